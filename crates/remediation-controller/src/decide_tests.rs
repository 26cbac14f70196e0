#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use capmaas_api::capi::Cluster;
use capmaas_api::conditions::reasons;
use capmaas_api::host::PowerState;
use capmaas_api::keys::{ANNOTATION_HOST_UNHEALTHY, ANNOTATION_PAUSED};
use capmaas_api::remediation::RemediationPhase::{DeletingMachine, Failed, Running, Waiting};

use super::*;
use crate::fixtures::{T0, UID, annotate, host, node, state, t, tainted, time};
use crate::keys::{ANNOTATION_SKIP_REMEDIATION, reboot_key};
use crate::state::NodeView;
use crate::status::next_status;

/// Attempt 1 started at T0, the Node backed up and fenced.
fn fenced_running() -> State {
    let s = state().backed_up().at(Running, 1, T0);
    let node = tainted(s.node().unwrap());
    s.with_node(node)
}

#[test]
fn the_finalizer_goes_on_first() {
    let mut s = state();
    s.remediation.metadata.finalizers = None;
    assert_eq!(decide(&s, t(T0)), Step::AddFinalizer);
}

#[test]
fn paused_does_nothing_even_mid_way() {
    let running = || fenced_running().requested().off();
    let mut s = running();
    s.cluster = Some(
        serde_json::from_value::<Cluster>(serde_json::json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "metadata": {"name": "c1", "namespace": "ns"}, "spec": {"paused": true}
        }))
        .unwrap(),
    );
    assert_eq!(
        decide(&s, t(T0 + 10_000)),
        Step::Paused("Cluster spec.paused is true".into())
    );
    let s = running().paused();
    assert!(matches!(decide(&s, t(T0)), Step::Paused(_)));
    let mut s = running();
    s.machine.as_mut().unwrap().metadata.annotations =
        Some([(ANNOTATION_PAUSED.into(), String::new())].into());
    assert!(matches!(decide(&s, t(T0)), Step::Paused(why) if why.contains("Machine")));
}

#[test]
fn skip_remediation_withdraws_a_request_then_does_nothing() {
    let mut s = fenced_running().requested();
    s.machine.as_mut().unwrap().metadata.annotations =
        Some([(ANNOTATION_SKIP_REMEDIATION.into(), String::new())].into());
    // A request already on the host goes first: the server must not stay off.
    assert!(matches!(decide(&s, t(T0 + 10_000)), Step::ReleaseHost(_)));
    let mut s = fenced_running();
    s.machine.as_mut().unwrap().metadata.annotations =
        Some([(ANNOTATION_SKIP_REMEDIATION.into(), String::new())].into());
    assert_eq!(decide(&s, t(T0 + 10_000)), Step::Skipped);
    let status = next_status(&s, &Step::Skipped, &time(T0)).unwrap();
    assert_eq!(status.phase, Some(Running), "the phase is kept");
}

/// The step that fails the remediation for what is missing.
fn missing(reason: &'static str, message: &str) -> Step {
    Step::Missing {
        reason,
        message: message.into(),
    }
}

#[test]
fn anything_missing_is_failed_with_its_name() {
    let mut s = state();
    s.host = None;
    assert_eq!(
        decide(&s, t(T0)),
        missing(
            reasons::HOST_MISSING,
            "MaasHost h1 not found, or not claimed by MaasMachine mm1 (its status.hostRef \
             is only the machine's intent; no other machine's server is rebooted)"
        )
    );
    s.maas_machine.as_mut().unwrap().status = None;
    assert!(
        matches!(decide(&s, t(T0)), Step::Missing { message, .. } if message.contains("no host"))
    );
    s.maas_machine = None;
    assert_eq!(
        decide(&s, t(T0)),
        missing(reason::MAAS_MACHINE_MISSING, "MaasMachine mm1 not found")
    );
    s.machine = None;
    assert_eq!(
        decide(&s, t(T0)),
        missing(reason::MACHINE_MISSING, "Machine m1 not found")
    );
}

#[test]
fn failed_resumes_where_it_was_once_everything_is_back() {
    let mut s = state();
    s.remediation.status = Some(capmaas_api::MaasRemediationStatus {
        phase: Some(Failed),
        ..Default::default()
    });
    assert_eq!(decide(&s, t(T0)), Step::BackupNode, "never started: start");
    let s = state().backed_up().at(Failed, 1, T0);
    assert_eq!(decide(&s, t(T0)), Step::Resume);
}

