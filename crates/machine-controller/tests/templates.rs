//! Autoscaling from zero against a real API server: a MaasMachineTemplate applied the way
//! CAPMAAS's manifests are (`status: null`), its `status.capacity` and `status.nodeInfo` filled
//! from the smallest fitting MaasHost, read back the way the cluster autoscaler's clusterapi
//! provider reads it (unstructured: a map of quantity strings), and following the inventory
//! (a claim changes nothing and writes nothing; a host gone, missing or added reshapes it).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use capmaas_api::MaasMachineTemplate;
use capmaas_api::machine::MaasMachineTemplateStatus;
use capmaas_testenv::objects;
use capmaas_testenv::{TestEnv, eventually};
use common::*;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};

const TEMPLATE: &str = "workers-v1";
/// A second template, for servers of 8 CPUs and more.
const LARGE: &str = "large-v1";

/// The template as a manifest in Git: `status: null`, as CAPMAAS's manifests carry it.
fn manifest(name: &str, min_cpu: i32, status: &Value) -> Value {
    json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasMachineTemplate",
        "metadata": {"name": name},
        "spec": {"template": {"spec": {"minCPU": min_cpu, "minMemory": 4096, "image": "ubuntu/jammy"}}},
        "status": status
    })
}

async fn server_side_apply(client: &Client, ns: &str, body: &Value) -> MaasMachineTemplate {
    let name = body["metadata"]["name"].as_str().unwrap();
    Api::<MaasMachineTemplate>::namespaced(client.clone(), ns)
        .patch(name, &PatchParams::apply("gitops"), &Patch::Apply(body))
        .await
        .unwrap_or_else(|e| panic!("server-side apply of {name} refused: {e}"))
}

async fn status(client: &Client, ns: &str, name: &str) -> Option<MaasMachineTemplateStatus> {
    Api::<MaasMachineTemplate>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .unwrap()
        .status
}

/// Waits until the capacity of template `name` reads `summary` (`None`: no capacity); the
/// status it last saw in the failure message otherwise.
async fn until_capacity(
    client: &Client,
    ns: &str,
    name: &str,
    summary: Option<&str>,
) -> MaasMachineTemplateStatus {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let current = status(client, ns, name).await;
        if let Some(s) = current.as_ref().filter(|s| {
            s.conditions.is_some()
                && s.capacity
                    .as_ref()
                    .map(machine_controller::capacity::summary)
                    .as_deref()
                    == summary
        }) {
            return s.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name}'s capacity never read {summary:?}; its status: {current:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn patch_host_status(client: &Client, ns: &str, name: &str, status: Value) {
    Api::<capmaas_api::MaasHost>::namespaced(client.clone(), ns)
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await
        .unwrap();
}

/// `capmaas_machine_template_status_writes_total{result="written"}` of the controller.
fn writes(controller: &capmaas_runtime::embedded::Running) -> u64 {
    let text = controller.metrics().encode().unwrap();
    text.lines()
        .find_map(|l| {
            l.strip_prefix("capmaas_machine_template_status_writes_total{result=\"written\"} ")
        })
        .map_or(0, |n| n.trim().parse().unwrap())
}

/// A Kubernetes quantity as `resource.ParseQuantity` reads it: a decimal number with an
/// optional binary (`Ki`..`Ei`), decimal (`m`, `k`..`E`) or exponent suffix.
fn parse_quantity(s: &str) -> f64 {
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(split);
    let number: f64 = number.parse().unwrap_or_else(|_| panic!("{s}: no number"));
    let binary = |p: i32| 1024_f64.powi(p);
    let scale = match suffix {
        "" => 1.0,
        "Ki" => binary(1),
        "Mi" => binary(2),
        "Gi" => binary(3),
        "Ti" => binary(4),
        "Pi" => binary(5),
        "Ei" => binary(6),
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        e if e.starts_with(['e', 'E']) => 10_f64.powi(e[1..].parse().unwrap()),
        other => panic!("{s}: unknown suffix {other}"),
    };
    number * scale
}

/// What the autoscaler's clusterapi provider learns from the template: `status.capacity` and
/// `status.nodeInfo` read as `unstructured.NestedStringMap` (every value a string, else the
/// whole map is ignored), each capacity value parsed as a quantity.
async fn as_the_autoscaler_reads_it(
    client: &Client,
    ns: &str,
) -> (Vec<(String, f64)>, Vec<(String, String)>) {
    let api = objects::namespaced_api(
        client,
        ns,
        "infrastructure.cluster.x-k8s.io/v1beta1",
        "MaasMachineTemplate",
        // The autoscaler's guess of the resource: the kind lower-cased, plus "s".
        &format!("{}s", "MaasMachineTemplate".to_lowercase()),
    );
    let object = serde_json::to_value(api.get(TEMPLATE).await.unwrap()).unwrap();
    let string_map = |path: &str| -> Vec<(String, String)> {
        object
            .pointer(path)
            .and_then(Value::as_object)
            .unwrap_or_else(|| panic!("{path} is not a map: {object}"))
            .iter()
            .map(|(k, v)| {
                let v = v
                    .as_str()
                    .unwrap_or_else(|| panic!("{path}.{k} is not a string: {v}"));
                (k.clone(), v.to_owned())
            })
            .collect()
    };
    let capacity = string_map("/status/capacity")
        .into_iter()
        .map(|(k, v)| (k, parse_quantity(&v)))
        .collect();
    (capacity, string_map("/status/nodeInfo"))
}

