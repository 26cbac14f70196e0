//! Request parameter types for machine operations, and their form encodings.

use base64::Engine as _;

use crate::error::MaasError;
use crate::form::Params;
use crate::model::MachineStatus;

/// Server-side filters for `GET /machines/` (all repeatable, ANDed across keys, ORed within).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MachineFilter {
    /// Exact system ids (`id`).
    pub system_ids: Vec<String>,
    /// Host names.
    pub hostnames: Vec<String>,
    /// MAC addresses.
    pub mac_addresses: Vec<String>,
    /// Resource pool names.
    pub pools: Vec<String>,
    /// Zone names.
    pub zones: Vec<String>,
    /// Tags the machine must all have.
    pub tags: Vec<String>,
    /// Allocation markers.
    pub agent_names: Vec<String>,
    /// Statuses.
    pub statuses: Vec<MachineStatus>,
    /// Owners.
    pub owners: Vec<String>,
}

impl MachineFilter {
    /// No filter: every visible machine (heavy; prefer a filter).
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a system id.
    #[must_use]
    pub fn system_id(mut self, id: impl Into<String>) -> Self {
        self.system_ids.push(id.into());
        self
    }

    /// Adds a host name.
    #[must_use]
    pub fn hostname(mut self, hostname: impl Into<String>) -> Self {
        self.hostnames.push(hostname.into());
        self
    }

    /// Adds a pool.
    #[must_use]
    pub fn pool(mut self, pool: impl Into<String>) -> Self {
        self.pools.push(pool.into());
        self
    }

    /// Adds a zone.
    #[must_use]
    pub fn zone(mut self, zone: impl Into<String>) -> Self {
        self.zones.push(zone.into());
        self
    }

    /// Adds a required tag.
    #[must_use]
    pub fn tag(mut self, tag: impl Into<String>) -> Self {
        self.tags.push(tag.into());
        self
    }

    /// Adds an agent name.
    #[must_use]
    pub fn agent_name(mut self, agent_name: impl Into<String>) -> Self {
        self.agent_names.push(agent_name.into());
        self
    }

    /// Adds a status.
    #[must_use]
    pub fn status(mut self, status: MachineStatus) -> Self {
        self.statuses.push(status);
        self
    }

    /// The query parameters. Fails for a status MAAS has no filter name for.
    pub fn to_params(&self) -> Result<Params, MaasError> {
        let mut params = Params::new();
        params
            .push_all("id", &self.system_ids)
            .push_all("hostname", &self.hostnames)
            .push_all("mac_address", &self.mac_addresses)
            .push_all("pool", &self.pools)
            .push_all("zone", &self.zones)
            .push_all("tags", &self.tags)
            .push_all("agent_name", &self.agent_names)
            .push_all("owner", &self.owners);
        for status in &self.statuses {
            let name = status.filter_name().ok_or_else(|| {
                MaasError::InvalidArgument(format!("status {status} cannot be filtered on"))
            })?;
            params.push("status", name);
        }
        Ok(params)
    }
}

/// Constraints and markers for `POST /machines/?op=allocate`.
///
/// Allocate is **never retried**: an answer lost after MAAS committed would leak a machine.
/// Set `agent_name`, and before allocating again after an ambiguous failure (timeout,
/// transport error, 5xx) list machines by that `agent_name` (maas-api.md section 8).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllocateRequest {
    /// Exact machine.
    pub system_id: Option<String>,
    /// Host name or FQDN.
    pub name: Option<String>,
    /// Minimum cores.
    pub cpu_count: Option<u32>,
    /// Minimum memory in MiB.
    pub mem_mib: Option<u64>,
    /// Architecture, e.g. `amd64`.
    pub arch: Option<String>,
    /// Required tags (all).
    pub tags: Vec<String>,
    /// Excluded tags.
    pub not_tags: Vec<String>,
    /// Zone.
    pub zone: Option<String>,
    /// Excluded zones.
    pub not_in_zone: Vec<String>,
    /// Resource pool.
    pub pool: Option<String>,
    /// Excluded pools.
    pub not_in_pool: Vec<String>,
    /// Allocation marker stored on the machine (cleared on release).
    pub agent_name: Option<String>,
    /// Event-log comment.
    pub comment: Option<String>,
    /// Choose but do not acquire.
    pub dry_run: bool,
}

