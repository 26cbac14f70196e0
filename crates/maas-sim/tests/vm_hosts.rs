//! VM hosts (MAAS 3.x pods): register, update, compose with overcommit, composed machines'
//! lifecycle (deleted on release), `register_vmhost` on deploy, and a MAAS without VM hosts.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use common::{TestSim, expect_answer, plaintext_header, sent, start, status_text};
use maas_sim::{ApiKey, NodeStatus, SimConfig, Timings, VmHostEventKind, VmHostSpec};
use reqwest::Method;
use serde_json::Value;

async fn instant_with_users(machines: usize) -> (TestSim, ApiKey) {
    let admin = ApiKey::parse("admin", true, "adminck:admintk:adminsecret").unwrap();
    let alice = ApiKey::parse("alice", false, "aliceck:alicetk:alicesecret").unwrap();
    let t = start(SimConfig {
        machines,
        api_keys: vec![admin, alice.clone()],
        ..SimConfig::instant()
    })
    .await;
    (t, alice)
}

fn small_host(name: &str) -> VmHostSpec {
    VmHostSpec {
        name: name.to_owned(),
        cores: 4,
        memory: 8192,
        local_storage: 100_000_000_000,
        ..VmHostSpec::default()
    }
}

/// Composes a machine on VM host `vm_host` with `params`; its system id.
async fn compose(t: &TestSim, vm_host: u64, params: &[(&str, &str)]) -> String {
    let composed = t
        .post_json(&format!("vm-hosts/{vm_host}/?op=compose"), params)
        .await;
    composed["system_id"].as_str().unwrap().to_owned()
}

fn events(t: &TestSim, kind: VmHostEventKind) -> usize {
    t.sim
        .state()
        .vm_host_events()
        .iter()
        .filter(|e| e.kind == kind)
        .count()
}

