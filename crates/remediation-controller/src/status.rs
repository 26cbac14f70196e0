//! The status this controller owns, as pure functions of the step being taken: phase, attempt
//! counters and conditions, built deterministically so an unchanged world causes no write.

use capmaas_api::conditions::{self as cond, reasons};
use capmaas_api::remediation::RemediationPhase;
use capmaas_api::{MaasRemediation, MaasRemediationStatus};
use capmaas_runtime::conditions::{ConditionStatus, NewCondition, set_condition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use crate::decide::{Step, attempt};
use crate::state::{NodeView, REASON_REMEDIATED, State};

/// What a step records besides conditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Progress {
    /// Counters and phase stay.
    Keep,
    /// A new phase, counters kept.
    Phase(RemediationPhase),
    /// A new attempt starts now.
    Attempt(i32),
}

/// The status after `step`, or `None` when the step records nothing or the status already says
/// it (no write).
pub fn next_status(s: &State, step: &Step, now: &Time) -> Option<MaasRemediationStatus> {
    let r = &s.remediation;
    let (progress, condition) = match step {
        Step::Paused(why) => {
            return changed(r, with_conditions(r, Progress::Keep, [paused(Some(why))], now));
        }
        Step::Skipped => (
            Progress::Keep,
            NewCondition::new(cond::REMEDIATION_IN_PROGRESS, ConditionStatus::False, crate::decide::reason::SKIPPED)
                .message("the Machine is annotated cluster.x-k8s.io/skip-remediation; nothing is done while it is"),
        ),
        Step::Missing { reason, message } => (
            Progress::Phase(RemediationPhase::Failed),
            NewCondition::new(cond::REMEDIATION_IN_PROGRESS, ConditionStatus::False, reason)
                .message(message.clone()),
        ),
        Step::BeginAttempt { attempt } => (Progress::Attempt(*attempt), power_off(s, *attempt)),
        Step::Resume => (
            Progress::Phase(RemediationPhase::Running),
            power_off(s, current(r)),
        ),
        Step::WaitForPowerOff => (Progress::Keep, power_off(s, current(r))),
        Step::MarkWaiting => (
            Progress::Phase(RemediationPhase::Waiting),
            node_back(s),
        ),
        Step::WaitForNode => (Progress::Keep, node_back(s)),
        Step::WorkloadUnreachable => (
            Progress::Keep,
            NewCondition::new(
                cond::REMEDIATION_IN_PROGRESS,
                ConditionStatus::True,
                crate::decide::reason::WORKLOAD_UNREACHABLE,
            )
            .message(format!(
                "the workload cluster's API does not answer, and {} is needed first; waited for \
                 at most {}s (from the remediation's creation, or its deletion), then the reboot \
                 goes on without it",
                node_name(s),
                s.remediation.spec.strategy.timeout_seconds
            )),
        ),
        Step::MarkRemediated => (
            Progress::Keep,
            NewCondition::new(cond::REMEDIATION_IN_PROGRESS, ConditionStatus::False, REASON_REMEDIATED)
                .message(format!(
                    "{} is Ready again after attempt {} of {}",
                    node_name(s),
                    current(r),
                    r.spec.strategy.retry_limit
                )),
        ),
        Step::GiveUp => (
            Progress::Phase(RemediationPhase::DeletingMachine),
            NewCondition::new(cond::REMEDIATION_IN_PROGRESS, ConditionStatus::False, reasons::REMEDIATION_FAILED)
                .message(give_up_message(s)),
        ),
        _ => return None,
    };
    let ready = ready_from(&condition);
    let status = with_conditions(r, progress, [paused(None), condition, ready], now);
    changed(r, status)
}

/// The note of the Event announcing that remediation gave up (also the condition message).
pub fn give_up_message(s: &State) -> String {
    let r = &s.remediation;
    let n = current(r);
    format!(
        "{n} reboot{} of MaasHost {} did not bring {} back within {}s each; the Machine is handed to its owner for replacement",
        if n == 1 { "" } else { "s" },
        host_name(s),
        node_name(s),
        r.spec.strategy.timeout_seconds
    )
}

/// The message of an attempt waiting for the power-off.
fn power_off(s: &State, attempt: i32) -> NewCondition {
    NewCondition::new(
        cond::REMEDIATION_IN_PROGRESS,
        ConditionStatus::True,
        reasons::WAITING_FOR_POWER_OFF,
    )
    .message(format!(
        "attempt {attempt} of {}: waiting for MaasHost {} to power off",
        s.remediation.spec.strategy.retry_limit,
        host_name(s)
    ))
}

/// The message of an attempt waiting for the server and its Node to come back.
fn node_back(s: &State) -> NewCondition {
    let r = &s.remediation;
    NewCondition::new(
        cond::REMEDIATION_IN_PROGRESS,
        ConditionStatus::True,
        reasons::WAITING_FOR_NODE,
    )
    .message(format!(
        "attempt {} of {}: waiting for MaasHost {} to power on and {} to be Ready",
        current(r),
        r.spec.strategy.retry_limit,
        host_name(s),
        node_name(s)
    ))
}

/// `Ready` follows `RemediationInProgress`: true only once the Node is back.
fn ready_from(progress: &NewCondition) -> NewCondition {
    let status = if progress.reason == REASON_REMEDIATED {
        ConditionStatus::True
    } else {
        ConditionStatus::False
    };
    NewCondition::new(cond::READY, status, &progress.reason).message(progress.message.clone())
}

/// `Paused` (v1beta2 contract).
fn paused(why: Option<&String>) -> NewCondition {
    match why {
        Some(why) => NewCondition::new(cond::PAUSED, ConditionStatus::True, reasons::PAUSED)
            .message(why.clone()),
        None => NewCondition::new(cond::PAUSED, ConditionStatus::False, reasons::NOT_PAUSED),
    }
}

fn with_conditions(
    r: &MaasRemediation,
    progress: Progress,
    conditions: impl IntoIterator<Item = NewCondition>,
    now: &Time,
) -> MaasRemediationStatus {
    let mut status = r.status.clone().unwrap_or_default();
    match progress {
        Progress::Keep => {}
        Progress::Phase(phase) => status.phase = Some(phase),
        Progress::Attempt(n) => {
            status.phase = Some(RemediationPhase::Running);
            status.retry_count = Some(n);
            status.last_remediated = Some(now.clone());
        }
    }
    let mut list = status.conditions.take().unwrap_or_default();
    for condition in conditions {
        set_condition(
            &mut list,
            condition.observed_generation(r.metadata.generation),
            now,
        );
    }
    status.conditions = Some(list);
    status
}

fn changed(r: &MaasRemediation, next: MaasRemediationStatus) -> Option<MaasRemediationStatus> {
    (r.status.as_ref() != Some(&next)).then_some(next)
}

fn current(r: &MaasRemediation) -> i32 {
    attempt(r).unwrap_or(1)
}

fn host_name(s: &State) -> String {
    s.host
        .as_ref()
        .map_or_else(|| "(unknown)".to_owned(), ResourceExt::name_any)
}

fn node_name(s: &State) -> String {
    match &s.node {
        NodeView::Present(node) => format!("Node {}", node.name_any()),
        NodeView::Absent(name) => format!("Node {name}"),
        NodeView::Unknown | NodeView::Unreachable { .. } => s
            .machine
            .as_ref()
            .and_then(|m| m.status.as_ref())
            .and_then(|st| st.node_ref.as_ref())
            .map_or_else(|| "its Node".to_owned(), |n| format!("Node {}", n.name)),
    }
}

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;
