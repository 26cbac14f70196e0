//! LXD VMs, the writes on VM hosts ([`crate::vm`] decides): adding a machine's VM request to
//! a VM host's `spec.vms` and withdrawing it. (Finding the request and the VM is
//! `state::find_vm`; claiming the VM, `claiming::claim_vm`.)
//! Every VM host write is a read-modify-replace under the host's resourceVersion
//! ([`host_ops::update_host`]): a concurrent writer (another machine taking the same capacity,
//! maas-client) makes it fail with 409, and the change is decided again on a fresh read.

use std::collections::BTreeSet;

use capmaas_api::conditions::{self as cond, reasons};
use capmaas_api::{MaasHost, MaasMachine, keys};
use capmaas_runtime::conditions::{ConditionStatus, NewCondition};
use capmaas_runtime::controller::Flow;
use capmaas_runtime::error::Failed;
use kube::ResourceExt;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use tracing::info;

use crate::context::Ctx;
use crate::decide::failure_domain;
use crate::error::Result;
use crate::host_ops::{self, Mutation, retry_delay};
use crate::state::{State, find_vm, host_namespace, namespace, still_claiming, write_status};
use crate::vm;

/// VM hosts tried, best first, before a reconcile gives up and looks again later.
const VM_HOST_CANDIDATES: usize = 4;

/// UIDs of the MaasMachines of `mm`'s Cluster (its cluster label, same namespace), `mm` left
/// out: the VMs its VM spreads away from.
fn cluster_members(ctx: &Ctx, mm: &MaasMachine) -> BTreeSet<String> {
    let Some(cluster) = mm.labels().get(keys::LABEL_CLUSTER_NAME) else {
        return BTreeSet::new();
    };
    ctx.maas_machines
        .state()
        .iter()
        .filter(|m| {
            m.metadata.namespace == mm.metadata.namespace
                && m.labels().get(keys::LABEL_CLUSTER_NAME) == Some(cluster)
                && m.metadata.uid != mm.metadata.uid
        })
        .filter_map(|m| m.metadata.uid.clone())
        .collect()
}

/// Chooses a VM host for `state.mm`'s VM and adds the VM's entry to its `spec.vms`.
pub(crate) async fn request_vm(ctx: &Ctx, state: &mut State) -> Result<Flow> {
    let ns = namespace(&state.mm)?;
    // Decided on a fresh read of the machine: a machine being deleted never adds an entry.
    if !still_claiming(ctx, state, &ns).await? {
        return Ok(Flow::Continue);
    }
    let (vm_host, composed) = find_vm(ctx, &state.mm).await?;
    if vm_host.is_some() {
        (state.vm_host, state.vm) = (vm_host, composed);
        return Ok(Flow::Continue);
    }
    let Some(machine) = state.machine.clone() else {
        return Ok(Flow::Continue);
    };
    let hostname = vm::machine_vm_hostname(&machine).ok_or(Failed::missing("Machine name"))?;
    let claimable = ctx.claimable_namespaces(&ns);
    let cached = ctx.hosts.state();
    let vm_hosts: Vec<&MaasHost> = cached
        .iter()
        .map(AsRef::as_ref)
        .filter(|h| claimable.admits_host(h))
        .filter(|h| h.status.as_ref().is_some_and(|s| s.vm_host.is_some()))
        .collect();
    let obj = ObjectRef::from_obj(&state.mm);
    // MAAS hostnames are unique: an entry of another machine with this hostname (a re-created
    // MaasMachine of the same Machine, its old VM not withdrawn yet) is waited out.
    if let Some(taken) =
        vm_hosts.iter().find(|h| {
            h.spec.vms.iter().flatten().any(|e| {
                e.hostname == hostname && e.consumer.uid != state.mm.uid().unwrap_or_default()
            })
        })
    {
        let message = format!(
            "VM hostname {hostname} is still asked for by another MaasMachine on VM host {}",
            taken.name_any()
        );
        return no_vm_host(ctx, state, &message, &obj).await;
    }
    let request = vm::vm_host_request(
        &state.mm,
        failure_domain(&state.mm, Some(&machine)),
        cluster_members(ctx, &state.mm),
    );
    let ranking = vm::rank_vm_hosts(&request, vm_hosts.iter().copied());
    if ranking.candidates.is_empty() {
        let message = vm::no_vm_host_explanation(&request, &ranking);
        return no_vm_host(ctx, state, &message, &obj).await;
    }
    ctx.waits.reset(&obj);
    for candidate in ranking.candidates.iter().take(VM_HOST_CANDIDATES) {
        let (host_ns, name) = (host_namespace(candidate)?, candidate.name_any());
        let entry =
            vm::vm_request(&state.mm, &machine, &host_ns).ok_or(Failed::missing("name or uid"))?;
        let mm = &state.mm;
        let ranked_siblings = vm::cluster_vms(&request, candidate);
        let written = host_ops::update_host(ctx, &host_ns, &name, "requesting a VM", |h| {
            // Decided again on every fresh read: another machine may have taken the capacity.
            let still_vm_host = h.status.as_ref().is_some_and(|s| s.vm_host.is_some());
            if !still_vm_host
                || vm::entry_of(h, mm).is_some()
                || vm::exclusion(&request, h).is_some()
            {
                return Mutation::Keep;
            }
            // A VM of the same Cluster placed here meanwhile: the spread is decided again.
            if vm::cluster_vms(&request, h) > ranked_siblings {
                return Mutation::Keep;
            }
            if h.spec
                .vms
                .iter()
                .flatten()
                .any(|e| e.hostname == entry.hostname)
            {
                return Mutation::Keep;
            }
            h.spec.vms.get_or_insert_with(Vec::new).push(entry.clone());
            Mutation::Write
        })
        .await?;
        if let Some(host) = written.filter(|h| vm::entry_of(h, &state.mm).is_some()) {
            let note = format!(
                "VM {hostname} ({} cores, {} MiB, {} GB) requested on VM host {name}",
                entry.cores, entry.memory_mib, entry.disk_gb
            );
            info!(vm_host = %name, %hostname, "VM requested");
            ctx.base
                .events
                .normal(&state.mm, reasons::VM_REQUESTED, &note)
                .await;
            state.vm_host = Some(host);
            state.vm = None;
            return Ok(Flow::Continue);
        }
    }
    // Every candidate filled up meanwhile: the cache is behind; look again shortly.
    Ok(Flow::Done(Action::requeue(retry_delay())))
}

