//! Executing a step of the provisioning state machine ([`Run::execute`]), with the MAAS
//! operations behind the steps that need more than one call: allocate (or adopt), deploy (with
//! user data and network data), release, power on, and the static addresses around them.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::time::Duration;

use capmaas_api::common::SecretKeyReference;
use capmaas_api::host::HostAllocation;
use capmaas_runtime::status::now;
use kube::ResourceExt;
use maas_api_client::{
    AllocateRequest, DeployRequest, MaasError, Machine, MachineStatus, PowerState,
};
use tracing::{info, warn};

use super::annotations::unix_now;
use super::annotations::{self as ann, RebootState, StaticAddresses};
use super::decide::Step;
use super::identity;
use super::machines::Machines;
use super::network::Applying;
use super::run::Run;
use super::static_links;
use crate::binding::{self, Bindings, Bound};
use crate::error::{Error, Result};
use crate::maas::Timed;

/// How an allocation found taken was made ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Adopted {
    /// MAAS shows it under an identity of this host (a lost answer, a restart, a move).
    Identified,
    /// Made without our identity and taken over ([`super::takeover`]).
    TakenOver,
}

/// How old an Allocated view may be for a deploy to be sent on it without reading the machine
/// again: the answer of the call just before (allocate, annotations, hostname) in the same
/// reconcile.
const FRESH_FOR_DEPLOY: Duration = Duration::from_secs(1);

