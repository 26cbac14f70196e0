//! The MAAS operations behind the steps that need more than one call: allocate (or adopt),
//! deploy (with user data and network data), release, power on.

use capmaas_runtime::error::failed;
use std::time::Duration;

use capmaas_api::common::SecretKeyReference;
use capmaas_api::host::HostAllocation;
use capmaas_runtime::status::now;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::Api;
use maas_api_client::{
    AllocateRequest, DeployRequest, MaasError, MachineFilter, MachineStatus, PowerState,
};
use tracing::info;

use super::annotations::{self as ann, RebootState};

/// How old an Allocated view may be for a deploy to be sent on it without reading the machine
/// again: the answer of the call just before (allocate, annotations, hostname) in the same
/// reconcile.
const FRESH_FOR_DEPLOY: Duration = Duration::from_secs(1);
use super::run::{Run, unix_now};
use crate::binding::{self, Bound};
use crate::error::{Error, Result};
use crate::maas::Timed;

impl Run<'_> {
    /// Allocates the exact machine with our agent_name, or adopts it when MAAS already shows it
    /// allocated with our agent_name (a previous attempt whose answer or record was lost).
    /// Records the allocation in status before anything else happens.
    /// The host's binding is read from the API server first: only the one host holding the
    /// machine in the whole cluster allocates or adopts it.
    ///
    /// The allocate goes first when the machine looks Ready: MAAS refuses it (409) for a machine
    /// already allocated, and only then is our allocation looked up. A machine that looks taken
    /// is looked up first (after a restart, a lost answer, a move).
    pub(super) async fn allocate_or_adopt(&mut self) -> Result<()> {
        let namespace = self.host.namespace().unwrap_or_default();
        let name = self.host.name_any();
        if let Bound::TakenBy(holder) =
            binding::acquire(self.gw, &self.system_id, &namespace, &name).await?
        {
            return Err(Error::NotOurs {
                system_id: self.system_id.clone(),
                reason: format!("the machine belongs to MaasHost {holder}"),
            });
        }
        let looks_ready = self
            .machine
            .as_ref()
            .is_some_and(|m| m.status == MachineStatus::Ready);
        let allocated = if looks_ready {
            self.allocate().await?
        } else {
            false
        };
        if !allocated {
            self.adopt(&namespace, &name).await?;
        }
        self.allocation = Some(HostAllocation {
            agent_name: Some(self.gw.settings.installation_id.clone()),
            consumer_uid: self.host.spec.consumer_ref.as_ref().map(|c| c.uid.clone()),
            allocated_at: Some(now()),
        });
        self.facts.allocation_recorded = true;
        self.facts.allocation_known = true;
        self.facts.allocated_for_other_consumer = false;
        self.announced = true;
        // Recorded with the status write that ends this reconcile (usually after the deploy);
        // until then MAAS's agent_name and the adoption cover a crash, as they cover one
        // between the allocate call and any write.
        self.allocation_unwritten = true;
        self.allocated_note = Some(format!("allocated MAAS machine {}", self.system_id));
        Ok(())
    }

    /// Allocates the exact machine with our agent_name; `false` when MAAS says it is not
    /// available (taken, by us or anyone: look it up).
    async fn allocate(&mut self) -> Result<bool> {
        let request = AllocateRequest {
            system_id: Some(self.system_id.clone()),
            agent_name: Some(self.gw.settings.installation_id.clone()),
            comment: Some(self.comment("allocate")),
            ..AllocateRequest::default()
        };
        match self.gw.maas.allocate(&request).await {
            Ok(m) => {
                self.seen(m);
                Ok(true)
            }
            Err(MaasError::NoMatchingMachine { .. }) => Ok(false),
            Err(e) => Err(Error::maas("allocate")(e)),
        }
    }

    /// Adopts the machine if MAAS shows it allocated with our agent_name and not annotated for
    /// another host; else the machine is someone else's ([`Error::NotOurs`]).
    async fn adopt(&mut self, namespace: &str, name: &str) -> Result<()> {
        let filter = MachineFilter::new()
            .system_id(self.system_id.clone())
            .agent_name(self.gw.settings.installation_id.clone());
        let mine = self
            .gw
            .maas
            .list_machines(&filter)
            .await
            .map_err(Error::maas("look up allocation"))?;
        let sent = mine.sent;
        let Some(machine) = mine.value.into_iter().next() else {
            // Not allocated with our agent_name: someone else's, or not allocated any more.
            self.refresh().await?;
            let state = self
                .machine
                .as_ref()
                .map_or_else(|| "gone".to_owned(), |m| m.status_name.clone());
            return Err(Error::NotOurs {
                system_id: self.system_id.clone(),
                reason: format!("not allocated with our agent_name ({state})"),
            });
        };
        // An allocation annotated for another host is that host's, whatever the agent_name.
        let me = binding::holder_identity(namespace, name);
        if let Some(other) = machine.annotations().get(ann::HOST).filter(|h| **h != me) {
            return Err(Error::NotOurs {
                system_id: self.system_id.clone(),
                reason: format!("allocated for MaasHost {other}"),
            });
        }
        info!(system_id = %self.system_id, "adopting a machine already allocated with our agent_name");
        self.seen(Timed {
            value: machine,
            sent,
        });
        Ok(())
    }

    /// A Secret of the deployment request: in the consumer's namespace, which is not the
    /// host's when the host's inventory admits claims from other namespaces.
    pub(super) async fn secret_value(&self, reference: &SecretKeyReference) -> Result<Vec<u8>> {
        let host_namespace = self.host.namespace().unwrap_or_default();
        let namespace = self
            .host
            .spec
            .consumer_ref
            .as_ref()
            .map_or(host_namespace.as_str(), |c| c.namespace_or(&host_namespace));
        let api: Api<Secret> = Api::namespaced(self.gw.base.client.clone(), namespace);
        let secret = api
            .get(&reference.name)
            .await
            .map_err(failed("read Secret"))?;
        secret
            .data
            .and_then(|mut d| d.remove(&reference.key))
            .map(|b| b.0)
            .ok_or_else(|| {
                Error::InvalidSpec(format!(
                    "Secret {} has no key {}",
                    reference.name, reference.key
                ))
            })
    }

    pub(super) async fn deploy(&mut self) -> Result<()> {
        let Some(provisioning) = self.host.spec.provisioning.clone() else {
            return Ok(());
        };
        let user_data = match &provisioning.user_data_secret_ref {
            Some(reference) => Some(self.secret_value(reference).await?),
            None => None,
        };
        let user_data = match &provisioning.meta_data_secret_ref {
            Some(reference) => {
                let meta_data = self.secret_value(reference).await?;
                match super::user_data::with_meta_data(user_data, &meta_data) {
                    Ok(combined) => Some(combined),
                    Err(unchanged) => {
                        let note =
                            "user data is not cloud-init (Ignition?): rendered metadata not added";
                        self.gw
                            .base
                            .events
                            .warning(self.host, "MetaDataNotDelivered", note)
                            .await;
                        Some(unchanged)
                    }
                }
            }
            None => user_data,
        };
        // Deploy is not idempotent: act only on a fresh Allocated view. The answer of our own
        // allocate or annotate call a moment ago is one; anything older is read again.
        if self
            .gw
            .cache
            .age(&self.system_id)
            .is_none_or(|age| age > FRESH_FOR_DEPLOY)
        {
            self.refresh().await?;
        }
        if self.machine.as_ref().map(|m| m.status) != Some(MachineStatus::Allocated) {
            return Ok(());
        }
        if let Some(reference) = &provisioning.network_data_secret_ref {
            self.apply_network_data(reference).await?;
        } else {
            // No network data: static addresses recorded by an earlier deployment go.
            self.settle_static_addresses(&std::collections::BTreeSet::new())
                .await?;
        }
        let request = DeployRequest {
            distro_series: Some(provisioning.image.clone()),
            hwe_kernel: provisioning.hwe_kernel.clone(),
            user_data,
            ephemeral_deploy: provisioning.deploy_in_memory.then_some(true),
            comment: Some(self.comment("deploy")),
            // Should the machine have been released behind our back, MAAS allocates it again
            // with the deploy: marked as ours, so it is adopted or swept, never anonymous.
            agent_name: Some(self.gw.settings.installation_id.clone()),
            ..DeployRequest::default()
        };
        let m = self
            .gw
            .maas
            .deploy(&self.system_id, &request)
            .await
            .map_err(Error::maas("deploy"))?;
        self.seen(m);
        self.announced = true;
        let note = match self.allocated_note.take() {
            Some(allocated) => format!("{allocated}, deploying {}", provisioning.image),
            None => format!("deploying {}", provisioning.image),
        };
        self.gw
            .base
            .events
            .normal(self.host, "DeployStarted", &note)
            .await;
        Ok(())
    }

    pub(super) async fn release(&mut self) -> Result<()> {
        let empty = std::collections::BTreeMap::new();
        let annotations = self.machine.as_ref().map_or(&empty, |m| m.annotations());
        let request = ann::release_request(
            annotations,
            self.host
                .spec
                .provisioning
                .as_ref()
                .and_then(|p| p.release_policy.as_ref()),
            self.comment("release"),
        );
        let m = self
            .gw
            .maas
            .release(&self.system_id, &request)
            .await
            .map_err(Error::maas("release"))?;
        self.seen(m);
        self.announced = true;
        let note = format!("released MAAS machine {}", self.system_id);
        self.gw
            .base
            .events
            .normal(self.host, "Released", &note)
            .await;
        Ok(())
    }

    pub(super) async fn power_on(&mut self) -> Result<()> {
        // IPMI power-on cycles a running machine: only on a fresh `off` reading.
        self.refresh().await?;
        let off = self.machine.as_ref().is_some_and(|m| {
            m.power_state == PowerState::Off && m.status == MachineStatus::Deployed
        });
        if !off {
            return Ok(());
        }
        let now_unix = unix_now();
        self.patch_annotation(ann::REBOOT_STATE, Some(ann::powering_on(now_unix)))
            .await?;
        self.facts.reboot = RebootState::PoweringOn {
            since: Duration::ZERO,
        };
        let m = self
            .gw
            .maas
            .power_on(&self.system_id, &self.comment("reboot"))
            .await
            .map_err(Error::maas("power on"))?;
        self.seen(m);
        Ok(())
    }
}