/// No VM host takes the VM: `NoVMHostAvailable` with `message`, a Warning when it is new.
async fn no_vm_host(
    ctx: &Ctx,
    state: &mut State,
    message: &str,
    obj: &ObjectRef<MaasMachine>,
) -> Result<Flow> {
    let reason = reasons::NO_VM_HOST_AVAILABLE;
    let conditions = vec![
        NewCondition::new(cond::PAUSED, ConditionStatus::False, reasons::NOT_PAUSED),
        NewCondition::new(cond::HOST_ASSOCIATED, ConditionStatus::False, reason).message(message),
        NewCondition::new(cond::MACHINE_DEPLOYED, ConditionStatus::False, reason).message(message),
    ];
    if write_status(ctx, state, conditions, false).await? {
        ctx.base.events.warning(&state.mm, reason, message).await;
    }
    Ok(Flow::Done(Action::requeue(ctx.waits.next_delay(obj))))
}

/// Deleting, no host held: removes the machine's entry from the VM host's `spec.vms`
/// (maas-client then deletes a VM that was never allocated).
pub(crate) async fn remove_vm_request(ctx: &Ctx, state: &mut State) -> Result<Flow> {
    let Some(vm_host) = state.vm_host.take() else {
        return Ok(Flow::Continue);
    };
    state.vm = None;
    let (host_ns, name) = (host_namespace(&vm_host)?, vm_host.name_any());
    let mm = state.mm.clone();
    let mut removed = Vec::new();
    host_ops::update_host(ctx, &host_ns, &name, "withdrawing the VM request", |h| {
        let Some(vms) = h.spec.vms.as_mut() else {
            return Mutation::Keep;
        };
        let before = vms.len();
        removed = vms
            .iter()
            .filter(|e| vm::is_entry_of(e, &mm, &host_ns))
            .map(|e| e.hostname.clone())
            .collect();
        vms.retain(|e| !vm::is_entry_of(e, &mm, &host_ns));
        if vms.len() == before {
            return Mutation::Keep;
        }
        if vms.is_empty() {
            h.spec.vms = None;
        }
        Mutation::Write
    })
    .await?;
    for hostname in removed {
        let note = format!("VM {hostname} no longer requested on VM host {name}");
        ctx.base
            .events
            .normal(&mm, reasons::VM_REQUEST_WITHDRAWN, &note)
            .await;
    }
    Ok(Flow::Continue)
}
