//! The composition reconciler of one VM host MaasHost: observe, take each VM's next step
//! ([`next_step`]), and again from what the steps wrote, until nothing moves (a few rounds:
//! record, compose, MaasHost, system id). The status (`status.composedVMs` and the
//! `VMsComposed` condition) is applied with the composition's own field manager.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use capmaas_api::MaasHost;
use capmaas_api::keys;
use capmaas_api::lxd::{ComposedVm, VmRequest};
use capmaas_runtime::conditions::{ConditionStatus, NewCondition, get_condition, set_condition};
use capmaas_runtime::error::failed;
use capmaas_runtime::status::{apply_status, now};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use maas_api_client::{ComposeRequest, MaasError, Machine};
use serde_json::json;
use tracing::info;

use super::decide::{
    REASON_NO_VM_HOST, REASON_VM_HOSTS_UNSUPPORTED, Refusal, VMS_COMPOSED, VmStep, compose_failure,
    composed_condition, next_step, refusal_wait,
};
use super::state::observe;
use crate::binding::{Bindings, Bound};
use crate::context::Gateway;
use crate::error::{Error, Result};
use crate::inventory::act::{DeleteOutcome, delete_unchanged};
use crate::mapping;

/// Rounds of steps in one reconcile: a new VM takes five (record, compose, MaasHost, system
/// id, settled); more wait for the next reconcile.
const ROUNDS: usize = 8;
/// While a VM is waited for (allocated, claimed) or the rounds ran out: look again after this.
const LOOK_AGAIN: Duration = Duration::from_secs(15);

/// What the steps of one reconcile left.
#[derive(Debug, Default)]
struct Progress {
    /// VM MaasHosts applied, by hostname.
    created: BTreeMap<String, String>,
    /// A refusal standing.
    refusal: Option<Refusal>,
    /// When a standing refusal may be asked again.
    retry_in: Option<Duration>,
    /// Wanted VMs not settled.
    pending: Vec<String>,
    /// Some VM is waited for.
    waiting: bool,
}

/// Reconciles the VMs of one VM host MaasHost.
pub async fn reconcile(host: Arc<MaasHost>, gw: Arc<Gateway>) -> Result<Action> {
    if host.meta().deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let namespace = host.namespace().unwrap_or_default();
    let key = format!("{namespace}/{}", host.name_any());
    let api: Api<MaasHost> = Api::namespaced(gw.base.client.clone(), &namespace);
    let generation = host.metadata.generation;
    let mut progress = Progress::default();
    if let Some((at, elapsed, refusal)) = gw.compose_refusals.get(&key) {
        match refusal_wait(Some((at, elapsed)), generation) {
            Some(left) => {
                progress.refusal = Some(refusal);
                progress.retry_in = Some(left);
            }
            None => gw.compose_refusals.clear(&key),
        }
    }
    let mut current = (*host).clone();
    let mut settled = false;
    for _ in 0..ROUNDS {
        let (next, moved) = round(&gw, &api, &key, current, &mut progress).await?;
        current = next;
        if !moved {
            settled = true;
            break;
        }
    }
    write_status(&gw, &api, &current, None, &progress).await?;
    let again = if settled && !progress.waiting {
        progress.retry_in
    } else {
        Some(progress.retry_in.map_or(LOOK_AGAIN, |r| r.min(LOOK_AGAIN)))
    };
    Ok(again.map_or_else(Action::await_change, Action::requeue))
}

