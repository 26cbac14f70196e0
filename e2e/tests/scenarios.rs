//! End-to-end scenarios: CAPI core, our controllers as processes, the MAAS simulator, two
//! real API servers and the kubelet stand-in. One harness at a time.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use capmaas_e2e::{ClusterSpec, Harness, HarnessConfig, apply, kubeconfig_secret, wait_for};
use common::{
    LONG, ONE_AT_A_TIME, POLL, api, assert_no_double_claims, capi, claimed_hosts, declare,
    describe_rollout, in_use, infra, list_infra, maas_dns, name_contains, running_machines,
    sim_counts, wait_running,
};
use k8s_openapi::api::core::v1::{Event, Node};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use maas_sim::NodeStatus;
use serde_json::{Value, json};

#[tokio::test]
async fn story_cluster_scales_down_and_is_deleted_without_leaks() {
    let _one = ONE_AT_A_TIME.lock().await;
    let mut h = Harness::start(HarnessConfig::default()).await.unwrap();
    let ns = h.management.create_namespace("story").await.unwrap();
    let spec = ClusterSpec::story(&ns);
    declare(&h, &spec).await;

    // machine-controller is SIGKILLed while it claims hosts and requests deployments: after
    // the restart nothing is claimed twice and every machine still comes up exactly once.
    wait_for("a first host claimed", LONG, POLL, || async {
        Ok((claimed_hosts(&h, &ns).await >= 1).then_some(()))
    })
    .await
    .unwrap();
    h.restart_controller("machine-controller").await.unwrap();

    let machines = wait_running(&mut h, &ns, 8).await;
    // Every Machine got a providerID in the CAPMAAS format, and every Node carries it.
    let provider_ids: BTreeSet<String> = machines
        .iter()
        .map(|m| m.data["spec"]["providerID"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(provider_ids.len(), 8);
    assert!(
        provider_ids.iter().all(|p| p.starts_with("maas:///")),
        "{provider_ids:?}"
    );
    let nodes = Api::<Node>::all(h.workload.client())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    let node_ids: BTreeSet<String> = nodes
        .iter()
        .filter_map(|n| n.spec.as_ref().and_then(|s| s.provider_id.clone()))
        .collect();
    assert_eq!(
        node_ids, provider_ids,
        "every Node has its Machine's providerID"
    );
    assert_no_double_claims(&h, &ns).await;

    // The DNS record holds the control-plane addresses.
    let control_plane_addresses: BTreeSet<String> = list_infra(&h, &ns, "MaasMachine")
        .await
        .iter()
        .filter(|m| name_contains(m, "control-plane"))
        .flat_map(|m| {
            m.data["status"]["addresses"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|a| a["type"] == "InternalIP")
        .filter_map(|a| a["address"].as_str().map(str::to_owned))
        .collect();
    let records = infra(&h, &ns, "MaasDNSRecord").await;
    wait_for(
        "the DNS record to hold the control-plane addresses",
        LONG,
        POLL,
        || async {
            let record = records.get_opt("story").await.unwrap();
            let addresses: BTreeSet<String> = record
                .map(|r| {
                    r.data["spec"]["addresses"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default()
                })
                .unwrap_or_default()
                .iter()
                .filter_map(|a| a.as_str().map(str::to_owned))
                .collect();
            Ok((!addresses.is_empty() && addresses == control_plane_addresses).then_some(()))
        },
    )
    .await
    .unwrap();

    wait_for(
        "MAAS to serve story.maas with the control-plane addresses",
        LONG,
        POLL,
        || async {
            Ok(
                (maas_dns(&h.sim, "story.maas").await.as_ref() == Some(&control_plane_addresses))
                    .then_some(()),
            )
        },
    )
    .await
    .unwrap();

    // Scaling the workers 5 → 2 releases three servers.
    let deployments = capi(&h, &ns, "MachineDeployment").await;
    deployments
        .patch(
            "story-workers",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"replicas": 2}})),
        )
        .await
        .unwrap();
    // ... and SIGKILLed again while it releases them.
    wait_for("a worker being deleted", LONG, POLL, || async {
        let deleting = list_infra(&h, &ns, "MaasMachine")
            .await
            .iter()
            .any(|m| m.metadata.deletion_timestamp.is_some());
        Ok(deleting.then_some(()))
    })
    .await
    .unwrap();
    h.restart_controller("machine-controller").await.unwrap();
    wait_running(&mut h, &ns, 5).await;
    wait_for("three servers released", LONG, POLL, || async {
        Ok((in_use(&h) == 5).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}: {:?}", sim_counts(&h)));
    assert_no_double_claims(&h, &ns).await;

    // Deleting the Cluster releases every server and deletes the DNS record.
    delete_cluster_and_wait_released(&h, &ns, "story").await;
    wait_for("the DNS record to be deleted", LONG, POLL, || async {
        Ok(records
            .get_opt("story")
            .await
            .unwrap()
            .is_none()
            .then_some(()))
    })
    .await
    .unwrap();
    wait_for("MAAS to drop story.maas", LONG, POLL, || async {
        Ok(maas_dns(&h.sim, "story.maas").await.is_none().then_some(()))
    })
    .await
    .unwrap();
    h.ensure_running().unwrap();
    common::assert_rbac_sufficient(&h);
}

#[tokio::test]
async fn image_change_with_node_reuse_reimages_the_same_servers() {
    let _one = ONE_AT_A_TIME.lock().await;
    let mut h = Harness::start(HarnessConfig::default()).await.unwrap();
    let ns = h.management.create_namespace("reuse").await.unwrap();
    let mut spec = ClusterSpec::story(&ns);
    spec.control_plane = 1;
    spec.workers = 3;
    spec.node_reuse = true;
    // Static worker addresses from a pool twice the workers' size: node reuse keeps each
    // server's address (the IPAddress itself, handed from the old machine's data to the new).
    spec.worker_addresses = Some(capmaas_e2e::WorkerAddresses::in_default_subnet(6));
    declare(&h, &spec).await;
    wait_running(&mut h, &ns, 4).await;
    let workers_before: BTreeSet<String> = worker_system_ids(&h, &ns).await;
    assert_eq!(workers_before.len(), 3);
    let addresses_before = server_pool_addresses(&h, &workers_before);
    assert_eq!(addresses_before.len(), 3, "{addresses_before:?}");
    let ip_addresses_before = ip_address_uids(&h, &ns).await;
    assert_eq!(ip_addresses_before.len(), 3, "{ip_addresses_before:?}");

    apply(
        &h.management.client(),
        &spec.worker_template("ubuntu/noble"),
    )
    .await
    .unwrap();
    apply(
        &h.management.client(),
        &spec.machine_deployment("ubuntu/noble"),
    )
    .await
    .unwrap();
    let result = wait_for(
        "the workers to be re-imaged with ubuntu/noble",
        LONG,
        POLL,
        || async {
            let noble = h
                .sim
                .state()
                .machines()
                .iter()
                .filter(|m| m.status == NodeStatus::Deployed && m.distro_series.contains("noble"))
                .count();
            Ok((noble == 3 && running_machines(&h, &ns).await.len() == 4).then_some(()))
        },
    )
    .await;
    if let Err(e) = result {
        panic!("{e}\n{}\n{}", describe_rollout(&h, &ns).await, h.logs(40));
    }
    assert_eq!(
        worker_system_ids(&h, &ns).await,
        workers_before,
        "node reuse kept the same servers"
    );
    assert_eq!(
        server_pool_addresses(&h, &workers_before),
        addresses_before,
        "node reuse kept each server's address"
    );
    assert_eq!(
        ip_address_uids(&h, &ns).await,
        ip_addresses_before,
        "the addresses were handed over, not freed and given out again"
    );
    assert_no_double_claims(&h, &ns).await;
    common::assert_rbac_sufficient(&h);
}

/// The worker pool's address each of `servers` carries in MAAS: system id → address.
fn server_pool_addresses(h: &Harness, servers: &BTreeSet<String>) -> BTreeMap<String, String> {
    let state = h.sim.state();
    servers
        .iter()
        .filter_map(|id| {
            let server = state.machine(id)?;
            let pool_ip = server
                .ip_addresses
                .iter()
                .find(|ip| ip.starts_with("10.20.200."))?
                .clone();
            Some((id.clone(), pool_ip))
        })
        .collect()
}

/// Address → UID of the IPAddress giving it out, in `ns`.
async fn ip_address_uids(h: &Harness, ns: &str) -> BTreeMap<String, String> {
    common::api(
        &h.management.client(),
        ns,
        "ipam.cluster.x-k8s.io",
        "v1beta2",
        "IPAddress",
    )
    .await
    .list(&ListParams::default())
    .await
    .unwrap()
    .items
    .iter()
    .map(|a| {
        (
            a.data["spec"]["address"].as_str().unwrap().to_owned(),
            a.metadata.uid.clone().unwrap(),
        )
    })
    .collect()
}

/// Deletes the Cluster `name` and waits until no server of the simulator is in use.
async fn delete_cluster_and_wait_released(h: &Harness, ns: &str, name: &str) {
    capi(h, ns, "Cluster")
        .await
        .delete(name, &DeleteParams::default())
        .await
        .unwrap();
    wait_for("every server released", LONG, POLL, || async {
        Ok((in_use(h) == 0).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}: {:?}\n{}", sim_counts(h), h.logs(30)));
}

async fn worker_system_ids(h: &Harness, ns: &str) -> BTreeSet<String> {
    list_infra(h, ns, "MaasMachine")
        .await
        .iter()
        .filter(|m| name_contains(m, "workers"))
        .filter_map(|m| m.data["spec"]["systemID"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn paused_clusters_are_left_alone_and_impossible_requests_say_so() {
    let _one = ONE_AT_A_TIME.lock().await;
    let h = Harness::start(HarnessConfig::default()).await.unwrap();

    // Paused: nothing is claimed or allocated.
    let ns = h.management.create_namespace("paused").await.unwrap();
    let mut spec = ClusterSpec::story(&ns);
    spec.workers = 0;
    declare(&h, &spec).await;
    capi(&h, &ns, "Cluster")
        .await
        .patch(
            "story",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"paused": true}})),
        )
        .await
        .unwrap();
    let paused_machine = spec.control_plane_maas_machine(0);
    let machines = infra(&h, &ns, "MaasMachine").await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let machine = machines
        .get(paused_machine["metadata"]["name"].as_str().unwrap())
        .await
        .unwrap();
    assert!(
        machine.data["spec"]["providerID"].is_null(),
        "a paused cluster's machine was provisioned"
    );

    // Impossible: no host has 1000 cores; a condition and an Event say so.
    // A second Cluster in the same namespace: its hosts come from the same inventory (one MAAS
    // machine backs one MaasHost cluster-wide, so another namespace would import none).
    let mut spec = ClusterSpec::story(&ns);
    spec.name = "impossible".into();
    spec.control_plane = 1;
    spec.workers = 0;
    let mut objects = spec.objects();
    for object in &mut objects {
        if object["kind"] == "MaasMachine" {
            object["spec"]["minCPU"] = json!(1000);
        }
    }
    let kubeconfig = h.workload.kubeconfig_yaml().unwrap();
    apply(
        &h.management.client(),
        &kubeconfig_secret(&spec.name, &ns, &kubeconfig),
    )
    .await
    .unwrap();
    for object in &objects {
        apply(&h.management.client(), object).await.unwrap();
    }
    let machines = infra(&h, &ns, "MaasMachine").await;
    let name = objects.iter().find(|o| o["kind"] == "MaasMachine").unwrap()["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_owned();
    let condition: Value = wait_for("a condition saying no host fits", LONG, POLL, || async {
        let machine = machines.get(&name).await.unwrap();
        Ok(machine.data["status"]["conditions"]
            .as_array()
            .and_then(|c| {
                c.iter()
                    .find(|c| {
                        c["status"] == "False"
                            && c["message"]
                                .as_str()
                                .is_some_and(|m| m.contains("CPU") || m.contains("cpu"))
                    })
                    .cloned()
            }))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", h.logs(40)));
    // The Event follows the status write that carries the condition: wait for it too.
    let events = Api::<Event>::namespaced(h.management.client(), &ns);
    wait_for(
        "a Warning Event saying no host fits",
        Duration::from_secs(30),
        POLL,
        || async {
            let listed = events.list(&ListParams::default()).await.unwrap();
            Ok(listed
                .items
                .iter()
                .any(|e| {
                    e.involved_object.name.as_deref() == Some(name.as_str())
                        && e.type_.as_deref() == Some("Warning")
                })
                .then_some(()))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("no Warning event for {name} ({e}); condition was {condition}"));
    common::assert_rbac_sufficient(&h);
}

/// The production overlay's namespaced install (`deploy/components/namespaced`): each
/// controller holds its rights in the served namespace only (and so reaches no Secret of
/// `capmaas-system`, the MAAS credentials among them). A cluster there is provisioned, its
/// workers get addresses from a pool (address locks: data-controller's one cluster-wide right),
/// and it is deleted with every server released, with no request refused by RBAC. A cluster in
/// another namespace is left alone.
#[tokio::test]
async fn a_namespaced_install_serves_its_namespace_and_nothing_else() {
    let _one = ONE_AT_A_TIME.lock().await;
    let mut h = Harness::start(HarnessConfig {
        access_from_overlay: Some("production".into()),
        ..HarnessConfig::default()
    })
    .await
    .unwrap();
    let served = h
        .watch_namespace("machine-controller")
        .expect("production serves one namespace")
        .to_owned();
    for controller in [
        "maas-client",
        "cluster-controller",
        "data-controller",
        "remediation-controller",
    ] {
        assert_eq!(h.watch_namespace(controller), Some(served.as_str()));
    }
    assert_eq!(h.watch_namespace("webhook-server"), None);
    assert_ne!(served, "capmaas-system");

    let mut spec = ClusterSpec::story(&served);
    spec.control_plane = 1;
    spec.workers = 2;
    spec.worker_addresses = Some(capmaas_e2e::WorkerAddresses::in_default_subnet(4));
    declare(&h, &spec).await;

    // Another namespace: a cluster with no inventory of its own, which pools imported on demand
    // would otherwise serve.
    let elsewhere = h.management.create_namespace("elsewhere").await.unwrap();
    let mut other = ClusterSpec::story(&elsewhere);
    other.name = "elsewhere".into();
    other.control_plane = 1;
    other.workers = 0;
    let kubeconfig = h.workload.kubeconfig_yaml().unwrap();
    apply(
        &h.management.client(),
        &kubeconfig_secret(&other.name, &elsewhere, &kubeconfig),
    )
    .await
    .unwrap();
    for object in other.objects() {
        if object["kind"] != "MaasInventory" {
            apply(&h.management.client(), &object).await.unwrap();
        }
    }

    let running = wait_running(&mut h, &served, 3).await;
    assert_eq!(running.len(), 3);
    let addresses = api(
        &h.management.client(),
        &served,
        "ipam.cluster.x-k8s.io",
        "v1beta2",
        "IPAddress",
    )
    .await
    .list(&ListParams::default())
    .await
    .unwrap()
    .items;
    assert_eq!(addresses.len(), 2, "one address per worker");
    assert_no_double_claims(&h, &served).await;

    // Nothing of ours touched the other namespace: no status, no host, no inventory.
    for kind in ["MaasCluster", "MaasMachine"] {
        for object in list_infra(&h, &elsewhere, kind).await {
            assert!(
                object.data["status"].is_null() && object.metadata.finalizers.is_none(),
                "{kind} {:?} in {elsewhere} was reconciled: {}",
                object.metadata.name,
                object.data
            );
        }
    }
    for kind in ["MaasHost", "MaasInventory"] {
        assert!(
            list_infra(&h, &elsewhere, kind).await.is_empty(),
            "{kind} in {elsewhere}"
        );
    }

    delete_cluster_and_wait_released(&h, &served, "story").await;
    h.ensure_running().unwrap();
    common::assert_rbac_sufficient(&h);
}
