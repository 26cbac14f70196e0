//! The MaasHost reconciler: observes the host ([`observe`]), asks [`next_step`] what to do,
//! does it, and repeats until a step has to wait; then writes the status once. A host whose
//! machine MAAS is changing registers with [`super::watch`], which wakes it when the machine
//! changes: no host polls MAAS on its own.

use std::sync::Arc;
use std::time::Duration;

use capmaas_api::MaasHost;
use capmaas_runtime::error_chain;
use capmaas_runtime::status::{apply_status, now};
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use maas_api_client::MachineStatus;
use tracing::{info, warn};

use super::decide::{Step, Wait, next_step, starts_later};
use super::finalizer::{self, Change, Deletion};
use super::run::Run;
use super::state::{Observed, State, observe};
use super::status::{Unmanaged, unmanaged_status};
use crate::context::Gateway;
use crate::error::{Error, Result};

/// Steps executed per reconcile at most (allocate, annotate, rename, deploy fit in one).
const MAX_STEPS: usize = 6;
/// Requeue while the inventory cache is not filled yet.
const CACHE_WAIT: Duration = Duration::from_secs(2);
/// Retry of a host whose machine someone else allocated first.
const HELD_BY_OTHER_RETRY: Duration = Duration::from_secs(300);
/// Requeue of a host whose machine is in flight: the observer wakes it on every change, this is
/// for what no change announces ([`super::decide::POWER_ON_RETRY_AFTER`]).
pub const IN_FLIGHT_RECHECK: Duration = Duration::from_secs(30);

/// Reconciles one MaasHost: executes steps until one has to wait, then writes the status.
/// Reconciles one MaasHost: executes steps until one has to wait, then writes the status.
pub async fn reconcile(host: Arc<MaasHost>, gw: Arc<Gateway>) -> Result<Action> {
    let gw = gw.as_ref();
    let host = &gw.own_writes.freshest(host.as_ref().clone());
    let State {
        facts,
        machine,
        unlisted_from,
    } = match observe(host, gw).await? {
        Observed::Managed(state) => *state,
        Observed::NotSynced => return Ok(Action::requeue(CACHE_WAIT)),
        Observed::Unmanaged(why) => {
            write_unmanaged(host, gw, &why).await?;
            return Ok(match why {
                Unmanaged::NotRegistered => Action::await_change(),
                Unmanaged::BoundElsewhere(_) => Action::requeue(HELD_BY_OTHER_RETRY),
            });
        }
    };
    let namespace = host.namespace().unwrap_or_default();
    let allocation = host.status.as_ref().and_then(|s| s.allocation.clone());
    let mut run = Run {
        gw,
        host,
        api: Api::namespaced(gw.base.client.clone(), &namespace),
        system_id: host.spec.system_id.clone(),
        facts,
        machine,
        allocation,
        unlisted_from,
        refusal: None,
        refusal_reason: None,
        announced: false,
        allocation_unwritten: false,
        allocated_note: None,
        written: None,
        replaced_versions: host.resource_version().into_iter().collect(),
    };
    let result = run_steps(&mut run).await;
    run.remember_writes();
    result
}

/// The reconcile of a managed host: steps until one waits, then the status.
async fn run_steps(run: &mut Run<'_>) -> Result<Action> {
    let (gw, host) = (run.gw, run.host);
    // The batched observation did not see the machine: only a direct read can tell whether it
    // is gone (404) or merely hidden from the list.
    // Likewise after a call whose answer was lost: MAAS may have carried it out.
    let deletion = Deletion::of(host);
    if deletion.deleting && !finalizer::present(host) {
        // Deleted before it held anything (or by a version without the finalizer): nothing
        // here can hold it for a release; the orphan sweep gives the server back.
        return Ok(Action::await_change());
    }
    let change = finalizer::before_steps(finalizer::present(host), deletion, &run.facts);
    if run.change_finalizer(change).await? || change == Change::Remove {
        return Ok(Action::await_change());
    }
    let unseen = gw.in_flight.take_unseen(&run.system_id);
    if run.machine.is_some() && (unseen || gw.cache.is_stale(&run.system_id)) {
        run.refresh().await?;
    }
    if let Some(later) = starts_later(
        &next_step(&run.facts, run.machine.as_deref()),
        gw.maas.backlog(),
    ) {
        return Ok(Action::requeue(later));
    }
    let steps = execute_steps(run).await;
    if steps.is_err()
        && let Err(e) = run.record_allocation().await
    {
        // The step's error is the one to report; the adoption finds the allocation anyway.
        warn!(error = %error_chain(&e), "cannot record the allocation after a failed step");
    }
    run.announce_allocation().await;
    let outcome = steps?;
    if outcome.in_flight && run.machine.is_some() {
        gw.in_flight
            .watch(&run.system_id, ObjectRef::from_obj(host));
    } else {
        gw.in_flight.forget(&run.system_id);
    }
    let present = finalizer::present(run.written.as_ref().unwrap_or(host));
    let change = finalizer::after_steps(present, deletion, &run.facts, outcome.why);
    if run.change_finalizer(change).await? {
        gw.in_flight.forget(&run.system_id);
        return Ok(Action::await_change());
    }
    let report_due = run.write_status(outcome.why).await?;
    let requeue = outcome.requeue_after(gw.base.sync_period);
    Ok(Action::requeue(
        report_due.map_or(requeue, |due| due.min(requeue)),
    ))
}