#[test]
fn a_new_remediation_backs_the_node_up_then_begins_attempt_one() {
    let s = state();
    assert_eq!(decide(&s, t(T0)), Step::BackupNode);
    assert_eq!(
        decide(&s.backed_up(), t(T0)),
        Step::BeginAttempt { attempt: 1 }
    );
    let mut s = state();
    s.node = NodeView::Absent("n1".into());
    assert_eq!(
        decide(&s, t(T0)),
        Step::BeginAttempt { attempt: 1 },
        "no Node, no backup"
    );
    s.node = NodeView::Unknown;
    assert_eq!(decide(&s, t(T0)), Step::BeginAttempt { attempt: 1 });
    s.node = NodeView::Unreachable { gone: false };
    assert_eq!(
        decide(&s, t(T0)),
        Step::WorkloadUnreachable,
        "never power without the Node"
    );
}

#[test]
fn running_requests_then_waits_for_the_power_off_then_fences() {
    let s = state().backed_up().at(Running, 1, T0);
    assert_eq!(
        decide(&s, t(T0 + 1)),
        Step::RequestReboot,
        "never fenced while the server may run"
    );
    let s = s.requested();
    assert_eq!(decide(&s, t(T0 + 1)), Step::WaitForPowerOff);
    let mut s = s;
    s.host_mut().status.as_mut().unwrap().power_state = Some(PowerState::Off);
    assert_eq!(
        decide(&s, t(T0 + 1)),
        Step::WaitForPowerOff,
        "off, but the gateway has not taken the request yet"
    );
    let off = state().backed_up().at(Running, 1, T0).requested().off();
    assert_eq!(decide(&off, t(T0 + 1)), Step::Fence(FenceMode::Taint));
    assert_eq!(
        decide(&fenced_running().requested().off(), t(T0 + 1)),
        Step::MarkWaiting
    );
    let mut unreachable = off;
    unreachable.node = NodeView::Unreachable { gone: false };
    assert_eq!(
        decide(&unreachable, t(T0 + 1)),
        Step::MarkWaiting,
        "a workload API down with the server does not hold the server off"
    );
}

#[test]
fn an_operators_out_of_service_taint_counts_as_fenced() {
    let mut s = state().backed_up().at(Running, 1, T0).requested().off();
    let mut node = tainted(s.node().unwrap());
    node.metadata
        .annotations
        .as_mut()
        .unwrap()
        .remove(crate::keys::ANNOTATION_FENCED_BY);
    s = s.with_node(node);
    assert_eq!(decide(&s, t(T0 + 1)), Step::MarkWaiting);
}

#[test]
fn delete_fence_deletes_the_old_node_only() {
    let mut s = state().backed_up().at(Running, 1, T0).requested().off();
    s.fence = FenceMode::Delete;
    assert_eq!(decide(&s, t(T0 + 1)), Step::Fence(FenceMode::Delete));
    let recreated = s.with_node(node(T0 + 1, Some(T0 + 1)));
    assert_eq!(
        decide(&recreated, t(T0 + 2)),
        Step::MarkWaiting,
        "the kubelet's new Node stays"
    );
    let mut s = recreated;
    s.node = NodeView::Absent("n1".into());
    assert_eq!(decide(&s, t(T0 + 2)), Step::MarkWaiting);
    let mut s = state().backed_up().at(Running, 1, T0).requested().off();
    s.fence = FenceMode::None;
    assert_eq!(decide(&s, t(T0 + 1)), Step::MarkWaiting);
}

#[test]
fn an_unreachable_workload_blocks_the_request_but_not_a_request_already_made() {
    let mut s = state().backed_up().at(Running, 1, T0);
    s.node = NodeView::Unreachable { gone: false };
    assert_eq!(decide(&s, t(T0 + 1)), Step::WorkloadUnreachable);
    let s = s.requested().off();
    assert_eq!(
        decide(&s, t(T0 + 1)),
        Step::MarkWaiting,
        "the API went down with the server"
    );
}

#[test]
fn a_kill_between_waiting_and_the_request_removal_never_reboots_twice() {
    // Status says Waiting, our request is still on the host (the kill came in between).
    let s = fenced_running().requested().off().at(Waiting, 1, T0);
    assert_eq!(decide(&s, t(T0 + 30)), Step::ReleaseHost("h1".into()));
    // Whatever the host reports meanwhile, Waiting never asks for the power-off again.
    for s in [
        s.on(),
        fenced_running().at(Waiting, 1, T0).off(),
        fenced_running().at(Waiting, 1, T0),
    ] {
        let step = decide(&s, t(T0 + 30));
        assert!(
            !matches!(step, Step::RequestReboot | Step::Fence(_)),
            "{step:?}"
        );
    }
}