/// One round: every VM's next step; the records written once at the end. Returns the host as
/// the round left it and whether anything moved.
async fn round(
    gw: &Gateway,
    api: &Api<MaasHost>,
    key: &str,
    current: MaasHost,
    progress: &mut Progress,
) -> Result<(MaasHost, bool)> {
    let observed = observe(gw, &current, &progress.created).await?;
    let mut records: Vec<ComposedVm> = current
        .status
        .as_ref()
        .and_then(|s| s.composed_vms.clone())
        .unwrap_or_default();
    let before = records.clone();
    let mut moved = false;
    progress.pending.clear();
    progress.waiting = false;
    for vm in &observed.vms {
        let step = next_step(vm);
        if vm.wanted && step != VmStep::Done {
            progress.pending.push(vm.hostname.clone());
        }
        match step {
            VmStep::Record => records.push(ComposedVm {
                hostname: vm.hostname.clone(),
                system_id: None,
            }),
            VmStep::Compose => {
                let Some(request) = observed.requests.get(&vm.hostname) else {
                    continue;
                };
                if progress.refusal.is_some() {
                    continue;
                }
                match compose(gw, &current, request).await? {
                    None => moved = true,
                    Some(refusal) => {
                        if refusal.reason != REASON_NO_VM_HOST {
                            gw.compose_refusals.record(
                                key,
                                current.metadata.generation,
                                refusal.clone(),
                            );
                            progress.retry_in = Some(super::decide::REFUSAL_RETRY);
                        }
                        progress.refusal = Some(refusal);
                    }
                }
            }
            VmStep::CreateHost { system_id } => {
                let machine = observed.machines.get(&vm.hostname);
                create_host(gw, api, &current, &vm.hostname, &system_id, machine).await?;
                progress.created.insert(vm.hostname.clone(), system_id);
                moved = true;
            }
            VmStep::SetSystemId { system_id } => {
                for r in records.iter_mut().filter(|r| r.hostname == vm.hostname) {
                    r.system_id = Some(system_id.clone());
                }
            }
            VmStep::DeleteMachine { system_id } => {
                match gw.maas.delete_machine(&system_id).await {
                    Ok(()) | Err(MaasError::NotFound { .. }) => {}
                    Err(e) => return Err(Error::maas("delete composed VM")(e)),
                }
                info!(%system_id, hostname = %vm.hostname, vm_host = %key, "deleted a composed VM no longer wanted");
                moved = true;
            }
            VmStep::DeleteHost { name, version } => {
                let outcome = delete_unchanged(api, &name, &version)
                    .await
                    .map_err(failed("delete composed VM host"))?;
                if outcome == DeleteOutcome::Changed {
                    progress.waiting = true;
                } else {
                    moved = true;
                }
            }
            VmStep::Drop => records.retain(|r| r.hostname != vm.hostname),
            VmStep::Wait => progress.waiting = true,
            VmStep::Done => {}
        }
    }
    if records == before {
        return Ok((current, moved));
    }
    let written = write_status(gw, api, &current, Some(records), progress).await?;
    Ok((written.unwrap_or(current), true))
}

/// Composes the VM of `request` on the VM host `vm_host` shows (`status.vmHost`) in its zone
/// and pool, as CAPMAAS does. `Some` refusal when MAAS (or what is known of it) refuses.
async fn compose(gw: &Gateway, vm_host: &MaasHost, request: &VmRequest) -> Result<Option<Refusal>> {
    let hostname = &request.hostname;
    let Some(shown) = vm_host.status.as_ref().and_then(|s| s.vm_host.as_ref()) else {
        return Ok(Some(Refusal {
            reason: REASON_NO_VM_HOST,
            message: format!("VM {hostname} waits for MAAS to register the VM host"),
        }));
    };
    if let Some(message) = gw.cache.vm_hosts.unsupported() {
        return Ok(Some(Refusal {
            reason: REASON_VM_HOSTS_UNSUPPORTED,
            message: format!("cannot compose VM {hostname}: this MAAS has no VM hosts: {message}"),
        }));
    }
    let compose = ComposeRequest {
        hostname: Some(hostname.clone()),
        cores: u32::try_from(request.cores).ok(),
        memory_mib: u64::try_from(request.memory_mib).ok(),
        storage_gb: u64::try_from(request.disk_gb).ok(),
        storage_pool: request.storage_pool.clone(),
        zone: shown.zone.clone(),
        pool: shown.pool.clone(),
        ..ComposeRequest::default()
    };
    match gw.maas.compose(shown.id, &compose).await {
        Ok(system_id) => {
            info!(%system_id, %hostname, vm_host = shown.id, "composed a VM");
            Ok(None)
        }
        Err(e) => compose_failure(hostname, e).map_err(Error::maas("compose")),
    }
}

