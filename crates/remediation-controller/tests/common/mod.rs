//! Test support: the objects of one unhealthy machine, a fake MAAS gateway and kubelet, the
//! controller running in-process, and polling helpers.
#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use capmaas_api::{MaasHost, MaasRemediation};
use capmaas_runtime::embedded::Running;
use capmaas_testenv::TestEnv;
use capmaas_testenv::objects;
use capmaas_testenv::task::AbortOnDrop;
use k8s_openapi::api::core::v1::{Node, Secret};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::core::DynamicObject;
use kube::discovery::ApiResource;
use kube::{Client, ResourceExt};
use remediation_controller::{BINARY, ControllerArgs, FenceMode};
use serde_json::{Value, json};

pub const CLUSTER: &str = "c1";
pub const MACHINE: &str = "m1";
pub const HOST: &str = "h1";
pub const REBOOT_PREFIX: &str = "reboot.maas.cluster.x-k8s.io/";
pub const REBOOT_STATE: &str = "maas.cluster.x-k8s.io/reboot-state";
pub const OUT_OF_SERVICE: &str = "node.kubernetes.io/out-of-service";

/// The controller running in-process; stops (like a kill) when the returned value is dropped.
pub async fn start_controller(env: &TestEnv) -> Running {
    let config = env.kube_config().await.unwrap();
    let args = ControllerArgs {
        fence: FenceMode::Taint,
        poll_interval: Duration::from_millis(300),
    };
    Running::start(BINARY, config, &["--concurrency=4"], move |term| {
        remediation_controller::run(term, args.clone())
    })
    .await
    .unwrap()
}

pub fn capi_api(client: &Client, ns: &str, kind: &str, plural: &str) -> Api<DynamicObject> {
    objects::namespaced_api(client, ns, "cluster.x-k8s.io/v1beta2", kind, plural)
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
    create_cluster(env, ns).await;
    create_machine(&env.client(), ns, MACHINE, HOST, &node_name(ns)).await;
}

/// The Cluster [`CLUSTER`] and its kubeconfig Secret pointing at this same API server.
pub async fn create_cluster(env: &TestEnv, ns: &str) {
    let client = env.client();
    let post = PostParams::default();
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
    let secret = objects::kubeconfig_secret(CLUSTER, env.kubeconfig_yaml().unwrap().as_bytes());
    Api::<Secret>::namespaced(client.clone(), ns)
        .create(&post, &secret)
        .await
        .unwrap();
}

fn parse(v: Value) -> DynamicObject {
    serde_json::from_value::<DynamicObject>(v).unwrap()
}

/// One unhealthy machine of [`CLUSTER`]: Machine `machine` with its `nodeRef`, MaasMachine of
/// the same name with its `hostRef`, deployed host `host` that is on, and the NotReady Node
/// `node` with labels and annotations.
pub async fn create_machine(client: &Client, ns: &str, machine: &str, host: &str, node: &str) {
    create_machine_with_host_in(client, ns, ns, machine, host, node).await;
}