/// Executes steps until one has to wait (at most [`MAX_STEPS`]): how the reconcile ends.
async fn execute_steps(run: &mut Run<'_>) -> Result<Outcome> {
    let mut outcome = Outcome::quiet(Wait::Idle);
    for _ in 0..MAX_STEPS {
        let step = next_step(&run.facts, run.machine.as_deref());
        match step {
            Step::Wait { why, poll } => {
                // MAAS is changing the machine: the observer reads it with the others.
                outcome = Outcome {
                    why,
                    in_flight: poll.is_some(),
                    retry: None,
                };
                break;
            }
            step => match run.execute(step).await {
                Ok(true) => {}
                Ok(false) => {
                    // MAAS completes the operation on its own: report what we wait for.
                    outcome = Outcome {
                        why: in_flight_reason(run),
                        in_flight: true,
                        retry: None,
                    };
                    break;
                }
                Err(Error::NotOurs { system_id, reason }) => {
                    // Someone else took the machine first: report it, look again later.
                    info!(%system_id, %reason, "machine held by someone else");
                    run.refusal = Some(reason);
                    outcome = Outcome {
                        why: Wait::HeldByOther,
                        in_flight: false,
                        retry: Some(HELD_BY_OTHER_RETRY),
                    };
                    break;
                }
                Err(Error::InvalidSpec(message)) => {
                    // Reported in the host status (`Provisioned=False`, reason InvalidSpec),
                    // then retried with the invalid-spec delay like any invalid spec.
                    run.gw.in_flight.forget(&run.system_id);
                    run.refusal = Some(message.clone());
                    run.write_status(Wait::InvalidSpec).await?;
                    return Err(Error::InvalidSpec(message));
                }
                Err(Error::VmHostRefused { reason, message }) => {
                    // Permanent, nothing changed in MAAS: reported once (condition and Event),
                    // then not sent again while the report stands (`vm_host::remembered`).
                    run.gw.in_flight.forget(&run.system_id);
                    let new = !super::vm_host::reported(run.host, reason, &message);
                    run.refusal = Some(message.clone());
                    run.refusal_reason = Some(reason);
                    run.write_status(Wait::InvalidSpec).await?;
                    if new {
                        warn!(system_id = %run.system_id, reason, %message, "deployment refused");
                        run.gw.base.events.warning(run.host, reason, &message).await;
                    }
                    return Err(Error::VmHostRefused { reason, message });
                }
                Err(e) => {
                    run.gw.cache.mark_stale(&run.system_id);
                    return Err(e);
                }
            },
        }
    }
    Ok(outcome)
}

/// How a reconcile ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// What the host waits for (the `Provisioned` reason).
    pub why: Wait,
    /// MAAS is changing the machine: observed by [`super::watch`], which wakes the host.
    pub in_flight: bool,
    /// Look again after this long regardless.
    pub retry: Option<Duration>,
}

impl Outcome {
    fn quiet(why: Wait) -> Self {
        Self {
            why,
            in_flight: false,
            retry: None,
        }
    }

    /// When to look again without a wake-up: a quiet host after `resync` (an inventory sync
    /// wakes it on any MAAS change anyway); a host in flight after [`IN_FLIGHT_RECHECK`], for
    /// what no change in MAAS announces (a power-on to repeat after a while).
    pub fn requeue_after(&self, resync: Duration) -> Duration {
        match (self.retry, self.in_flight) {
            (Some(retry), _) => retry,
            (None, true) => IN_FLIGHT_RECHECK.min(resync),
            (None, false) => resync,
        }
    }
}

/// Reports why the host is left alone, when that changed.
async fn write_unmanaged(host: &MaasHost, gw: &Gateway, why: &Unmanaged) -> Result<()> {
    let previous = host.status.as_ref();
    let status = unmanaged_status(previous, why, host.metadata.generation, &now());
    if previous == Some(&status) {
        return Ok(());
    }
    if let Unmanaged::BoundElsewhere(holder) = why {
        let note = format!(
            "MAAS machine {} belongs to MaasHost {holder}; this host is left alone",
            host.spec.system_id
        );
        gw.base
            .events
            .warning(host, "BoundToAnotherHost", &note)
            .await;
    }
    let api: Api<MaasHost> = Api::namespaced(
        gw.base.client.clone(),
        &host.namespace().unwrap_or_default(),
    );
    let sent = crate::compose::decide::without_composition(status);
    apply_status(&api, &host.name_any(), &gw.base.field_manager, &sent).await?;
    Ok(())
}

/// Why the host waits right after an operation MAAS completes asynchronously.
fn in_flight_reason(run: &Run<'_>) -> Wait {
    match next_step(&run.facts, run.machine.as_deref()) {
        Step::Wait { why, .. } => why,
        _ => match run.machine.as_ref().map(|m| m.status) {
            Some(MachineStatus::Deploying) => Wait::Deploying,
            Some(MachineStatus::Releasing | MachineStatus::DiskErasing) => Wait::Releasing,
            _ => Wait::PowerTransition,
        },
    }
}
