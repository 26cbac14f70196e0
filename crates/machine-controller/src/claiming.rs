//! Choosing and claiming a host, safe against concurrent reconciles in this process and in
//! other replicas.
//!
//! Intent before acquisition: the chosen host is first written to the MaasMachine's
//! `status.hostRef` (with the rest of the status the claim will bring) under the machine's
//! resourceVersion, then claimed on the host under the
//! host's resourceVersion. Two writers on the same machine cannot both record an intent, and
//! two machines cannot both claim one host, so no host is claimed twice and no machine holds
//! two hosts. A recorded intent whose host was lost is withdrawn (again under the
//! resourceVersion) before another host is chosen.

use capmaas_runtime::error::{Failed, failed};

use capmaas_api::common::HostReference;
use capmaas_api::conditions::{self as cond, reasons};
use capmaas_api::machine::MaasMachineStatus;
use capmaas_api::{MaasHost, MaasMachine};
use capmaas_runtime::conditions::{ConditionStatus, NewCondition};
use capmaas_runtime::controller::Flow;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use serde_json::{Value, json};
use tracing::info;

use crate::choose::{self, HostRequest, rank_hosts};
use crate::context::Ctx;
use crate::decide::{Observed, host_request};
use crate::error::Result;
use crate::host_ops::{self, Claim, Fit, retry_delay};
use crate::state::{
    State, apply_owned, host_namespace, mm_api, namespace, still_claiming, write_status,
};
use crate::status::{consumer_ref, intended_status, owned_status};

/// Hosts tried, best first, before a reconcile gives up claiming and looks again later.
const CLAIM_CANDIDATES: usize = 8;

/// Writes (or clears) `status.hostRef` only if the MaasMachine is still at `mm`'s
/// resourceVersion; 409 means another writer got there first.
async fn record_intent(
    ctx: &Ctx,
    mm: &MaasMachine,
    host: Option<&HostReference>,
) -> Result<MaasMachine> {
    let rv = mm
        .resource_version()
        .ok_or(Failed::missing("resourceVersion"))?;
    // `namespace` is written even when absent (null): a merge patch keeps keys it does not name.
    let host_ref = host.map_or(
        Value::Null,
        |h| json!({"name": h.name, "namespace": h.namespace}),
    );
    let patch = json!({"metadata": {"resourceVersion": rv}, "status": {"hostRef": host_ref}});
    let params = PatchParams {
        field_manager: Some(ctx.base.field_manager.clone()),
        ..PatchParams::default()
    };
    let written = mm_api(ctx, mm)?
        .patch_status(&mm.name_any(), &params, &Patch::Merge(&patch))
        .await
        .map_err(failed("recording the chosen host"))?;
    Ok(written)
}

/// `(namespace, name)` of the host recorded in `status.hostRef`.
fn recorded_host(mm: &MaasMachine) -> Option<(String, String)> {
    let own = mm.metadata.namespace.as_deref().unwrap_or_default();
    mm.status
        .as_ref()
        .and_then(|s| s.host_ref.as_ref())
        .map(|r| (r.namespace_or(own).to_owned(), r.name.clone()))
}

