#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use capmaas_api::conditions::{self as cond, reasons};
use capmaas_api::remediation::RemediationPhase::{DeletingMachine, Failed, Running, Waiting};
use capmaas_runtime::get_condition;

use super::*;
use crate::fixtures::{T0, state, time};

fn condition<'a>(
    status: &'a MaasRemediationStatus,
    type_: &str,
) -> &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
    get_condition(status.conditions.as_deref().unwrap(), type_).unwrap()
}

#[test]
fn an_attempt_records_phase_counters_and_what_it_waits_for() {
    let s = state();
    let status = next_status(&s, &Step::BeginAttempt { attempt: 1 }, &time(T0)).unwrap();
    assert_eq!(status.phase, Some(Running));
    assert_eq!(status.retry_count, Some(1));
    assert_eq!(status.last_remediated, Some(time(T0)));
    let progress = condition(&status, cond::REMEDIATION_IN_PROGRESS);
    assert_eq!(progress.status, "True");
    assert_eq!(progress.reason, reasons::WAITING_FOR_POWER_OFF);
    assert_eq!(
        progress.message,
        "attempt 1 of 2: waiting for MaasHost h1 to power off"
    );
    assert_eq!(progress.observed_generation, Some(1));
    let ready = condition(&status, cond::READY);
    assert_eq!(
        (ready.status.as_str(), ready.message.as_str()),
        ("False", progress.message.as_str())
    );
    assert_eq!(condition(&status, cond::PAUSED).status, "False");
}

#[test]
fn an_unchanged_world_writes_nothing() {
    let mut s = state().at(Running, 1, T0);
    let first = next_status(&s, &Step::WaitForPowerOff, &time(T0 + 1)).unwrap();
    s.remediation.status = Some(first);
    assert_eq!(next_status(&s, &Step::WaitForPowerOff, &time(T0 + 9)), None);
    assert_eq!(
        next_status(&s, &Step::RequestReboot, &time(T0 + 9)),
        None,
        "no status step"
    );
    let again = next_status(&s, &Step::BeginAttempt { attempt: 2 }, &time(T0 + 600)).unwrap();
    assert_eq!(again.retry_count, Some(2));
    assert_eq!(again.last_remediated, Some(time(T0 + 600)));
    let progress = condition(&again, cond::REMEDIATION_IN_PROGRESS);
    assert_eq!(
        progress.last_transition_time,
        time(T0 + 1),
        "still in progress"
    );
    assert!(progress.message.starts_with("attempt 2 of 2"));
}

#[test]
fn waiting_then_remediated() {
    let s = state().at(Running, 1, T0);
    let waiting = next_status(&s, &Step::MarkWaiting, &time(T0 + 20)).unwrap();
    assert_eq!(waiting.phase, Some(Waiting));
    assert_eq!(waiting.retry_count, Some(1));
    let progress = condition(&waiting, cond::REMEDIATION_IN_PROGRESS);
    assert_eq!(progress.reason, reasons::WAITING_FOR_NODE);
    assert_eq!(
        progress.message,
        "attempt 1 of 2: waiting for MaasHost h1 to power on and Node n1 to be Ready"
    );
    let mut s = s;
    s.remediation.status = Some(waiting);
    let done = next_status(&s, &Step::MarkRemediated, &time(T0 + 90)).unwrap();
    assert_eq!(done.phase, Some(Waiting));
    let ready = condition(&done, cond::READY);
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("True", "Remediated")
    );
    assert_eq!(ready.last_transition_time, time(T0 + 90));
    assert_eq!(
        condition(&done, cond::REMEDIATION_IN_PROGRESS).status,
        "False"
    );
    s.remediation.status = Some(done);
    assert!(crate::state::remediated(&s.remediation));
}

#[test]
fn giving_up_says_why_and_failed_names_what_is_missing() {
    let s = state().at(Waiting, 2, T0);
    let status = next_status(&s, &Step::GiveUp, &time(T0 + 600)).unwrap();
    assert_eq!(status.phase, Some(DeletingMachine));
    let progress = condition(&status, cond::REMEDIATION_IN_PROGRESS);
    assert_eq!(progress.reason, reasons::REMEDIATION_FAILED);
    assert_eq!(
        progress.message,
        "2 reboots of MaasHost h1 did not bring Node n1 back within 600s each; the Machine is handed to its owner for replacement"
    );
    assert_eq!(condition(&status, cond::READY).status, "False");
    let missing = Step::Missing {
        reason: reasons::HOST_MISSING,
        message: "MaasHost h1 not found".into(),
    };
    let status = next_status(&state(), &missing, &time(T0)).unwrap();
    assert_eq!(status.phase, Some(Failed));
    assert_eq!(status.retry_count, None);
    assert_eq!(
        condition(&status, cond::READY).message,
        "MaasHost h1 not found"
    );
}

#[test]
fn paused_touches_only_the_paused_condition() {
    let s = state().at(Running, 1, T0);
    let status = next_status(
        &s,
        &Step::Paused("Cluster spec.paused is true".into()),
        &time(T0),
    )
    .unwrap();
    assert_eq!(status.phase, Some(Running));
    assert_eq!(status.conditions.as_ref().unwrap().len(), 1);
    let paused = condition(&status, cond::PAUSED);
    assert_eq!(
        (paused.status.as_str(), paused.message.as_str()),
        ("True", "Cluster spec.paused is true")
    );
}