impl Run<'_> {
    /// Executes a step; returns whether the next step may follow at once (false after an
    /// operation MAAS completes asynchronously).
    pub(super) async fn execute(&mut self, step: Step) -> Result<bool> {
        let sid = self.system_id.clone();
        let maas = self.gw.maas.clone();
        match step {
            Step::Wait { .. } => return Ok(false),
            Step::Allocate => {
                self.allocate_or_adopt().await?;
                return Ok(true);
            }
            Step::SetAnnotations => {
                let m = maas
                    .set_workload_annotations(&sid, &self.facts.annotations)
                    .await
                    .map_err(Error::maas("set workload annotations"))?;
                self.seen(m);
                return Ok(true);
            }
            Step::SetHostname(name) => {
                let m = maas
                    .update_hostname(&sid, &name)
                    .await
                    .map_err(Error::maas("set hostname"))?;
                self.seen(m);
                return Ok(true);
            }
            Step::RecordOriginalHostname(original) => {
                self.patch_annotation(ann::ORIGINAL_HOSTNAME, Some(original.clone()))
                    .await?;
                self.facts.original_hostname = Some(original);
                return Ok(true);
            }
            Step::ForgetOriginalHostname => {
                self.patch_annotation(ann::ORIGINAL_HOSTNAME, None).await?;
                self.facts.original_hostname = None;
                return Ok(true);
            }
            Step::Deploy => self.deploy().await?,
            Step::Release => self.release().await?,
            Step::RetryDeployment => {
                let failures = self.facts.deploy_failures.saturating_add(1);
                self.patch_annotation(ann::DEPLOY_FAILURES, Some(failures.to_string()))
                    .await?;
                self.facts.deploy_failures = failures;
                let note = format!(
                    "MAAS deployment failed; retry {failures} of {}",
                    self.facts.max_deploy_retries
                );
                self.gw
                    .base
                    .events
                    .warning(self.host, "DeploymentRetried", &note)
                    .await;
                self.release().await?;
            }
            Step::UnlinkStaticAddresses => {
                self.unlink_static_addresses().await?;
                return Ok(true);
            }
            Step::ForgetStaticAddresses => {
                self.forget_static_addresses().await?;
                return Ok(true);
            }
            Step::ResetFailures => {
                self.patch_annotation(ann::DEPLOY_FAILURES, None).await?;
                self.facts.deploy_failures = 0;
                return Ok(true);
            }
            Step::BeginReboot => {
                self.patch_annotation(ann::REBOOT_STATE, Some(ann::POWERED_OFF.to_owned()))
                    .await?;
                self.facts.reboot = RebootState::PoweringOff;
                self.gw
                    .base
                    .events
                    .normal(
                        self.host,
                        "RebootStarted",
                        "powering off for a reboot request",
                    )
                    .await;
                return Ok(true);
            }
            Step::PowerOff => {
                let answer = maas
                    .power_off(&sid, &self.comment("reboot"))
                    .await
                    .map_err(Error::maas("power off"))?;
                match answer.transpose() {
                    Some(machine) => self.seen(machine),
                    None => self.refresh().await?,
                }
            }
            Step::PowerOn => self.power_on("reboot").await?,
            Step::RestorePower => {
                let note = "MAAS shows the deployed machine powered off: powering it on (spec.keepPoweredOn)";
                self.gw
                    .base
                    .events
                    .warning(self.host, "PoweredOff", note)
                    .await;
                self.power_on("power on again").await?;
            }
            Step::FinishReboot => {
                self.patch_annotation(ann::REBOOT_STATE, None).await?;
                self.facts.reboot = RebootState::Idle;
                self.gw
                    .base
                    .events
                    .normal(self.host, "RebootFinished", "powered on again")
                    .await;
                return Ok(true);
            }
        }
        Ok(false)
    }

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
        if let Bound::TakenBy(holder) = Bindings::of(self.gw)
            .acquire(&self.system_id, &namespace, &name)
            .await?
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
        let adopted = if allocated {
            None
        } else {
            Some(self.adopt(&namespace, &name).await?)
        };
        self.allocation = Some(HostAllocation {
            agent_name: Some(self.identity()),
            consumer_uid: self.host.spec.consumer_ref.as_ref().map(|c| c.uid.clone()),
            allocated_at: Some(now()),
            taken_over: (adopted == Some(Adopted::TakenOver)).then_some(true),
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

    /// The identity this host's allocation carries in MAAS ([`identity::agent_name`]): this
    /// installation, this host, and the release policy asked for now.
    fn identity(&self) -> String {
        let release = self
            .host
            .spec
            .provisioning
            .as_ref()
            .and_then(|p| p.release_policy.clone())
            .unwrap_or_default();
        identity::agent_name(
            &self.gw.settings.installation_id,
            &self.host.namespace().unwrap_or_default(),
            &self.host.name_any(),
            &release,
        )
    }

    /// Allocates the exact machine with our identity as agent_name; `false` when MAAS says it
    /// is not available (taken, by us or anyone: look it up).
    async fn allocate(&mut self) -> Result<bool> {
        let request = AllocateRequest {
            system_id: Some(self.system_id.clone()),
            agent_name: Some(self.identity()),
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

    /// Adopts the machine if MAAS shows it allocated with an identity of this host (any release
    /// policy), or with the previous version's agent_name and not annotated for another host;
    /// else takes it over if it is CAPMAAS's allocation for this host's consumer
    /// ([`super::takeover`]); else the machine is someone else's ([`Error::NotOurs`]). One call: MAAS matches any of
    /// the values.
    async fn adopt(&mut self, namespace: &str, name: &str) -> Result<Adopted> {
        let filter = identity::lookup(
            &self.gw.settings.installation_id,
            &self.system_id,
            namespace,
            name,
        );
        let mine = self
            .gw
            .maas
            .list_machines(&filter)
            .await
            .map_err(Error::maas("look up allocation"))?;
        let sent = mine.sent;
        let Some(machine) = mine.value.into_iter().next() else {
            // Not allocated with our agent_name: someone else's, not allocated any more, or
            // CAPMAAS's allocation for the MaasMachine that claimed this host.
            self.refresh().await?;
            self.take_over(namespace, name).await?;
            return Ok(Adopted::TakenOver);
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
        Ok(Adopted::Identified)
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
        let register_vmhost = provisioning.register_vm_host == Some(true);
        if register_vmhost {
            super::vm_host::not_refused(&self.gw.cache, self.host)?;
        }
        if let Some(reference) = &provisioning.network_data_secret_ref {
            self.apply_network_data(reference).await?;
        } else {
            // No network data: static addresses recorded by an earlier deployment go.
            self.settle_static_addresses(&BTreeSet::new()).await?;
        }
        let request = DeployRequest {
            distro_series: Some(provisioning.image.clone()),
            hwe_kernel: provisioning.hwe_kernel.clone(),
            user_data,
            ephemeral_deploy: provisioning.deploy_in_memory.then_some(true),
            // MAAS installs LXD and registers the machine as a VM host itself: the key stays here.
            register_vmhost,
            comment: Some(self.comment("deploy")),
            // Should the machine have been released behind our back, MAAS allocates it again
            // with the deploy: marked as ours, so it is adopted or swept, never anonymous.
            agent_name: Some(self.identity()),
            ..DeployRequest::default()
        };
        let m = self
            .gw
            .maas
            .deploy(&self.system_id, &request)
            .await
            .map_err(|e| super::vm_host::deploy_error(&self.gw.cache, e, register_vmhost))?;
        let note = match self.allocated_note.take() {
            Some(allocated) => format!("{allocated}, deploying {}", provisioning.image),
            None => format!("deploying {}", provisioning.image),
        };
        self.announce(m, "DeployStarted", &note).await;
        Ok(())
    }

    pub(super) async fn release(&mut self) -> Result<()> {
        let empty = std::collections::BTreeMap::new();
        let annotations = self.machine.as_ref().map_or(&empty, |m| m.annotations());
        // The spec's, else the policy the allocation's identity carries (recorded in the status,
        // or found in MAAS by the observation).
        let request = ann::release_request(
            annotations,
            self.host
                .spec
                .provisioning
                .as_ref()
                .and_then(|p| p.release_policy.as_ref())
                .or(self.facts.recorded_release.as_ref()),
            self.comment("release"),
        );
        let m = self
            .gw
            .maas
            .release(&self.system_id, &request)
            .await
            .map_err(Error::maas("release"))?;
        let note = format!("released MAAS machine {}", self.system_id);
        self.announce(m, "Released", &note).await;
        Ok(())
    }

    /// Takes MAAS's answer to a deploy or release and says what was done in a Normal event
    /// (the reconcile's status write then says it too).
    async fn announce(&mut self, answer: Timed<Machine>, reason: &str, note: &str) {
        self.seen(answer);
        self.announced = true;
        self.gw.base.events.normal(self.host, reason, note).await;
    }

    pub(super) async fn power_on(&mut self, why: &str) -> Result<()> {
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
            .power_on(&self.system_id, &self.comment(why))
            .await
            .map_err(Error::maas("power on"))?;
        self.seen(m);
        Ok(())
    }

    /// Makes the machine's MAAS interfaces match the rendered network data; does only what is
    /// missing, so it is safe to repeat after a crash. The data is checked against the machine
    /// first; its static addresses are recorded (and recorded ones it no longer asks for
    /// unlinked) before the first link.
    async fn apply_network_data(&mut self, reference: &SecretKeyReference) -> Result<()> {
        let raw = self.secret_value(reference).await?;
        let text = String::from_utf8(raw).map_err(|_| {
            Error::InvalidSpec(format!(
                "network data in Secret {} is not UTF-8",
                reference.name
            ))
        })?;
        let machines = Machines::of(self.gw);
        let system_id = self.system_id.clone();
        let mut applying = Applying::start(machines, &system_id, &text).await?;
        let checked = applying.check(self.machine.as_deref()).await?;
        if !checked.notes.is_empty() {
            let note = checked.notes.join("; ");
            warn!(system_id = %self.system_id, %note, "network data: not applied to MAAS");
            self.gw
                .base
                .events
                .warning(self.host, "NetworkDataNotApplied", &note)
                .await;
        }
        self.settle_static_addresses(&checked.static_addresses)
            .await?;
        self.machine = applying.converge(self.machine.clone()).await?;
        Ok(())
    }

    /// Before network data is applied to the (Allocated) machine: unlinks the recorded
    /// addresses the data no longer asks for (an earlier deployment's, e.g. before a retry
    /// with other data or for another consumer), then records exactly `wanted`.
    async fn settle_static_addresses(&mut self, wanted: &BTreeSet<IpAddr>) -> Result<()> {
        if let Some(recorded) = self.facts.static_addresses.clone() {
            self.unlink_recorded(&recorded, wanted).await?;
        }
        let target = (!wanted.is_empty()).then(|| StaticAddresses::Listed(wanted.clone()));
        if self.facts.static_addresses != target {
            let value = (!wanted.is_empty()).then(|| ann::encode_static_addresses(wanted));
            self.patch_annotation(ann::STATIC_ADDRESSES, value).await?;
            self.facts.static_addresses = target;
        }
        Ok(())
    }

    /// The step on a released machine nobody wants deployed: reads it fresh, unlinks every
    /// recorded static link, and forgets the record once MAAS shows none. A machine that is
    /// no longer Ready is left for the next step to decide.
    async fn unlink_static_addresses(&mut self) -> Result<()> {
        self.refresh().await?;
        let ready = self
            .machine
            .as_ref()
            .is_some_and(|m| m.status == MachineStatus::Ready);
        let Some(recorded) = self.facts.static_addresses.clone().filter(|_| ready) else {
            return Ok(());
        };
        if self.unlink_recorded(&recorded, &BTreeSet::new()).await? {
            let note = format!(
                "removed the static addresses of released MAAS machine {}",
                self.system_id
            );
            self.gw
                .base
                .events
                .normal(self.host, "StaticAddressesReleased", &note)
                .await;
        }
        self.forget_static_addresses().await
    }

    /// Removes the record (its links are gone, or so is the machine).
    async fn forget_static_addresses(&mut self) -> Result<()> {
        self.patch_annotation(ann::STATIC_ADDRESSES, None).await?;
        self.facts.static_addresses = None;
        Ok(())
    }

    /// Unlinks the static links `recorded` covers, except addresses in `keep`, from the
    /// machine as last read; `true` when anything was unlinked.
    async fn unlink_recorded(
        &mut self,
        recorded: &StaticAddresses,
        keep: &BTreeSet<IpAddr>,
    ) -> Result<bool> {
        let links = static_links::doomed(self.machine.as_deref(), recorded, keep);
        if links.is_empty() {
            return Ok(false);
        }
        if let StaticAddresses::Unreadable(value) = recorded {
            let note = format!(
                "annotation {} is unreadable ({value:?}): unlinking every static address of \
                 MAAS machine {}",
                ann::STATIC_ADDRESSES,
                self.system_id
            );
            warn!(system_id = %self.system_id, %value, "unreadable static-address record");
            self.gw
                .base
                .events
                .warning(self.host, "StaticAddressesUnreadable", &note)
                .await;
        }
        let machines = Machines::of(self.gw);
        self.machine =
            static_links::unlink(machines, &self.system_id, &links, recorded, keep).await?;
        Ok(true)
    }
}