/// Chooses a host for `state.mm` and claims it.
pub(crate) async fn choose_and_claim(ctx: &Ctx, state: &mut State) -> Result<Flow> {
    let ns = namespace(&state.mm)?;
    let uid = state.mm.uid().ok_or(Failed::missing("uid"))?;
    if !still_claiming(ctx, state, &ns).await? {
        return Ok(Flow::Continue);
    }
    let now = jiff::Timestamp::now();
    let marked = ctx.claims.marked_by_others(&uid);
    // Ranked in place from the cache (no copies): this runs once per machine at scale.
    let claimable = ctx.claimable_namespaces(&ns);
    let cached = ctx.hosts.state();
    let hosts: Vec<&MaasHost> = cached
        .iter()
        .filter(|h| claimable.admits_host(h))
        .map(AsRef::as_ref)
        .collect();
    // Walking owners costs reads; only do it when some host is reserved at all.
    let reuse_owner = match &state.machine {
        Some(machine) if hosts.iter().any(|h| choose::reservation_active(h, now)) => {
            crate::reuse::resolve(&ctx.base.client, &state.mm, machine)
                .await?
                .map(|t| t.owner.uid)
        }
        _ => None,
    };
    let mut request = host_request(&state.mm, state.machine.as_ref(), reuse_owner.clone());

    // An intent recorded earlier (by us before a crash, or by another replica that may be
    // claiming right now) is resumed. It is withdrawn only once the claim is definitely lost
    // (the host went to another machine or no longer fits), never while it may still succeed.
    if let Some((host_ns, recorded)) = recorded_host(&state.mm) {
        if !ctx.claims.try_mark(&host_ns, &recorded, &uid) {
            return Ok(Flow::Done(Action::requeue(retry_delay())));
        }
        // A recorded host the namespace may no longer claim (its inventory closed to it) is
        // not claimed: the intent is withdrawn like any lost claim.
        let admitted = ctx
            .hosts
            .get(&ObjectRef::new(&recorded).within(&host_ns))
            .is_none_or(|h| claimable.admits_host(&h));
        let claimed = if admitted {
            let claim = host_ops::claim(
                ctx,
                &state.mm,
                &host_ns,
                &recorded,
                Fit::Request(&request),
                state.machine.as_ref(),
                ctx.registers_vm_hosts(state.cluster.as_ref()),
            );
            claim.await?
        } else {
            Claim::Lost
        };
        if let Claim::Won(host) = claimed {
            deployment_requested(ctx, state, &host).await;
            state.host = Some(*host);
            return Ok(Flow::Continue);
        }
        ctx.claims.unmark(&host_ns, &recorded, &uid);
        state.replace_mm(record_intent(ctx, &state.mm, None).await?);
    }

    request.busy_hosts = marked;
    let ranking = rank_hosts(&request, hosts.iter().copied(), now);
    let obj = ObjectRef::from_obj(&state.mm);
    if ranking.candidates.is_empty() {
        return no_host(ctx, state, &request, &ranking, &obj).await;
    }
    ctx.waits.reset(&obj);
    for candidate in ranking.candidates.iter().take(CLAIM_CANDIDATES) {
        let (host_ns, host_name) = (host_namespace(candidate)?, candidate.name_any());
        if !ctx.claims.try_mark(&host_ns, &host_name, &uid) {
            continue;
        }
        let fit = Fit::Request(&request);
        let claimed = claim_with_intent(ctx, state, &host_ns, candidate, fit).await;
        match claimed {
            Ok(Some(host)) => {
                let reused = choose::reserved_for(candidate, reuse_owner.as_deref(), now);
                let (reason, note) = if reused {
                    (
                        reasons::HOST_REUSED,
                        format!("reusing host {host_name}, reserved for this machine's owner"),
                    )
                } else {
                    (
                        reasons::HOST_CLAIMED,
                        format!("claimed host {host_name} (system {})", host.spec.system_id),
                    )
                };
                info!(host = %host_name, reused, "host claimed");
                // One write, one Event: a claim that carries the deployment request says so.
                let note = match host.spec.provisioning.as_ref() {
                    Some(request) => {
                        format!("{note}; deployment with image {} requested", request.image)
                    }
                    None => note,
                };
                ctx.base.events.normal(&state.mm, reason, &note).await;
                state.host = Some(host);
                return Ok(Flow::Continue);
            }
            Ok(None) => ctx.claims.unmark(&host_ns, &host_name, &uid),
            Err(e) => {
                ctx.claims.unmark(&host_ns, &host_name, &uid);
                return Err(e);
            }
        }
    }
    // Every candidate went to someone else meanwhile: the cache is behind; look again shortly.
    Ok(Flow::Done(Action::requeue(retry_delay())))
}

