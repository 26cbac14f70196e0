//! The built `maas-client` binary is SIGKILLed at each step of provisioning and release and
//! started again: the host ends deployed exactly once, and MAAS keeps no allocation that no
//! consumed host claims. Also: two replicas with leader election, only the leader calls MAAS
//! (takeover timing is the runtime's and is tested there: kube-lease-manager's standby
//! notices a released Lease only on its next poll, ~20 s).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use kube::api::{Api, DeleteParams};
use maas_sim::{FaultConfig, MachineView, NodeStatus, OpFault, SimConfig, Simulator, Timings};
use support::*;

type StepDone = fn(&MachineView) -> bool;

/// Waits (polling the simulator every 5 ms) until `machine` satisfies `cond`.
async fn until(
    state: &maas_sim::SimHandle,
    id: &str,
    what: &str,
    cond: impl Fn(&MachineView) -> bool,
) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(40);
    while !cond(&state.machine(id).unwrap()) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn leaked(state: &maas_sim::SimHandle, claimed: &[&str]) -> Vec<String> {
    state
        .machines()
        .into_iter()
        .filter(|m| m.owner.is_some() && !claimed.contains(&m.system_id.as_str()))
        .map(|m| m.system_id)
        .collect()
}

#[tokio::test]
async fn sigkill_at_every_step_deploys_exactly_once_and_leaks_nothing() {
    let (env, client, ns) = api_server("kill").await;
    let timings = Timings {
        deploy: Duration::from_secs(2),
        release: Duration::from_millis(500),
        ..Timings::zero()
    };
    // Every MAAS call takes 100 ms, so each step is a window the test can kill in.
    let faults = FaultConfig {
        ops: vec![OpFault {
            op: "*".into(),
            error_rate: 0.0,
            status: 503,
            latency_ms: 100,
            retry_after: None,
            body: None,
        }],
        ..FaultConfig::default()
    };
    let sim = Simulator::start(SimConfig {
        machines: 3,
        timings,
        faults,
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let state = sim.state();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("gateway.log");
    create_deployable_inventory(&client, &ns).await;

    // With the workload annotations, so that their call is one of the steps killed after.
    let flags = ["--maas-workload-annotations"];
    let mut child = spawn_binary(&sim, &env, &ns, &log, &flags);
    let ids = imported(&client, &ns, 3).await;
    let (id, other) = (ids[0].as_str(), ids[1].as_str());
    request_deploy(&client, &ns, id, "m1").await;

    // Kill right after each observable MAAS step, then start again.
    let steps: [(&str, StepDone); 4] = [
        ("allocated", |m| m.owner.is_some()),
        ("renamed", |m| m.hostname == "node-m1"),
        ("deploying", |m| m.status == NodeStatus::Deploying),
        ("annotated", |m| m.owner_data.contains_key("capmaas.host")),
    ];
    for (what, cond) in steps {
        until(&state, id, what, cond).await;
        kill_binary(child).await;
        child = spawn_binary(&sim, &env, &ns, &log, &flags);
    }
    until(&state, id, "deployed", |m| m.status == NodeStatus::Deployed).await;
    eventually("host reports Deployed", Duration::from_secs(20), || async {
        (provisioning_state(&host(&client, &ns, id).await).as_deref() == Some("Deployed"))
            .then_some(())
    })
    .await;
    // Counted as MAAS applied them: a call the killed process had in flight may still land
    // (MAAS does not cancel it), so its successor may send the same call again and be refused
    // with 409; what must hold is that only one of them took effect.
    let applied = state.applied_counts();
    assert_eq!(
        applied.get("machine.deploy").copied(),
        Some(1),
        "deployed exactly once (calls sent: {:?})",
        state.call_counts()
    );
    assert_eq!(state.machine(id).unwrap().power_on_count, 1);
    assert_eq!(
        applied.get("machines.allocate").copied(),
        Some(1),
        "allocated exactly once (calls sent: {:?})",
        state.call_counts()
    );

    // An allocation whose claim is dropped while the gateway is dead is released after restart.
    request_deploy(&client, &ns, other, "m2").await;
    until(&state, other, "other allocated", |m| m.owner.is_some()).await;
    kill_binary(child).await;
    release_request(&client, &ns, other).await;
    child = spawn_binary(&sim, &env, &ns, &log, &[]);
    until(&state, other, "other released", |m| {
        m.status == NodeStatus::Ready
    })
    .await;

    // The host object itself vanishes while the gateway is dead: the sweeper releases the
    // orphan after the grace period (the inventory re-imports the host unclaimed).
    request_deploy(&client, &ns, other, "m3").await;
    until(&state, other, "other allocated again", |m| {
        m.owner.is_some()
    })
    .await;
    kill_binary(child).await;
    Api::<capmaas_api::MaasHost>::namespaced(client.clone(), &ns)
        .delete(other, &DeleteParams::default())
        .await
        .unwrap();
    child = spawn_binary(&sim, &env, &ns, &log, &[]);
    until(&state, other, "orphan released", |m| m.owner.is_none()).await;
    assert!(
        leaked(&state, &[id]).is_empty(),
        "leaked: {:?}",
        leaked(&state, &[id])
    );

    // Release, killed mid-way, still ends available.
    release_request(&client, &ns, id).await;
    until(&state, id, "releasing", |m| {
        m.status != NodeStatus::Deployed
    })
    .await;
    kill_binary(child).await;
    let child = spawn_binary(&sim, &env, &ns, &log, &[]);
    eventually("available again", Duration::from_secs(20), || async {
        let h = host(&client, &ns, id).await;
        (provisioning_state(&h).as_deref() == Some("Available")).then_some(())
    })
    .await;
    assert!(
        leaked(&state, &[]).is_empty(),
        "leaked: {:?}",
        leaked(&state, &[])
    );
    kill_binary(child).await;
    sim.shutdown().await;
}

fn free_port() -> u16 {
    capmaas_testenv::free_port().unwrap()
}

async fn maas_requests(port: u16) -> Option<u64> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .ok()?;
    let mut body = String::new();
    stream.read_to_string(&mut body).await.ok()?;
    Some(
        body.lines()
            .filter(|l| l.starts_with("capmaas_maas_requests_total{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum(),
    )
}

#[tokio::test]
async fn two_replicas_only_the_leader_calls_maas() {
    let (env, client, ns) = api_server("ha").await;
    let sim = instant_sim(3).await;
    let dir = tempfile::tempdir().unwrap();
    create_inventory(&client, &ns, "inv", "default").await;
    let ports = [free_port(), free_port()];
    let leader_flags = |port: u16| {
        vec![
            "--leader-elect".to_owned(),
            format!("--leader-election-namespace={ns}"),
            format!("--metrics-bind-addr=127.0.0.1:{port}"),
        ]
    };
    let mut children = Vec::new();
    for (i, port) in ports.iter().enumerate() {
        let flags = leader_flags(*port);
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        children.push(spawn_binary(
            &sim,
            &env,
            &ns,
            &dir.path().join(format!("r{i}.log")),
            &flags,
        ));
    }
    eventually("hosts imported", Duration::from_secs(30), || async {
        (hosts(&client, &ns).await.len() == 3).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let counts = [
        maas_requests(ports[0]).await.unwrap(),
        maas_requests(ports[1]).await.unwrap(),
    ];
    let leader = usize::from(counts[1] > 0);
    assert!(
        counts[leader] > 0 && counts[1 - leader] == 0,
        "exactly one replica calls MAAS: {counts:?}"
    );

    for child in children {
        kill_binary(child).await;
    }
    sim.shutdown().await;
}