impl AllocateRequest {
    /// The form parameters.
    pub fn to_params(&self) -> Params {
        let mut params = Params::new();
        params
            .push_opt("system_id", self.system_id.as_ref())
            .push_opt("name", self.name.as_ref())
            .push_opt("cpu_count", self.cpu_count)
            .push_opt("mem", self.mem_mib)
            .push_opt("arch", self.arch.as_ref())
            .push_all("tags", &self.tags)
            .push_all("not_tags", &self.not_tags)
            .push_opt("zone", self.zone.as_ref())
            .push_all("not_in_zone", &self.not_in_zone)
            .push_opt("pool", self.pool.as_ref())
            .push_all("not_in_pool", &self.not_in_pool)
            .push_opt("agent_name", self.agent_name.as_ref())
            .push_opt("comment", self.comment.as_ref())
            .push_flag("dry_run", self.dry_run);
        params
    }
}

/// Parameters of `POST /machines/{id}/?op=deploy`. Its `Debug` shows the user data's size
/// only: cloud-init user data carries join tokens and certificates.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct DeployRequest {
    /// `jammy`, `ubuntu/jammy`, or a custom image name (`NAME` or `custom/NAME`); MAAS
    /// ignores `osystem`, so the OS is chosen here only.
    pub distro_series: Option<String>,
    /// Kernel, e.g. `hwe-22.04`.
    pub hwe_kernel: Option<String>,
    /// Cloud-init user data (raw bytes; base64-encoded on the wire).
    pub user_data: Option<Vec<u8>>,
    /// Deploy to RAM.
    pub ephemeral_deploy: Option<bool>,
    /// Hardware sync (3.2+).
    pub enable_hw_sync: Option<bool>,
    /// Event-log comment.
    pub comment: Option<String>,
    /// `agent_name` MAAS stores when the deploy allocates a Ready machine implicitly (one call
    /// instead of allocate + deploy); ignored for an Allocated machine. Also what makes a
    /// deploy sent on a stale view recognisable: a machine allocated this way carries it.
    pub agent_name: Option<String>,
    /// Register the deployed machine as an LXD VM host (MAAS 3.x, admin key, not with
    /// `ephemeral_deploy`). Sent only when true: MAAS 4.0 refuses the parameter whatever its
    /// value ([`MaasError::VmHostsUnsupported`]).
    pub register_vmhost: bool,
}

impl std::fmt::Debug for DeployRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeployRequest")
            .field("distro_series", &self.distro_series)
            .field("hwe_kernel", &self.hwe_kernel)
            .field(
                "user_data",
                &self
                    .user_data
                    .as_ref()
                    .map(|d| format!("<{} bytes redacted>", d.len())),
            )
            .field("ephemeral_deploy", &self.ephemeral_deploy)
            .field("enable_hw_sync", &self.enable_hw_sync)
            .field("comment", &self.comment)
            .field("agent_name", &self.agent_name)
            .field("register_vmhost", &self.register_vmhost)
            .finish()
    }
}

impl DeployRequest {
    /// The form parameters.
    pub fn to_params(&self) -> Params {
        let mut params = Params::new();
        params
            .push_opt("distro_series", self.distro_series.as_ref())
            .push_opt("hwe_kernel", self.hwe_kernel.as_ref())
            .push_opt(
                "user_data",
                self.user_data
                    .as_ref()
                    .map(|data| base64::engine::general_purpose::STANDARD.encode(data)),
            )
            .push_bool("ephemeral_deploy", self.ephemeral_deploy)
            .push_bool("enable_hw_sync", self.enable_hw_sync)
            .push_opt("comment", self.comment.as_ref())
            .push_opt("agent_name", self.agent_name.as_ref())
            .push_flag("register_vmhost", self.register_vmhost);
        params
    }
}

/// Parameters of `POST /machines/{id}/?op=release`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReleaseRequest {
    /// Event-log comment.
    pub comment: Option<String>,
    /// Erase disks.
    pub erase: bool,
    /// Quick erase (with `erase`).
    pub quick_erase: bool,
    /// Secure erase (with `erase`).
    pub secure_erase: bool,
    /// Force (also tears down a KVM host's VMs).
    pub force: bool,
}