/// Applies the MaasHost of VM `hostname` (named by its system id) with the composition's
/// labels and the VM host's inventory, zone, pool and architecture labels, after taking the
/// machine's binding. Idempotent.
async fn create_host(
    gw: &Gateway,
    api: &Api<MaasHost>,
    vm_host: &MaasHost,
    hostname: &str,
    system_id: &str,
    machine: Option<&Machine>,
) -> Result<()> {
    let namespace = vm_host.namespace().unwrap_or_default();
    if let Bound::TakenBy(holder) = Bindings::of(gw)
        .acquire_new(system_id, &namespace, system_id)
        .await?
    {
        return Err(Error::NotOurs {
            system_id: system_id.to_owned(),
            reason: format!("the composed VM {hostname} is imported as MaasHost {holder}"),
        });
    }
    let inventory = vm_host
        .labels()
        .get(keys::LABEL_HOST_INVENTORY)
        .cloned()
        .unwrap_or_default();
    let mut labels: BTreeMap<String, String> = machine
        .map(|m| mapping::host_labels(m, &inventory, None))
        .unwrap_or_default()
        .into_iter()
        // Tags are the inventory's to follow; the composition never owns them.
        .filter(|(k, _)| !k.starts_with(keys::LABEL_HOST_TAG_PREFIX))
        .collect();
    labels.insert(keys::LABEL_COMPOSED_ON.to_owned(), vm_host.name_any());
    labels.insert(keys::LABEL_VM_HOSTNAME.to_owned(), hostname.to_owned());
    let body = json!({
        "apiVersion": MaasHost::api_version(&()),
        "kind": MaasHost::kind(&()),
        "metadata": { "name": system_id, "labels": labels },
        "spec": { "systemID": system_id },
    });
    let manager = super::field_manager(&gw.base.field_manager);
    api.patch(
        system_id,
        &PatchParams::apply(&manager).force(),
        &Patch::Apply(&body),
    )
    .await
    .map_err(failed("apply composed VM host"))?;
    info!(namespace, host = %system_id, %hostname, vm_host = %vm_host.name_any(), "created the MaasHost of a composed VM");
    Ok(())
}

/// Applies `status.composedVMs` (`records`, or the host's own when `None`) and `VMsComposed`
/// when either changed; the written host.
async fn write_status(
    gw: &Gateway,
    api: &Api<MaasHost>,
    host: &MaasHost,
    records: Option<Vec<ComposedVm>>,
    progress: &Progress,
) -> Result<Option<MaasHost>> {
    let status = host.status.clone().unwrap_or_default();
    let previous = status
        .conditions
        .as_deref()
        .and_then(|c| get_condition(c, VMS_COMPOSED));
    let wanted = host.spec.vms.as_ref().map_or(0, Vec::len);
    let mut conditions = previous.cloned().into_iter().collect::<Vec<_>>();
    // Between the steps the condition stays as it is; the reconcile's end sets it.
    if records.is_none()
        && let Some((ok, reason, message)) = composed_condition(
            progress.refusal.as_ref(),
            &progress.pending,
            wanted,
            previous,
        )
    {
        let status = if ok {
            ConditionStatus::True
        } else {
            ConditionStatus::False
        };
        set_condition(
            &mut conditions,
            NewCondition::new(VMS_COMPOSED, status, reason)
                .message(message)
                .observed_generation(host.metadata.generation),
            &now(),
        );
    }
    let records_changed = records
        .as_ref()
        .is_some_and(|r| Some(r) != status.composed_vms.as_ref());
    let records = records.or(status.composed_vms.clone()).unwrap_or_default();
    if !records_changed && conditions.first() == previous {
        return Ok(None);
    }
    let manager = super::field_manager(&gw.base.field_manager);
    let body = json!({ "composedVMs": records, "conditions": conditions });
    let written = apply_status(api, &host.name_any(), &manager, &body).await?;
    Ok(Some(written))
}
