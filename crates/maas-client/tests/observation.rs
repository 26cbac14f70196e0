//! Batched observation: while MAAS deploys and releases, the gateway reads the machines in
//! flight with one list per interval for all of them, never one by one, and every change still
//! reaches the hosts; a machine that vanishes from MAAS meanwhile is read directly (404) and
//! reported missing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use maas_sim::{NodeStatus, SimConfig, Simulator, Timings};
use support::*;

const MACHINES: usize = 12;

fn count(calls: &BTreeMap<String, u64>, op: &str) -> u64 {
    calls.get(op).copied().unwrap_or(0)
}

async fn all_report(client: &kube::Client, ns: &str, ids: &[String], want: &str) {
    eventually(
        &format!("all hosts {want}"),
        Duration::from_secs(60),
        || async {
            let hosts = hosts(client, ns).await;
            ids.iter()
                .all(|id| {
                    hosts.iter().any(|h| {
                        h.spec.system_id == *id && provisioning_state(h).as_deref() == Some(want)
                    })
                })
                .then_some(())
        },
    )
    .await;
}

#[tokio::test]
async fn machines_in_flight_are_observed_with_one_list_per_interval() {
    let (env, client, ns) = api_server("observe").await;
    let sim = Simulator::start(SimConfig {
        machines: MACHINES,
        timings: Timings {
            deploy: Duration::from_secs(12),
            release: Duration::from_secs(8),
            ..Timings::zero()
        },
        ..SimConfig::instant()
    })
    .await
    .unwrap();
    let state = sim.state();
    // No inventory list and no sweep during the measurement: only the observation reads.
    let gateway = start_in_process(
        &env,
        &sim,
        &ns,
        &[
            "--inventory-sync-interval=1h",
            "--orphan-sweep-interval=1h",
            "--maas-observe-interval=1s",
        ],
    )
    .await;
    let ids = import_hosts(&client, &ns, MACHINES).await;

    // --- Deploying: one list per interval for all twelve, no single reads.
    for (i, id) in ids.iter().enumerate() {
        request_deploy(&client, &ns, id, &format!("m{i}")).await;
    }
    eventually("all deploying", Duration::from_secs(20), || async {
        ids.iter()
            .all(|id| state.machine(id).unwrap().status == NodeStatus::Deploying)
            .then_some(())
    })
    .await;
    all_report(&client, &ns, &ids, "Deploying").await;
    state.reset_counts();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let calls = state.call_counts();
    assert_eq!(
        count(&calls, "machine.read"),
        0,
        "no machine is read on its own while MAAS deploys it: {calls:?}"
    );
    let lists = count(&calls, "machines.read");
    assert!(
        (3..=7).contains(&lists),
        "about one list per second for {MACHINES} machines in 5 s: {calls:?}"
    );
    all_report(&client, &ns, &ids, "Deployed").await;
    for id in &ids {
        let m = state.machine(id).unwrap();
        assert_eq!(
            (m.status, m.power_on_count),
            (NodeStatus::Deployed, 1),
            "{id}"
        );
    }

    // --- Releasing: observed the same way; a machine removed from MAAS meanwhile is read on its
    // own (the list no longer shows it), answers 404 and is reported missing.
    state.reset_counts();
    let vanishing = &ids[0];
    for id in &ids {
        release_request(&client, &ns, id).await;
    }
    eventually("releasing", Duration::from_secs(20), || async {
        ids.iter()
            .all(|id| state.machine(id).unwrap().status == NodeStatus::Releasing)
            .then_some(())
    })
    .await;
    state.remove_machine(vanishing).unwrap();
    eventually("missing", Duration::from_secs(20), || async {
        (provisioning_state(&host(&client, &ns, vanishing).await).as_deref() == Some("Missing"))
            .then_some(())
    })
    .await;
    all_report(&client, &ns, &ids[1..], "Available").await;
    let calls = state.call_counts();
    assert!(
        count(&calls, "machine.read") <= 3,
        "only the vanished machine is read on its own: {calls:?}"
    );
    assert_eq!(
        count(&calls, "machine.release"),
        MACHINES as u64,
        "{calls:?}"
    );
    gateway.stop().await;
    sim.shutdown().await;
}