#[test]
fn waiting_restores_the_node_once_it_is_ready_again_and_the_host_on() {
    let s = fenced_running().at(Waiting, 1, T0);
    assert_eq!(
        decide(&s, t(T0 + 30)),
        Step::WaitForNode,
        "host off, Node NotReady"
    );
    let back = |s: State, ready_at: i64| {
        let mut node = s.node().unwrap().clone();
        let cond = &mut node.status.as_mut().unwrap().conditions.as_mut().unwrap()[0];
        cond.status = "True".into();
        cond.last_transition_time = Some(time(ready_at));
        s.with_node(node)
    };
    let early = back(fenced_running().at(Waiting, 1, T0).on(), T0 - 1);
    assert_eq!(
        decide(&early, t(T0 + 30)),
        Step::WaitForNode,
        "Ready since before the attempt"
    );
    let host_off = back(fenced_running().at(Waiting, 1, T0).off(), T0 + 20);
    assert_eq!(
        decide(&host_off, t(T0 + 30)),
        Step::WaitForNode,
        "the host is not on yet"
    );
    let ready = back(fenced_running().at(Waiting, 1, T0).on(), T0 + 20);
    assert_eq!(decide(&ready, t(T0 + 30)), Step::RestoreNode);
    let unfenced = ready.with_node(node(T0 - 10_000, Some(T0 + 20)));
    assert_eq!(decide(&unfenced, t(T0 + 30)), Step::MarkRemediated);
    let mut recreated = fenced_running().at(Waiting, 1, T0).on();
    recreated.fence = FenceMode::Delete;
    let mut fresh = node(T0 + 25, Some(T0 + 25));
    fresh.metadata.labels = None;
    let recreated = recreated.with_node(fresh);
    assert_eq!(
        decide(&recreated, t(T0 + 30)),
        Step::RestoreNode,
        "labels come back"
    );
}

#[test]
fn each_attempt_has_its_own_timeout_and_the_limit_is_compared_with_gte() {
    let s = fenced_running().at(Waiting, 1, T0);
    assert_eq!(decide(&s, t(T0 + 599)), Step::WaitForNode);
    assert_eq!(decide(&s, t(T0 + 600)), Step::BeginAttempt { attempt: 2 });
    // Stuck before the power-off: the next attempt keeps the request (no extra cycle).
    let stuck = fenced_running().requested();
    assert_eq!(
        decide(&stuck, t(T0 + 600)),
        Step::BeginAttempt { attempt: 2 }
    );
    // Attempt 2 started at T0 + 600: its own clock.
    let second = fenced_running().at(Waiting, 2, T0 + 600);
    assert_eq!(decide(&second, t(T0 + 1100)), Step::WaitForNode);
    assert_eq!(decide(&second, t(T0 + 1200)), Step::MarkHostUnhealthy);
    // The limit lowered below the attempts made: give up, never loop.
    let mut lowered = fenced_running().at(Waiting, 2, T0);
    lowered.remediation.spec.strategy.retry_limit = 1;
    assert_eq!(decide(&lowered, t(T0 + 600)), Step::MarkHostUnhealthy);
}

#[test]
fn giving_up_powers_on_marks_the_host_hands_the_machine_back() {
    let now = t(T0 + 1300);
    let mut s = fenced_running().requested().at(Running, 2, T0 + 600);
    assert_eq!(
        decide(&s, now),
        Step::ReleaseHost("h1".into()),
        "never leave it off"
    );
    s.host_mut()
        .metadata
        .annotations
        .as_mut()
        .unwrap()
        .remove(&reboot_key(UID));
    assert_eq!(decide(&s, now), Step::MarkHostUnhealthy);
    annotate(s.host_mut(), ANNOTATION_HOST_UNHEALTHY, "x");
    assert_eq!(decide(&s, now), Step::SetOwnerRemediated);
    s.owner_remediated = true;
    assert_eq!(decide(&s, now), Step::GiveUp);
    let s = s.at(DeletingMachine, 2, T0 + 600);
    assert!(matches!(decide(&s, now), Step::Done(_)), "terminal");
    let s = s.requested();
    assert_eq!(
        decide(&s, now),
        Step::ReleaseHost("h1".into()),
        "even then, never held off"
    );
}

