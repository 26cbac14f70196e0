//! "MAAS did it but the answer was lost": the simulator applies allocate, deploy, power and
//! release, then answers a 5xx, answers nothing until the gateway times out, or the gateway is
//! SIGKILLed while it waits. Each host is still allocated once, deployed once, powered on once
//! and released once, nothing stays allocated to us, and the host status converges.
//!
//! "Applied" counts come from the simulator (`SimHandle::applied_counts`: calls that answered
//! successfully and changed MAAS); "calls" count every request the gateway sent.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use capmaas_api::keys::reboot_annotation;
use kube::ResourceExt;
use maas_sim::{LostAnswer, NodeStatus, PowerState, SimHandle};
use support::*;

const ALLOCATE: &str = "machines.allocate";
const DEPLOY: &str = "machine.deploy";
const RELEASE: &str = "machine.release";
const POWER_ON: &str = "machine.power_on";
const POWER_OFF: &str = "machine.power_off";

fn count(map: &BTreeMap<String, u64>, op: &str) -> u64 {
    map.get(op).copied().unwrap_or(0)
}

/// Machines MAAS shows as owned by anyone, except the ones a host legitimately holds.
fn leaked(state: &SimHandle, claimed: &[&str]) -> Vec<String> {
    state
        .machines()
        .into_iter()
        .filter(|m| m.owner.is_some() || !m.agent_name.is_empty())
        .filter(|m| !claimed.contains(&m.system_id.as_str()))
        .map(|m| m.system_id)
        .collect()
}

async fn until_state(client: &kube::Client, ns: &str, id: &str, want: &str) {
    eventually(
        &format!("{id} reports {want}"),
        Duration::from_secs(40),
        || async {
            (provisioning_state(&host(client, ns, id).await).as_deref() == Some(want)).then_some(())
        },
    )
    .await;
}

/// Every host deployed, with our agent name, allocated and deployed (= powered on) once.
async fn assert_deployed_once(state: &SimHandle, client: &kube::Client, ns: &str, ids: &[String]) {
    for id in ids {
        let m = state.machine(id).unwrap();
        assert_eq!(
            (m.status, m.power_on_count),
            (NodeStatus::Deployed, 1),
            "{id}: deployed once"
        );
        assert!(
            is_identity_of(&m.agent_name, ns, id),
            "{id}: allocated with our identity, not {}",
            m.agent_name
        );
        let h = host(client, ns, id).await;
        let allocation = h.status.as_ref().and_then(|s| s.allocation.as_ref());
        assert_eq!(
            allocation.and_then(|a| a.agent_name.as_deref()),
            Some(m.agent_name.as_str()),
            "{id}: the allocation is recorded"
        );
    }
    let n = ids.len() as u64;
    let (applied, calls) = (state.applied_counts(), state.call_counts());
    assert_eq!(count(&applied, ALLOCATE), n, "one allocate per host");
    assert_eq!(count(&calls, ALLOCATE), n, "no allocate sent twice");
    assert_eq!(count(&applied, DEPLOY), n, "one deploy per host");
    assert_eq!(count(&calls, DEPLOY), n, "no deploy sent twice");
}

/// Every host released once, available, and nothing left allocated to us.
async fn assert_released_once(state: &SimHandle, client: &kube::Client, ns: &str, ids: &[String]) {
    for id in ids {
        let m = state.machine(id).unwrap();
        assert_eq!(m.status, NodeStatus::Ready, "{id}");
        assert_eq!(m.releases.len(), 1, "{id}: released once: {:?}", m.releases);
        let h = host(client, ns, id).await;
        assert_eq!(provisioning_state(&h).as_deref(), Some("Available"));
        assert!(
            h.status
                .as_ref()
                .and_then(|s| s.allocation.as_ref())
                .is_none(),
            "{id}: the allocation record is gone"
        );
    }
    assert_eq!(
        count(&state.applied_counts(), RELEASE),
        ids.len() as u64,
        "one release per host"
    );
    assert!(
        leaked(state, &[]).is_empty(),
        "leaked: {:?}",
        leaked(state, &[])
    );
}

/// Reboots a deployed host through the reboot annotation: power off, then power on once.
async fn reboot(state: &SimHandle, client: &kube::Client, ns: &str, id: &str) {
    let request = reboot_annotation("lost-answers");
    set_annotation(client, ns, id, &request, Some("")).await;
    eventually("powered off", Duration::from_secs(30), || async {
        (state.machine(id).unwrap().power_state == PowerState::Off).then_some(())
    })
    .await;
    set_annotation(client, ns, id, &request, None).await;
    eventually("powered on again", Duration::from_secs(40), || async {
        let h = host(client, ns, id).await;
        let done = !h
            .annotations()
            .contains_key("maas.cluster.x-k8s.io/reboot-state");
        (state.machine(id).unwrap().power_state == PowerState::On && done).then_some(())
    })
    .await;
}

