//! `reconcile`: observe the MaasRemediation's world, [`decide`] the next step, perform it, and
//! decide again on the updated state until a step waits.

use capmaas_runtime::error::Failed;
use std::sync::Arc;
use std::time::Duration;

use capmaas_api::MaasRemediation;
use capmaas_api::keys::ANNOTATION_HOST_UNHEALTHY;
use capmaas_runtime::controller::{Flow, Steps, walk};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::runtime::controller::Action;
use tracing::{debug, info};

use crate::context::Ctx;
use crate::decide::{Step, attempt, decide};
use crate::error::{Error, Result};
use crate::state::{State, phase};
use crate::status::{give_up_message, next_status};
use crate::{host_ops, node_ops, writes};

/// Most steps one reconcile performs before yielding (each step is one write at most).
const MAX_STEPS: usize = 16;
/// Look again at a remediation whose Machine, MaasMachine or host is missing: it may appear.
const MISSING_RETRY: Duration = Duration::from_secs(60);

/// Reconciles one MaasRemediation (the function the kit runs): up to `MAX_STEPS` steps, each
/// decided on what the previous one left, starting from a fresh read; a conflict reads
/// everything again.
pub async fn reconcile(r: Arc<MaasRemediation>, ctx: Arc<Ctx>) -> Result<Action> {
    // The remediation is read from the API server, not taken from the cache: a reconcile
    // queued while the previous one wrote `Waiting` would otherwise see `Running` with the
    // request already withdrawn and ask for a second power cycle (seen under load: a few hosts
    // cycled twice). One GET per reconcile buys "never two cycles in one attempt".
    let Some(mut state) = State::observe_fresh(&ctx, &r).await? else {
        return Ok(Action::await_change());
    };
    walk(&mut Reconcile {
        ctx: &ctx,
        state: &mut state,
    })
    .await
}

/// One reconcile's walk: what it knows and the context it writes through.
struct Reconcile<'a> {
    ctx: &'a Ctx,
    state: &'a mut State,
}

impl Steps for Reconcile<'_> {
    /// The step, and the time it was decided at (which its status write records).
    type Step = (Step, Timestamp);
    type Error = Error;
    const MAX_STEPS: usize = MAX_STEPS;

    fn decide(&self) -> (Step, Timestamp) {
        let now = now();
        (decide(self.state, now), now)
    }

    async fn perform(&mut self, (step, now): (Step, Timestamp)) -> Result<Flow> {
        act(self.ctx, self.state, step, &Time(now)).await
    }

    fn is_conflict(error: &Error) -> bool {
        error.is_conflict()
    }

    async fn observe_again(&mut self) -> Result<bool> {
        match State::observe_fresh(self.ctx, &self.state.remediation).await? {
            Some(fresh) => {
                *self.state = fresh;
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

/// Now, to the second: the precision the API keeps for times, so a status computed now
/// compares equal to the same status read back.
fn now() -> Timestamp {
    let now = Timestamp::now();
    Timestamp::from_second(now.as_second()).unwrap_or(now)
}

async fn act(ctx: &Ctx, state: &mut State, step: Step, now: &Time) -> Result<Flow> {
    let poll = Action::requeue(ctx.poll_interval);
    let status = next_status(state, &step, now);
    let before = phase(&state.remediation);
    if let Some(status) = &status {
        writes::write_status(ctx, state, status).await?;
    }
    let r = state.remediation.clone();
    match step {
        Step::Done(why) => {
            debug!(why, "nothing to do");
            Ok(Flow::Done(Action::await_change()))
        }
        Step::AddFinalizer => {
            writes::add_finalizer(ctx, state).await?;
            Ok(Flow::Continue)
        }
        Step::Paused(_) | Step::Skipped => Ok(Flow::Done(Action::await_change())),
        Step::Missing { message, .. } => {
            if before != phase(&state.remediation) {
                ctx.base
                    .events
                    .warning(&r, "RemediationBlocked", &message)
                    .await;
            }
            Ok(Flow::Done(Action::requeue(MISSING_RETRY)))
        }
        Step::WorkloadUnreachable => Err(state
            .workload_error
            .take()
            .unwrap_or_else(|| Error::from(Failed::conflict("reading the workload Node")))),
        Step::BackupNode => {
            writes::record_backup(ctx, state).await?;
            Ok(Flow::Continue)
        }
        Step::BeginAttempt { attempt } => {
            let note = format!(
                "attempt {attempt} of {}: fencing the Node and power-cycling MaasHost {}",
                r.spec.strategy.retry_limit,
                host_name(state)
            );
            info!(attempt, "remediation attempt started");
            ctx.base
                .events
                .normal(&r, "RemediationStarted", &note)
                .await;
            Ok(Flow::Continue)
        }
        Step::Resume | Step::MarkWaiting => Ok(Flow::Continue),
        Step::Fence(mode) => {
            node_ops::fence(ctx, state, mode).await?;
            Ok(Flow::Continue)
        }
        Step::RequestReboot => {
            let (name, key) = (host_name(state), state.reboot_key());
            let value = format!("{}/{}", r.namespace().unwrap_or_default(), r.name_any());
            host_ops::annotate(ctx, state, &name, &key, Some(&value)).await?;
            Ok(Flow::Continue)
        }
        Step::WaitForPowerOff | Step::WaitForNode => Ok(Flow::Done(poll)),
        Step::WaitForHostCache => Ok(Flow::Done(Action::requeue(Duration::from_secs(1)))),
        Step::ReleaseHost(name) => {
            let key = state.reboot_key();
            host_ops::annotate(ctx, state, &name, &key, None).await?;
            Ok(Flow::Continue)
        }
        Step::RestoreNode => {
            node_ops::restore(ctx, state).await?;
            ctx.base
                .events
                .normal(
                    &r,
                    "NodeRestored",
                    "Node labels and annotations restored, fence removed",
                )
                .await;
            Ok(Flow::Continue)
        }
        Step::MarkRemediated => {
            let n = attempt(&r).unwrap_or(1);
            info!(attempt = n, "remediated");
            let note = format!("the Node is Ready again after attempt {n}");
            ctx.base.events.normal(&r, "Remediated", &note).await;
            Ok(Flow::Continue)
        }
        Step::MarkHostUnhealthy => {
            let name = host_name(state);
            let value = format!(
                "remediation {} gave up after {} reboot(s) at {}",
                r.name_any(),
                attempt(&r).unwrap_or(1),
                now.0
            );
            host_ops::annotate(ctx, state, &name, ANNOTATION_HOST_UNHEALTHY, Some(&value)).await?;
            Ok(Flow::Continue)
        }
        Step::SetOwnerRemediated => {
            writes::hand_back_machine(ctx, state, &give_up_message(state), now).await?;
            Ok(Flow::Continue)
        }
        Step::GiveUp => {
            info!("remediation gave up");
            ctx.base
                .events
                .warning(&r, "RemediationFailed", &give_up_message(state))
                .await;
            Ok(Flow::Continue)
        }
        Step::RemoveFinalizer => {
            writes::remove_finalizer(ctx, state).await?;
            Ok(Flow::Done(Action::await_change()))
        }
    }
}

fn host_name(state: &State) -> String {
    state
        .host
        .as_ref()
        .map(ResourceExt::name_any)
        .unwrap_or_default()
}