/// Claims the host of `spec.systemID` again (see [`crate::decide::Step::ReclaimHost`]), with
/// the intent recorded first as for any claim.
pub(crate) async fn reclaim(ctx: &Ctx, state: &mut State) -> Result<Flow> {
    let ns = namespace(&state.mm)?;
    let uid = state.mm.uid().ok_or(Failed::missing("uid"))?;
    if !still_claiming(ctx, state, &ns).await? {
        return Ok(Flow::Continue);
    }
    let Some(system_host) = state.system_host.as_ref() else {
        return Ok(Flow::Continue);
    };
    let intent = crate::choose::host_ref(&state.mm, system_host);
    let (host_ns, host_name) = (host_namespace(system_host)?, system_host.name_any());
    if !ctx.claims.try_mark(&host_ns, &host_name, &uid) {
        return Ok(Flow::Done(Action::requeue(retry_delay())));
    }
    state.replace_mm(record_intent(ctx, &state.mm, Some(&intent)).await?);
    let claimed = host_ops::reclaim(ctx, &state.mm, &host_ns, &host_name).await;
    match claimed {
        Ok(Claim::Won(host)) => {
            let note = format!(
                "claimed host {host_name} again: it runs this machine's MAAS machine {}",
                host.spec.system_id
            );
            info!(host = %host_name, "host claimed again by system id");
            ctx.base
                .events
                .normal(&state.mm, reasons::HOST_CLAIMED, &note)
                .await;
            state.host = Some(*host);
            state.system_host = None;
            Ok(Flow::Continue)
        }
        Ok(Claim::Lost) => {
            ctx.claims.unmark(&host_ns, &host_name, &uid);
            state.replace_mm(record_intent(ctx, &state.mm, None).await?);
            state.system_host = None;
            Ok(Flow::Continue)
        }
        Err(e) => {
            ctx.claims.unmark(&host_ns, &host_name, &uid);
            Err(e)
        }
    }
}

/// The Event of a deployment requested together with the claim.
async fn deployment_requested(ctx: &Ctx, state: &State, host: &MaasHost) {
    if host.spec.provisioning.is_some() {
        host_ops::announce_deployment(ctx, &state.mm, &host.name_any()).await;
    }
}

/// Claims the composed VM's MaasHost through the ordinary claim (intent first, consumerRef
/// under the host's resourceVersion, the deployment request in the same write when it can be
/// made). A VM is never registered as a VM host.
pub(crate) async fn claim_vm(ctx: &Ctx, state: &mut State) -> Result<Flow> {
    let ns = namespace(&state.mm)?;
    let uid = state.mm.uid().ok_or(Failed::missing("uid"))?;
    if !still_claiming(ctx, state, &ns).await? {
        return Ok(Flow::Continue);
    }
    let (Some(vm_host), Some(composed)) = (state.vm_host.clone(), state.vm.clone()) else {
        return Ok(Flow::Continue);
    };
    let Some(entry) = crate::vm::entry_of(&vm_host, &state.mm).cloned() else {
        return Ok(Flow::Continue);
    };
    let (host_ns, name) = (host_namespace(&composed)?, composed.name_any());
    if !ctx.claims.try_mark(&host_ns, &name, &uid) {
        return Ok(Flow::Done(Action::requeue(retry_delay())));
    }
    let vm_host_name = vm_host.name_any();
    let fit = Fit::Vm {
        composed_on: &vm_host_name,
        hostname: &entry.hostname,
    };
    match claim_with_intent(ctx, state, &host_ns, &composed, fit).await {
        Ok(Some(host)) => {
            let mut note = format!(
                "claimed host {name}, VM {} composed on VM host {vm_host_name} (system {})",
                entry.hostname, host.spec.system_id
            );
            if let Some(request) = host.spec.provisioning.as_ref() {
                note = format!("{note}; deployment with image {} requested", request.image);
            }
            info!(host = %name, vm_host = %vm_host_name, "VM claimed");
            ctx.base
                .events
                .normal(&state.mm, reasons::HOST_CLAIMED, &note)
                .await;
            state.host = Some(host);
            Ok(Flow::Continue)
        }
        Ok(None) => {
            ctx.claims.unmark(&host_ns, &name, &uid);
            Ok(Flow::Done(Action::requeue(retry_delay())))
        }
        Err(e) => {
            ctx.claims.unmark(&host_ns, &name, &uid);
            Err(e)
        }
    }
}

