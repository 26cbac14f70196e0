//! Shared setup: a real API server (testenv), the MAAS simulator, and the gateway either
//! in-process or as the built `maas-client` binary.
#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use capmaas_api::MaasInventory;
use capmaas_api::common::{ConsumerReference, ReleasePolicy, SecretKeyReference};
use capmaas_api::host::{HostProvisioning, MaasHost};
use capmaas_runtime::{CommonArgs, Runtime};
/// Polls until a check returns `Some`, or panics after the timeout (shared with every crate).
pub use capmaas_testenv::eventually;
use clap::{Args as _, Parser};
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use maas_client::args::{Environment, GatewayArgs, GatewayConfig};
use tokio_util::sync::CancellationToken;

/// The binary's command line, as its `main` parses it.
#[derive(Debug, Parser)]
pub struct Flags {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub gateway: GatewayArgs,
}

pub const INSTALLATION: &str = "capmaas-test";

/// An API server with our CRDs (no controller-manager, no CAPI) and a namespace named after
/// `prefix`.
pub async fn api_server(prefix: &str) -> (capmaas_testenv::TestEnv, kube::Client, String) {
    let env = bare_api_server().await;
    let client = env.client();
    let ns = env.create_namespace(prefix).await.unwrap();
    (env, client, ns)
}

/// An API server with our CRDs only: no controller-manager, no CAPI.
pub async fn bare_api_server() -> capmaas_testenv::TestEnv {
    capmaas_testenv::TestEnv::builder()
        .controller_manager(false)
        .capi_crds(false)
        .start()
        .await
        .unwrap()
}

/// A MAAS simulator with `machines` machines whose operations complete at once.
pub async fn instant_sim(machines: usize) -> maas_sim::RunningSim {
    maas_sim::Simulator::start(maas_sim::SimConfig {
        machines,
        ..maas_sim::SimConfig::instant()
    })
    .await
    .unwrap()
}

/// A MAAS client of the simulator with `key` (`consumer:token:secret`).
pub fn maas_as(url: &str, key: &str) -> maas_api_client::MaasClient {
    maas_api_client::MaasClient::new(
        maas_api_client::Config::builder(url, maas_api_client::ApiKey::parse(key).unwrap())
            .build()
            .unwrap(),
    )
    .unwrap()
}

/// A MAAS client of the simulator with the gateway's key.
pub fn maas_of(sim: &maas_sim::RunningSim) -> maas_api_client::MaasClient {
    maas_as(&sim.url(), &sim.api_key())
}

/// The DNS resources MAAS lists for `fqdn`, without the implicit ones (negative ids).
pub async fn live_dns_resources(
    maas: &maas_api_client::MaasClient,
    fqdn: &str,
) -> Vec<maas_api_client::DnsResource> {
    maas.list_dns_resources(&maas_api_client::DnsResourceFilter::fqdn(fqdn))
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.id >= 0)
        .collect()
}

/// Whether `agent_name` is this installation's identity for the MaasHost `namespace/host`
/// (any release policy).
pub fn is_identity_of(agent_name: &str, namespace: &str, host: &str) -> bool {
    maas_client::host::identity::candidates(INSTALLATION, namespace, host)
        .iter()
        .take(maas_client::host::identity::POLICIES.len())
        .any(|candidate| candidate == agent_name)
}

/// Flags for a gateway watching `namespace`.
pub fn gateway_args(sim: &maas_sim::RunningSim, namespace: &str, extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = vec![
        "maas-client".into(),
        "--metrics-bind-addr=127.0.0.1:0".into(),
        "--health-addr=127.0.0.1:0".into(),
        format!("--namespace={namespace}"),
        format!("--maas-endpoint={}", sim.url()),
        "--maas-allow-insecure-http".into(),
        format!("--installation-id={INSTALLATION}"),
        "--inventory-sync-interval=1s".into(),
        "--maas-rate-limit=500".into(),
        "--orphan-sweep-interval=1s".into(),
        "--orphan-grace-period=3s".into(),
    ];
    // A flag given in `extra` replaces the default (clap refuses repeated flags).
    let flag = |arg: &str| arg.split('=').next().unwrap_or(arg).to_owned();
    let overridden: Vec<String> = extra.iter().map(|e| flag(e)).collect();
    v.retain(|a| !overridden.contains(&flag(a)));
    v.extend(extra.iter().map(|s| (*s).to_owned()));
    v
}

/// A gateway running in this process until the returned token is cancelled.
pub struct InProcess {
    pub token: CancellationToken,
    pub task: tokio::task::JoinHandle<()>,
}

impl InProcess {
    pub async fn stop(self) {
        self.token.cancel();
        tokio::time::timeout(Duration::from_secs(30), self.task)
            .await
            .expect("gateway stops")
            .unwrap();
    }
}

