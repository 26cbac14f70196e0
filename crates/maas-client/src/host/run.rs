//! [`Run`]: one reconcile of a MaasHost in progress: the host, what is known of its machine,
//! and the reads and writes every step shares (machine refresh, Secrets, annotation patch,
//! finalizer, status). The step loop (`act`) and the step executor (`actions`) both work on
//! it; it uses neither. These two files are the only ones that extend `Run`.

use std::sync::Arc;
use std::time::Duration;

use capmaas_api::common::SecretKeyReference;
use capmaas_api::host::{HostAllocation, ProvisioningState};
use capmaas_api::{MaasHost, keys};
use capmaas_runtime::controller::finalizer;
use capmaas_runtime::error::failed;
use capmaas_runtime::status::{apply_status, now};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use maas_api_client::{Machine, MachineStatus};
use serde_json::json;

use super::decide::{HostFacts, Wait, held_by_us};
use super::finalizer::Change;
use super::machines::Machines;
use super::status::{StatusInput, build_status, progress_report_wait};
use crate::context::Gateway;
use crate::error::{Error, Result};
use crate::maas::Timed;

/// The state of one MaasHost reconcile.
pub(super) struct Run<'a> {
    pub(super) gw: &'a Gateway,
    pub(super) host: &'a MaasHost,
    pub(super) api: Api<MaasHost>,
    pub(super) system_id: String,
    pub(super) facts: HostFacts,
    pub(super) machine: Option<Arc<Machine>>,
    pub(super) allocation: Option<HostAllocation>,
    /// The host's inventory, when its latest list did not show the (existing) machine.
    pub(super) unlisted_from: Option<String>,
    /// Why the request cannot be carried out, reported with [`Wait::InvalidSpec`], or why the
    /// machine is not this host's, reported with [`Wait::HeldByOther`].
    pub(super) refusal: Option<String>,
    /// The `Provisioned` reason of `refusal` when it is not `InvalidSpec` (a VM host refusal).
    pub(super) refusal_reason: Option<&'static str>,
    /// An operation of this reconcile announced itself with an Event (`Allocated`,
    /// `DeployStarted`, `Released`): the state change it causes needs no second one.
    pub(super) announced: bool,
    /// This reconcile allocated (or adopted) the machine and has not written the allocation
    /// to the status yet. The status write that ends the reconcile records it; a step that
    /// fails after the allocation writes it before the error is returned
    /// ([`Run::record_allocation`]). A crash in between is what the adoption covers.
    pub(super) allocation_unwritten: bool,
    /// The `Allocated` Event of this reconcile's allocation, held back so that a deploy in the
    /// same reconcile announces both with one `DeployStarted` Event ([`Run::announce_allocation`]).
    pub(super) allocated_note: Option<String>,
    /// The host as this reconcile's last write left it, and the versions it replaced (the
    /// one the reconcile started from first): remembered for the next reconcile
    /// ([`capmaas_runtime::own_writes`]).
    pub(super) written: Option<MaasHost>,
    pub(super) replaced_versions: Vec<String>,
}