/// Records the intent, claims the host, and withdraws the intent if the claim was lost.
///
/// The intent is the whole status the machine will have once it holds the host
/// ([`intended_status`]), not only `status.hostRef`: a won claim (nearly every one) then needs
/// no second status write. The withdrawal puts the status back as it was before.
async fn claim_with_intent(
    ctx: &Ctx,
    state: &mut State,
    host_ns: &str,
    candidate: &MaasHost,
    fit: Fit<'_>,
) -> Result<Option<MaasHost>> {
    let host = candidate.name_any();
    let consumer = consumer_ref(&state.mm, host_ns).ok_or(Failed::missing("name or uid"))?;
    let vm_hosts = host_ops::registers_vm_host(ctx, state.cluster.as_ref(), candidate);
    let mut expected = candidate.clone();
    host_ops::mark_claimed(
        &mut expected,
        &state.mm,
        &consumer,
        state.machine.as_ref(),
        vm_hosts,
    );
    let intended = intended_status(
        &Observed {
            host: Some(&expected),
            system_host: None,
            ..state.observed()
        },
        &capmaas_runtime::status::now(),
    );
    let before = owned_status(&state.mm);
    state.replace_mm(apply_owned(ctx, &state.mm, &intended, RECORDING_HOST).await?);
    let machine = state.machine.as_ref();
    match host_ops::claim(ctx, &state.mm, host_ns, &host, fit, machine, vm_hosts).await? {
        Claim::Won(h) => Ok(Some(*h)),
        Claim::Lost => {
            let restored = MaasMachineStatus {
                host_ref: None,
                ..before
            };
            state.replace_mm(apply_owned(ctx, &state.mm, &restored, RECORDING_HOST).await?);
            // A hostRef written by a merge patch (an intent resumed from an older version) is
            // not released by the apply above.
            if recorded_host(&state.mm).is_some() {
                state.replace_mm(record_intent(ctx, &state.mm, None).await?);
            }
            Ok(None)
        }
    }
}

/// What the claim's status writes are called in errors.
const RECORDING_HOST: &str = "recording the chosen host";

async fn no_host(
    ctx: &Ctx,
    state: &mut State,
    request: &HostRequest,
    ranking: &choose::Ranking<'_>,
    obj: &ObjectRef<MaasMachine>,
) -> Result<Flow> {
    let (reason, mut message) = choose::no_host_explanation(request, ranking);
    if let Some(pool) = &request.resource_pool
        && let Some(inventory) = crate::on_demand::import_pool(ctx, pool).await?
    {
        use std::fmt::Write as _;
        let _ = write!(
            message,
            "; MAAS pool {pool} is imported on demand by MaasInventory {inventory}"
        );
    }
    let conditions = vec![
        NewCondition::new(cond::PAUSED, ConditionStatus::False, reasons::NOT_PAUSED),
        NewCondition::new(cond::HOST_ASSOCIATED, ConditionStatus::False, reason).message(&message),
        NewCondition::new(cond::MACHINE_DEPLOYED, ConditionStatus::False, reason).message(&message),
    ];
    if write_status(ctx, state, conditions, false).await? {
        ctx.base.events.warning(&state.mm, reason, &message).await;
    }
    Ok(Flow::Done(Action::requeue(ctx.waits.next_delay(obj))))
}
