//! Machine lifecycle over HTTP: allocate, deploy, release, power, abort, broken, owner data.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::many_single_char_names)]

mod common;

use std::time::Duration;

use base64::Engine as _;
use common::{json_with_status, start, start_instant, start_timed, status_text};
use maas_sim::{NodeStatus, PowerState, SimConfig, Timings};
use reqwest::Method;

#[tokio::test]
async fn deploy_and_release_with_zero_durations() {
    let t = start_instant(3).await;
    let id = t
        .allocate(&[("agent_name", "capi-1"), ("comment", "for c1")])
        .await;
    let view = t.sim.state().machine(&id).unwrap();
    assert_eq!(
        (view.status, view.owner.as_deref(), view.agent_name.as_str()),
        (NodeStatus::Allocated, Some("admin"), "capi-1")
    );
    let user_data =
        base64::engine::general_purpose::STANDARD.encode(b"#cloud-config\nhostname: x\n");
    let m = t
        .machine_op(
            &id,
            "deploy",
            &[
                ("distro_series", "ubuntu/jammy"),
                ("user_data", &user_data),
                ("hwe_kernel", "hwe-22.04"),
            ],
        )
        .await;
    // The response itself shows Deploying; the next read shows Deployed.
    assert_eq!(m["status"], 9);
    let m = t.machine_read(&id, None).await;
    assert_eq!(
        (
            m["status"].as_u64(),
            m["status_name"].as_str(),
            m["power_state"].as_str()
        ),
        (Some(6), Some("Deployed"), Some("on"))
    );
    assert_eq!(
        (m["osystem"].as_str(), m["distro_series"].as_str()),
        (Some("ubuntu"), Some("jammy"))
    );
    assert!(!m["ip_addresses"].as_array().unwrap().is_empty());
    let view = t.sim.state().machine(&id).unwrap();
    assert_eq!(
        view.user_data.as_deref(),
        Some(&b"#cloud-config\nhostname: x\n"[..])
    );
    assert_eq!(view.hwe_kernel.as_deref(), Some("hwe-22.04"));

    t.machine_op(&id, "set_owner_data", &[("cluster", "c1"), ("role", "cp")])
        .await;
    let m = t
        .machine_op(&id, "set_workload_annotations", &[("role", "")])
        .await;
    assert_eq!(
        m["workload_annotations"],
        serde_json::json!({"cluster": "c1"})
    );

    let m = t.machine_op(&id, "release", &[("comment", "bye")]).await;
    assert_eq!(m["status_name"], "Ready");
    let view = t.sim.state().machine(&id).unwrap();
    assert!(
        view.owner.is_none()
            && view.agent_name.is_empty()
            && view.owner_data.is_empty()
            && view.user_data.is_none()
    );
    assert_eq!(view.power_state, PowerState::Off);
    // Release is idempotent on Ready.
    let m = t.machine_op(&id, "release", &[]).await;
    assert_eq!(m["status"], 4);
}

#[tokio::test]
async fn deploy_on_ready_allocates_implicitly_and_bad_image_rolls_back() {
    let t = start_instant(1).await;
    let id = t.first_id();
    let resp = t
        .machine_post(&id, "deploy", &[("distro_series", "plan9")])
        .await;
    let v = json_with_status(resp, 400).await;
    assert!(
        v["distro_series"][0]
            .as_str()
            .unwrap()
            .starts_with("'plan9' is not a valid distro_series.")
    );
    assert_eq!(t.status_of(&id), NodeStatus::Ready);
    let m = t
        .machine_op(
            &id,
            "deploy",
            &[("distro_series", "u-2204-0-k-1330-0"), ("agent_name", "a")],
        )
        .await;
    assert_eq!(m["owner"], "admin");
    let view = t.sim.state().machine(&id).unwrap();
    assert_eq!(
        (
            view.osystem.as_str(),
            view.distro_series.as_str(),
            view.agent_name.as_str()
        ),
        ("custom", "u-2204-0-k-1330-0", "a")
    );
}

#[tokio::test]
async fn timed_transitions_show_intermediate_states() {
    let timings = Timings {
        deploy: Duration::from_millis(400),
        deploy_spread_percent: 0,
        release: Duration::from_millis(300),
        erase: Duration::from_millis(300),
        commission: Duration::from_millis(100),
        power: Duration::from_millis(100),
    };
    let t = start_timed(2, timings).await;
    let id = t.deployed(&[]).await;
    let m = t.machine_read(&id, None).await;
    assert_eq!(m["status"], 9);
    assert!(m["status_message"].as_str().is_some());
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(t.status_of(&id), NodeStatus::Deployed);
    let m = t.machine_op(&id, "release", &[("erase", "true")]).await;
    assert_eq!(m["status_name"], "Disk erasing");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(t.status_of(&id), NodeStatus::Ready);
    // A powered-on deployed machine releases through Releasing.
    let id = t.deployed(&[]).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let m = t.machine_op(&id, "release", &[]).await;
    assert_eq!(m["status_name"], "Releasing");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(t.status_of(&id), NodeStatus::Ready);
}

