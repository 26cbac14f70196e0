//! Test support: the objects of one unhealthy machine, a fake MAAS gateway and kubelet, the
//! controller running in-process, and polling helpers.
#![allow(
    dead_code,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use capmaas_api::{MaasHost, MaasRemediation};
use capmaas_runtime::Runtime;
use capmaas_testenv::TestEnv;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Node, Secret};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::core::DynamicObject;
use kube::discovery::ApiResource;
use kube::{Client, ResourceExt};
use remediation_controller::{BINARY, ControllerArgs, FenceMode};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub const CLUSTER: &str = "c1";
pub const MACHINE: &str = "m1";
pub const HOST: &str = "h1";
pub const REBOOT_PREFIX: &str = "reboot.maas.cluster.x-k8s.io/";
pub const REBOOT_STATE: &str = "maas.cluster.x-k8s.io/reboot-state";
pub const OUT_OF_SERVICE: &str = "node.kubernetes.io/out-of-service";

/// The controller running in-process (`Runtime::embedded`); stops (like a kill) on drop.
pub struct RunningController {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<Result<(), capmaas_runtime::Error>>,
}

impl Drop for RunningController {
    fn drop(&mut self) {
        self.stop.cancel();
        self.task.abort();
    }
}

pub async fn start_controller(env: &TestEnv) -> RunningController {
    let config = env.kube_config().await.unwrap();
    let stop = CancellationToken::new();
    let runtime = Runtime::embedded(BINARY, config, stop.clone(), &["--concurrency=4"])
        .await
        .unwrap();
    let args = ControllerArgs {
        fence: FenceMode::Taint,
        poll_interval: Duration::from_millis(300),
    };
    let task =
        tokio::spawn(runtime.run(move |term| remediation_controller::run(term, args.clone())));
    RunningController { stop, task }
}

pub async fn eventually<T, F, Fut>(what: &str, secs: u64, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    capmaas_testenv::eventually(what, Duration::from_secs(secs), check).await
}

pub fn capi_api(client: &Client, ns: &str, kind: &str, plural: &str) -> Api<DynamicObject> {
    let resource = ApiResource {
        group: "cluster.x-k8s.io".into(),
        version: "v1beta2".into(),
        api_version: "cluster.x-k8s.io/v1beta2".into(),
        kind: kind.into(),
        plural: plural.into(),
    };
    Api::namespaced_with(client.clone(), ns, &resource)
}

fn params() -> PatchParams {
    PatchParams::default()
}

/// The name of the Node of namespace `ns` (Nodes are cluster-scoped; tests share the server).
pub fn node_name(ns: &str) -> String {
    format!("{ns}-n1")
}

