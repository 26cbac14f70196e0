use std::time::Duration;

use serde_json::json;

use super::*;

fn at(base: Instant, ms: u64) -> Instant {
    base + Duration::from_millis(ms)
}

/// One machine `m-0` → MaasMachine `mm-0` → host `h-0` (system id `abc`, hostname `node-a`)
/// through every step, each 100 ms after the one before, and the simulator's history.
fn one_machine(base: Instant) -> (Recorder, SimView) {
    let mut r = Recorder::default();
    let machine = |phase: &str, node: bool| {
        let mut data = json!({
            "spec": {"infrastructureRef": {"name": "mm-0"}},
            "status": {"phase": phase}
        });
        if node {
            data["spec"]["providerID"] = json!("maas:///z1/abc");
            data["status"]["nodeRef"] = json!({"name": "node-a"});
        }
        data
    };
    r.observe(
        Kind::Machine,
        "m-0",
        &machine("Pending", false),
        at(base, 0),
    );
    r.observe(
        Kind::MaasMachine,
        "mm-0",
        &json!({"spec": {}}),
        at(base, 100),
    );
    r.observe(
        Kind::Host,
        "h-0",
        &json!({"spec": {"systemID": "abc"}}),
        at(base, 150),
    );
    let claimed = json!({"spec": {"systemID": "abc", "consumerRef": {"name": "mm-0"}}});
    r.observe(Kind::Host, "h-0", &claimed, at(base, 200));
    let mut provisioning = claimed.clone();
    provisioning["spec"]["provisioning"] = json!({"image": "ubuntu/jammy"});
    r.observe(Kind::Host, "h-0", &provisioning, at(base, 300));
    // The same state again is no new mark.
    r.observe(Kind::Host, "h-0", &provisioning, at(base, 350));
    let mut deployed = provisioning.clone();
    deployed["status"] = json!({"provisioningState": "Deployed"});
    r.observe(Kind::Host, "h-0", &deployed, at(base, 700));
    r.observe(Kind::Node, "node-a", &json!({"spec": {}}), at(base, 750));
    r.observe(
        Kind::MaasMachine,
        "mm-0",
        &json!({"spec": {"providerID": "maas:///z1/abc", "systemID": "abc"}}),
        at(base, 800),
    );
    r.observe(
        Kind::MaasMachine,
        "mm-0",
        &json!({"spec": {"providerID": "maas:///z1/abc"}, "status": {"initialization": {"provisioned": true}}}),
        at(base, 900),
    );
    r.observe(
        Kind::Node,
        "node-a",
        &json!({"spec": {"providerID": "maas:///z1/abc"}}),
        at(base, 950),
    );
    r.observe(
        Kind::Machine,
        "m-0",
        &machine("Provisioned", false),
        at(base, 1000),
    );
    r.observe(
        Kind::Machine,
        "m-0",
        &machine("Running", true),
        at(base, 1100),
    );
    r.observe(
        Kind::Machine,
        "m-0",
        &machine("Running", true),
        at(base, 1500),
    );
    let change = |status, ms| StatusChange {
        status,
        at: at(base, ms),
    };
    let sim = SimView {
        changes: BTreeMap::from([(
            "abc".to_owned(),
            vec![
                change(NodeStatus::Allocated, 400),
                change(NodeStatus::Deploying, 500),
                change(NodeStatus::Deployed, 600),
            ],
        )]),
        hostnames: BTreeMap::from([("abc".to_owned(), "node-a".to_owned())]),
    };
    (r, sim)
}