pub async fn start_in_process(
    env: &capmaas_testenv::TestEnv,
    sim: &maas_sim::RunningSim,
    namespace: &str,
    extra: &[&str],
) -> InProcess {
    start_in_process_with(env, sim, namespace, extra, |_| {}).await
}

/// [`start_in_process`] with the resolved configuration adjusted first (settings that have no
/// flag, such as the MAAS request timeout).
pub async fn start_in_process_with(
    env: &capmaas_testenv::TestEnv,
    sim: &maas_sim::RunningSim,
    namespace: &str,
    extra: &[&str],
    adjust: impl FnOnce(&mut GatewayConfig),
) -> InProcess {
    let command_line = gateway_args(sim, namespace, extra);
    let flags = Flags::try_parse_from(&command_line).unwrap();
    let environment = Environment {
        api_key: Some(sim.api_key()),
        namespace: namespace.to_owned(),
    };
    let mut config = GatewayConfig::resolve(&flags.gateway, &environment).unwrap();
    adjust(&mut config);
    // The shared flags go to the embedded runtime, which chooses the admin addresses itself.
    let common = CommonArgs::augment_args(clap::Command::new(maas_client::BINARY));
    let is_common = |arg: &&String| {
        let name = arg.split('=').next().unwrap_or(arg).trim_start_matches('-');
        !matches!(name, "metrics-bind-addr" | "health-addr")
            && common.get_arguments().any(|a| a.get_long() == Some(name))
    };
    let runtime_flags: Vec<&str> = command_line[1..]
        .iter()
        .filter(is_common)
        .map(String::as_str)
        .collect();
    let token = CancellationToken::new();
    let runtime = Runtime::embedded(
        maas_client::BINARY,
        env.kube_config().await.unwrap(),
        token.clone(),
        &runtime_flags,
    )
    .await
    .unwrap();
    let task = tokio::spawn(async move {
        maas_client::run_with(runtime, config).await.unwrap();
    });
    InProcess { token, task }
}

pub async fn create_inventory(client: &kube::Client, namespace: &str, name: &str, pool: &str) {
    let api: Api<MaasInventory> = Api::namespaced(client.clone(), namespace);
    let inv: MaasInventory = serde_json::from_value(serde_json::json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "MaasInventory",
        "metadata": { "name": name },
        "spec": { "resourcePool": pool },
    }))
    .unwrap();
    api.create(&PostParams::default(), &inv).await.unwrap();
}

pub async fn hosts(client: &kube::Client, namespace: &str) -> Vec<MaasHost> {
    let api: Api<MaasHost> = Api::namespaced(client.clone(), namespace);
    api.list(&ListParams::default()).await.unwrap().items
}

pub async fn host(client: &kube::Client, namespace: &str, name: &str) -> MaasHost {
    Api::<MaasHost>::namespaced(client.clone(), namespace)
        .get(name)
        .await
        .unwrap()
}

pub async fn create_user_data(client: &kube::Client, namespace: &str, name: &str, data: &str) {
    let api: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), namespace);
    let secret = serde_json::from_value(serde_json::json!({
        "metadata": { "name": name },
        "stringData": { "value": data },
    }))
    .unwrap();
    api.create(&PostParams::default(), &secret).await.unwrap();
}

/// The inventory `inv` of pool `default` and the user data `user-data`: what the hosts of a
/// test need to be imported and then deployed.
pub async fn create_deployable_inventory(client: &kube::Client, namespace: &str) {
    create_inventory(client, namespace, "inv", "default").await;
    create_user_data(client, namespace, "user-data", "#cloud-config\n").await;
}

/// [`create_deployable_inventory`], then [`imported`]: the system IDs of its `n` hosts, sorted.
pub async fn import_hosts(client: &kube::Client, namespace: &str, n: usize) -> Vec<String> {
    create_deployable_inventory(client, namespace).await;
    imported(client, namespace, n).await
}

/// Waits up to 30 s until `n` hosts are imported with status; their system IDs, sorted.
pub async fn imported(client: &kube::Client, namespace: &str, n: usize) -> Vec<String> {
    imported_within(client, namespace, n, Duration::from_secs(30)).await
}

/// [`imported`], waiting up to `timeout`.
pub async fn imported_within(
    client: &kube::Client,
    namespace: &str,
    n: usize,
    timeout: Duration,
) -> Vec<String> {
    eventually("hosts imported", timeout, || async {
        let hosts = hosts(client, namespace).await;
        (hosts.len() == n && hosts.iter().all(|h| h.status.is_some())).then(|| {
            let mut ids: Vec<String> = hosts.iter().map(|h| h.spec.system_id.clone()).collect();
            ids.sort();
            ids
        })
    })
    .await
}