#[tokio::test]
async fn template_capacity_follows_the_inventory() {
    let env = TestEnv::without_controller_manager().await.unwrap();
    let client = env.client();
    let ns = env.create_namespace("mc-template").await.unwrap();

    // GitOps manifests carry `status: null` (CAPMAAS's do) or `status: {}`: server-side apply
    // accepts both.
    server_side_apply(&client, &ns, &manifest(TEMPLATE, 2, &Value::Null)).await;
    server_side_apply(&client, &ns, &manifest(LARGE, 8, &json!({}))).await;

    create_host(&client, &ns, "big", "az1", 16, 65536).await;
    create_host(&client, &ns, "small", "az1", 4, 8192).await;
    create_host(&client, &ns, "tiny", "az1", 1, 2048).await;
    for name in ["big", "small", "tiny"] {
        patch_host_status(&client, &ns, name, json!({"architecture": "amd64/generic"})).await;
    }
    let controller = start_controller(&env, Some(&ns), 2).await;

    // The smallest host that fits (tiny is below minCPU).
    let filled = until_capacity(
        &client,
        &ns,
        TEMPLATE,
        Some("cpu=4, memory=8Gi, ephemeral-storage=500Gi"),
    )
    .await;
    let large = until_capacity(
        &client,
        &ns,
        LARGE,
        Some("cpu=16, memory=64Gi, ephemeral-storage=500Gi"),
    )
    .await;
    let condition = &filled.conditions.as_ref().unwrap()[0];
    assert_eq!(
        (
            condition.type_.as_str(),
            condition.status.as_str(),
            condition.reason.as_str()
        ),
        ("CapacityKnown", "True", "SmallestFittingHost")
    );
    assert!(
        condition.message.contains(&format!("{ns}/small")),
        "{condition:?}"
    );
    let (capacity, node_info) = as_the_autoscaler_reads_it(&client, &ns).await;
    assert_eq!(
        capacity,
        [
            ("cpu".to_owned(), 4.0),
            ("ephemeral-storage".to_owned(), 500.0 * 1024_f64.powi(3)),
            ("memory".to_owned(), 8.0 * 1024_f64.powi(3)),
        ]
    );
    assert_eq!(
        node_info,
        [
            ("architecture".to_owned(), "amd64".to_owned()),
            ("operatingSystem".to_owned(), "linux".to_owned()),
        ]
    );
    // One write per template. Applying the manifest again (status: null) leaves the
    // controller's status alone.
    let settled = writes(&controller);
    assert_eq!(settled, 2);
    server_side_apply(&client, &ns, &manifest(TEMPLATE, 2, &Value::Null)).await;
    assert_eq!(status(&client, &ns, TEMPLATE).await.as_ref(), Some(&filled));

    // A machine claims the small host and MAAS deploys it: the shape is the same, and nothing
    // is written (the host is only busy, it may be free again tomorrow).
    Api::<capmaas_api::MaasHost>::namespaced(client.clone(), &ns)
        .patch(
            "small",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"consumerRef": {
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasMachine",
                "name": "someone", "uid": "0000"
            }}})),
        )
        .await
        .unwrap();
    for state in ["Allocating", "Deploying", "Deployed"] {
        patch_host_status(
            &client,
            &ns,
            "small",
            json!({"provisioningState": state, "powerState": "on", "statusMessage": state}),
        )
        .await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(status(&client, &ns, TEMPLATE).await.as_ref(), Some(&filled));
    assert_eq!(status(&client, &ns, LARGE).await.as_ref(), Some(&large));
    assert_eq!(writes(&controller), settled, "a claim rewrote a status");

    // The small host is deleted: a bigger-only inventory, the big host's shape. The large
    // template's shape stays (and is not written).
    Api::<capmaas_api::MaasHost>::namespaced(client.clone(), &ns)
        .delete("small", &DeleteParams::default())
        .await
        .unwrap();
    until_capacity(
        &client,
        &ns,
        TEMPLATE,
        Some("cpu=16, memory=64Gi, ephemeral-storage=500Gi"),
    )
    .await;
    let (capacity, _) = as_the_autoscaler_reads_it(&client, &ns).await;
    assert_eq!(capacity[0], ("cpu".to_owned(), 16.0));
    assert_eq!(
        writes(&controller),
        settled + 1,
        "one write for the one change"
    );

    // MAAS loses the big host: nothing fits; capacity and nodeInfo go, the condition says why.
    patch_host_status(&client, &ns, "big", json!({"missing": true})).await;
    let empty = until_capacity(&client, &ns, TEMPLATE, None).await;
    assert_eq!(empty.node_info, None);
    let condition = &empty.conditions.as_ref().unwrap()[0];
    assert_eq!(
        (condition.status.as_str(), condition.reason.as_str()),
        ("False", "NoHostFits")
    );
    assert_eq!(
        condition.message,
        "no MaasHost fits the template among 2: 1 missing from MAAS; 1 below minCPU 2"
    );
    let events = events(&client, &ns, TEMPLATE, "NoHostFits").await;
    assert!(!events.is_empty(), "a Warning Event says why");

    // A new arm64 server is enrolled: its shape.
    create_host(&client, &ns, "arm", "az1", 32, 131_072).await;
    patch_host_status(
        &client,
        &ns,
        "arm",
        json!({"architecture": "arm64/generic"}),
    )
    .await;
    until_capacity(
        &client,
        &ns,
        TEMPLATE,
        Some("cpu=32, memory=128Gi, ephemeral-storage=500Gi"),
    )
    .await;
    eventually("arm64 in nodeInfo", Duration::from_secs(30), || async {
        let (_, node_info) = as_the_autoscaler_reads_it(&client, &ns).await;
        (node_info[0] == ("architecture".to_owned(), "arm64".to_owned())).then_some(())
    })
    .await;
}
