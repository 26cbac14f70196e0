//! The remediation-controller end to end: a MachineHealthCheck over the workers remediates
//! through a MaasRemediationTemplate. A worker whose kubelet goes silent is power-cycled in
//! MAAS (once, even though remediation-controller and maas-client are SIGKILLed while the
//! server is off; its Node fenced only once MAAS reports it off), comes
//! back with its Node's labels, and is never replaced. A worker that never comes back is
//! handed to its MachineSet after `retryLimit` reboots: replaced on another server, its own
//! server marked unhealthy and never chosen again, nothing leaked.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use capmaas_e2e::{ClusterSpec, Harness, HarnessConfig, WorkerRemediation, wait_for};
use common::{
    LONG, ONE_AT_A_TIME, POLL, declare, describe_rollout, in_use, infra, list_capi, name_contains,
    running_machines, sim_counts, wait_running,
};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use maas_sim::{NodeStatus, PowerState};
use serde_json::json;

/// Long enough for one attempt that never succeeds (timeoutSeconds is at least 100).
const GIVE_UP: Duration = Duration::from_secs(400);

fn spec(ns: &str, retry_limit: u32) -> ClusterSpec {
    let mut spec = ClusterSpec::story(ns);
    spec.control_plane = 1;
    spec.workers = 2;
    spec.worker_remediation = Some(WorkerRemediation {
        retry_limit,
        timeout_seconds: 100,
        unhealthy_after_seconds: 5,
    });
    spec
}

/// A running worker Machine: (Machine name, Node name, MAAS system id).
async fn a_running_worker(h: &Harness, ns: &str) -> (String, String, String) {
    let machine = running_machines(h, ns)
        .await
        .into_iter()
        .find(|m| name_contains(m, "workers"))
        .unwrap();
    let provider_id = machine.data["spec"]["providerID"].as_str().unwrap();
    (
        machine.metadata.name.clone().unwrap(),
        machine.data["status"]["nodeRef"]["name"]
            .as_str()
            .unwrap()
            .to_owned(),
        provider_id.rsplit('/').next().unwrap().to_owned(),
    )
}

/// What [`watch_fence_order`] saw.
#[derive(Debug, Default)]
struct FenceOrder {
    /// When (ms after the start) the Node carried the out-of-service taint while MAAS still
    /// reported the server on and never powered it off: must never happen.
    tainted_before_off: Option<u128>,
    /// The taint seen while MAAS reported the server off.
    tainted_while_off: bool,
}

fn out_of_service(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| {
            t.iter()
                .any(|t| t.key == "node.kubernetes.io/out-of-service")
        })
}