/// Claims and asks for deployment the way machine-controller does (its own field manager).
pub async fn request_deploy(client: &kube::Client, namespace: &str, host: &str, consumer: &str) {
    request_deploy_with_network(client, namespace, host, consumer, None).await;
}

/// [`request_deploy`] with a rendered network data Secret.
pub async fn request_deploy_with_network(
    client: &kube::Client,
    namespace: &str,
    host: &str,
    consumer: &str,
    network_data: Option<&str>,
) {
    request_deploy_with(client, namespace, host, consumer, network_data, None).await;
}

/// [`request_deploy`] with a release policy (`spec.provisioning.releasePolicy`).
pub async fn request_deploy_with_policy(
    client: &kube::Client,
    namespace: &str,
    host: &str,
    consumer: &str,
    policy: ReleasePolicy,
) {
    request_deploy_with(client, namespace, host, consumer, None, Some(policy)).await;
}

fn consumer_ref(consumer: &str) -> ConsumerReference {
    ConsumerReference {
        api_version: "infrastructure.cluster.x-k8s.io/v1beta1".into(),
        kind: "MaasMachine".into(),
        name: consumer.into(),
        uid: format!("uid-{consumer}"),
        namespace: None,
    }
}

/// Claims and asks for the host as machine-controller does for a MaasMachine whose
/// `spec.systemID` already names the host's machine (CAPMAAS provisioned it): an allocation
/// without our identity may be taken over.
pub async fn request_takeover(client: &kube::Client, namespace: &str, host: &str, consumer: &str) {
    request_deploy_adjusted(client, namespace, host, consumer, |p| {
        p.adopt_allocation = Some(true);
    })
    .await;
}

async fn request_deploy_with(
    client: &kube::Client,
    namespace: &str,
    host: &str,
    consumer: &str,
    network_data: Option<&str>,
    release_policy: Option<ReleasePolicy>,
) {
    request_deploy_adjusted(client, namespace, host, consumer, |p| {
        p.network_data_secret_ref = network_data.map(|name| SecretKeyReference {
            name: name.to_owned(),
            key: "networkData".to_owned(),
        });
        p.release_policy = release_policy;
    })
    .await;
}

pub async fn request_deploy_adjusted(
    client: &kube::Client,
    namespace: &str,
    host: &str,
    consumer: &str,
    adjust: impl FnOnce(&mut HostProvisioning),
) {
    let consumer_ref = consumer_ref(consumer);
    let mut provisioning = HostProvisioning {
        image: "ubuntu/jammy".into(),
        user_data_secret_ref: Some(SecretKeyReference::new("user-data")),
        meta_data_secret_ref: None,
        network_data_secret_ref: None,
        hostname: Some(format!("node-{consumer}")),
        deploy_in_memory: false,
        hwe_kernel: Some("hwe-22.04".into()),
        release_policy: None,
        adopt_allocation: None,
        keep_powered_on: None,
        register_vm_host: None,
    };
    adjust(&mut provisioning);
    let spec = serde_json::json!({ "consumerRef": consumer_ref, "provisioning": provisioning });
    apply_host_spec(client, namespace, host, spec).await;
}

/// Server-side applies `spec` to the host as machine-controller's field manager: what it
/// leaves out, machine-controller no longer asks for.
async fn apply_host_spec(
    client: &kube::Client,
    namespace: &str,
    host: &str,
    spec: serde_json::Value,
) {
    let api: Api<MaasHost> = Api::namespaced(client.clone(), namespace);
    let patch = serde_json::json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "MaasHost",
        "spec": spec,
    });
    api.patch(
        host,
        &PatchParams::apply("capmaas-machine-controller").force(),
        &Patch::Apply(&patch),
    )
    .await
    .unwrap();
}

/// Drops the request but keeps the claim: what machine-controller does first when its machine
/// is deleted (it drops the claim once the host reports the release done).
pub async fn clear_provisioning(
    client: &kube::Client,
    namespace: &str,
    host: &str,
    consumer: &str,
) {
    let spec = serde_json::json!({ "consumerRef": consumer_ref(consumer) });
    apply_host_spec(client, namespace, host, spec).await;
}

