//! Brings up the whole end-to-end environment: a management API server with Cluster API
//! core, a workload API server, the MAAS simulator, our binaries as processes and the
//! kubelet stand-in.

use std::path::{Path, PathBuf};
use std::time::Duration;

use capmaas_testenv::objects::deploy_base_rbac;
use capmaas_testenv::{Process, TestEnv, WebhookServing, repo_root};
use kube::api::DynamicObject;
use maas_sim::{LatencyProfile, RunningSim, SimConfig, Timings};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub use crate::api::{apply, dynamic_api, wait_for};
use crate::error::{Error, Result};
use crate::overlay::Access;
use crate::{capi, kubelet};

/// Our binaries, in start order: the webhook server first, so every write of the others is
/// admitted through it.
pub const CONTROLLERS: [&str; 6] = [
    "webhook-server",
    "maas-client",
    "cluster-controller",
    "machine-controller",
    "data-controller",
    "remediation-controller",
];

/// How to size the environment.
#[derive(Debug, Clone)]
pub struct HarnessConfig {
    /// Simulated MAAS machines.
    pub machines: usize,
    /// MAAS zones.
    pub zones: Vec<String>,
    /// Simulated deployment time of one machine.
    pub deploy_time: Duration,
    /// Spread of the deployment time, percent: each server takes `deploy_time` × a factor in
    /// [1 − spread, 1 + spread] fixed by the seed and its system id (0: all exactly the same).
    pub deploy_spread_percent: u32,
    /// Simulated release time.
    pub release_time: Duration,
    /// How long the simulated MAAS takes to answer (none by default).
    pub maas_latency: LatencyProfile,
    /// `RUST_LOG` filter of our binaries.
    pub log_filter: String,
    /// Extra flags of the gateway (`maas-client`), e.g. `--orphan-grace-period=20s`.
    pub gateway_args: Vec<String>,
    /// Seed of the simulator's random rolls (fault injection) and of the deployment spread.
    pub seed: u64,
    /// Start our six binaries (default). Off: API servers, CAPI core, the simulator and the
    /// kubelet stand-in only, for a run where something else plays the provider (the
    /// benchmark's null provider).
    pub our_controllers: bool,
    /// Write the management API server's audit log ([`TestEnv::audit_log_path`]).
    pub audit_log: bool,
    /// Extra environment of all our binaries ([`HarnessConfig::binary_env`]).
    pub binary_env: Vec<(String, String)>,
    /// Run our binaries with the access of `deploy/overlays/<overlay>` as it renders (its
    /// RBAC, admission policies and watched namespaces, which are created first) instead of
    /// `deploy/base`'s files: `production` is the namespaced install.
    pub access_from_overlay: Option<String>,
}

impl Default for HarnessConfig {
    fn default() -> Self {
        Self {
            machines: 20,
            zones: vec!["z1".into(), "z2".into(), "z3".into()],
            deploy_time: Duration::from_secs(2),
            deploy_spread_percent: 0,
            release_time: Duration::from_millis(500),
            maas_latency: LatencyProfile::none(),
            log_filter: "info".into(),
            gateway_args: Vec::new(),
            seed: 1,
            our_controllers: true,
            audit_log: false,
            binary_env: Vec::new(),
            access_from_overlay: None,
        }
    }
}

/// The running environment; dropping it stops everything.
#[derive(Debug)]
pub struct Harness {
    /// The management cluster (CAPI core, our CRDs, our controllers).
    pub management: TestEnv,
    /// The workload cluster (Nodes registered by the kubelet stand-in).
    pub workload: TestEnv,
    /// The MAAS simulator.
    pub sim: RunningSim,
    pub(crate) capi: Process,
    pub(crate) controllers: Vec<Process>,
    pub(crate) log_filter: String,
    pub(crate) gateway_args: Vec<String>,
    pub(crate) binary_env: Vec<(String, String)>,
    /// Where our access comes from: `deploy/base`'s files, or an overlay's rendering.
    pub(crate) access: Access,
    pub(crate) restarts: u64,
    dir: tempfile::TempDir,
    cancel: CancellationToken,
    silence: kubelet::Silence,
    pub(crate) webhook: WebhookServing,
    /// Management clusters this one replaced (`clusterctl move`), with their processes, kept
    /// until the harness goes.
    pub(crate) retired: Vec<Retired>,
    /// The metrics port of each of our binaries, as last started (a restart takes a new one).
    pub(crate) metrics_ports: std::sync::Mutex<std::collections::BTreeMap<&'static str, u16>>,
}