/// One unhealthy machine: Cluster, kubeconfig Secret pointing at this same API server, Machine
/// with its `nodeRef`, MaasMachine with its `hostRef`, a deployed host that is on, and the
/// NotReady Node with labels and annotations.
pub async fn create_world(env: &TestEnv, ns: &str) {
    let client = env.client();
    let post = PostParams::default();
    let parse = |v: Value| serde_json::from_value::<DynamicObject>(v).unwrap();
    capi_api(&client, ns, "Cluster", "clusters")
        .create(
            &post,
            &parse(json!({
                "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
                "metadata": {"name": CLUSTER, "namespace": ns}, "spec": {"paused": false}
            })),
        )
        .await
        .unwrap();
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(format!("{CLUSTER}-kubeconfig")),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            "value".to_owned(),
            ByteString(env.kubeconfig_yaml().unwrap().into_bytes()),
        )])),
        ..Default::default()
    };
    Api::<Secret>::namespaced(client.clone(), ns)
        .create(&post, &secret)
        .await
        .unwrap();
    let machines = capi_api(&client, ns, "Machine", "machines");
    machines
        .create(&post, &parse(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": {"name": MACHINE, "namespace": ns,
                         "labels": {"cluster.x-k8s.io/cluster-name": CLUSTER}},
            "spec": {
                "clusterName": CLUSTER,
                "bootstrap": {"dataSecretName": "bootstrap"},
                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "MaasMachine", "name": MACHINE}
            }
        })))
        .await
        .unwrap();
    machines
        .patch_status(
            MACHINE,
            &params(),
            &Patch::Merge(json!({
                "status": {"nodeRef": {"name": node_name(ns)}}
            })),
        )
        .await
        .unwrap();
    let mm: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::erase::<capmaas_api::MaasMachine>(&()),
    );
    mm.create(
        &post,
        &parse(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasMachine",
            "metadata": {"name": MACHINE, "namespace": ns},
            "spec": {"minCPU": 2, "minMemory": 4096, "image": "ubuntu/jammy"}
        })),
    )
    .await
    .unwrap();
    mm.patch_status(
        MACHINE,
        &params(),
        &Patch::Merge(json!({"status": {"hostRef": {"name": HOST}}})),
    )
    .await
    .unwrap();
    let hosts: Api<MaasHost> = Api::namespaced(client.clone(), ns);
    hosts
        .create(
            &post,
            &serde_json::from_value(json!({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasHost",
                "metadata": {"name": HOST, "namespace": ns},
                "spec": {"systemID": "sys-h1"}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    hosts
        .patch_status(
            HOST,
            &params(),
            &Patch::Merge(json!({"status": {
                "provisioningState": "Deployed", "powerState": "on", "maasStatusName": "Deployed"
            }})),
        )
        .await
        .unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .create(&post, &serde_json::from_value(json!({"metadata": {
            "name": node_name(ns),
            "labels": {"kubernetes.io/hostname": node_name(ns), "node-role.kubernetes.io/worker": "", "team": "blue"},
            "annotations": {"note": "keep me"}
        }})).unwrap())
        .await
        .unwrap();
    set_node_ready(&client, &node_name(ns), "False").await;
}

/// The MaasRemediation CAPI would create from the template (owner: the Machine).
pub async fn create_remediation(client: &Client, ns: &str, retry_limit: i32, timeout: i32) {
    let machine = capi_api(client, ns, "Machine", "machines")
        .get(MACHINE)
        .await
        .unwrap();
    Api::<MaasRemediation>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasRemediation",
            "metadata": {
                "name": MACHINE, "namespace": ns,
                "labels": {"cluster.x-k8s.io/cluster-name": CLUSTER},
                "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
                                     "name": MACHINE, "uid": machine.uid().unwrap()}]
            },
            "spec": {"strategy": {"type": "Reboot", "retryLimit": retry_limit, "timeoutSeconds": timeout}}
        })).unwrap())
        .await
        .unwrap();
}

pub async fn set_node_ready(client: &Client, name: &str, status: &str) {
    let now = jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    Api::<Node>::all(client.clone())
        .patch_status(
            name,
            &params(),
            &Patch::Merge(json!({"status": {"conditions": [{
                "type": "Ready", "status": status, "reason": "Test",
                "lastHeartbeatTime": now, "lastTransitionTime": now
            }]}})),
        )
        .await
        .unwrap();
}

pub async fn get_remediation(client: &Client, ns: &str) -> Option<MaasRemediation> {
    Api::<MaasRemediation>::namespaced(client.clone(), ns)
        .get_opt(MACHINE)
        .await
        .unwrap()
}

pub async fn host(client: &Client, ns: &str) -> MaasHost {
    Api::<MaasHost>::namespaced(client.clone(), ns)
        .get(HOST)
        .await
        .unwrap()
}

pub async fn node(client: &Client, ns: &str) -> Node {
    Api::<Node>::all(client.clone())
        .get(&node_name(ns))
        .await
        .unwrap()
}

pub fn has_out_of_service(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == OUT_OF_SERVICE))
}

pub fn condition<'a>(
    r: &'a MaasRemediation,
    type_: &str,
) -> Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    r.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