#[test]
fn deletion_releases_the_host_first_then_restores_then_lets_go() {
    let s = fenced_running().requested().off().deleting().paused();
    assert_eq!(
        decide(&s, t(T0 + 5)),
        Step::ReleaseHost("h1".into()),
        "even paused"
    );
    let s = fenced_running().deleting().paused();
    assert_eq!(decide(&s, t(T0 + 5)), Step::RestoreNode);
    let mut restored = s.with_node(node(T0 - 10_000, None));
    assert_eq!(decide(&restored, t(T0 + 5)), Step::RemoveFinalizer);
    restored.hosts_synced = false;
    assert_eq!(
        decide(&restored, t(T0 + 5)),
        Step::WaitForHostCache,
        "another host may still hold our request"
    );
    restored.hosts_synced = true;
    let mut gone = restored;
    gone.remediation.metadata.finalizers = None;
    assert!(matches!(decide(&gone, t(T0 + 5)), Step::Done(_)));
}

#[test]
fn deletion_finds_requests_left_on_other_hosts() {
    let mut s = fenced_running().deleting();
    let mut old = host("h0", "off");
    annotate(&mut old, &reboot_key(UID), "ns/m1");
    s.held = vec![old];
    s.host = None;
    assert_eq!(decide(&s, t(T0 + 5)), Step::ReleaseHost("h0".into()));
}

#[test]
fn deletion_and_the_workload_cluster() {
    let mut s = fenced_running().deleting();
    s.node = NodeView::Unreachable { gone: false };
    assert_eq!(
        decide(&s, t(T0 + 5)),
        Step::WorkloadUnreachable,
        "the fence must come off"
    );
    s.node = NodeView::Unreachable { gone: true };
    assert_eq!(
        decide(&s, t(T0 + 5)),
        Step::RemoveFinalizer,
        "the cluster is gone"
    );
    let mut s = fenced_running().deleting();
    s.machine.as_mut().unwrap().metadata.deletion_timestamp = Some(time(T0));
    assert_eq!(
        decide(&s, t(T0 + 5)),
        Step::RemoveFinalizer,
        "the Node goes with its Machine"
    );
    let s = fenced_running().deleting().at(DeletingMachine, 2, T0);
    assert_eq!(decide(&s, t(T0 + 5)), Step::RemoveFinalizer);
}

#[test]
fn requests_left_on_another_host_are_taken_back() {
    let mut s = fenced_running();
    let mut old = host("h0", "off");
    annotate(&mut old, &reboot_key(UID), "ns/m1");
    s.held = vec![old];
    assert_eq!(decide(&s, t(T0 + 5)), Step::ReleaseHost("h0".into()));
}

#[test]
fn an_unreachable_workload_is_waited_for_one_timeout_then_the_reboot_goes_on_without_it() {
    let mut s = state();
    s.remediation.metadata.creation_timestamp = Some(time(T0));
    s.node = NodeView::Unreachable { gone: false };
    assert_eq!(decide(&s, t(T0 + 599)), Step::WorkloadUnreachable);
    assert_eq!(
        decide(&s, t(T0 + 600)),
        Step::BeginAttempt { attempt: 1 },
        "a cluster whose only control plane hung answers only after the reboot"
    );
    let mut running = state().at(Running, 1, T0 + 600);
    running.remediation.metadata.creation_timestamp = Some(time(T0));
    running.node = NodeView::Unreachable { gone: false };
    assert_eq!(decide(&running, t(T0 + 601)), Step::RequestReboot);
    // The API answers again once the server is off: the Node is backed up before the fence.
    let mut off = running.requested().off();
    off.node = state().node;
    assert_eq!(decide(&off, t(T0 + 602)), Step::BackupNode);
    assert_eq!(
        decide(&off.backed_up(), t(T0 + 602)),
        Step::Fence(FenceMode::Taint)
    );
}

#[test]
fn a_deletion_waits_one_timeout_for_the_workload_to_restore_the_node_then_ends() {
    let mut s = fenced_running().deleting();
    s.remediation.metadata.deletion_timestamp = Some(time(T0 + 10));
    s.node = NodeView::Unreachable { gone: false };
    assert_eq!(decide(&s, t(T0 + 609)), Step::WorkloadUnreachable);
    assert_eq!(decide(&s, t(T0 + 610)), Step::RemoveFinalizer);
}