/// A management cluster replaced by a move, with the processes that ran against it.
#[derive(Debug)]
pub struct Retired {
    /// Its API server.
    pub env: TestEnv,
    /// Its CAPI core manager.
    pub capi: Process,
    /// Our binaries that ran against it (stopped by [`Harness::retire_source`], `clusterctl move` in `moving.rs`).
    pub controllers: Vec<Process>,
}

/// The namespace of the provider's Deployments in `deploy/`.
pub const DEPLOY_NAMESPACE: &str = "capmaas-system";

/// Where the webhook configurations that ship in `deploy/` live, relative to the repository.
pub const WEBHOOK_CONFIGURATIONS: &str = "deploy/base/webhook-server/webhook-configurations.yaml";

/// Where `cargo build` put the workspace's binaries (`CAPMAAS_BIN_DIR` overrides; a relative
/// folder is taken from the current directory, since the processes run in another one).
pub fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CAPMAAS_BIN_DIR") {
        let dir = PathBuf::from(dir);
        return match std::env::current_dir() {
            Ok(cwd) if dir.is_relative() => cwd.join(dir),
            _ => dir,
        };
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| repo_root().join("target"), PathBuf::from);
    target.join("debug")
}

/// Path of one of our binaries, or a clear error when it has not been built.
pub fn binary(name: &str) -> Result<PathBuf> {
    let path = bin_dir().join(name);
    if path.is_file() {
        Ok(path)
    } else {
        Err(Error::MissingBinary { path })
    }
}

impl Harness {
    /// Starts everything; returns when CAPI core and our controllers are running.
    pub async fn start(config: HarnessConfig) -> Result<Self> {
        // Two API servers' start-up futures are large; keep them off the caller's stack.
        Box::pin(Self::start_inner(config)).await
    }

    async fn start_inner(config: HarnessConfig) -> Result<Self> {
        if config.our_controllers {
            for name in CONTROLLERS {
                binary(name)?;
            }
        }
        let dir = tempfile::Builder::new()
            .prefix("capmaas-e2e-")
            .tempdir()
            .map_err(Error::io("creating the e2e directory"))?;
        let (management, workload) = tokio::join!(
            TestEnv::builder().audit_log(config.audit_log).start(),
            TestEnv::api_server_only(),
        );
        let (management, workload) = (management?, workload?);
        let mut sim_config = SimConfig::with_machines(config.machines);
        sim_config.zones.clone_from(&config.zones);
        sim_config.seed = config.seed;
        sim_config.timings = Timings {
            deploy: config.deploy_time,
            deploy_spread_percent: config.deploy_spread_percent,
            release: config.release_time,
            ..Timings::default()
        };
        sim_config.latency.clone_from(&config.maas_latency);
        let sim = maas_sim::Simulator::start(sim_config).await?;
        let capi = capi::start_core_manager(&management, dir.path()).await?;

        let cancel = CancellationToken::new();
        let silence = kubelet::Silence::default();
        tokio::spawn(kubelet::run(
            sim.state(),
            workload.client(),
            silence.clone(),
            cancel.clone(),
        ));

        let mut harness = Self {
            management,
            workload,
            sim,
            capi,
            controllers: Vec::new(),
            log_filter: config.log_filter,
            gateway_args: config.gateway_args,
            binary_env: config.binary_env,
            access: Access::of(config.access_from_overlay.as_deref())?,
            restarts: 0,
            dir,
            cancel,
            silence,
            webhook: WebhookServing::generate()?,
            retired: Vec::new(),
            metrics_ports: std::sync::Mutex::default(),
        };
        if !config.our_controllers {
            return Ok(harness);
        }
        harness.grant_deploy_rbac().await?;
        harness.start_webhook_server().await?;
        for name in CONTROLLERS.into_iter().filter(|n| *n != "webhook-server") {
            let process = harness.start_controller(name).await?;
            harness.controllers.push(process);
        }
        Ok(harness)
    }

