//! Fault injection, control endpoints and concurrent allocation.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::{op_fault, start_instant, status_text};
use maas_sim::{FaultConfig, NodeStatus, PowerState, ReleaseResult};
use reqwest::Method;
use serde_json::{Value, json};

#[tokio::test]
async fn concurrent_allocations_never_share_a_machine() {
    let t = start_instant(20).await;
    let mut tasks = Vec::new();
    for _ in 0..50 {
        let req = t
            .signed(&t.client, Method::POST, "machines/?op=allocate")
            .form(&[("agent_name", "race")]);
        tasks.push(tokio::spawn(async move {
            status_text(req.send().await.unwrap()).await
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
    assert!(t.all_in(NodeStatus::Allocated));
}

#[tokio::test]
async fn error_rate_latency_and_retry_after() {
    let t = start_instant(3).await;
    let faults = FaultConfig {
        ops: vec![
            op_fault("machines.allocate", 1.0, 503, 0, Some(10)),
            op_fault("machine.read", 1.0, 409, 0, None),
            op_fault("machines.read", 0.0, 503, 150, None),
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
    let id = t.first_id();
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
    assert!(t.all_in(NodeStatus::Ready));
}

#[tokio::test]
async fn failed_deploy_release_and_erase() {
    let t = start_instant(3).await;
    let state = t.sim.state();
    let id = t.allocate(&[]).await;
    state.fail_next_deploy(&id).unwrap();
    t.machine_op(&id, "deploy", &[]).await;
    let view = state.machine(&id).unwrap();
    assert_eq!(
        (view.status, view.status_number),
        (NodeStatus::FailedDeployment, 11)
    );
    assert!(view.error_description.starts_with("Installation failed"));
    // Deploying again from Failed deployment is refused; release first.
    t.expect_post(
        &format!("machines/{id}/?op=deploy"),
        &[],
        (
            409,
            "Can't deploy a machine that is in the 'Failed deployment' state",
        ),
    )
    .await;
    state.fail_next_releases(1);
    t.machine_op(&id, "release", &[]).await;
    assert_eq!(t.status_of(&id), NodeStatus::FailedReleasing);
    state.fail_next_erases(1);
    t.machine_op(
        &id,
        "release",
        &[("erase", "true"), ("quick_erase", "true")],
    )
    .await;
    assert_eq!(
        state.machine(&id).unwrap().status_name,
        "Failed disk erasing"
    );
    t.machine_op(&id, "release", &[("erase", "1")]).await;
    assert_eq!(state.machine(&id).unwrap().status, NodeStatus::Ready);

    let id = t.allocate(&[]).await;
    state.power_fail_deploys(&id).unwrap();
    t.machine_op(&id, "deploy", &[]).await;
    let view = state.machine(&id).unwrap();
    assert_eq!(
        (view.status, view.power_state),
        (NodeStatus::FailedDeployment, PowerState::Error)
    );
}

#[tokio::test]
async fn outage_and_control_endpoints() {
    let t = start_instant(2).await;
    let faults = t.control_json("faults").await;
    assert_eq!(faults["ops"], json!([]));
    let resp = t
        .control_put("faults", r#"{"outage_seconds": 1, "fail_next_deploys": 2}"#)
        .await;
    assert_eq!(resp.status(), 200);
    let (s, _) = status_text(t.get("machines/", &[]).await).await;
    assert_eq!(s, 503);
    let stats = t.control_json("stats").await;
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
    for bad in [
        r#"{"ops": [{"op": "*", "error_rate": 2.0}]}"#,
        r#"{"bogus": 1}"#,
    ] {
        assert_eq!(t.control_put("faults", bad).await.status(), 400, "{bad}");
    }
    t.control_send(Method::POST, "reset-stats").await;
    assert!(t.sim.state().call_counts().is_empty());
    let machines = t.control_json("machines").await;
    assert_eq!(machines.as_array().unwrap().len(), 2);
    assert_eq!(machines[0]["status_name"], "Ready");
}

#[tokio::test]
async fn handle_mutations_show_through_the_api() {
    let t = start_instant(3).await;
    let state = t.sim.state();
    let ids = t.machine_ids();
    state.add_tag(&ids[1], "gpu").unwrap();
    let v = t
        .post_json("machines/?op=allocate", &[("tags", "gpu")])
        .await;
    assert_eq!(v["system_id"], ids[1].as_str());
    state.break_machine(&ids[1]).unwrap();
    let m = t.machine_read(&ids[1], None).await;
    assert_eq!(
        (m["status"].as_u64(), m["power_state"].as_str()),
        (Some(8), Some("error"))
    );
    state.set_power(&ids[0], PowerState::On).unwrap();
    let s = t.machine_read(&ids[0], Some("query_power_state")).await;
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
    let id = t.first_id();
    let power = format!("machines/{id}/power");
    let resp = t.control_put(&power, r#"{"power_state": "on"}"#).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        t.sim.state().machine(&id).unwrap().power_state,
        PowerState::On
    );
    let resp = t
        .control_put(&power, r#"{"power_state": "sideways"}"#)
        .await;
    assert_eq!(resp.status(), 400);
    let (machine, broken) = (format!("machines/{id}"), format!("machines/{id}/break"));
    t.control_send(Method::POST, &format!("machines/{id}/tags/gpu"))
        .await;
    t.control_send(Method::POST, &broken).await;
    let view = t.control_json(&machine).await;
    assert_eq!(
        (view["status_name"].as_str(), view["tags"][0].as_str()),
        (Some("Broken"), Some("gpu"))
    );
    for (method, path, status) in [
        (Method::DELETE, &machine, 200),
        (Method::GET, &machine, 404),
        (Method::POST, &broken, 404),
    ] {
        assert_eq!(
            t.control_send(method, path).await.status(),
            status,
            "{path}"
        );
    }
}

/// An erasing release that fails ends in Failed disk erasing with the allocation kept (agent
/// name and workload annotations stay until an erase succeeds, as in MAAS); every accepted
/// release is recorded with its flags and how it ended.
#[tokio::test]
async fn failed_erase_keeps_the_allocation_and_each_release_is_recorded() {
    let t = start_instant(2).await;
    let state = t.sim.state();
    let id = t.deployed(&[("agent_name", "inst-1")]).await;
    t.machine_op(&id, "set_workload_annotations", &[("owner", "me")])
        .await;
    state.fail_next_erases(1);
    let m = t
        .machine_op(
            &id,
            "release",
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
    t.machine_op(
        &id,
        "release",
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
    t.machine_op(&id, "release", &[]).await;
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
    let id = t.first_id();
    state.add_tag(&id, "cap").unwrap();
    let listed = t.json(Method::GET, "machines/", &[("tags", "cap")]).await;
    assert_eq!(listed.as_array().map(Vec::len), Some(1));
    state.remove_tag(&id, "cap").unwrap();
    let listed = t.json(Method::GET, "machines/", &[("tags", "cap")]).await;
    assert_eq!(listed.as_array().map(Vec::len), Some(0));
    assert!(!state.machine(&id).unwrap().tags.contains("cap"));
    assert!(state.remove_tag("nope", "cap").is_err());
}