/// Deletes a host as `clusterctl move` does (annotated `delete-for-move` first): the gateway
/// lets it go without releasing its server, which is left to whoever claims it next, or to the
/// orphan sweep.
pub async fn delete_host_for_move(client: &kube::Client, namespace: &str, host: &str) {
    let api: Api<MaasHost> = Api::namespaced(client.clone(), namespace);
    let patch = serde_json::json!({ "metadata": { "annotations": {
        capmaas_api::keys::ANNOTATION_DELETE_FOR_MOVE: "" } } });
    api.patch(host, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    api.delete(host, &kube::api::DeleteParams::default())
        .await
        .unwrap();
}

/// Drops the claim and the request (machine-controller deleting its machine).
pub async fn release_request(client: &kube::Client, namespace: &str, host: &str) {
    apply_host_spec(client, namespace, host, serde_json::json!({})).await;
}

pub async fn set_annotation(
    client: &kube::Client,
    namespace: &str,
    host: &str,
    key: &str,
    value: Option<&str>,
) {
    let api: Api<MaasHost> = Api::namespaced(client.clone(), namespace);
    let patch = serde_json::json!({ "metadata": { "annotations": { key: value } } });
    api.patch(host, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

pub fn provisioning_state(h: &MaasHost) -> Option<String> {
    h.status
        .as_ref()
        .and_then(|s| s.provisioning_state)
        .map(|s| format!("{s:?}"))
}

pub fn labels(h: &MaasHost) -> BTreeMap<String, String> {
    h.metadata.labels.clone().unwrap_or_default()
}

/// The built `maas-client` binary watching `ns`, logging to `log` (appended), with `extra`
/// flags; killed when dropped.
pub fn spawn_binary(
    sim: &maas_sim::RunningSim,
    env: &capmaas_testenv::TestEnv,
    ns: &str,
    log: &std::path::Path,
    extra: &[&str],
) -> tokio::process::Child {
    let args = gateway_args(sim, ns, extra);
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    tokio::process::Command::new(env!("CARGO_BIN_EXE_maas-client"))
        .args(&args[1..])
        .arg(format!("--kubeconfig={}", env.kubeconfig_path().display()))
        .env("MAAS_API_KEY", sim.api_key())
        .env("RUST_LOG", "info,maas_client=debug")
        .stdout(std::process::Stdio::null())
        .stderr(log.try_clone().unwrap())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// SIGKILLs the binary and reaps it.
pub async fn kill_binary(mut child: tokio::process::Child) {
    child.start_kill().unwrap();
    child.wait().await.unwrap();
}

// API writes, counted by the API server itself: a write that changes nothing counts too.

/// Write requests the API server answered (`apiserver_request_total` with a write verb),
/// by `resource[/subresource]`.
#[derive(Debug, Default)]
pub struct ApiWrites(pub BTreeMap<String, u64>);

impl ApiWrites {
    /// Reads the API server's counters now.
    // Counters are whole numbers printed as floats.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    pub async fn scrape(client: &kube::Client) -> Self {
        let requests = capmaas_testenv::ApiRequests::scrape(client).await.unwrap();
        Self(
            requests
                .writes()
                .by_resource()
                .into_iter()
                .map(|(resource, n)| (resource, n as u64))
                .collect(),
        )
    }

    /// The writes since `before`, resources without any left out.
    pub fn since(&self, before: &Self) -> Self {
        Self(
            self.0
                .iter()
                .map(|(k, v)| (k.clone(), v - before.0.get(k).copied().unwrap_or(0)))
                .filter(|(_, v)| *v > 0)
                .collect(),
        )
    }

    /// Without `n` lease writes that were the API server's own.
    pub fn without_leases(mut self, n: u64) -> Self {
        if let Some(v) = self.0.get_mut("leases") {
            *v = v.saturating_sub(n);
            if *v == 0 {
                self.0.remove("leases");
            }
        }
        self
    }

    /// All writes.
    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }
}

impl std::fmt::Display for ApiWrites {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

/// Counts the lease changes in `kube-system` (the API server renewing its identity lease
/// every few seconds), to tell them from the gateway's lease writes (host bindings) in
/// [`ApiWrites::without_leases`].
#[derive(Debug)]
pub struct BackgroundLeases {
    changes: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl BackgroundLeases {
    /// Starts counting once the watch has listed what exists.
    pub async fn start(client: &kube::Client) -> Self {
        let changes = Arc::new(AtomicU64::new(0));
        let counter = changes.clone();
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let api: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
        let task = tokio::spawn(async move {
            let mut ready = Some(ready_tx);
            let mut stream = watcher(api, watcher::Config::default()).boxed();
            while let Some(event) = stream.next().await {
                match event {
                    Ok(watcher::Event::InitDone) => {
                        if let Some(tx) = ready.take() {
                            let _ = tx.send(());
                        }
                    }
                    Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_)) if ready.is_none() => {
                        counter.fetch_add(1, Ordering::Relaxed);
                    }
                    _ => {}
                }
            }
        });
        let _ = ready_rx.await;
        Self { changes, task }
    }

    /// Stops counting; the number of changes seen.
    pub fn stop(self) -> u64 {
        self.task.abort();
        self.changes.load(Ordering::Relaxed)
    }
}
