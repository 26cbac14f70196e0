//! Shared by the admission test and the benchmark: a real API server with webhook-server
//! running as a process, registered with the webhook configurations that ship in `deploy/`.
#![allow(
    clippy::unwrap_used,
    clippy::needless_pass_by_value,
    dead_code,
    unreachable_pub
)]

use std::path::Path;
use std::time::Duration;

use capmaas_testenv::objects::load_yaml_documents;
use capmaas_testenv::{Process, TestEnv, WebhookServing, free_port, repo_root};
use serde_json::{Value, json};
use webhook_server::manifests::MANIFEST_PATH;

pub const API_VERSION: &str = "infrastructure.cluster.x-k8s.io/v1beta1";

pub struct Served {
    pub env: TestEnv,
    pub process: Process,
    pub serving: WebhookServing,
    pub dir: tempfile::TempDir,
}

/// Starts the API server and webhook-server (the `webhook-server` binary of this build), and
/// registers the configurations of `deploy/`.
pub async fn serve() -> Served {
    serve_on(TestEnv::our_crds_only().await.unwrap()).await
}

/// As [`serve`], on an API server the caller started (with the CRDs it needs).
pub async fn serve_on(env: TestEnv) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let serving = WebhookServing::generate().unwrap();
    let cert_dir = serving.write_files(&dir.path().join("certs")).unwrap();
    let health_port = free_port().unwrap();
    let mut process = Process::start(
        "webhook-server",
        Path::new(env!("CARGO_BIN_EXE_webhook-server")),
        &[
            format!("--kubeconfig={}", env.kubeconfig_path().display()),
            "--webhook-host=127.0.0.1".into(),
            format!("--webhook-port={}", serving.port),
            format!("--webhook-cert-dir={}", cert_dir.display()),
            "--cert-reload-interval=1s".into(),
            format!("--health-addr=127.0.0.1:{health_port}"),
            "--metrics-bind-addr=0".into(),
            "--log-format=text".into(),
        ],
        &[("RUST_LOG", "info,webhook_server=debug")],
        dir.path(),
    )
    .unwrap();
    process
        .wait_ready(
            &format!("http://127.0.0.1:{health_port}/readyz"),
            Duration::from_secs(60),
        )
        .await
        .unwrap();
    let configurations = load_yaml_documents(&repo_root().join(MANIFEST_PATH)).unwrap();
    env.register_webhooks(&configurations, &serving)
        .await
        .unwrap();
    Served {
        env,
        process,
        serving,
        dir,
    }
}

/// An object of our group.
pub fn object(kind: &str, name: &str, spec: Value) -> Value {
    json!({"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": name}, "spec": spec})
}