impl ReleaseRequest {
    /// The form parameters.
    pub fn to_params(&self) -> Params {
        let mut params = Params::new();
        params
            .push_opt("comment", self.comment.as_ref())
            .push_flag("erase", self.erase)
            .push_flag("quick_erase", self.quick_erase)
            .push_flag("secure_erase", self.secure_erase)
            .push_flag("force", self.force);
        params
    }
}

/// `power_off` stop mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StopMode {
    /// Immediate power off.
    #[default]
    Hard,
    /// ACPI shutdown.
    Soft,
}

/// Checks an annotation key: MAAS answers 500 for keys outside `[\w.-]+` (e.g. with `/`).
pub fn validate_annotation_key(key: &str) -> Result<(), MaasError> {
    let valid = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '.' || c == '-');
    if valid {
        Ok(())
    } else {
        Err(MaasError::InvalidArgument(format!(
            "workload annotation key {key:?} must match [\\w.-]+"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_encodes_repeated_keys_and_status_names() {
        let filter = MachineFilter::new()
            .tag("gpu")
            .tag("ssd")
            .pool("p1")
            .agent_name("capmaas-1")
            .status(MachineStatus::Ready)
            .status(MachineStatus::FailedDeployment)
            .system_id("abc");
        assert_eq!(
            filter.to_params().unwrap().encode(),
            "id=abc&pool=p1&tags=gpu&tags=ssd&agent_name=capmaas-1&status=ready&status=failed_deployment"
        );
        let bad = MachineFilter::new().status(MachineStatus::Unknown(77));
        assert!(bad.to_params().is_err());
    }

    #[test]
    fn allocate_params_use_maas_names() {
        let request = AllocateRequest {
            system_id: Some("abc".into()),
            cpu_count: Some(4),
            mem_mib: Some(8192),
            tags: vec!["a".into(), "b".into()],
            not_tags: vec!["c".into()],
            zone: Some("z".into()),
            pool: Some("p".into()),
            agent_name: Some("agent".into()),
            comment: Some("hi there".into()),
            dry_run: true,
            ..AllocateRequest::default()
        };
        assert_eq!(
            request.to_params().encode(),
            "system_id=abc&cpu_count=4&mem=8192&tags=a&tags=b&not_tags=c&zone=z&pool=p&agent_name=agent&comment=hi+there&dry_run=true"
        );
        assert!(AllocateRequest::default().to_params().is_empty());
    }

    #[test]
    fn deploy_base64_encodes_user_data() {
        let request = DeployRequest {
            distro_series: Some("jammy".into()),
            user_data: Some(b"#cloud-config\n".to_vec()),
            ephemeral_deploy: Some(false),
            ..DeployRequest::default()
        };
        let params = request.to_params();
        let user_data = &params
            .pairs()
            .iter()
            .find(|(k, _)| k == "user_data")
            .unwrap()
            .1;
        assert_eq!(user_data, "I2Nsb3VkLWNvbmZpZwo=");
        assert!(params.encode().contains("ephemeral_deploy=false"));
        assert!(!params.encode().contains("register_vmhost"));
        let vm_host = DeployRequest {
            register_vmhost: true,
            ..DeployRequest::default()
        };
        assert_eq!(vm_host.to_params().encode(), "register_vmhost=true");
    }

    #[test]
    fn release_flags_only_when_set() {
        let request = ReleaseRequest {
            erase: true,
            quick_erase: true,
            ..ReleaseRequest::default()
        };
        assert_eq!(request.to_params().encode(), "erase=true&quick_erase=true");
    }

    #[test]
    fn annotation_keys_are_checked() {
        for good in ["cluster", "capmaas.host-name", "a_b", "x1"] {
            validate_annotation_key(good).unwrap();
        }
        for bad in ["", "cluster.x-k8s.io/cluster-name", "a b", "k=v"] {
            assert!(validate_annotation_key(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn debug_output_never_shows_user_data() {
        let request = DeployRequest {
            distro_series: Some("jammy".into()),
            user_data: Some(b"#cloud-config\njoin-token: s3cr3t\n".to_vec()),
            ..DeployRequest::default()
        };
        let shown = format!("{request:?}");
        assert!(!shown.contains("s3cr3t"), "{shown}");
        assert!(shown.contains("bytes redacted"), "{shown}");
        assert!(shown.contains("jammy"), "{shown}");
    }
}