    /// Creates what `deploy/base` (or the overlay of [`HarnessConfig::access_from_overlay`])
    /// gives each binary (namespaces, ServiceAccounts, RBAC, the admission policies) and
    /// writes a kubeconfig per binary holding a token of its ServiceAccount: every binary
    /// then runs with exactly its Deployment's permissions, so each scenario proves them
    /// sufficient.
    pub(crate) async fn grant_deploy_rbac(&self) -> Result<()> {
        let client = self.management.client();
        let documents = match &self.access {
            Access::Base => {
                let mut documents = deploy_base_rbac(&CONTROLLERS)?;
                // The API server's own admission policies, so every scenario runs under them too.
                documents.extend(capmaas_testenv::objects::load_yaml_documents(
                    &capmaas_testenv::repo_root().join("deploy/base/admission-policies.yaml"),
                )?);
                documents
            }
            Access::Overlay(access) => {
                let mut documents: Vec<Value> = access
                    .served_namespaces()
                    .into_iter()
                    .map(|ns| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
                    .collect();
                documents.extend(access.documents.iter().cloned());
                documents
            }
        };
        for document in &documents {
            apply(&client, document).await?;
        }
        for name in CONTROLLERS {
            let yaml = self
                .management
                .service_account_token_kubeconfig(DEPLOY_NAMESPACE, &format!("capmaas-{name}"), 24)
                .await?;
            std::fs::write(self.kubeconfig_of(name), yaml)
                .map_err(Error::io(format!("writing the kubeconfig of {name}")))?;
        }
        Ok(())
    }

    /// The namespace `binary` watches (`--namespace`), if the access it runs with names one.
    pub fn watch_namespace(&self, binary: &str) -> Option<&str> {
        self.access.watch_namespace(binary)
    }

    /// The kubeconfig a binary runs with: its ServiceAccount's token.
    pub(crate) fn kubeconfig_of(&self, name: &str) -> PathBuf {
        self.run_dir().join(format!("{name}.kubeconfig"))
    }

    /// Where the current management cluster's processes keep their files: the harness folder,
    /// or `management-<n>` in it after the `n`-th `clusterctl move`.
    pub(crate) fn run_dir(&self) -> PathBuf {
        self.management_dir(self.retired.len())
    }

    pub(crate) fn management_dir(&self, moves: usize) -> PathBuf {
        match moves {
            0 => self.dir.path().to_path_buf(),
            n => self.dir.path().join(format!("management-{n}")),
        }
    }

    /// Kills one of our binaries (SIGKILL) and starts it again. The killed process's log is
    /// appended to `<name>.previous.log` in [`Self::dir`] (the new process starts a fresh
    /// `<name>.log`).
    pub async fn restart_controller(&mut self, name: &'static str) -> Result<()> {
        if let Some(index) = self.controllers.iter().position(|p| p.name() == name) {
            let mut old = self.controllers.remove(index);
            old.kill().await;
            self.restarts += 1;
            archive_log(
                old.log_path(),
                &self.run_dir().join(format!("{name}.previous.log")),
                self.restarts,
            )?;
        }
        let process = self.start_controller(name).await?;
        self.controllers.push(process);
        Ok(())
    }

    /// Our binaries that have exited by themselves, with their exit status; each is started
    /// again (its log archived as by [`Self::restart_controller`]).
    pub async fn restart_exited_controllers(&mut self) -> Result<Vec<(&'static str, String)>> {
        let mut exited = Vec::new();
        for process in &mut self.controllers {
            if let Err(e) = process.ensure_running() {
                let status = match e {
                    capmaas_testenv::Error::ProcessExited { status, .. } => status,
                    other => other.to_string(),
                };
                exited.push((process.name(), status));
            }
        }
        for (name, _) in &exited {
            self.restart_controller(name).await?;
        }
        Ok(exited)
    }

    /// The kubelet stand-in's switch to make Nodes go silent.
    pub fn kubelets(&self) -> &kubelet::Silence {
        &self.silence
    }

    /// Our running binaries.
    pub fn controllers(&self) -> &[Process] {
        &self.controllers
    }

    /// Where one of our binaries serves its Prometheus metrics (`http://127.0.0.1:<port>/metrics`),
    /// when it has been started.
    pub fn metrics_url(&self, name: &str) -> Option<String> {
        self.metrics_ports
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(name)
            .map(|port| format!("http://127.0.0.1:{port}/metrics"))
    }

    /// The CAPI core manager process.
    pub fn capi_manager(&self) -> &Process {
        &self.capi
    }

    /// Folder of the processes' logs.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Fails when one of the processes has exited.
    pub fn ensure_running(&mut self) -> Result<()> {
        self.capi.ensure_running()?;
        for process in &mut self.controllers {
            process.ensure_running()?;
        }
        Ok(())
    }

    /// Log lines of our binaries (every process, killed ones included) that report a request
    /// refused by RBAC: with each binary running as its ServiceAccount, any such line means
    /// `deploy/base` lacks a rule.
    pub fn forbidden_requests(&self) -> Vec<String> {
        let mut refused = Vec::new();
        for folder in (0..=self.retired.len()).map(|n| self.management_dir(n)) {
            let Ok(entries) = std::fs::read_dir(&folder) else {
                refused.push(format!("<{} cannot be read>", folder.display()));
                continue;
            };
            refused.extend(forbidden_in(entries));
        }
        refused
    }

    /// The tail of every process log.
    pub fn logs(&self, lines: usize) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let retired = self
            .retired
            .iter()
            .flat_map(|r| std::iter::once(&r.capi).chain(&r.controllers));
        for process in retired
            .chain(std::iter::once(&self.capi))
            .chain(&self.controllers)
        {
            let _ = writeln!(
                out,
                "===== {} =====\n{}",
                process.name(),
                process.log_tail(lines)
            );
        }
        out
    }