pub fn requested(host: &MaasHost) -> bool {
    host.annotations()
        .keys()
        .any(|k| k.starts_with(REBOOT_PREFIX))
}

/// Events regarding the remediation with `reason`.
pub async fn events(client: &Client, ns: &str, reason: &str) -> Vec<Event> {
    Api::<Event>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some(reason)
                && e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("MaasRemediation")
        })
        .collect()
}

/// Plays maas-client and the kubelet for the host of one namespace. While any reboot request
/// is on the host it marks `reboot-state: off` and reports the server off (and the Node goes
/// NotReady, losing a label and an annotation as a re-registered kubelet would); when none
/// remains it reports the server on and the Node Ready again. While `stall` is set it takes no
/// request; with `no_ack` it powers off without marking `reboot-state`.
pub struct FakeGateway {
    pub offs: Arc<AtomicU32>,
    pub ons: Arc<AtomicU32>,
    /// The Node carried the out-of-service taint at every power-off.
    pub fenced_at_off: Arc<AtomicBool>,
    pub stall: Arc<AtomicBool>,
    pub no_ack: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeGateway {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub fn start_gateway(client: &Client, ns: &str) -> FakeGateway {
    let (offs, ons) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let fenced_at_off = Arc::new(AtomicBool::new(true));
    let (stall, no_ack) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    FakeGateway {
        offs: offs.clone(),
        ons: ons.clone(),
        fenced_at_off: fenced_at_off.clone(),
        stall: stall.clone(),
        no_ack: no_ack.clone(),
        task: tokio::spawn({
            let (client, ns) = (client.clone(), ns.to_owned());
            async move {
                loop {
                    if !stall.load(Ordering::SeqCst) {
                        let acked = !no_ack.load(Ordering::SeqCst);
                        if let Some(went_off) = step(&client, &ns, acked).await {
                            if went_off {
                                offs.fetch_add(1, Ordering::SeqCst);
                                if !has_out_of_service(&node(&client, &ns).await) {
                                    fenced_at_off.store(false, Ordering::SeqCst);
                                }
                            } else {
                                ons.fetch_add(1, Ordering::SeqCst);
                            }
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }),
    }
}

/// One look at the host: `Some(true)` when it was powered off, `Some(false)` when on.
async fn step(client: &Client, ns: &str, ack: bool) -> Option<bool> {
    let hosts: Api<MaasHost> = Api::namespaced(client.clone(), ns);
    let host = hosts.get_opt(HOST).await.ok()??;
    let on = host.status.as_ref()?.power_state == Some(capmaas_api::host::PowerState::On);
    let wanted = requested(&host);
    if wanted && on {
        if ack {
            let patch = json!({"metadata": {"annotations": {REBOOT_STATE: "off"}}});
            hosts
                .patch(HOST, &params(), &Patch::Merge(patch))
                .await
                .ok()?;
        }
        power(&hosts, "off").await?;
        let nodes: Api<Node> = Api::all(client.clone());
        let lost = json!({"metadata": {
            "labels": {"team": null}, "annotations": {"note": null}
        }});
        nodes
            .patch(&node_name(ns), &params(), &Patch::Merge(lost))
            .await
            .ok()?;
        set_node_ready(client, &node_name(ns), "Unknown").await;
        Some(true)
    } else if !wanted && !on {
        let patch = json!({"metadata": {"annotations": {REBOOT_STATE: null}}});
        hosts
            .patch(HOST, &params(), &Patch::Merge(patch))
            .await
            .ok()?;
        power(&hosts, "on").await?;
        tokio::time::sleep(Duration::from_millis(1100)).await;
        set_node_ready(client, &node_name(ns), "True").await;
        Some(false)
    } else {
        None
    }
}

async fn power(hosts: &Api<MaasHost>, state: &str) -> Option<()> {
    let patch = json!({"status": {"powerState": state}});
    hosts
        .patch_status(HOST, &params(), &Patch::Merge(patch))
        .await
        .ok()
        .map(|_| ())
}