/// (a) Commit-then-5xx on allocate, deploy, power off, power on and release: once each.
#[tokio::test]
async fn error_answers_after_the_fact_act_exactly_once() {
    let (env, client, ns) = api_server("lost5xx").await;
    let sim = instant_sim(3).await;
    let state = sim.state();
    let gateway = start_in_process(&env, &sim, &ns, &[]).await;
    let all = import_hosts(&client, &ns, 3).await;
    let ids = all[..2].to_vec();

    // The first answer of each operation of each host is lost (two hosts: two of each).
    for (op, status) in [(ALLOCATE, 503), (DEPLOY, 500), (RELEASE, 502)] {
        state
            .add_lost_answer(LostAnswer::error(op, status).times(2))
            .unwrap();
    }
    state
        .add_lost_answer(LostAnswer::error(POWER_OFF, 504).once())
        .unwrap();
    state
        .add_lost_answer(LostAnswer::error(POWER_ON, 503).once())
        .unwrap();
    state.reset_counts();

    for (i, id) in ids.iter().enumerate() {
        request_deploy(&client, &ns, id, &format!("m{i}")).await;
    }
    for id in &ids {
        until_state(&client, &ns, id, "Deployed").await;
    }
    let lost = state.lost_answer_counts();
    assert_eq!(
        (count(&lost, ALLOCATE), count(&lost, DEPLOY)),
        (2, 2),
        "the faults fired: {lost:?}"
    );
    tokio::time::sleep(Duration::from_secs(2)).await; // nothing more happens afterwards
    assert_deployed_once(&state, &client, &ns, &ids).await;

    // A reboot whose power-off and power-on answers are lost: one power cycle.
    reboot(&state, &client, &ns, &ids[0]).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let lost = state.lost_answer_counts();
    assert_eq!((count(&lost, POWER_OFF), count(&lost, POWER_ON)), (1, 1));
    assert_eq!(count(&state.applied_counts(), POWER_ON), 1);
    assert_eq!(
        count(&state.call_counts(), POWER_ON),
        1,
        "power-on sent once"
    );
    assert_eq!(
        state.machine(&ids[0]).unwrap().power_on_count,
        2,
        "deploy + exactly one power-on"
    );
    until_state(&client, &ns, &ids[0], "Deployed").await;

    for id in &ids {
        release_request(&client, &ns, id).await;
    }
    for id in &ids {
        until_state(&client, &ns, id, "Available").await;
    }
    assert_eq!(count(&state.lost_answer_counts(), RELEASE), 2);
    tokio::time::sleep(Duration::from_secs(4)).await; // a sweep pass and a resync later
    assert_released_once(&state, &client, &ns, &ids).await;
    assert_eq!(count(&state.applied_counts(), ALLOCATE), 2, "never again");
    gateway.stop().await;
}

/// (b) The answers of allocate, deploy and release never come: the gateway times out (its
/// MAAS request timeout is shortened to 1.5 s, the simulator holds the answer 4 s).
#[tokio::test]
async fn timed_out_answers_act_exactly_once() {
    let (env, client, ns) = api_server("losttimeout").await;
    let sim = instant_sim(2).await;
    let state = sim.state();
    let gateway = start_in_process_with(&env, &sim, &ns, &[], |config| {
        config.maas.request_timeout = Duration::from_millis(1500);
    })
    .await;
    let ids = import_hosts(&client, &ns, 2).await;
    let ids = ids[..1].to_vec();
    let hold = Duration::from_secs(4);
    for op in [ALLOCATE, DEPLOY, RELEASE] {
        state
            .add_lost_answer(LostAnswer::timeout(op, hold).once())
            .unwrap();
    }
    state.reset_counts();

    request_deploy(&client, &ns, &ids[0], "t0").await;
    until_state(&client, &ns, &ids[0], "Deployed").await;
    let lost = state.lost_answer_counts();
    assert_eq!((count(&lost, ALLOCATE), count(&lost, DEPLOY)), (1, 1));
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_deployed_once(&state, &client, &ns, &ids).await;

    release_request(&client, &ns, &ids[0]).await;
    until_state(&client, &ns, &ids[0], "Available").await;
    assert_eq!(count(&state.lost_answer_counts(), RELEASE), 1);
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_released_once(&state, &client, &ns, &ids).await;
    gateway.stop().await;
}