/// [`create_machine`] with the host in `host_ns` (an inventory open to `ns` keeps its hosts in
/// its own namespace), claimed from `ns`.
pub async fn create_machine_with_host_in(
    client: &Client,
    ns: &str,
    host_ns: &str,
    machine: &str,
    host: &str,
    node: &str,
) {
    let post = PostParams::default();
    let machines = capi_api(client, ns, "Machine", "machines");
    machines
        .create(&post, &parse(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": {"name": machine, "namespace": ns,
                         "labels": {"cluster.x-k8s.io/cluster-name": CLUSTER}},
            "spec": {
                "clusterName": CLUSTER,
                "bootstrap": {"dataSecretName": "bootstrap"},
                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "MaasMachine", "name": machine}
            }
        })))
        .await
        .unwrap();
    machines
        .patch_status(
            machine,
            &params(),
            &Patch::Merge(json!({
                "status": {"nodeRef": {"name": node}}
            })),
        )
        .await
        .unwrap();
    let mm: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::erase::<capmaas_api::MaasMachine>(&()),
    );
    let created = mm
        .create(
            &post,
            &parse(json!({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasMachine",
                "metadata": {"name": machine, "namespace": ns},
                "spec": {"minCPU": 2, "minMemory": 4096, "image": "ubuntu/jammy"}
            })),
        )
        .await
        .unwrap();
    mm.patch_status(
        machine,
        &params(),
        &Patch::Merge(json!({"status": {"hostRef": {"name": host, "namespace": host_ns}}})),
    )
    .await
    .unwrap();
    let hosts: Api<MaasHost> = Api::namespaced(client.clone(), host_ns);
    hosts
        .create(
            &post,
            &serde_json::from_value(json!({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasHost",
                "metadata": {"name": host, "namespace": host_ns},
                "spec": {"systemID": format!("sys-{host}"), "consumerRef": {
                    "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasMachine",
                    "name": machine, "namespace": ns, "uid": created.uid().unwrap()
                }}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    hosts
        .patch_status(
            host,
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
            "name": node,
            "labels": {"kubernetes.io/hostname": node, "node-role.kubernetes.io/worker": "", "team": "blue"},
            "annotations": {"note": "keep me"}
        }})).unwrap())
        .await
        .unwrap();
    set_node_ready(client, node, "False").await;
}

/// The MaasRemediation CAPI would create from the template (owner: the Machine).
pub async fn create_remediation(client: &Client, ns: &str, retry_limit: i32, timeout: i32) {
    create_remediation_for(client, ns, MACHINE, retry_limit, timeout).await;
}

/// The MaasRemediation CAPI would create for Machine `machine` (same name, owner the Machine).
pub async fn create_remediation_for(
    client: &Client,
    ns: &str,
    machine: &str,
    retry_limit: i32,
    timeout: i32,
) {
    let owner = capi_api(client, ns, "Machine", "machines")
        .get(machine)
        .await
        .unwrap();
    Api::<MaasRemediation>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasRemediation",
            "metadata": {
                "name": machine, "namespace": ns,
                "labels": {"cluster.x-k8s.io/cluster-name": CLUSTER},
                "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
                                     "name": machine, "uid": owner.uid().unwrap()}]
            },
            "spec": {"strategy": {"type": "Reboot", "retryLimit": retry_limit, "timeoutSeconds": timeout}}
        })).unwrap())
        .await
        .unwrap();
}

pub async fn set_node_ready(client: &Client, name: &str, status: &str) {
    node_ready(client, name, status).await.unwrap();
}

/// Sets the Node's `Ready` condition to `status`, turned now.
async fn node_ready(client: &Client, name: &str, status: &str) -> kube::Result<Node> {
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
    capmaas_runtime::get_condition(r.status.as_ref()?.conditions.as_ref()?, type_)
}

pub fn requested(host: &MaasHost) -> bool {
    host.annotations()
        .keys()
        .any(|k| k.starts_with(REBOOT_PREFIX))
}

/// Events regarding the remediation with `reason`.
pub async fn events(client: &Client, ns: &str, reason: &str) -> Vec<Event> {
    objects::events(client, ns, reason, |e| {
        e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("MaasRemediation")
    })
    .await
    .unwrap()
}

/// Plays maas-client and the kubelet for the host of one namespace. While any reboot request
/// is on the host it marks `reboot-state: off` and reports the server off (and the Node goes
/// NotReady, losing a label and an annotation as a re-registered kubelet would); when none
/// remains it reports the server on and the Node Ready again. While `stall` is set it takes no
/// request; with `no_ack` it powers off without marking `reboot-state`.
pub struct FakeGateway {
    pub offs: Arc<AtomicU32>,
    pub ons: Arc<AtomicU32>,
    /// The Node carried the out-of-service taint when a power-off came: fenced while the
    /// server still ran, which must never happen.
    pub fenced_before_off: Arc<AtomicBool>,
    /// The Node carried the out-of-service taint when the server was powered on again: it
    /// was fenced while off.
    pub fenced_at_on: Arc<AtomicBool>,
    pub stall: Arc<AtomicBool>,
    pub no_ack: Arc<AtomicBool>,
    _task: AbortOnDrop,
}

