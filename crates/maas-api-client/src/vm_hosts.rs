//! VM hosts (MAAS 3.x, `/vm-hosts/`): list, read, update, delete, and compose machines on
//! them. A MAAS without VM hosts (4.0 and later) answers every call with
//! [`MaasError::VmHostsUnsupported`].

use crate::calls::{collection, numbered_item};
use crate::error::{ErrorContext, MaasError};
use crate::form::Params;
use crate::model::{ComposedMachine, VmHost};
use crate::transport::{Call, MaasClient};

/// Fields of `PUT /vm-hosts/{id}/`; `None` leaves a field as it is.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VmHostUpdate {
    /// New name.
    pub name: Option<String>,
    /// Zone name of machines composed from now on.
    pub zone: Option<String>,
    /// Resource pool name of machines composed from now on.
    pub pool: Option<String>,
    /// Cores may be committed this many times over (0 to 10).
    pub cpu_over_commit_ratio: Option<f64>,
    /// Memory may be committed this many times over (0 to 10).
    pub memory_over_commit_ratio: Option<f64>,
    /// Replaces the tags (sent comma-separated; empty clears them).
    pub tags: Option<Vec<String>>,
}

impl VmHostUpdate {
    /// The form parameters.
    pub fn to_params(&self) -> Params {
        let mut params = Params::new();
        params
            .push_opt("name", self.name.as_ref())
            .push_opt("zone", self.zone.as_ref())
            .push_opt("pool", self.pool.as_ref())
            .push_opt("cpu_over_commit_ratio", self.cpu_over_commit_ratio)
            .push_opt("memory_over_commit_ratio", self.memory_over_commit_ratio)
            .push_opt("tags", self.tags.as_ref().map(|t| t.join(",")));
        params
    }
}

/// A machine to compose with `POST /vm-hosts/{id}/?op=compose`; `None` takes MAAS's default
/// (1 core, 2048 MiB, one 8 GB disk in the default storage pool, the VM host's zone and pool).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ComposeRequest {
    /// Host name (MAAS makes one up when absent).
    pub hostname: Option<String>,
    /// Cores.
    pub cores: Option<u32>,
    /// Memory in MiB.
    pub memory_mib: Option<u64>,
    /// Size of the root disk in GB as MAAS counts them for `storage` (10^9 bytes).
    pub storage_gb: Option<u64>,
    /// Storage pool of the root disk (a name from [`VmHost::storage_pools`]).
    pub storage_pool: Option<String>,
    /// Zone name.
    pub zone: Option<String>,
    /// Resource pool name.
    pub pool: Option<String>,
    /// Interface constraints, `label:key=value[,key=value][;label:...]` as MAAS takes them.
    pub interfaces: Option<String>,
    /// Architecture, e.g. `amd64/generic` (one of the VM host's).
    pub architecture: Option<String>,
}

/// MAAS's default root disk of a composed machine, in GB.
const DEFAULT_STORAGE_GB: u64 = 8;

impl ComposeRequest {
    /// The form parameters; the disk is sent as `root:<GB>[(<pool>)]`.
    pub fn to_params(&self) -> Params {
        let storage = match (self.storage_gb, self.storage_pool.as_ref()) {
            (None, None) => None,
            (size, pool) => {
                let size = size.unwrap_or(DEFAULT_STORAGE_GB);
                Some(match pool {
                    Some(pool) => format!("root:{size}({pool})"),
                    None => format!("root:{size}"),
                })
            }
        };
        let mut params = Params::new();
        params
            .push_opt("hostname", self.hostname.as_ref())
            .push_opt("cores", self.cores)
            .push_opt("memory", self.memory_mib)
            .push_opt("storage", storage)
            .push_opt("zone", self.zone.as_ref())
            .push_opt("pool", self.pool.as_ref())
            .push_opt("interfaces", self.interfaces.as_ref())
            .push_opt("architecture", self.architecture.as_ref());
        params
    }
}

fn vm_host_path(id: i64) -> Vec<String> {
    numbered_item("vm-hosts", id)
}

impl MaasClient {
    /// `GET /vm-hosts/`.
    pub async fn vm_hosts(&self) -> Result<Vec<VmHost>, MaasError> {
        let call =
            Call::get("vm_hosts.list", collection("vm-hosts")).context(ErrorContext::VmHosts);
        self.json(call).await
    }

    /// `GET /vm-hosts/{id}/`; [`MaasError::NotFound`] for an unknown id.
    pub async fn vm_host(&self, id: i64) -> Result<VmHost, MaasError> {
        let call = Call::get("vm_hosts.get", vm_host_path(id)).context(ErrorContext::VmHosts);
        self.json(call).await
    }

    /// `PUT /vm-hosts/{id}/` (admin). Idempotent, retried.
    pub async fn update_vm_host(
        &self,
        id: i64,
        update: &VmHostUpdate,
    ) -> Result<VmHost, MaasError> {
        let call = Call::put("vm_hosts.update", vm_host_path(id))
            .params(update.to_params())
            .context(ErrorContext::VmHosts);
        self.json(call).await
    }

    /// `DELETE /vm-hosts/{id}/` (admin); with `decompose` the machines composed on it are
    /// deleted too. Retried; [`MaasError::NotFound`] after a retry means it is gone.
    pub async fn delete_vm_host(&self, id: i64, decompose: bool) -> Result<(), MaasError> {
        let mut params = Params::new();
        params.push_flag("decompose", decompose);
        let call = Call::delete("vm_hosts.delete", vm_host_path(id))
            .params(params)
            .context(ErrorContext::VmHosts);
        self.discard(call).await
    }

    /// `POST /vm-hosts/{id}/?op=compose` (admin): a new machine on the VM host; returns its
    /// system id. The machine commissions, then is Ready to allocate and deploy; MAAS deletes
    /// it when it is released. Never retried (a repeat composes a second machine): after an
    /// ambiguous failure, look for the hostname before composing again. Too few resources
    /// left is [`MaasError::ComposeRefused`].
    pub async fn compose(
        &self,
        vm_host_id: i64,
        request: &ComposeRequest,
    ) -> Result<String, MaasError> {
        let call = Call::post("vm_hosts.compose", vm_host_path(vm_host_id))
            .op("compose")
            .params(request.to_params())
            .context(ErrorContext::Compose);
        let composed: ComposedMachine = self.json(call).await?;
        tracing::Span::current().record("maas.system_id", composed.system_id.as_str());
        Ok(composed.system_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compose_params_use_maas_names() {
        let request = ComposeRequest {
            hostname: Some("vm1".into()),
            cores: Some(2),
            memory_mib: Some(4096),
            storage_gb: Some(20),
            storage_pool: Some("fast".into()),
            zone: Some("z1".into()),
            ..ComposeRequest::default()
        };
        assert_eq!(
            request.to_params().encode(),
            "hostname=vm1&cores=2&memory=4096&storage=root%3A20%28fast%29&zone=z1"
        );
        assert!(ComposeRequest::default().to_params().is_empty());
        let pool_only = ComposeRequest {
            storage_pool: Some("p".into()),
            ..ComposeRequest::default()
        };
        assert_eq!(pool_only.to_params().encode(), "storage=root%3A8%28p%29");
    }

    #[test]
    fn update_params() {
        let update = VmHostUpdate {
            cpu_over_commit_ratio: Some(2.5),
            tags: Some(vec!["a".into(), "b".into()]),
            ..VmHostUpdate::default()
        };
        assert_eq!(
            update.to_params().encode(),
            "cpu_over_commit_ratio=2.5&tags=a%2Cb"
        );
    }
}
