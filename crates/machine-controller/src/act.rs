//! `reconcile`: observe the MaasMachine's world, [`decide`] the next step, perform it, and
//! decide again on the updated state until a step waits. The bigger steps live in
//! `claiming.rs`, `deployed.rs` and `release.rs`; the small ones are here.

use capmaas_runtime::error::failed;
use std::sync::Arc;
use std::time::Duration;

use capmaas_api::conditions::reasons;
use capmaas_api::{MaasHost, MaasMachine, keys};
use capmaas_runtime::controller::{Flow, Steps, finalizer, walk};
use kube::ResourceExt;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;

use crate::context::Ctx;
use crate::decide::{Step, decide};
use crate::error::{Error, Result};
use crate::host_ops::{self, Mutation};
use crate::state::{State, host_namespace, mm_api, write_status};
use crate::status::{claimed_by, step_conditions};
use crate::{claiming, data, deployed, release, vm_ops};

/// Most steps one reconcile performs before yielding (each step is one write at most).
const MAX_STEPS: usize = 12;

/// Reconciles one MaasMachine (the function the kit runs): up to `MAX_STEPS` (12) steps, each
/// decided on what the previous one left; a conflict reads everything again and decides again.
pub async fn reconcile(mm: Arc<MaasMachine>, ctx: Arc<Ctx>) -> Result<Action> {
    let mm = ctx.own_writes.freshest(mm.as_ref().clone());
    let mut state = State::observe(&ctx, mm).await?;
    let result = steps(&ctx, &mut state).await;
    ctx.own_writes.remember(&state.mm, &state.superseded);
    result
}

async fn steps(ctx: &Ctx, state: &mut State) -> Result<Action> {
    walk(&mut Reconcile { ctx, state }).await
}

/// One reconcile's walk: what it knows and the context it writes through.
struct Reconcile<'a> {
    ctx: &'a Ctx,
    state: &'a mut State,
}

