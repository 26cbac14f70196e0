//! Shared setup: a real API server (testenv), the MAAS simulator, and the gateway either
//! in-process or as the built `maas-client` binary.
#![allow(
    dead_code,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use capmaas_api::MaasInventory;
use capmaas_api::common::{ConsumerReference, SecretKeyReference};
use capmaas_api::host::{HostProvisioning, MaasHost};
use capmaas_runtime::{CommonArgs, Runtime};
use clap::Parser;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use maas_gateway::config::{Args, Environment, GatewayConfig};
use tokio_util::sync::CancellationToken;

pub const INSTALLATION: &str = "capmaas-test";

pub async fn kube_config(env: &capmaas_testenv::TestEnv) -> kube::Config {
    let kc = kube::config::Kubeconfig::read_from(env.kubeconfig_path()).unwrap();
    kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .unwrap()
}

/// Flags for a gateway watching `namespace`.
pub fn gateway_args(sim: &maas_sim::RunningSim, namespace: &str, extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = vec![
        "maas-client".into(),
        "--metrics-bind-addr=127.0.0.1:0".into(),
        "--health-addr=127.0.0.1:0".into(),
        format!("--namespace={namespace}"),
        format!("--maas-endpoint={}", sim.url()),
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
    let args = Args::try_parse_from(gateway_args(sim, namespace, extra)).unwrap();
    let environment = Environment {
        api_key: Some(sim.api_key()),
        namespace: namespace.to_owned(),
    };
    let config = GatewayConfig::resolve(&args, &environment).unwrap();
    let token = CancellationToken::new();
    let common: CommonArgs = args.common.clone();
    let runtime = Runtime::builder(maas_gateway::BINARY)
        .with_args(common)
        .with_kube_config(kube_config(env).await)
        .without_telemetry()
        .with_shutdown_token(token.clone())
        .drain_timeout(Duration::from_secs(5))
        .build()
        .await
        .unwrap();
    let task = tokio::spawn(async move {
        maas_gateway::run_with(runtime, config).await.unwrap();
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

/// Polls `check` every 200 ms until it returns `Some`, or panics after `within`.
pub async fn eventually<T, F, Fut>(what: &str, within: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
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
    let api: Api<MaasHost> = Api::namespaced(client.clone(), namespace);
    let consumer_ref = ConsumerReference {
        api_version: "infrastructure.cluster.x-k8s.io/v1beta1".into(),
        kind: "MaasMachine".into(),
        name: consumer.into(),
        uid: format!("uid-{consumer}"),
    };
    let provisioning = HostProvisioning {
        image: "ubuntu/jammy".into(),
        user_data_secret_ref: Some(SecretKeyReference::new("user-data")),
        network_data_secret_ref: network_data.map(|name| SecretKeyReference {
            name: name.to_owned(),
            key: "networkData".to_owned(),
        }),
        hostname: Some(format!("node-{consumer}")),
        deploy_in_memory: false,
        hwe_kernel: None,
        release_policy: None,
    };
    let patch = serde_json::json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "MaasHost",
        "spec": { "consumerRef": consumer_ref, "provisioning": provisioning },
    });
    api.patch(
        host,
        &PatchParams::apply("capmaas-machine-controller").force(),
        &Patch::Apply(&patch),
    )
    .await
    .unwrap();
}

/// Drops the claim and the request (machine-controller deleting its machine).
pub async fn release_request(client: &kube::Client, namespace: &str, host: &str) {
    let api: Api<MaasHost> = Api::namespaced(client.clone(), namespace);
    let patch = serde_json::json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "MaasHost",
        "spec": {},
    });
    api.patch(
        host,
        &PatchParams::apply("capmaas-machine-controller").force(),
        &Patch::Apply(&patch),
    )
    .await
    .unwrap();
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