#[tokio::test]
async fn register_list_read_update_delete() {
    let (t, alice) = instant_with_users(1).await;
    let created = t
        .post_json(
            "vm-hosts/",
            &[
                ("type", "lxd"),
                ("power_address", "10.0.0.9:8443"),
                ("name", "lxd1"),
                ("tags", "a,b"),
            ],
        )
        .await;
    assert_eq!(created["type"], "lxd");
    assert_eq!(created["name"], "lxd1");
    assert_eq!(created["zone"]["name"], "default");
    assert_eq!(created["pool"]["name"], "default");
    assert_eq!(created["host"], Value::Null);
    assert_eq!(created["total"]["cores"], 16);
    assert_eq!(created["used"]["cores"], 0);
    assert_eq!(created["available"]["memory"], 65_536);
    assert_eq!(created["tags"], serde_json::json!(["a", "b"]));
    let id = created["id"].as_u64().unwrap();
    assert_eq!(
        created["resource_uri"],
        format!("/MAAS/api/2.0/vm-hosts/{id}/")
    );
    // The pre-2.9 name of the same collection.
    let pods = t.get_json("pods/").await;
    assert_eq!(pods.as_array().unwrap().len(), 1);
    let updated = t
        .json(
            Method::PUT,
            &format!("vm-hosts/{id}/"),
            &[("cpu_over_commit_ratio", "2.5"), ("name", "lxd-one")],
        )
        .await;
    assert_eq!(updated["cpu_over_commit_ratio"], 2.5);
    assert_eq!(updated["available"]["cores"], 40);
    assert_eq!(updated["name"], "lxd-one");
    let (status, body) = status_text(
        t.call(
            Method::PUT,
            &format!("vm-hosts/{id}/"),
            &[("memory_over_commit_ratio", "11")],
        )
        .await,
    )
    .await;
    assert_eq!(
        (status, body.as_str()),
        (
            400,
            r#"{"memory_over_commit_ratio":["Ensure this value is less than or equal to 10."]}"#
        )
    );
    t.expect_post(
        "vm-hosts/",
        &[("type", "docker"), ("power_address", "x")],
        (
            400,
            r#"{"type":["Select a valid choice. docker is not one of the available choices."]}"#,
        ),
    )
    .await;
    t.expect(
        Method::GET,
        "vm-hosts/999999/",
        &[],
        (404, "No Pod matches the given query."),
    )
    .await;

    let as_alice = |method: Method, path: &str| {
        t.client
            .request(method, t.api(path))
            .header("Authorization", plaintext_header(&alice.credential()))
    };
    let listed: Value = sent(as_alice(Method::GET, "vm-hosts/"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1);
    let resp = sent(
        as_alice(Method::POST, "vm-hosts/")
            .form(&[("type", "lxd"), ("power_address", "10.0.0.10:8443")]),
    )
    .await;
    expect_answer(resp, (403, "This method is reserved for admin users.")).await;
    let resp = sent(as_alice(
        Method::POST,
        &format!("vm-hosts/{id}/?op=compose"),
    ))
    .await;
    assert_eq!(status_text(resp).await, (403, String::new()));
    let resp = sent(as_alice(Method::DELETE, &format!("vm-hosts/{id}/"))).await;
    assert_eq!(status_text(resp).await, (403, String::new()));

    assert_eq!(
        t.call(Method::DELETE, &format!("vm-hosts/{id}/"), &[])
            .await
            .status(),
        204
    );
    assert_eq!(t.get(&format!("vm-hosts/{id}/"), &[]).await.status(), 404);
    assert_eq!(events(&t, VmHostEventKind::Registered), 1);
    assert_eq!(events(&t, VmHostEventKind::Updated), 1);
    assert_eq!(events(&t, VmHostEventKind::Deleted), 1);
    let applied = t.sim.state().applied_counts();
    assert_eq!(common::count(&applied, "vm-hosts.create"), 1);
    assert_eq!(common::count(&applied, "vm-host.update"), 1);
}

#[tokio::test]
async fn compose_accounts_resources_with_overcommit() {
    let (t, _) = instant_with_users(1).await;
    let id = t.sim.state().add_vm_host(small_host("small")).unwrap();
    let path = format!("vm-hosts/{id}/?op=compose");
    let composed = t
        .post_json(
            &path,
            &[
                ("hostname", "vm-a"),
                ("cores", "3"),
                ("memory", "4096"),
                ("storage", "0:20(default)"),
            ],
        )
        .await;
    let system_id = composed["system_id"].as_str().unwrap().to_owned();
    assert_eq!(
        composed["resource_uri"],
        format!("/MAAS/api/2.0/machines/{system_id}/")
    );
    let m = t.machine_read(&system_id, None).await;
    assert_eq!(m["hostname"], "vm-a");
    assert_eq!(m["status_name"], "Ready");
    assert_eq!(m["cpu_count"], 3);
    assert_eq!(m["memory"], 4096);
    assert_eq!(m["storage"], 20_000.0);
    assert_eq!(m["power_type"], "lxd");
    assert_eq!(m["pod"]["id"], id);
    assert_eq!(m["pod"]["name"], "small");
    assert_eq!(m["parent"], Value::Null);
    let host = t.get_json(&format!("vm-hosts/{id}/")).await;
    assert_eq!(host["used"]["cores"], 3);
    assert_eq!(host["used"]["memory"], 4096);
    assert_eq!(host["used"]["local_storage"], 20_000_000_000u64);
    assert_eq!(host["available"]["cores"], 1);

    t.expect_post(
        &path,
        &[("cores", "2")],
        (
            503,
            "Unable to compose KVM instance in 'small'. CPU overcommit ratio is 1.0 and there are 1 available resources; 2 requested.",
        ),
    )
    .await;
    t.expect_post(
        &path,
        &[("cores", "1"), ("memory", "8192")],
        (
            503,
            "Unable to compose KVM instance in 'small'. Memory overcommit ratio is 1.0 and there are 4096 available resources; 8192 requested.",
        ),
    )
    .await;
    t.json(
        Method::PUT,
        &format!("vm-hosts/{id}/"),
        &[("cpu_over_commit_ratio", "2")],
    )
    .await;
    t.post_json(&path, &[("cores", "2"), ("storage", "10")])
        .await;
    assert_eq!(events(&t, VmHostEventKind::Composed), 2);
    assert_eq!(
        common::count(&t.sim.state().applied_counts(), "vm-host.compose"),
        2
    );
    // Composed machines are machines, listed and filtered by their VM host.
    let on_pod = t.get("machines/", &[("pod", "small")]).await;
    assert_eq!(
        on_pod
            .json::<Value>()
            .await
            .unwrap()
            .as_array()
            .unwrap()
            .len(),
        2
    );
    t.expect_post(
        &path,
        &[("hostname", "vm-a")],
        (
            400,
            r#"{"hostname":["Node with hostname \"vm-a\" already exists."]}"#,
        ),
    )
    .await;
    t.expect_post(
        &path,
        &[("storage", "0:5(fast)")],
        (400, r#"{"storage":["Unknown storage pool 'fast'."]}"#),
    )
    .await;
}

#[tokio::test]
async fn a_composed_machine_is_deleted_on_release() {
    let (t, _) = instant_with_users(1).await;
    let id = t.sim.state().add_vm_host(small_host("h")).unwrap();
    let system_id = compose(&t, id, &[("cores", "2")]).await;
    let allocated = t.allocate(&[("system_id", &system_id)]).await;
    assert_eq!(allocated, system_id);
    let deployed = t.machine_op(&system_id, "deploy", &[]).await;
    assert_eq!(deployed["status_name"], "Deploying");
    assert_eq!(t.status_of(&system_id), NodeStatus::Deployed);
    t.machine_op(&system_id, "release", &[]).await;
    t.expect(
        Method::GET,
        &format!("machines/{system_id}/"),
        &[],
        (404, "No Machine matches the given query."),
    )
    .await;
    let host = t.get_json(&format!("vm-hosts/{id}/")).await;
    assert_eq!(host["used"]["cores"], 0);
    assert_eq!(events(&t, VmHostEventKind::Decomposed), 1);
}

#[tokio::test]
async fn deleting_a_composed_machine_gives_its_resources_back() {
    let (t, alice) = instant_with_users(1).await;
    let id = t.sim.state().add_vm_host(small_host("h")).unwrap();
    let system_id = compose(&t, id, &[("cores", "2"), ("memory", "2048")]).await;
    let path = format!("machines/{system_id}/");
    // As MAAS's get_node_or_404 with the admin permission: 404 first, then 403 without a body.
    let resp = sent(
        t.client
            .request(Method::DELETE, t.api(&path))
            .header("Authorization", plaintext_header(&alice.credential())),
    )
    .await;
    assert_eq!(status_text(resp).await, (403, String::new()));
    t.expect(
        Method::DELETE,
        "machines/nosuch/",
        &[],
        (404, "No Machine matches the given query."),
    )
    .await;
    assert_eq!(
        t.get_json(&format!("vm-hosts/{id}/")).await["used"]["cores"],
        2
    );
    assert_eq!(t.call(Method::DELETE, &path, &[]).await.status(), 204);
    assert_eq!(t.get(&path, &[]).await.status(), 404);
    let host = t.get_json(&format!("vm-hosts/{id}/")).await;
    assert_eq!(host["used"]["cores"], 0);
    assert_eq!(host["used"]["memory"], 0);
    assert_eq!(host["used"]["local_storage"], 0);
    assert_eq!(events(&t, VmHostEventKind::Decomposed), 1);
    assert_eq!(
        common::count(&t.sim.state().applied_counts(), "machine.delete"),
        1
    );
}

#[tokio::test]
async fn composed_machines_commission_with_the_configured_time() {
    let t = start(SimConfig {
        machines: 1,
        timings: Timings {
            commission: Duration::from_millis(300),
            ..Timings::zero()
        },
        ..SimConfig::default()
    })
    .await;
    let id = t.sim.state().add_vm_host(small_host("h")).unwrap();
    let system_id = compose(&t, id, &[]).await;
    assert_eq!(t.status_of(&system_id), NodeStatus::Commissioning);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(t.status_of(&system_id), NodeStatus::Ready);
    let history = t.sim.state().status_history();
    let statuses: Vec<NodeStatus> = history[&system_id].iter().map(|c| c.status).collect();
    assert_eq!(statuses, [NodeStatus::Commissioning, NodeStatus::Ready]);
}

#[tokio::test]
async fn deploying_with_register_vmhost_registers_an_lxd_host() {
    let (t, alice) = instant_with_users(2).await;
    let ids = t.machine_ids();
    let host_id = ids[0].clone();
    let machine = t.sim.state().machine(&host_id).unwrap();

    t.expect_post(
        &format!("machines/{host_id}/?op=deploy"),
        &[("register_vmhost", "true"), ("ephemeral_deploy", "true")],
        (
            400,
            "A machine can not be a VM host if it is deployed to memory.",
        ),
    )
    .await;
    assert_eq!(t.status_of(&host_id), NodeStatus::Ready);
    let resp = sent(
        t.client
            .post(t.api(&format!("machines/{}/?op=deploy", ids[1])))
            .header("Authorization", plaintext_header(&alice.credential()))
            .form(&[("register_vmhost", "true")]),
    )
    .await;
    assert_eq!(status_text(resp).await, (403, String::new()));

    t.machine_op(&host_id, "deploy", &[("register_vmhost", "true")])
        .await;
    assert_eq!(t.status_of(&host_id), NodeStatus::Deployed);
    let hosts = t.get_json("vm-hosts/").await;
    let hosts = hosts.as_array().unwrap();
    assert_eq!(hosts.len(), 1);
    let host = &hosts[0];
    assert_eq!(host["type"], "lxd");
    assert_eq!(host["name"], machine.hostname.as_str());
    assert_eq!(host["host"]["system_id"], host_id.as_str());
    assert_eq!(host["total"]["cores"], machine.cpu_count);
    assert_eq!(host["total"]["memory"], machine.memory);
    assert_eq!(host["zone"]["name"], machine.zone.as_str());
    assert_eq!(host["pool"]["name"], machine.pool.as_str());
    let vm_host_id = host["id"].as_u64().unwrap();

    let vm = compose(&t, vm_host_id, &[("cores", "1")]).await;
    let read = t.machine_read(&vm, None).await;
    assert_eq!(read["parent"]["system_id"], host_id.as_str());

    // Releasing the host tears the VM host down: refused while it has VMs, unless forced.
    let (status, body) = status_text(t.machine_post(&host_id, "release", &[]).await).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("force=true"), "{body}");
    assert_eq!(t.status_of(&host_id), NodeStatus::Deployed);
    t.machine_op(&host_id, "release", &[("force", "true")])
        .await;
    assert_eq!(t.status_of(&host_id), NodeStatus::Ready);
    assert_eq!(t.get(&format!("machines/{vm}/"), &[]).await.status(), 404);
    assert!(t.get_json("vm-hosts/").await.as_array().unwrap().is_empty());
    assert_eq!(events(&t, VmHostEventKind::Registered), 1);
    assert_eq!(events(&t, VmHostEventKind::Deleted), 1);
}

#[tokio::test]
async fn deleting_a_vm_host_keeps_its_machines_unless_decompose() {
    let (t, _) = instant_with_users(1).await;
    let state = t.sim.state();
    let a = state.add_vm_host(small_host("a")).unwrap();
    let b = state.add_vm_host(small_host("b")).unwrap();
    let vm_a = &compose(&t, a, &[]).await;
    let vm_b = &compose(&t, b, &[]).await;
    assert_eq!(
        t.call(Method::DELETE, &format!("vm-hosts/{a}/"), &[])
            .await
            .status(),
        204
    );
    assert_eq!(t.machine_read(vm_a, None).await["pod"], Value::Null);
    assert_eq!(
        t.call(
            Method::DELETE,
            &format!("vm-hosts/{b}/"),
            &[("decompose", "true")]
        )
        .await
        .status(),
        204
    );
    assert_eq!(t.get(&format!("machines/{vm_b}/"), &[]).await.status(), 404);
}

#[tokio::test]
async fn control_api_creates_and_lists_vm_hosts() {
    let (t, _) = instant_with_users(1).await;
    let resp = sent(
        t.client
            .post(t.control("vm-hosts"))
            .json(&serde_json::json!({"name": "c1", "cores": 8, "memory": 16384})),
    )
    .await;
    assert_eq!(resp.status(), 200);
    let id = resp.json::<Value>().await.unwrap()["id"].as_u64().unwrap();
    let listed = t.control_json("vm-hosts").await;
    assert_eq!(listed[0]["id"], id);
    assert_eq!(listed[0]["cores"], 8);
    let resp = sent(
        t.client
            .post(t.control("vm-hosts"))
            .json(&serde_json::json!({"name": "c1"})),
    )
    .await;
    assert_eq!(resp.status(), 400);
    let events = t.control_json("vm-host-events").await;
    assert_eq!(events[0]["kind"], "registered");
}

#[tokio::test]
async fn a_maas_without_vm_hosts_answers_like_4_0() {
    let t = start(SimConfig {
        machines: 1,
        vm_hosts: false,
        ..SimConfig::instant()
    })
    .await;
    t.expect(
        Method::GET,
        "vm-hosts/",
        &[],
        (404, "Unknown API endpoint: /MAAS/api/2.0/vm-hosts/."),
    )
    .await;
    t.expect(
        Method::GET,
        "pods/",
        &[],
        (404, "Unknown API endpoint: /MAAS/api/2.0/pods/."),
    )
    .await;
    let id = t.first_id();
    for param in ["register_vmhost", "install_kvm"] {
        t.expect_post(
            &format!("machines/{id}/?op=deploy"),
            &[(param, "false")],
            (
                400,
                "Support for install_kvm allocation parameter has been removed.",
            ),
        )
        .await;
    }
    assert_eq!(t.status_of(&id), NodeStatus::Ready);
    t.expect_post(
        "machines/?op=allocate",
        &[("pod", "x")],
        (400, r#"{"pod":["No such constraint."]}"#),
    )
    .await;
    let m = t.machine_read(&id, None).await;
    assert!(m.get("pod").is_none());
    let describe: Value = t
        .client
        .get(t.api("describe/"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let names: Vec<&str> = describe["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"MachinesHandler"));
    assert!(
        !names
            .iter()
            .any(|n| n.contains("VmHost") || n.contains("Pod"))
    );
}
