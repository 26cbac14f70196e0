//! The Cluster API core manager, built from Go modules by `hack/testenv/build.sh`, run as
//! a process against the management API server with its webhooks served locally.

use std::path::Path;
use std::time::Duration;

use capmaas_testenv::objects::load_yaml_documents;
use capmaas_testenv::{Process, TestEnv, WebhookServing, cache_dir, free_port};

use crate::error::{Error, Result};

/// The user CAPI core runs as (client certificate, group `system:masters`).
pub const CAPI_USER: &str = "capi-manager";

/// Extra flags of CAPI core's manager, separated by spaces (`CAPMAAS_CAPI_ARGS`): for what-if
/// measurements, never set in tests.
pub const CAPI_ARGS_ENV: &str = "CAPMAAS_CAPI_ARGS";

/// Starts the CAPI core manager, registers its webhooks and waits until it is ready.
pub async fn start_core_manager(env: &TestEnv, dir: &Path) -> Result<Process> {
    let serving = WebhookServing::generate()?;
    let cert_dir = serving.write_files(&dir.join("capi-webhook-certs"))?;

    let manifests_path = cache_dir().join("capi-webhooks/core.yaml");
    let configurations = load_yaml_documents(&manifests_path)?;
    env.register_webhooks(&configurations, &serving).await?;

    // Its own user (a system:masters member, as the admin), so that an audit log tells CAPI
    // core's writes from the test's.
    let (kubeconfig, _) = env.user_kubeconfig(CAPI_USER, &["system:masters"]).await?;
    let kubeconfig_path = dir.join("capi-manager.kubeconfig");
    std::fs::write(&kubeconfig_path, kubeconfig)
        .map_err(Error::io("writing the kubeconfig of capi-manager"))?;
    let health_port = free_port()?;
    let diagnostics_port = free_port()?;
    let mut args = vec![
        format!("--kubeconfig={}", kubeconfig_path.display()),
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
    ];
    // What-if runs of the benchmark, e.g. CAPI core's client rate limit (`--kube-api-qps`).
    args.extend(
        std::env::var(CAPI_ARGS_ENV)
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_owned),
    );
    let mut process = Process::start(
        "capi-manager",
        &cache_dir().join("bin/capi-manager"),
        &args,
        &[],
        dir,
    )?;
    process
        .wait_ready(
            &format!("http://127.0.0.1:{health_port}/readyz"),
            Duration::from_secs(120),
        )
        .await?;
    Ok(process)
}
