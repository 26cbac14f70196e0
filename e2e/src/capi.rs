//! The Cluster API core manager, built from Go modules by `hack/testenv/build.sh`, run as
//! a process against the management API server with its webhooks served locally.

use std::path::Path;
use std::time::{Duration, Instant};

use capmaas_testenv::{Process, TestEnv, WebhookServing, cache_dir, free_port};

use crate::error::{Error, Result};

/// Starts the CAPI core manager, registers its webhooks and waits until it is ready.
pub async fn start_core_manager(env: &TestEnv, dir: &Path) -> Result<Process> {
    let serving = WebhookServing::generate()?;
    let cert_dir = dir.join("capi-webhook-certs");
    std::fs::create_dir_all(&cert_dir).map_err(Error::io("creating the CAPI cert dir"))?;
    std::fs::write(cert_dir.join("tls.crt"), &serving.serving.cert_pem)
        .map_err(Error::io("writing tls.crt"))?;
    std::fs::write(cert_dir.join("tls.key"), &serving.serving.key_pem)
        .map_err(Error::io("writing tls.key"))?;

    let manifests_path = cache_dir().join("capi-webhooks/core.yaml");
    let text = std::fs::read_to_string(&manifests_path)
        .map_err(Error::io(format!("reading {}", manifests_path.display())))?;
    let configurations: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&text).map_err(|e| Error::Manifest {
            name: manifests_path.display().to_string(),
            message: e.to_string(),
        })?;
    let configurations: Vec<serde_json::Value> = configurations
        .into_iter()
        .filter(|c| !c.is_null())
        .collect();
    env.register_webhooks(&configurations, &serving).await?;

    let health_port = free_port()?;
    let diagnostics_port = free_port()?;
    let mut process = Process::start(
        "capi-manager",
        &cache_dir().join("bin/capi-manager"),
        &[
            format!("--kubeconfig={}", env.kubeconfig_path().display()),
            "--leader-elect=false".into(),
            format!("--webhook-port={}", serving.port),
            format!("--webhook-cert-dir={}", cert_dir.display()),
            format!("--health-addr=127.0.0.1:{health_port}"),
            format!("--diagnostics-address=127.0.0.1:{diagnostics_port}"),
            "--insecure-diagnostics=true".into(),
            "--feature-gates=MachinePool=false,ClusterTopology=false".into(),
            "--skip-crd-migration-phases=StorageVersionMigration,CleanupManagedFields".into(),
            "--sync-period=1m".into(),
            "--v=2".into(),
        ],
        &[],
        dir,
    )?;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .map_err(|e| Error::Io {
            context: "building an HTTP client".into(),
            source: std::io::Error::other(e),
        })?;
    let url = format!("http://127.0.0.1:{health_port}/readyz");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        process.ensure_running()?;
        if let Ok(resp) = http.get(&url).send().await
            && resp.status().is_success()
        {
            return Ok(process);
        }
        if Instant::now() > deadline {
            return Err(Error::Timeout {
                what: format!(
                    "the CAPI core manager to be ready; log tail:\n{}",
                    process.log_tail(40)
                ),
                seconds: 120,
            });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