    /// Server-side applies `object` (any kind) in the management cluster.
    pub async fn apply(&self, object: &Value) -> Result<DynamicObject> {
        apply(&self.management.client(), object).await
    }
}

/// The lines of our binaries' logs among `entries` that report a request refused by RBAC.
fn forbidden_in(entries: std::fs::ReadDir) -> Vec<String> {
    let mut refused = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let ours = CONTROLLERS
            .iter()
            .any(|c| name.starts_with(&format!("{c}.")));
        if !ours || path.extension().is_none_or(|e| e != "log") {
            continue;
        }
        refused.extend(rbac_refusals(&path, name));
    }
    refused
}

/// The lines of the log at `path` that report a request refused by RBAC (the API server's
/// `<resource> "<name>" is forbidden: User ...`), each prefixed with `who`.
pub(crate) fn rbac_refusals(path: &Path, who: &str) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("is forbidden"))
        .map(|l| format!("{who}: {l}"))
        .collect()
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.cancel.cancel();
        if std::thread::panicking() {
            eprintln!("e2e process logs (test panicked):\n{}", self.logs(80));
            // Whole logs of a failed run, for a person to read: `CAPMAAS_E2E_LOGS=<folder>`.
            if let Some(keep) = std::env::var_os("CAPMAAS_E2E_LOGS") {
                let copied = std::process::Command::new("cp")
                    .arg("-r")
                    .arg(self.dir.path())
                    .arg(&keep)
                    .status();
                eprintln!(
                    "process logs copied to {}: {copied:?}",
                    keep.to_string_lossy()
                );
            }
        }
    }
}

/// Appends the log at `from` to `to`, under a header naming the restart.
pub(crate) fn archive_log(from: &Path, to: &Path, restart: u64) -> Result<()> {
    use std::io::Write as _;
    let text = std::fs::read(from).map_err(Error::io(format!("reading {}", from.display())))?;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(to)
        .map_err(Error::io(format!("opening {}", to.display())))?;
    writeln!(
        file,
        "===== an earlier process, ended before restart {restart} ====="
    )
    .and_then(|()| file.write_all(&text))
    .map_err(Error::io(format!("writing {}", to.display())))
}
