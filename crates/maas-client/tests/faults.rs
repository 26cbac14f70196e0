//! A 60 s MAAS outage and 20 % injected errors: no crash, no leak, convergence after recovery.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use maas_sim::{FaultConfig, NodeStatus, OpFault};
use support::*;

#[tokio::test]
async fn outage_and_error_injection_converge_without_leaks() {
    let (env, client, ns) = api_server("faults").await;
    let sim = instant_sim(8).await;
    let state = sim.state();
    let gateway = start_in_process(&env, &sim, &ns, &[]).await;
    let ids = import_hosts(&client, &ns, 8).await;

    // The outage starts while five hosts are asked to deploy.
    let outage = Duration::from_secs(60);
    let outage_started = std::time::Instant::now();
    state.start_outage(outage);
    for (i, id) in ids.iter().take(5).enumerate() {
        request_deploy(&client, &ns, id, &format!("m{i}")).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        !gateway.task.is_finished(),
        "the gateway survives the outage"
    );
    assert!(
        state.machines().iter().all(|m| m.owner.is_none()),
        "nothing happened during the outage"
    );

    tokio::time::sleep(outage.saturating_sub(outage_started.elapsed())).await;
    assert!(
        !gateway.task.is_finished(),
        "the gateway survives the whole outage"
    );
    assert!(
        state.machines().iter().all(|m| m.owner.is_none()),
        "nothing was allocated during the outage"
    );
    let recovery = std::time::Instant::now();

    // Then 20 % of all calls fail.
    state
        .set_faults(FaultConfig {
            ops: vec![OpFault {
                op: "*".into(),
                error_rate: 0.2,
                status: 503,
                latency_ms: 0,
                retry_after: None,
                body: None,
            }],
            ..FaultConfig::default()
        })
        .unwrap();
    eventually("five hosts deployed", Duration::from_secs(240), || async {
        let hosts = hosts(&client, &ns).await;
        let deployed = hosts
            .iter()
            .filter(|h| provisioning_state(h).as_deref() == Some("Deployed"))
            .count();
        (deployed == 5).then_some(())
    })
    .await;
    eprintln!("converged {:?} after the outage ended", recovery.elapsed());
    for id in ids.iter().take(5) {
        let view = state.machine(id).unwrap();
        assert_eq!(
            (view.status, view.power_on_count),
            (NodeStatus::Deployed, 1),
            "{id} deployed once"
        );
    }
    for id in ids.iter().take(5) {
        release_request(&client, &ns, id).await;
    }
    eventually("all released", Duration::from_secs(90), || async {
        state
            .machines()
            .iter()
            .all(|m| m.owner.is_none() && m.status == NodeStatus::Ready)
            .then_some(())
    })
    .await;
    state.set_faults(FaultConfig::default()).unwrap();
    eventually("all hosts available", Duration::from_secs(30), || async {
        let hosts = hosts(&client, &ns).await;
        hosts
            .iter()
            .all(|h| provisioning_state(h).as_deref() == Some("Available"))
            .then_some(())
    })
    .await;
    assert!(!gateway.task.is_finished());
    gateway.stop().await;
    sim.shutdown().await;
}