impl Run<'_> {
    /// Records a machine MAAS returned.
    pub(super) fn seen(&mut self, answer: Timed<Machine>) {
        self.machine = Some(Machines::of(self.gw).seen(answer));
    }

    /// Reads the machine from MAAS again (`None` when it is gone).
    pub(super) async fn refresh(&mut self) -> Result<()> {
        self.machine = Machines::of(self.gw).read(&self.system_id).await?;
        Ok(())
    }

    /// The MAAS comment of an operation on behalf of this host.
    pub(super) fn comment(&self, what: &str) -> String {
        format!(
            "capmaas {what}: MaasHost {}/{}",
            self.host.namespace().unwrap_or_default(),
            self.host.name_any()
        )
    }

    /// Sets (or, with `None`, removes) an annotation of the host.
    pub(super) async fn patch_annotation(
        &mut self,
        key: &str,
        value: Option<String>,
    ) -> Result<()> {
        let patch = json!({ "metadata": { "annotations": { key: value } } });
        let written = self
            .api
            .patch(
                &self.host.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .map_err(failed("annotate host"))?;
        self.wrote(written);
        Ok(())
    }

    /// Keeps the host as a write of this reconcile returned it.
    pub(super) fn wrote(&mut self, host: MaasHost) {
        let replaced = self.written.replace(host);
        if let Some(rv) = replaced.and_then(|h| h.metadata.resource_version) {
            self.replaced_versions.push(rv);
        }
    }

    /// Hands the host as this reconcile's writes left it to the next reconcile.
    pub(super) fn remember_writes(&self) {
        if let Some(written) = &self.written {
            self.gw
                .own_writes
                .remember(written, &self.replaced_versions);
        }
    }

    /// Writes the host status for this outcome when it changed, with an Event on a new
    /// provisioning state unless an operation of this reconcile announced it already. A change
    /// of MAAS's progress text alone waits ([`progress_report_wait`]): the time until it is
    /// due is returned, for the reconcile to look again then.
    pub(super) async fn write_status(&mut self, wait: Wait) -> Result<Option<Duration>> {
        let machine = self.machine.as_deref();
        let ours = machine.is_some_and(|m| {
            !matches!(m.status, MachineStatus::Ready | MachineStatus::New)
                && held_by_us(&self.facts, m)
        });
        let previous = self.host.status.as_ref();
        let (vm_host, vm_host_id) =
            super::vm_host::status_fields(&self.gw.cache, machine, previous);
        let input = StatusInput {
            previous,
            machine,
            ours,
            wants_deploy: self.facts.wants_deploy(),
            allocation: self.allocation.clone(),
            wait,
            deploy_failures: self.facts.deploy_failures,
            generation: self.host.metadata.generation,
            unlisted_from: self.unlisted_from.as_deref(),
            refusal: self.refusal.as_deref(),
            release_cleanup_pending: self.facts.static_addresses.is_some()
                || self.facts.original_hostname.is_some(),
            refusal_reason: self.refusal_reason,
            vm_host,
            vm_host_id,
        };
        let now = now();
        let status = build_status(&input, &now);
        if previous == Some(&status) {
            return Ok(None);
        }
        if let Some(due) = previous.and_then(|p| progress_report_wait(p, &status, &now)) {
            return Ok(Some(due));
        }
        let old_state = previous.and_then(|s| s.provisioning_state);
        let written = apply_status(
            &self.api,
            &self.host.name_any(),
            &self.gw.base.field_manager,
            &crate::compose::decide::without_composition(status.clone()),
        )
        .await?;
        self.wrote(written);
        self.allocation_unwritten = false;
        let new_state = status
            .provisioning_state
            .filter(|s| old_state != Some(*s) && !self.announced);
        if let Some(state) = new_state {
            let note = format!(
                "{} -> {}",
                old_state.map_or("(none)", ProvisioningState::as_str),
                state.as_str()
            );
            // The reason names the new state: the event recorder folds an Event into an
            // earlier one of the same reason and object (a series), keeping the earlier note.
            let events = &self.gw.base.events;
            if matches!(
                state,
                ProvisioningState::Failed | ProvisioningState::Broken | ProvisioningState::Missing
            ) {
                events.warning(self.host, state.as_str(), &note).await;
            } else {
                events.normal(self.host, state.as_str(), &note).await;
            }
        }
        Ok(None)
    }

    /// Writes the allocation this reconcile made to the status, if not written yet: after a
    /// failed step, so the host says the machine is ours although the reconcile ends early.
    pub(super) async fn record_allocation(&mut self) -> Result<()> {
        if self.allocation_unwritten {
            self.write_status(Wait::Idle).await?;
        }
        Ok(())
    }

    /// Publishes the `Allocated` Event no deploy of this reconcile took along.
    pub(super) async fn announce_allocation(&mut self) {
        if let Some(note) = self.allocated_note.take() {
            self.gw
                .base
                .events
                .normal(self.host, "Allocated", &note)
                .await;
        }
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

    /// Applies `change`; `true` when the host is gone (its last finalizer removed while
    /// deleting), and the reconcile has nothing left to write.
    pub(super) async fn change_finalizer(&mut self, change: Change) -> Result<bool> {
        let current = self.written.clone().unwrap_or_else(|| self.host.clone());
        let (api, field_manager) = (&self.api, &self.gw.base.field_manager);
        let key = keys::FINALIZER_MAAS_HOST;
        // `add` always answers with the host; `remove` answers `None` when the host went with it.
        let written = match change {
            Change::Keep => return Ok(false),
            Change::Add => finalizer::add(api, &current, key, field_manager)
                .await
                .map(Some),
            Change::Remove => finalizer::remove(api, &current, key, field_manager).await,
        }
        .map_err(failed("updating the finalizer"))?;
        let gone = change == Change::Remove
            && current.metadata.deletion_timestamp.is_some()
            && written.as_ref().is_none_or(|h| h.finalizers().is_empty());
        if let Some(written) = written {
            self.wrote(written);
        }
        Ok(gone)
    }
}