#[test]
fn every_step_is_dated_and_joined_to_its_machine() {
    let base = Instant::now();
    let (recorder, sim) = one_machine(base);
    assert_eq!(recorder.running(), 1);
    assert_eq!(recorder.last_running(), Some(at(base, 1100)));
    let joined = join(&recorder, &sim, base);
    assert_eq!(joined.len(), 1);
    let ms: Vec<Option<u64>> = joined[0]
        .iter()
        .map(|m| m.map(|t| u64::try_from((t - base).as_millis()).unwrap()))
        .collect();
    assert_eq!(
        ms,
        [
            Some(0),
            Some(100),
            Some(200),
            Some(300),
            Some(400),
            Some(500),
            Some(600),
            Some(700),
            Some(800),
            Some(900),
            Some(750),
            Some(1100),
        ]
    );
    let summary = summarize(&joined, at(base, 0));
    assert_eq!(summary.machines, 1);
    assert_eq!(summary.rows.len(), Milestone::ALL.len());
    let row = |m: Milestone| summary.rows.iter().find(|r| r.milestone == m).unwrap();
    assert_eq!(
        row(Milestone::MachineRunning).since_created,
        Some((1.1, 1.1))
    );
    assert_eq!(
        row(Milestone::MaasMachineCreated).since_declared,
        Some((0.1, 0.1))
    );
    // The Node came before the MaasMachine was ready: its hop from the previous step is
    // negative, and the next step counts from it.
    assert_eq!(row(Milestone::NodeCreated).hop, Some((-0.15, -0.15)));
    assert_eq!(row(Milestone::MachineRunning).hop, Some((0.35, 0.35)));
    assert_eq!(row(Milestone::MachineCreated).hop, None);
    assert_eq!(summary.deployed_to_running, [0.5]);
}

#[test]
fn the_null_provider_has_no_maas_steps_and_deleted_machines_are_not_running() {
    let base = Instant::now();
    let mut r = Recorder::default();
    let running = json!({
        "spec": {"infrastructureRef": {"name": "mm-1"}, "providerID": "maas:///null/mm-1"},
        "status": {"phase": "Running", "nodeRef": {"name": "mm-1"}}
    });
    r.observe(
        Kind::MaasMachine,
        "mm-1",
        &json!({"spec": {"providerID": "maas:///null/mm-1"}, "status": {"ready": true}}),
        at(base, 10),
    );
    r.observe(
        Kind::Node,
        "mm-1",
        &json!({"spec": {"providerID": "maas:///null/mm-1"}}),
        at(base, 20),
    );
    r.observe(Kind::Machine, "m-1", &running, at(base, 30));
    assert_eq!(r.running(), 1);
    let summary = summarize(&join(&r, &SimView::default(), base), base);
    let seen: Vec<Milestone> = summary.rows.iter().map(|r| r.milestone).collect();
    assert_eq!(
        seen,
        [
            Milestone::MachineCreated,
            Milestone::MaasMachineCreated,
            Milestone::ProviderId,
            Milestone::MaasMachineReady,
            Milestone::NodeCreated,
            Milestone::MachineRunning,
        ]
    );
    assert!(summary.deployed_to_running.is_empty());
    r.forget(Kind::Machine, "m-1", at(base, 40));
    assert_eq!(r.running(), 0);
}

#[test]
fn a_host_claimed_again_starts_a_new_timeline() {
    let base = Instant::now();
    let mut r = Recorder::default();
    let claim = |consumer: &str| json!({"spec": {"systemID": "abc", "consumerRef": {"name": consumer}, "provisioning": {}}});
    r.observe(Kind::Host, "h-0", &claim("mm-old"), at(base, 0));
    r.observe(Kind::Host, "h-0", &claim("mm-new"), at(base, 500));
    let host = &r.hosts["h-0"];
    assert_eq!(host.consumer.as_deref(), Some("mm-new"));
    assert_eq!(host.claimed, Some(at(base, 500)));
    assert_eq!(host.provisioning, Some(at(base, 500)));
    assert_eq!(host.system_id.as_deref(), Some("abc"));
}

#[test]
fn a_node_deleted_and_created_again_is_dated_by_its_new_creation() {
    let base = Instant::now();
    let mut r = Recorder::default();
    let node = json!({"spec": {"providerID": "maas:///z1/abc"}});
    r.observe(Kind::Node, "node-a", &node, at(base, 0));
    r.forget(Kind::Node, "node-a", at(base, 100));
    assert!(!r.nodes.contains_key("node-a"));
    r.observe(Kind::Node, "node-a", &node, at(base, 900));
    assert_eq!(r.nodes["node-a"].created, at(base, 900));
}

#[test]
fn the_system_id_is_the_last_segment_of_the_provider_id() {
    assert_eq!(system_id_of("maas:///z1/abc123").as_deref(), Some("abc123"));
    assert_eq!(system_id_of("maas:///abc123").as_deref(), Some("abc123"));
    assert_eq!(system_id_of("maas:///z1/"), None);
}
