//! Unit tests of the declared objects.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

#[test]
fn the_story_cluster_has_every_object() {
    let spec = ClusterSpec::story("ns");
    let objects = spec.objects();
    let kinds: Vec<&str> = objects.iter().filter_map(|o| o["kind"].as_str()).collect();
    assert_eq!(kinds.iter().filter(|k| **k == "Machine").count(), 3);
    assert_eq!(kinds.iter().filter(|k| **k == "MaasMachine").count(), 3);
    assert!(kinds.contains(&"MachineDeployment") && kinds.contains(&"MaasInventory"));
    let zones: Vec<&str> = objects
        .iter()
        .filter(|o| o["kind"] == "Machine")
        .filter_map(|o| o["spec"]["failureDomain"].as_str())
        .collect();
    assert_eq!(zones, ["z1", "z2", "z3"]);
    assert_eq!(
        spec.worker_template_name("ubuntu/noble"),
        "story-workers-ubuntu-noble"
    );
    assert!(objects.iter().all(|o| o["spec"]["releasePolicy"].is_null()
        && o["spec"]["template"]["spec"]["releasePolicy"].is_null()));
}

#[test]
fn worker_addresses_add_a_pool_and_a_data_template_the_workers_use() {
    let mut spec = ClusterSpec::story("ns");
    spec.worker_addresses = Some(WorkerAddresses::in_default_subnet(5));
    let objects = spec.objects();
    let pool = objects.iter().find(|o| o["kind"] == "MaasIPPool").unwrap();
    assert_eq!(
        pool["spec"]["pools"],
        json!([{"start": "10.20.200.10", "end": "10.20.200.14"}])
    );
    let template = objects
        .iter()
        .find(|o| o["kind"] == "MaasMachineTemplate")
        .unwrap();
    assert_eq!(
        template["spec"]["template"]["spec"]["dataTemplate"],
        json!({"name": "story-workers"})
    );
    let kinds: Vec<&str> = objects.iter().filter_map(|o| o["kind"].as_str()).collect();
    let position = |kind: &str| kinds.iter().position(|k| *k == kind).unwrap();
    assert!(position("MaasDataTemplate") < position("MaasMachineTemplate"));
    assert!(
        objects
            .iter()
            .filter(|o| o["kind"] == "MaasMachine")
            .all(|m| m["spec"]["dataTemplate"].is_null()),
        "control-plane machines keep MAAS's addresses"
    );
}

#[test]
fn dual_stack_adds_an_ipv6_pool_and_network_and_a_control_plane_template() {
    let mut spec = ClusterSpec::story("ns");
    spec.worker_addresses = Some(WorkerAddresses::in_default_subnet(8));
    spec.ipv6_addresses = Some(WorkerAddresses::ipv6(8));
    spec.control_plane_addresses = true;
    spec.dns_published_subnets = vec!["10.20.0.0/16".into(), "fd00:20::/64".into()];
    let objects = spec.objects();
    let pools: Vec<&Value> = objects
        .iter()
        .filter(|o| o["kind"] == "MaasIPPool")
        .collect();
    assert_eq!(pools.len(), 2);
    assert_eq!(
        pools[1]["spec"]["pools"],
        json!([{"start": "fd00:20::10", "end": "fd00:20::17"}])
    );
    let templates: Vec<&Value> = objects
        .iter()
        .filter(|o| o["kind"] == "MaasDataTemplate")
        .collect();
    assert_eq!(templates.len(), 2);
    for template in &templates {
        let networks = &template["spec"]["networkData"]["networks"];
        assert_eq!(
            networks["ipv4"][0]["ipAddressFromPool"]["name"],
            "story-workers"
        );
        assert_eq!(
            networks["ipv6"][0]["ipAddressFromPool"]["name"],
            "story-workers-v6"
        );
    }
    assert!(
        objects
            .iter()
            .filter(|o| o["kind"] == "MaasMachine")
            .all(|m| m["spec"]["dataTemplate"]["name"] == "story-control-plane")
    );
    let cluster = objects.iter().find(|o| o["kind"] == "MaasCluster").unwrap();
    assert_eq!(
        cluster["spec"]["dnsRecord"]["publishedAddressSubnets"],
        json!(["10.20.0.0/16", "fd00:20::/64"])
    );
    // Without the options, nothing changes.
    let plain = ClusterSpec::story("ns").objects();
    let cluster = plain.iter().find(|o| o["kind"] == "MaasCluster").unwrap();
    assert!(cluster["spec"]["dnsRecord"].is_null());
}

#[test]
fn a_release_erase_goes_on_every_machine() {
    let mut spec = ClusterSpec::story("ns");
    spec.release_erase = Some("Quick".into());
    let objects = spec.objects();
    let template = objects
        .iter()
        .find(|o| o["kind"] == "MaasMachineTemplate")
        .unwrap();
    assert_eq!(
        template["spec"]["template"]["spec"]["releasePolicy"],
        json!({"erase": "Quick"})
    );
    let machines: Vec<&Value> = objects
        .iter()
        .filter(|o| o["kind"] == "MaasMachine")
        .collect();
    assert_eq!(machines.len(), 3);
    assert!(
        machines
            .iter()
            .all(|m| m["spec"]["releasePolicy"]["erase"] == "Quick")
    );
}