#[tokio::test]
async fn the_status_history_dates_allocation_deployment_and_its_end() {
    let timings = Timings {
        deploy: Duration::from_millis(300),
        deploy_spread_percent: 50,
        ..Timings::zero()
    };
    let t = start_timed(3, timings).await;
    let id = t.deployed(&[]).await;
    // A deploy of a Ready machine allocates it in the same call: the allocation still shows.
    let direct = t.first_in(NodeStatus::Ready);
    t.machine_op(&direct, "deploy", &[]).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    let history = t.sim.state().status_history();
    for system_id in [&id, &direct] {
        let changes = &history[system_id];
        let statuses: Vec<NodeStatus> = changes.iter().map(|c| c.status).collect();
        assert_eq!(
            statuses,
            [
                NodeStatus::Allocated,
                NodeStatus::Deploying,
                NodeStatus::Deployed
            ]
        );
        // Deployed is dated when it was due, with this machine's share of the spread.
        assert_eq!(
            (changes[2].at - changes[1].at).as_millis(),
            timings.deploy_for(1, system_id).as_millis()
        );
    }
    let untouched = history
        .iter()
        .filter(|(_, changes)| changes.is_empty())
        .count();
    assert_eq!(untouched, 1);
}

#[tokio::test]
async fn abort_power_and_broken() {
    let timings = Timings {
        deploy: Duration::from_secs(60),
        ..Timings::zero()
    };
    let t = start_timed(2, timings).await;
    let id = t.deployed(&[]).await;
    let m = t.machine_op(&id, "abort", &[]).await;
    assert_eq!(
        (m["status_name"].as_str(), m["power_state"].as_str()),
        (Some("Allocated"), Some("off"))
    );
    // power_on on Allocated is a deploy.
    let m = t.machine_op(&id, "power_on", &[]).await;
    assert_eq!(m["status"], 9);
    let state = t.machine_read(&id, Some("query_power_state")).await;
    assert_eq!(state, serde_json::json!({"state": "on"}));
    t.machine_op(&id, "power_off", &[("stop_mode", "soft")])
        .await;
    assert_eq!(
        t.sim.state().machine(&id).unwrap().power_state,
        PowerState::Off
    );

    let other = t
        .sim
        .state()
        .machines()
        .into_iter()
        .find(|m| m.system_id != id)
        .unwrap()
        .system_id;
    t.expect_post(
        &format!("machines/{other}/?op=power_on"),
        &[],
        (409, "Can't start node: it hasn't been allocated."),
    )
    .await;

    let m = t
        .machine_op(&id, "mark_broken", &[("comment", "disk smoke")])
        .await;
    assert_eq!(
        (m["status"].as_u64(), m["error_description"].as_str()),
        (Some(8), Some("disk smoke"))
    );
    let m = t.machine_op(&id, "mark_fixed", &[]).await;
    assert_eq!(m["status_name"], "Ready");
    let (s, _) = status_text(t.machine_post(&id, "release", &[]).await).await;
    assert_eq!(s, 200);
    t.expect_post(
        &format!("machines/{id}/?op=set_owner_data"),
        &[("a", "b")],
        (
            409,
            "Cannot set workload annotation: it hasn't been acquired.",
        ),
    )
    .await;
}

#[tokio::test]
async fn list_filters_server_side() {
    let t = start(SimConfig {
        machines: 6,
        zones: vec!["z1".into(), "z2".into()],
        ..SimConfig::instant()
    })
    .await;
    let id = t.allocate(&[("agent_name", "install-1")]).await;
    let v = t
        .json(Method::GET, "machines/", &[("agent_name", "install-1")])
        .await;
    assert_eq!(v.as_array().unwrap().len(), 1);
    assert_eq!(v[0]["system_id"], id.as_str());
    let v = t
        .json(Method::GET, "machines/", &[("status", "ready")])
        .await;
    assert_eq!(v.as_array().unwrap().len(), 5);
    let v = t.json(Method::GET, "machines/", &[("zone", "z1")]).await;
    assert!(
        v.as_array()
            .unwrap()
            .iter()
            .all(|m| m["zone"]["name"] == "z1")
    );
    let v = t
        .json(Method::GET, "machines/", &[("id", &id), ("id", "nope")])
        .await;
    assert_eq!(v.as_array().unwrap().len(), 1);
    t.expect(
        Method::GET,
        "machines/",
        &[("colour", "red")],
        (400, r#"{"colour":["No such constraint."]}"#),
    )
    .await;
    let v = t.get_json("machines/?op=list_allocated").await;
    assert_eq!(v.as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn hostname_update_and_delete_are_admin_operations() {
    let t = start_instant(2).await;
    let machines = t.sim.state().machines();
    let (a, b) = (&machines[0], &machines[1]);
    let m = t
        .json(
            Method::PUT,
            &format!("machines/{}/", a.system_id),
            &[("hostname", "cp-0")],
        )
        .await;
    assert_eq!(m["fqdn"], "cp-0.maas");
    t.expect(
        Method::PUT,
        &format!("machines/{}/", b.system_id),
        &[("hostname", "cp-0")],
        (
            400,
            r#"{"hostname":["Node with hostname \"cp-0\" already exists"]}"#,
        ),
    )
    .await;
    let (s, _) = status_text(
        t.call(Method::DELETE, &format!("machines/{}/", b.system_id), &[])
            .await,
    )
    .await;
    assert_eq!(s, 204);
    assert_eq!(t.sim.state().machines().len(), 1);
}