/// Samples the Node, then MAAS's power state, every 20 ms until the server was powered on
/// again. The Node is read first: a taint seen there and a server then still on with its
/// power-on count unchanged can only mean the taint came before the power-off.
async fn watch_fence_order(
    sim: maas_sim::SimHandle,
    system_id: String,
    nodes: Api<Node>,
    node: String,
    power_ons_before: u64,
) -> FenceOrder {
    let started = std::time::Instant::now();
    let mut seen = FenceOrder::default();
    let mut seen_off = false;
    while started.elapsed() < LONG {
        let tainted = nodes
            .get_opt(&node)
            .await
            .ok()
            .flatten()
            .is_some_and(|n| out_of_service(&n));
        let server = sim.machine(&system_id).unwrap();
        let off = server.power_state == PowerState::Off;
        seen_off |= off;
        if tainted && !off && !seen_off && server.power_on_count == power_ons_before {
            seen.tainted_before_off = Some(started.elapsed().as_millis());
        }
        seen.tainted_while_off |= tainted && off;
        if server.power_on_count > power_ons_before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    seen
}

async fn machine_names(h: &Harness, ns: &str) -> BTreeSet<String> {
    list_capi(h, ns, "Machine")
        .await
        .into_iter()
        .filter_map(|m| m.metadata.name)
        .collect()
}

async fn remediation(h: &Harness, ns: &str, name: &str) -> Option<DynamicObject> {
    infra(h, ns, "MaasRemediation")
        .await
        .get_opt(name)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_silent_worker_is_rebooted_once_and_comes_back_with_its_labels() {
    let _one = ONE_AT_A_TIME.lock().await;
    let mut h = Harness::start(HarnessConfig::default()).await.unwrap();
    let ns = h.management.create_namespace("reboot").await.unwrap();
    declare(&h, &spec(&ns, 2)).await;
    wait_running(&mut h, &ns, 3).await;
    let machines_before = machine_names(&h, &ns).await;
    let (machine, node, system_id) = a_running_worker(&h, &ns).await;

    // A label and an annotation an operator put on the Node.
    let nodes: Api<Node> = Api::all(h.workload.client());
    nodes
        .patch(
            &node,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {
                "labels": {"example.com/team": "blue"},
                "annotations": {"example.com/owner": "storage"}
            }})),
        )
        .await
        .unwrap();

    let server = h.sim.state().machine(&system_id).unwrap();
    h.kubelets()
        .until_power_cycle(&server.hostname, server.power_on_count);
    let asked = wait_for(
        "the MachineHealthCheck to ask for a remediation",
        LONG,
        POLL,
        || async { Ok(remediation(&h, &ns, &machine).await.map(|_| ())) },
    )
    .await;
    if let Err(e) = asked {
        panic!("{e}\n{}\n{}", describe_rollout(&h, &ns).await, h.logs(40));
    }

    // The fence's order, watched from outside: MAAS's power state and the Node's taint.
    let order = tokio::spawn(watch_fence_order(
        h.sim.state(),
        system_id.clone(),
        nodes.clone(),
        node.clone(),
        server.power_on_count,
    ));

    // remediation-controller and maas-client are SIGKILLed while the server is held off,
    // between MAAS's power-off and the fence.
    wait_for("the server to be powered off", LONG, POLL, || async {
        let server = h.sim.state().machine(&system_id).unwrap();
        Ok((server.power_state == PowerState::Off).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", h.logs(40)));
    h.restart_controller("remediation-controller")
        .await
        .unwrap();
    h.restart_controller("maas-client").await.unwrap();

    wait_for(
        "the Node back, Ready, with its labels and no fence",
        LONG,
        POLL,
        || async {
            if h.kubelets().is_silent(&server.hostname) {
                return Ok(None);
            }
            let Some(n) = nodes.get_opt(&node).await.unwrap() else {
                return Ok(None);
            };
            let labelled = n
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("example.com/team"))
                == Some(&"blue".to_owned())
                && n.metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get("example.com/owner"))
                    == Some(&"storage".to_owned());
            let fenced = n
                .spec
                .as_ref()
                .and_then(|s| s.taints.as_ref())
                .is_some_and(|t| {
                    t.iter()
                        .any(|t| t.key == "node.kubernetes.io/out-of-service")
                });
            Ok((labelled && !fenced).then_some(()))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", h.logs(40)));
    wait_for(
        "the remediation to be done and removed",
        LONG,
        POLL,
        || async { Ok(remediation(&h, &ns, &machine).await.is_none().then_some(())) },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", h.logs(40)));

    let server_after = h.sim.state().machine(&system_id).unwrap();
    assert_eq!(
        server_after.power_on_count,
        server.power_on_count + 1,
        "exactly one power cycle"
    );
    let order = order.await.unwrap();
    assert_eq!(
        order.tainted_before_off, None,
        "the Node was fenced while its server ran"
    );
    assert!(
        order.tainted_while_off,
        "the Node was fenced while its server was off"
    );
    assert_eq!(server_after.power_state, PowerState::On);
    assert_eq!(server_after.status, NodeStatus::Deployed);
    wait_running(&mut h, &ns, 3).await;
    assert_eq!(
        machine_names(&h, &ns).await,
        machines_before,
        "no Machine was replaced"
    );
    h.ensure_running().unwrap();
    common::assert_rbac_sufficient(&h);
}

#[tokio::test]
async fn a_worker_that_never_comes_back_is_replaced_and_its_server_set_aside() {
    let _one = ONE_AT_A_TIME.lock().await;
    let mut h = Harness::start(HarnessConfig::default()).await.unwrap();
    let ns = h.management.create_namespace("giveup").await.unwrap();
    declare(&h, &spec(&ns, 1)).await;
    wait_running(&mut h, &ns, 3).await;
    let (machine, _node, system_id) = a_running_worker(&h, &ns).await;
    let hostname = h.sim.state().machine(&system_id).unwrap().hostname;
    h.kubelets().forever(&hostname);

    // One reboot does not help: CAPI replaces the Machine on another server.
    let result = wait_for(
        "the Machine replaced and three Running again",
        GIVE_UP,
        POLL,
        || async {
            let names = machine_names(&h, &ns).await;
            let running = running_machines(&h, &ns).await.len();
            Ok((!names.contains(&machine) && running == 3).then_some(()))
        },
    )
    .await;
    if let Err(e) = result {
        panic!(
            "{e}\nremediation: {:?}\n{}\n{}",
            remediation(&h, &ns, &machine).await.map(|r| r.data),
            describe_rollout(&h, &ns).await,
            h.logs(40)
        );
    }
    let server = h.sim.state().machine(&system_id).unwrap();
    assert!(
        server.power_on_count >= 2,
        "rebooted once before giving up: {} power-ons",
        server.power_on_count
    );

    // The broken server is marked and released, not chosen again, and nothing leaks.
    let hosts = infra(&h, &ns, "MaasHost").await;
    let host = hosts
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|host| host.data["spec"]["systemID"] == system_id.as_str())
        .unwrap();
    assert!(
        host.metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key("maas.cluster.x-k8s.io/unhealthy")),
        "the host is marked unhealthy: {:?}",
        host.metadata.annotations
    );
    let running_servers: BTreeSet<String> = running_machines(&h, &ns)
        .await
        .iter()
        .filter_map(|m| m.data["spec"]["providerID"].as_str())
        .filter_map(|p| p.rsplit('/').next().map(str::to_owned))
        .collect();
    assert!(!running_servers.contains(&system_id), "{running_servers:?}");
    wait_for("the broken server released", LONG, POLL, || async {
        Ok((in_use(&h) == 3).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}: {:?}", sim_counts(&h)));
    h.ensure_running().unwrap();
    common::assert_rbac_sufficient(&h);
}