/// Four hosts deploy and release while `lost` (on every operation, reads included) loses a
/// share of the answers after the fact.
async fn random_losses(prefix: &str, lost: LostAnswer, request_timeout: Duration) {
    let (env, client, ns) = api_server(prefix).await;
    let sim = instant_sim(4).await;
    let state = sim.state();
    let gateway = start_in_process_with(&env, &sim, &ns, &[], |config| {
        config.maas.request_timeout = request_timeout;
    })
    .await;
    let ids = import_hosts(&client, &ns, 4).await;
    state.add_lost_answer(lost).unwrap();
    state.reset_counts();
    for (i, id) in ids.iter().enumerate() {
        request_deploy(&client, &ns, id, &format!("r{i}")).await;
    }
    for id in &ids {
        until_state(&client, &ns, id, "Deployed").await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_deployed_once(&state, &client, &ns, &ids).await;
    for id in &ids {
        release_request(&client, &ns, id).await;
    }
    for id in &ids {
        until_state(&client, &ns, id, "Available").await;
    }
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_released_once(&state, &client, &ns, &ids).await;
    let lost = state.lost_answer_counts();
    assert!(
        lost.values().sum::<u64>() > 0,
        "answers were lost: {lost:?}"
    );
    gateway.stop().await;
}

/// 30 % of all successful answers replaced by a 503.
#[tokio::test]
async fn random_error_answers_everywhere_act_exactly_once() {
    random_losses(
        "lostrandom",
        LostAnswer::error("*", 503).rate(0.3),
        Duration::from_secs(90),
    )
    .await;
}

/// 20 % of all successful answers never come (held 2 s, the gateway gives up after 1 s).
#[tokio::test]
async fn random_timeouts_everywhere_act_exactly_once() {
    random_losses(
        "lostrandomtimeout",
        LostAnswer::timeout("*", Duration::from_secs(2)).rate(0.2),
        Duration::from_secs(1),
    )
    .await;
}

/// Waits until the simulator has applied `op` and withheld its answer: the gateway is now
/// waiting for an answer that will not come before it is killed.
async fn until_withheld(state: &SimHandle, op: &str, n: u64) {
    eventually(
        &format!("{op} applied, answer withheld"),
        Duration::from_secs(40),
        || async { (count(&state.lost_answer_counts(), op) >= n).then_some(()) },
    )
    .await;
}

/// (c) SIGKILL after MAAS acted but before the gateway saw the answer (so before its status
/// write), at allocate, deploy and release; the restarted gateway adopts, waits, finishes.
#[tokio::test]
async fn sigkill_while_the_answer_is_outstanding_acts_exactly_once() {
    let (env, client, ns) = api_server("lostkill").await;
    let sim = instant_sim(2).await;
    let state = sim.state();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("gateway.log");
    create_deployable_inventory(&client, &ns).await;
    let mut child = spawn_binary(&sim, &env, &ns, &log, &[]);
    let ids = imported(&client, &ns, 2).await;
    let id = ids[0].as_str();
    // Far longer than the test: the answer only ever reaches a dead process.
    let hold = Duration::from_secs(120);
    state.reset_counts();

    // Allocate: applied in MAAS, the answer outstanding, killed before recording it.
    state
        .add_lost_answer(LostAnswer::timeout(ALLOCATE, hold).once())
        .unwrap();
    request_deploy(&client, &ns, id, "k0").await;
    until_withheld(&state, ALLOCATE, 1).await;
    kill_binary(child).await;
    let m = state.machine(id).unwrap();
    assert_eq!(m.status, NodeStatus::Allocated);
    assert!(is_identity_of(&m.agent_name, &ns, id), "{}", m.agent_name);
    let h = host(&client, &ns, id).await;
    assert!(
        h.status
            .as_ref()
            .and_then(|s| s.allocation.as_ref())
            .is_none(),
        "killed before the allocation was recorded"
    );

    // Deploy: the restarted gateway adopts the allocation and deploys; killed while waiting.
    state
        .add_lost_answer(LostAnswer::timeout(DEPLOY, hold).once())
        .unwrap();
    child = spawn_binary(&sim, &env, &ns, &log, &[]);
    until_withheld(&state, DEPLOY, 1).await;
    kill_binary(child).await;
    assert_eq!(state.machine(id).unwrap().status, NodeStatus::Deployed);

    child = spawn_binary(&sim, &env, &ns, &log, &[]);
    until_state(&client, &ns, id, "Deployed").await;
    tokio::time::sleep(Duration::from_secs(4)).await; // sweeps and resyncs pass: no change
    assert_deployed_once(&state, &client, &ns, &ids[..1]).await;
    assert!(
        leaked(&state, &[id]).is_empty(),
        "{:?}",
        leaked(&state, &[id])
    );

    // Release: applied, the answer outstanding, killed; the restarted gateway finishes.
    state
        .add_lost_answer(LostAnswer::timeout(RELEASE, hold).once())
        .unwrap();
    release_request(&client, &ns, id).await;
    until_withheld(&state, RELEASE, 1).await;
    kill_binary(child).await;
    let child = spawn_binary(&sim, &env, &ns, &log, &[]);
    until_state(&client, &ns, id, "Available").await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_released_once(&state, &client, &ns, &ids[..1]).await;
    let applied = state.applied_counts();
    assert_eq!(
        (count(&applied, ALLOCATE), count(&applied, DEPLOY)),
        (1, 1),
        "{applied:?}"
    );
    kill_binary(child).await;
}