impl FakeGateway {
    /// The power-offs and power-ons so far.
    pub fn power_cycles(&self) -> (u32, u32) {
        (
            self.offs.load(Ordering::SeqCst),
            self.ons.load(Ordering::SeqCst),
        )
    }
}

pub fn start_gateway(client: &Client, ns: &str) -> FakeGateway {
    start_gateway_in(client, ns, ns)
}

/// [`start_gateway`] for the host in `host_ns` and the Node of the machine in `ns`.
pub fn start_gateway_in(client: &Client, host_ns: &str, ns: &str) -> FakeGateway {
    let (offs, ons) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let fenced_before_off = Arc::new(AtomicBool::new(false));
    let fenced_at_on = Arc::new(AtomicBool::new(false));
    let (stall, no_ack) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    FakeGateway {
        offs: offs.clone(),
        ons: ons.clone(),
        fenced_before_off: fenced_before_off.clone(),
        fenced_at_on: fenced_at_on.clone(),
        stall: stall.clone(),
        no_ack: no_ack.clone(),
        _task: AbortOnDrop::spawn({
            let (client, host_ns, ns) = (client.clone(), host_ns.to_owned(), ns.to_owned());
            async move {
                loop {
                    if !stall.load(Ordering::SeqCst) {
                        let acked = !no_ack.load(Ordering::SeqCst);
                        if let Some((went_off, fenced)) = step(&client, &host_ns, &ns, acked).await
                        {
                            if went_off {
                                offs.fetch_add(1, Ordering::SeqCst);
                                if fenced {
                                    fenced_before_off.store(true, Ordering::SeqCst);
                                }
                            } else {
                                ons.fetch_add(1, Ordering::SeqCst);
                                if fenced {
                                    fenced_at_on.store(true, Ordering::SeqCst);
                                }
                            }
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }),
    }
}

/// One look at the host: `Some((true, fenced))` when it was powered off, `Some((false,
/// fenced))` when on, with whether the Node carried the out-of-service taint right before.
async fn step(client: &Client, host_ns: &str, ns: &str, ack: bool) -> Option<(bool, bool)> {
    let hosts: Api<MaasHost> = Api::namespaced(client.clone(), host_ns);
    let host = hosts.get_opt(HOST).await.ok()??;
    let on = host.status.as_ref()?.power_state == Some(capmaas_api::host::PowerState::On);
    let wanted = requested(&host);
    let fenced = || async { has_out_of_service(&node(client, ns).await) };
    if wanted && on {
        let fenced = fenced().await;
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
        Some((true, fenced))
    } else if !wanted && !on {
        let fenced = fenced().await;
        let patch = json!({"metadata": {"annotations": {REBOOT_STATE: null}}});
        hosts
            .patch(HOST, &params(), &Patch::Merge(patch))
            .await
            .ok()?;
        power(&hosts, "on").await?;
        tokio::time::sleep(Duration::from_millis(1100)).await;
        set_node_ready(client, &node_name(ns), "True").await;
        Some((false, fenced))
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

// A herd: many machines of one Cluster unhealthy at once (`tests/herd.rs`, `benches/`).

/// `n` unhealthy machines of [`CLUSTER`] in one namespace: Machine and MaasMachine `m<i>`, host
/// `h<i>`, Node `<ns>-n<i>`, `i` from 0.
#[derive(Debug, Clone)]
pub struct Herd {
    pub ns: String,
    pub n: usize,
}

/// Machine and MaasMachine `i` of a [`Herd`].
pub fn herd_machine(i: usize) -> String {
    format!("m{i}")
}

/// Host `i` of a [`Herd`].
pub fn herd_host(i: usize) -> String {
    format!("h{i}")
}

impl Herd {
    /// Node `i` (Nodes are cluster-scoped; tests share the server).
    pub fn node(&self, i: usize) -> String {
        format!("{}-n{i}", self.ns)
    }
}

/// Runs `make(i)` for `0..n` as tasks, at most 32 at a time, and waits for them all.
pub async fn all_at_once<F, Fut>(n: usize, make: F)
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let permits = Arc::new(tokio::sync::Semaphore::new(32));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..n {
        let permit = permits.clone().acquire_owned().await.unwrap();
        let work = make(i);
        tasks.spawn(async move {
            work.await;
            drop(permit);
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
}

/// The Cluster and the `n` machines of a [`Herd`] in `ns`.
pub async fn create_herd(env: &TestEnv, ns: &str, n: usize) -> Herd {
    create_cluster(env, ns).await;
    let herd = Herd {
        ns: ns.to_owned(),
        n,
    };
    let client = env.client();
    all_at_once(n, |i| {
        let (client, herd) = (client.clone(), herd.clone());
        async move {
            let (machine, host, node) = (herd_machine(i), herd_host(i), herd.node(i));
            create_machine(&client, &herd.ns, &machine, &host, &node).await;
        }
    })
    .await;
    herd
}

/// One MaasRemediation per machine of the herd, created together.
pub async fn create_herd_remediations(
    client: &Client,
    herd: &Herd,
    retry_limit: i32,
    timeout: i32,
) {
    all_at_once(herd.n, |i| {
        let (client, herd) = (client.clone(), herd.clone());
        async move {
            create_remediation_for(&client, &herd.ns, &herd_machine(i), retry_limit, timeout).await;
        }
    })
    .await;
}

/// What a [`HerdGateway`] did.
#[derive(Debug, Default)]
pub struct HerdCounts {
    /// Power-offs by host.
    pub offs: BTreeMap<String, u32>,
    /// Power-ons by host.
    pub ons: BTreeMap<String, u32>,
    /// Hosts powered off while their Node already carried the out-of-service taint (fenced
    /// while the server still ran).
    pub fenced_before_off: Vec<String>,
    /// Hosts powered on again while their Node carried the taint (fenced while off).
    pub fenced_while_off: Vec<String>,
    /// The gateway's and kubelet's own requests by `(resource[/subresource], verb)`, every
    /// one sent (its periodic LIST of hosts left out).
    pub requests: BTreeMap<(&'static str, &'static str), u32>,
}

/// Plays maas-client and the kubelets for every host of a [`Herd`], as [`FakeGateway`] does
/// for one: a host carrying a reboot request and on is acknowledged (`reboot-state: off`),
/// then after `delay` reported off while its Node goes `Ready=Unknown` and loses a label and
/// an annotation; a host off with no request left is, after `delay`, reported on and its Node
/// `Ready=True`. The hosts are listed every 100 ms; each transition runs on its own task.
pub struct HerdGateway {
    pub counts: Arc<std::sync::Mutex<HerdCounts>>,
    /// Take no reboot request: the servers stay on.
    pub hold_off: Arc<AtomicBool>,
    /// Power no server on again.
    pub hold_on: Arc<AtomicBool>,
    _task: AbortOnDrop,
}

impl HerdGateway {
    pub fn counts(&self) -> std::sync::MutexGuard<'_, HerdCounts> {
        self.counts.lock().unwrap()
    }
}

pub fn start_herd_gateway(client: &Client, herd: &Herd, delay: Duration) -> HerdGateway {
    let counts = Arc::new(std::sync::Mutex::new(HerdCounts::default()));
    let (hold_off, hold_on) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let nodes: BTreeMap<String, String> =
        (0..herd.n).map(|i| (herd_host(i), herd.node(i))).collect();
    let task = AbortOnDrop::spawn({
        let (client, ns) = (client.clone(), herd.ns.clone());
        let (counts, hold_off, hold_on) = (counts.clone(), hold_off.clone(), hold_on.clone());
        async move {
            let hosts: Api<MaasHost> = Api::namespaced(client.clone(), &ns);
            let busy = Arc::new(std::sync::Mutex::new(std::collections::BTreeSet::new()));
            // A list sent before a transition's writes landed shows the host as it was: such a
            // list must not start the same transition again (only the number of the last list
            // begun before each transition ended is kept, per host).
            let lists = Arc::new(std::sync::atomic::AtomicU64::new(0));
            let ended = Arc::new(std::sync::Mutex::new(BTreeMap::<String, u64>::new()));
            loop {
                let this_list = lists.fetch_add(1, Ordering::SeqCst) + 1;
                let listed = hosts.list(&ListParams::default()).await;
                for host in listed.map(|l| l.items).unwrap_or_default() {
                    let name = host.name_any();
                    let Some(node) = nodes.get(&name).cloned() else {
                        continue;
                    };
                    if ended
                        .lock()
                        .unwrap()
                        .get(&name)
                        .is_some_and(|&last| this_list <= last)
                    {
                        continue;
                    }
                    let power = host.status.as_ref().and_then(|s| s.power_state);
                    let wanted = requested(&host);
                    let off = wanted
                        && power == Some(capmaas_api::host::PowerState::On)
                        && !hold_off.load(Ordering::SeqCst);
                    let on = !wanted
                        && power == Some(capmaas_api::host::PowerState::Off)
                        && !hold_on.load(Ordering::SeqCst);
                    if (off || on) && busy.lock().unwrap().insert(name.clone()) {
                        let (client, ns, counts, busy) =
                            (client.clone(), ns.clone(), counts.clone(), busy.clone());
                        let (lists, ended) = (lists.clone(), ended.clone());
                        tokio::spawn(async move {
                            transition(&client, &ns, &name, &node, off, delay, &counts).await;
                            let last_begun = lists.load(Ordering::SeqCst);
                            ended.lock().unwrap().insert(name.clone(), last_begun);
                            busy.lock().unwrap().remove(&name);
                        });
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    });
    HerdGateway {
        counts,
        hold_off,
        hold_on,
        _task: task,
    }
}

/// Powers `host` off (`off`) or on, playing the kubelet of `node` too; stops at the first
/// failed request (the next look tries again).
async fn transition(
    client: &Client,
    ns: &str,
    host: &str,
    node: &str,
    off: bool,
    delay: Duration,
    counts: &std::sync::Mutex<HerdCounts>,
) -> Option<()> {
    let count = |resource: &'static str, verb: &'static str| {
        *counts
            .lock()
            .unwrap()
            .requests
            .entry((resource, verb))
            .or_default() += 1;
    };
    let hosts: Api<MaasHost> = Api::namespaced(client.clone(), ns);
    let nodes: Api<Node> = Api::all(client.clone());
    let reboot_state = |value: Option<&str>| {
        Patch::Merge(json!({"metadata": {"annotations": {REBOOT_STATE: value}}}))
    };
    let power = |state: &str| Patch::Merge(json!({"status": {"powerState": state}}));
    if off {
        count("maashosts", "PATCH");
        hosts
            .patch(host, &params(), &reboot_state(Some("off")))
            .await
            .ok()?;
        tokio::time::sleep(delay).await;
        count("nodes", "GET");
        let fenced = has_out_of_service(&nodes.get(node).await.ok()?);
        count("maashosts/status", "PATCH");
        hosts
            .patch_status(host, &params(), &power("off"))
            .await
            .ok()?;
        let lost = json!({"metadata": {"labels": {"team": null}, "annotations": {"note": null}}});
        count("nodes", "PATCH");
        nodes
            .patch(node, &params(), &Patch::Merge(lost))
            .await
            .ok()?;
        count("nodes/status", "PATCH");
        node_ready(client, node, "Unknown").await.ok()?;
        let mut counts = counts.lock().unwrap();
        *counts.offs.entry(host.to_owned()).or_default() += 1;
        if fenced {
            counts.fenced_before_off.push(host.to_owned());
        }
    } else {
        tokio::time::sleep(delay).await;
        count("nodes", "GET");
        let fenced = has_out_of_service(&nodes.get(node).await.ok()?);
        count("maashosts", "PATCH");
        hosts
            .patch(host, &params(), &reboot_state(None))
            .await
            .ok()?;
        count("maashosts/status", "PATCH");
        hosts
            .patch_status(host, &params(), &power("on"))
            .await
            .ok()?;
        count("nodes/status", "PATCH");
        node_ready(client, node, "True").await.ok()?;
        let mut counts = counts.lock().unwrap();
        *counts.ons.entry(host.to_owned()).or_default() += 1;
        if fenced {
            counts.fenced_while_off.push(host.to_owned());
        }
    }
    Some(())
}