impl Steps for Reconcile<'_> {
    type Step = Step;
    type Error = Error;
    const MAX_STEPS: usize = MAX_STEPS;

    fn decide(&self) -> Step {
        decide(&self.state.observed())
    }

    async fn perform(&mut self, step: Step) -> Result<Flow> {
        act(self.ctx, self.state, step).await
    }

    fn is_conflict(error: &Error) -> bool {
        error.is_conflict()
    }

    async fn observe_again(&mut self) -> Result<bool> {
        match State::observe_fresh(self.ctx, &self.state.mm).await? {
            Some(fresh) => {
                self.state.replace_all(fresh);
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

/// Performs `step`.
pub async fn act(ctx: &Ctx, state: &mut State, step: Step) -> Result<Flow> {
    let backstop = Action::requeue(ctx.base.sync_period);
    match &step {
        Step::WaitForOwner | Step::Done => Ok(Flow::Done(Action::await_change())),
        Step::WaitForCluster => Ok(Flow::Done(Action::requeue(Duration::from_secs(30)))),
        Step::Paused
        | Step::WaitForClusterInfrastructure
        | Step::WaitForBootstrapData
        | Step::WaitForData { .. }
        | Step::WaitForVm { .. }
        | Step::WaitForRelease { .. } => {
            let conditions = step_conditions(&step, state.host.as_ref());
            write_status(ctx, state, conditions, false).await?;
            Ok(Flow::Done(backstop))
        }
        Step::AddFinalizer => {
            state.replace_mm(
                finalizer::add(
                    &mm_api(ctx, &state.mm)?,
                    &state.mm,
                    keys::FINALIZER_MAAS_MACHINE,
                    &ctx.base.field_manager,
                )
                .await
                .map_err(failed("adding the finalizer"))?,
            );
            Ok(Flow::Continue)
        }
        Step::ChooseHost => claiming::choose_and_claim(ctx, state).await,
        Step::RequestVm => vm_ops::request_vm(ctx, state).await,
        Step::ClaimVm => claiming::claim_vm(ctx, state).await,
        Step::RemoveVmRequest => vm_ops::remove_vm_request(ctx, state).await,
        Step::ReclaimHost => claiming::reclaim(ctx, state).await,
        Step::HostLost => {
            // A machine moved here by clusterctl whose pool this installation imports on
            // demand: its host comes back once the pool is imported here too.
            if state.mm.spec.system_id.is_some()
                && let Some(pool) = state.mm.spec.resource_pool.as_deref()
            {
                crate::on_demand::import_pool(ctx, pool).await?;
            }
            if write_status(ctx, state, step_conditions(&step, None), false).await? {
                ctx.base
                    .events
                    .warning(
                        &state.mm,
                        reasons::MACHINE_NOT_FOUND,
                        "the machine has a providerID but its MaasHost is no longer claimed for it",
                    )
                    .await;
            }
            Ok(Flow::Done(backstop))
        }
        Step::RecordHost => {
            let conditions = step_conditions(&step, state.host.as_ref());
            write_status(ctx, state, conditions, false).await?;
            Ok(Flow::Continue)
        }
        Step::CreateDataClaim => {
            let conditions = step_conditions(&step, state.host.as_ref());
            write_status(ctx, state, conditions, false).await?;
            data::create_claim(ctx, state).await
        }
        Step::ReleaseData => data::release(ctx, state).await,
        Step::RequestDeployment => request_deployment(ctx, state).await,
        Step::UpdateLiveSettings => update_live_settings(ctx, state).await,
        Step::WaitForDeployment {
            reason,
            message,
            failed,
        } => {
            let conditions = step_conditions(&step, state.host.as_ref());
            let changed = write_status(ctx, state, conditions, false).await?;
            if changed && *failed {
                ctx.base.events.warning(&state.mm, reason, message).await;
            }
            Ok(Flow::Done(backstop))
        }
        Step::SetProviderId => {
            deployed::set_provider_id(ctx, state).await?;
            Ok(Flow::Continue)
        }
        Step::Provisioned => deployed::provisioned(ctx, state).await,
        Step::ClearProvisioning => clear_provisioning(ctx, state, &step).await,
        Step::ReleaseHost => release::release_host(ctx, state).await,
        Step::RemoveFinalizer => {
            let removed = finalizer::remove(
                &mm_api(ctx, &state.mm)?,
                &state.mm,
                keys::FINALIZER_MAAS_MACHINE,
                &ctx.base.field_manager,
            )
            .await
            .map_err(failed("removing the finalizer"))?;
            if let Some(mm) = removed {
                state.replace_mm(mm);
            }
            // The kit resets the error backoff after this successful reconcile.
            ctx.waits.reset(&ObjectRef::from_obj(&state.mm));
            if let Some(uid) = state.mm.uid() {
                ctx.forget_linked(&uid);
            }
            Ok(Flow::Done(Action::await_change()))
        }
    }
}

/// Deleting: withdraws the deployment request, which asks the gateway to release the host.
async fn clear_provisioning(ctx: &Ctx, state: &mut State, step: &Step) -> Result<Flow> {
    let Some(name) = state.host.as_ref().map(ResourceExt::name_any) else {
        return Ok(Flow::Continue);
    };
    let conditions = step_conditions(step, state.host.as_ref());
    write_status(ctx, state, conditions, false).await?;
    let mm = state.mm.clone();
    // Only reached with the annotation when its Cluster runs unpaused (`moved_by_clusterctl`).
    if keys::deleted_for_move(&mm.metadata) {
        let message = format!(
            "{} is set but the Cluster is not paused, as clusterctl move leaves it: releasing \
             host {name} as for any deletion",
            keys::ANNOTATION_DELETE_FOR_MOVE
        );
        let events = &ctx.base.events;
        events.warning(&mm, "MoveAnnotationIgnored", &message).await;
    }
    let clear = |h: &mut MaasHost| h.spec.provisioning.take().is_some();
    update_claimed_host(ctx, state, "clearing provisioning", clear).await?;
    let message = format!("release of host {name} requested");
    ctx.base
        .events
        .normal(&mm, "ReleaseRequested", &message)
        .await;
    Ok(Flow::Continue)
}

/// Carries an edited `spec.releasePolicy` or `spec.keepPoweredOn` to the host's deployment request.
async fn update_live_settings(ctx: &Ctx, state: &mut State) -> Result<Flow> {
    let mm = state.mm.clone();
    let carry = |h: &mut MaasHost| {
        let edited = crate::decide::live_settings_edited(&mm, h);
        let Some(request) = h.spec.provisioning.as_mut().filter(|_| edited) else {
            return false;
        };
        request.release_policy.clone_from(&mm.spec.release_policy);
        request.keep_powered_on = mm.spec.keep_powered_on;
        true
    };
    if let Some(name) = update_claimed_host(ctx, state, "updating the live settings", carry).await?
    {
        let message =
            format!("host {name} follows the edited spec.releasePolicy and spec.keepPoweredOn");
        ctx.base
            .events
            .normal(&mm, "DeploymentRequestUpdated", &message)
            .await;
    }
    Ok(Flow::Continue)
}

/// Writes the deployment request (`spec.provisioning`) on the claimed host, when it can be made
/// ([`host_ops::deployment_request`]).
async fn request_deployment(ctx: &Ctx, state: &mut State) -> Result<Flow> {
    let Some(host) = state.host.as_ref() else {
        return Ok(Flow::Continue);
    };
    let rendered = state
        .data_claim
        .as_ref()
        .and_then(|c| crate::decide::rendered_data(c, state.data.as_ref()));
    let vm_hosts = host_ops::registers_vm_host(ctx, state.cluster.as_ref(), host);
    let Some(request) =
        host_ops::deployment_request(&state.mm, state.machine.as_ref(), host, rendered, vm_hosts)
    else {
        return Ok(Flow::Continue);
    };
    let request_once = |h: &mut MaasHost| {
        let unrequested = h.spec.provisioning.is_none();
        if unrequested {
            h.spec.provisioning = Some(request.clone());
        }
        unrequested
    };
    if let Some(name) =
        update_claimed_host(ctx, state, "requesting deployment", request_once).await?
    {
        host_ops::announce_deployment(ctx, &state.mm, &name).await;
    }
    Ok(Flow::Continue)
}

/// Changes the host this MaasMachine claims, read fresh and written under its resourceVersion,
/// when `change` changes something (it says whether it did), and keeps the host in `state` only
/// while it is still claimed by this MaasMachine. The host's name, or `None` when there is none.
async fn update_claimed_host(
    ctx: &Ctx,
    state: &mut State,
    what: &str,
    mut change: impl FnMut(&mut MaasHost) -> bool,
) -> Result<Option<String>> {
    let Some(host) = state.host.as_ref() else {
        return Ok(None);
    };
    let (host_ns, name) = (host_namespace(host)?, host.name_any());
    let mm = &state.mm;
    state.host = host_ops::update_host(ctx, &host_ns, &name, what, |h| {
        if claimed_by(h, mm) && change(h) {
            Mutation::Write
        } else {
            Mutation::Keep
        }
    })
    .await?
    .filter(|h| claimed_by(h, mm));
    Ok(Some(name))
}
