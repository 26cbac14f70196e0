//! Fault injection, control endpoints and concurrent allocation.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::{start_instant, status_text};
use maas_sim::{FaultConfig, NodeStatus, OpFault, PowerState, ReleaseResult};
use reqwest::Method;
use serde_json::{Value, json};

#[tokio::test]
async fn concurrent_allocations_never_share_a_machine() {
    let t = start_instant(20).await;
    let mut tasks = Vec::new();
    for _ in 0..50 {
        let client = t.client.clone();
        let url = t.api("machines/?op=allocate");
        let header = common::plaintext_header(&t.key);
        tasks.push(tokio::spawn(async move {
            let resp = client
                .post(url)
                .header("Authorization", header)
                .form(&[("agent_name", "race")])
                .send()
                .await
                .unwrap();
            let status = resp.status().as_u16();
            let body = resp.text().await.unwrap();
            (status, body)
        }));
    }
    let mut won = Vec::new();
    let mut lost = 0;
    for task in tasks {
        let (status, body) = task.await.unwrap();
        match status {
            200 => won.push(
                serde_json::from_str::<Value>(&body).unwrap()["system_id"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            ),
            409 => {
                assert_eq!(body, "No machine available.");
                lost += 1;
            }
            other => panic!("unexpected {other}: {body}"),
        }
    }
    let unique: BTreeSet<_> = won.iter().collect();
    assert_eq!((won.len(), unique.len(), lost), (20, 20, 30));
    assert!(
        t.sim
            .state()
            .machines()
            .iter()
            .all(|m| m.status == NodeStatus::Allocated)
    );
}

#[tokio::test]
async fn error_rate_latency_and_retry_after() {
    let t = start_instant(3).await;
    let faults = FaultConfig {
        ops: vec![
            OpFault {
                op: "machines.allocate".into(),
                error_rate: 1.0,
                status: 503,
                latency_ms: 0,
                retry_after: Some(10),
                body: None,
            },
            OpFault {
                op: "machine.read".into(),
                error_rate: 1.0,
                status: 409,
                latency_ms: 0,
                retry_after: None,
                body: None,
            },
            OpFault {
                op: "machines.read".into(),
                error_rate: 0.0,
                status: 503,
                latency_ms: 150,
                retry_after: None,
                body: None,
            },
        ],
        ..FaultConfig::default()
    };
    t.sim.state().set_faults(faults).unwrap();
    let resp = t.post("machines/?op=allocate", &[]).await;
    assert_eq!(
        (
            resp.status().as_u16(),
            resp.headers()["retry-after"].to_str().unwrap()
        ),
        (503, "10")
    );
    let id = t.sim.state().machines()[0].system_id.clone();
    let resp = t.get(&format!("machines/{id}/"), &[]).await;
    assert_eq!(resp.status(), 409);
    assert_eq!(resp.headers()["retry-after"], "5");
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let started = Instant::now();
    assert_eq!(t.get("machines/", &[]).await.status(), 200);
    assert!(started.elapsed() >= Duration::from_millis(150));
    // Nothing was allocated by the failed calls.
    assert!(
        t.sim
            .state()
            .machines()
            .iter()
            .all(|m| m.status == NodeStatus::Ready)
    );
}

#[tokio::test]
async fn failed_deploy_release_and_erase() {
    let t = start_instant(3).await;
    let state = t.sim.state();
    let id = t.allocate(&[]).await;
    state.fail_next_deploy(&id).unwrap();
    t.json(Method::POST, &format!("machines/{id}/?op=deploy"), &[])
        .await;
    let view = state.machine(&id).unwrap();
    assert_eq!(
        (view.status, view.status_number),
        (NodeStatus::FailedDeployment, 11)
    );
    assert!(view.error_description.starts_with("Installation failed"));
    // Deploying again from Failed deployment is refused; release first.
    let (s, body) = status_text(t.post(&format!("machines/{id}/?op=deploy"), &[]).await).await;
    assert_eq!(
        (s, body.as_str()),
        (
            409,
            "Can't deploy a machine that is in the 'Failed deployment' state"
        )
    );
    state.fail_next_releases(1);
    t.json(Method::POST, &format!("machines/{id}/?op=release"), &[])
        .await;
    assert_eq!(
        state.machine(&id).unwrap().status,
        NodeStatus::FailedReleasing
    );
    state.fail_next_erases(1);
    t.json(
        Method::POST,
        &format!("machines/{id}/?op=release"),
        &[("erase", "true"), ("quick_erase", "true")],
    )
    .await;
    assert_eq!(
        state.machine(&id).unwrap().status_name,
        "Failed disk erasing"
    );
    t.json(
        Method::POST,
        &format!("machines/{id}/?op=release"),
        &[("erase", "1")],
    )
    .await;
    assert_eq!(state.machine(&id).unwrap().status, NodeStatus::Ready);

    let id = t.allocate(&[]).await;
    state.power_fail_deploys(&id).unwrap();
    t.json(Method::POST, &format!("machines/{id}/?op=deploy"), &[])
        .await;
    let view = state.machine(&id).unwrap();
    assert_eq!(
        (view.status, view.power_state),
        (NodeStatus::FailedDeployment, PowerState::Error)
    );
}

#[tokio::test]
async fn outage_and_control_endpoints() {
    let t = start_instant(2).await;
    let root = t.root();
    let faults: Value = t
        .client
        .get(format!("{root}/_sim/faults"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(faults["ops"], json!([]));
    let resp = t
        .client
        .put(format!("{root}/_sim/faults"))
        .body(r#"{"outage_seconds": 1, "fail_next_deploys": 2}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let (s, _) = status_text(t.get("machines/", &[]).await).await;
    assert_eq!(s, 503);
    let stats: Value = t
        .client
        .get(format!("{root}/_sim/stats"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (
            stats["calls"]["machines.read"].as_u64(),
            stats["outage"].as_bool()
        ),
        (Some(1), Some(true))
    );
    assert_eq!(stats["machines_by_status"]["ready"], 2);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(t.get("machines/", &[]).await.status(), 200);
    assert_eq!(t.sim.state().faults().fail_next_deploys, 2);
    let resp = t
        .client
        .put(format!("{root}/_sim/faults"))
        .body(r#"{"ops": [{"op": "*", "error_rate": 2.0}]}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let resp = t
        .client
        .put(format!("{root}/_sim/faults"))
        .body(r#"{"bogus": 1}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    t.client
        .post(format!("{root}/_sim/reset-stats"))
        .send()
        .await
        .unwrap();
    assert!(t.sim.state().call_counts().is_empty());
    let machines: Value = t
        .client
        .get(format!("{root}/_sim/machines"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(machines.as_array().unwrap().len(), 2);
    assert_eq!(machines[0]["status_name"], "Ready");
}

#[tokio::test]
async fn handle_mutations_show_through_the_api() {
    let t = start_instant(3).await;
    let state = t.sim.state();
    let ids: Vec<String> = state.machines().into_iter().map(|m| m.system_id).collect();
    state.add_tag(&ids[1], "gpu").unwrap();
    let v = t
        .json(Method::POST, "machines/?op=allocate", &[("tags", "gpu")])
        .await;
    assert_eq!(v["system_id"], ids[1].as_str());
    state.break_machine(&ids[1]).unwrap();
    let m = t
        .json(Method::GET, &format!("machines/{}/", ids[1]), &[])
        .await;
    assert_eq!(
        (m["status"].as_u64(), m["power_state"].as_str()),
        (Some(8), Some("error"))
    );
    state.set_power(&ids[0], PowerState::On).unwrap();
    let s = t
        .json(
            Method::GET,
            &format!("machines/{}/?op=query_power_state", ids[0]),
            &[],
        )
        .await;
    assert_eq!(s["state"], "on");
    state.remove_machine(&ids[2]).unwrap();
    assert_eq!(
        t.get(&format!("machines/{}/", ids[2]), &[]).await.status(),
        404
    );
    assert!(state.remove_machine("nope").is_err());
    assert_eq!(state.status_counts().get(&NodeStatus::Broken), Some(&1));
}

#[tokio::test]
async fn per_machine_control_endpoints() {
    let t = start_instant(2).await;
    let root = t.root();
    let id = t.sim.state().machines()[0].system_id.clone();
    let resp = t
        .client
        .put(format!("{root}/_sim/machines/{id}/power"))
        .body(r#"{"power_state": "on"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(
        t.sim.state().machine(&id).unwrap().power_state,
        PowerState::On
    );
    let resp = t
        .client
        .put(format!("{root}/_sim/machines/{id}/power"))
        .body(r#"{"power_state": "sideways"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    t.client
        .post(format!("{root}/_sim/machines/{id}/tags/gpu"))
        .send()
        .await
        .unwrap();
    t.client
        .post(format!("{root}/_sim/machines/{id}/break"))
        .send()
        .await
        .unwrap();
    let view: Value = t
        .client
        .get(format!("{root}/_sim/machines/{id}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (view["status_name"].as_str(), view["tags"][0].as_str()),
        (Some("Broken"), Some("gpu"))
    );
    assert_eq!(
        t.client
            .delete(format!("{root}/_sim/machines/{id}"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        t.client
            .get(format!("{root}/_sim/machines/{id}"))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    assert_eq!(
        t.client
            .post(format!("{root}/_sim/machines/{id}/break"))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
}

/// An erasing release that fails ends in Failed disk erasing with the allocation kept (agent
/// name and workload annotations stay until an erase succeeds, as in MAAS); every accepted
/// release is recorded with its flags and how it ended.
#[tokio::test]
async fn failed_erase_keeps_the_allocation_and_each_release_is_recorded() {
    let t = start_instant(2).await;
    let state = t.sim.state();
    let id = t.allocate(&[("agent_name", "inst-1")]).await;
    t.json(Method::POST, &format!("machines/{id}/?op=deploy"), &[])
        .await;
    t.json(
        Method::POST,
        &format!("machines/{id}/?op=set_workload_annotations"),
        &[("owner", "me")],
    )
    .await;
    state.fail_next_erases(1);
    let m = t
        .json(
            Method::POST,
            &format!("machines/{id}/?op=release"),
            &[
                ("erase", "true"),
                ("secure_erase", "true"),
                ("comment", "c1"),
            ],
        )
        .await;
    assert_eq!(m["status_name"], "Disk erasing");
    let view = state.machine(&id).unwrap();
    assert_eq!(view.status, NodeStatus::FailedDiskErasing);
    assert_eq!(view.agent_name, "inst-1");
    assert_eq!(view.owner_data.get("owner").map(String::as_str), Some("me"));
    // Still listed as ours.
    let listed = t
        .json(Method::GET, "machines/", &[("agent_name", "inst-1")])
        .await;
    assert_eq!(listed.as_array().map(Vec::len), Some(1));
    let record = &view.releases[0];
    assert!(record.erase && record.secure_erase && !record.quick_erase && record.erases());
    assert_eq!(
        (record.comment.as_str(), record.result),
        ("c1", ReleaseResult::Failed)
    );

    // Released again with the same flags: erased, then Ready and no longer ours.
    t.json(
        Method::POST,
        &format!("machines/{id}/?op=release"),
        &[("erase", "true"), ("secure_erase", "true")],
    )
    .await;
    let view = state.machine(&id).unwrap();
    assert_eq!(view.status, NodeStatus::Ready);
    assert!(view.agent_name.is_empty() && view.owner_data.is_empty() && view.owner.is_none());
    assert_eq!(view.releases.len(), 2);
    assert_eq!(view.releases[1].result, ReleaseResult::Released);
    assert!(view.releases.iter().all(|r| r.secure_erase));

    // A release without erase drops the agent name at once and is recorded as such.
    let id = t.allocate(&[("agent_name", "inst-1")]).await;
    t.json(Method::POST, &format!("machines/{id}/?op=release"), &[])
        .await;
    let view = state.machine(&id).unwrap();
    assert_eq!(
        (view.status, view.agent_name.as_str()),
        (NodeStatus::Ready, "")
    );
    let last = view.releases.last().unwrap();
    assert!(!last.erases());
    assert_eq!(last.result, ReleaseResult::Released);
}

#[tokio::test]
async fn removing_a_tag_takes_the_machine_out_of_tag_listings() {
    let t = start_instant(2).await;
    let state = t.sim.state();
    let id = state.machines()[0].system_id.clone();
    state.add_tag(&id, "cap").unwrap();
    let listed = t.json(Method::GET, "machines/", &[("tags", "cap")]).await;
    assert_eq!(listed.as_array().map(Vec::len), Some(1));
    state.remove_tag(&id, "cap").unwrap();
    let listed = t.json(Method::GET, "machines/", &[("tags", "cap")]).await;
    assert_eq!(listed.as_array().map(Vec::len), Some(0));
    assert!(!state.machine(&id).unwrap().tags.contains("cap"));
    assert!(state.remove_tag("nope", "cap").is_err());
}
