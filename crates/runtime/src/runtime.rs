//! The [`Runtime`]: builds everything a binary needs from its flags and runs its controller
//! during each leadership term.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::client::{KubeClients, field_manager};
use crate::error::{BoxError, Error, Result, error_chain};
use crate::fence::Fence;
use crate::flags::{self, CommonArgs, ListenAddr};
use crate::health::Health;
use crate::leader::{self, LeaderElectionConfig, run_while_leader};
use crate::metrics::{MetricsRegistry, ReconcileMetrics};
use crate::telemetry::{self, TelemetryGuard};
use crate::{server, shutdown};

/// Default time a controller gets to stop after its term is cancelled.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(20);
/// Default `--concurrency` when the binary does not choose one.
pub const DEFAULT_CONCURRENCY: u16 = 4;

/// Installs rustls' ring provider as the process default. Idempotent; the runtime builder calls
/// it, binaries that use TLS before building the runtime call it first.
pub fn install_crypto_provider() {
    // Err only means a provider is already installed, which is what we want.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Settings resolved from flags and per-binary defaults.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Binary name, e.g. `machine-controller`.
    pub binary: String,
    /// Server-side-apply field manager, e.g. `capmaas-machine-controller`.
    pub field_manager: String,
    /// Namespace to watch; `None` = all.
    pub namespace: Option<String>,
    /// Periodic requeue interval (`--sync-period`).
    pub sync_period: Duration,
    /// Reconcile concurrency (`--concurrency` or the binary's default).
    pub concurrency: u16,
    /// Leader election, when `--leader-elect`.
    pub leader_election: Option<LeaderElectionConfig>,
}

/// Configures a [`Runtime`].
#[derive(Debug)]
#[must_use]
pub struct RuntimeBuilder {
    binary: String,
    args: Option<CommonArgs>,
    default_concurrency: u16,
    default_lease_name: Option<String>,
    drain_timeout: Duration,
    kube_config: Option<kube::Config>,
    telemetry: bool,
    shutdown: Option<CancellationToken>,
}

impl RuntimeBuilder {
    /// Uses parsed flags (otherwise every flag has its default value).
    pub fn with_args(mut self, args: CommonArgs) -> Self {
        self.args = Some(args);
        self
    }

    /// `--concurrency` when the flag is not given.
    pub fn default_concurrency(mut self, n: u16) -> Self {
        self.default_concurrency = n.max(1);
        self
    }

    /// `--leader-election-id` when the flag is not given (default: `capmaas-<binary>-leader`).
    pub fn default_lease_name(mut self, name: impl Into<String>) -> Self {
        self.default_lease_name = Some(name.into());
        self
    }

    /// How long a controller may take to stop after cancellation.
    pub fn drain_timeout(mut self, d: Duration) -> Self {
        self.drain_timeout = d;
        self
    }

    /// Uses this client configuration instead of `--kubeconfig` / inference (tests, embedding).
    pub fn with_kube_config(mut self, config: kube::Config) -> Self {
        self.kube_config = Some(config);
        self
    }

    /// Skips installing the global tracing subscriber (when the caller installed one).
    pub fn without_telemetry(mut self) -> Self {
        self.telemetry = false;
        self
    }

    /// Uses this token instead of installing SIGTERM/SIGINT handlers (tests, embedding).
    pub fn with_shutdown_token(mut self, token: CancellationToken) -> Self {
        self.shutdown = Some(token);
        self
    }

    /// Initialises telemetry, clients, metrics, health, the shutdown token, and binds the admin
    /// listeners. Must run inside a Tokio runtime.
    pub async fn build(self) -> Result<Runtime> {
        install_crypto_provider();
        let args = match self.args {
            Some(a) => a,
            None => CommonArgs::try_parse_from([self.binary.as_str()]).map_err(|e| {
                Error::InvalidArgument {
                    flag: "defaults",
                    reason: e.to_string(),
                }
            })?,
        };
        let telemetry = if self.telemetry {
            telemetry::init(&telemetry::TelemetryConfig::from_env(
                &self.binary,
                &args.log_filter(),
                args.log_format,
            )?)?
        } else {
            TelemetryGuard::default()
        };
        let ignored = args.compat.ignored();
        if !ignored.is_empty() {
            tracing::warn!(
                flags = %ignored.join(" "),
                "flags of CAPMAAS's manager or of klog are accepted but change nothing here \
                 (docs/install.md, \"Switching from CAPMAAS\")"
            );
        }
        let shutdown = match self.shutdown {
            Some(t) => t,
            None => shutdown::shutdown_on_signals()?,
        };
        let clients = match self.kube_config {
            Some(config) => KubeClients::from_config(config)?,
            None => KubeClients::from_kubeconfig(args.kubeconfig.as_deref()).await?,
        };
        let leader_election = args.leader_elect.then(|| {
            LeaderElectionConfig::new(
                args.leader_election_id
                    .clone()
                    .or(self.default_lease_name)
                    .unwrap_or_else(|| leader::default_lease_name(&self.binary)),
                flags::leader_namespace_from_env(args.leader_election_namespace.as_deref()),
                leader::identity_from_env(),
            )
        });
        let fence = leader_election
            .as_ref()
            .map_or_else(Fence::unfenced, |config| {
                Fence::new(config.fence_validity())
            });
        let settings = Settings {
            field_manager: field_manager(&self.binary),
            namespace: args.watch_namespace().map(str::to_owned),
            sync_period: args.sync_period,
            concurrency: args.concurrency.unwrap_or(self.default_concurrency),
            leader_election,
            binary: self.binary,
        };
        let metrics = MetricsRegistry::new();
        let reconcile_metrics = metrics.register(ReconcileMetrics::register);
        let health = Health::new();
        let (metrics_addr, metrics_secure) = args.metrics_endpoint();
        let security = if metrics_secure && *metrics_addr != ListenAddr::Disabled {
            Some(server::MetricsSecurity::new(
                args.metrics_cert_dir.as_deref(),
                clients.api.clone(),
            )?)
        } else {
            None
        };
        let admin = server::AdminServer::bind(
            metrics_addr,
            &args.health_addr,
            metrics.clone(),
            health.clone(),
            security,
        )
        .await?;
        Ok(Runtime {
            settings: Arc::new(settings),
            clients,
            metrics,
            reconcile_metrics,
            health,
            shutdown,
            admin,
            telemetry,
            drain_timeout: self.drain_timeout,
            fence,
        })
    }
}

/// Everything a binary needs, ready to [`run`](Runtime::run).
#[derive(Debug)]
pub struct Runtime {
    settings: Arc<Settings>,
    clients: KubeClients,
    metrics: MetricsRegistry,
    reconcile_metrics: ReconcileMetrics,
    health: Health,
    shutdown: CancellationToken,
    admin: server::AdminServer,
    telemetry: TelemetryGuard,
    drain_timeout: Duration,
    fence: Fence,
}

/// What a controller gets for one leadership term; cheap to clone.
#[derive(Debug, Clone)]
pub struct Term {
    /// Kubernetes clients (`api` for calls, `watch` for watches).
    pub clients: KubeClients,
    /// Resolved settings.
    pub settings: Arc<Settings>,
    /// The process-wide registry, to register the controller's own metrics.
    pub metrics: MetricsRegistry,
    /// Reconcile metric families; `reconcile.controller("name")` for a labelled handle.
    pub reconcile: ReconcileMetrics,
    /// Health handle: mark ready, register watchdogs.
    pub health: Health,
    /// Cancelled when this term ends (leadership lost or shutdown): stop the controller.
    pub cancel: CancellationToken,
    /// `true` while leader.
    pub leader: watch::Receiver<bool>,
    /// The leadership fence: [`Fence::check`] right before a write that must not overlap with
    /// another leader's (always valid without `--leader-elect`).
    pub fence: Fence,
}

impl Runtime {
    /// Starts configuring the runtime of `binary` (e.g. `machine-controller`).
    pub fn builder(binary: &str) -> RuntimeBuilder {
        RuntimeBuilder {
            binary: binary.to_owned(),
            args: None,
            default_concurrency: DEFAULT_CONCURRENCY,
            default_lease_name: None,
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
            kube_config: None,
            telemetry: true,
            shutdown: None,
        }
    }

    /// A runtime for in-process tests and embedding: the API server of `config`, no admin
    /// endpoints (`/metrics`, `/healthz` off), no global tracing subscriber, stopped by `stop`,
    /// a 5 s drain; `flags` as on the command line (e.g. `--namespace=x`, `--concurrency=2`).
    pub async fn embedded(
        binary: &str,
        config: kube::Config,
        stop: CancellationToken,
        flags: &[&str],
    ) -> Result<Self> {
        let command_line = [binary, "--metrics-bind-addr=0", "--health-addr=0"]
            .into_iter()
            .chain(flags.iter().copied());
        let args =
            CommonArgs::try_parse_from(command_line).map_err(|e| Error::InvalidArgument {
                flag: "embedded",
                reason: e.to_string(),
            })?;
        Self::builder(binary)
            .with_args(args)
            .with_kube_config(config)
            .without_telemetry()
            .with_shutdown_token(stop)
            .drain_timeout(Duration::from_secs(5))
            .build()
            .await
    }

    /// Resolved settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Kubernetes clients.
    pub fn clients(&self) -> &KubeClients {
        &self.clients
    }

    /// The metrics registry (register crate metrics before or after `run` starts).
    pub fn metrics(&self) -> &MetricsRegistry {
        &self.metrics
    }

    /// The reconcile metric families.
    pub fn reconcile_metrics(&self) -> &ReconcileMetrics {
        &self.reconcile_metrics
    }

    /// The health handle.
    pub fn health(&self) -> &Health {
        &self.health
    }

    /// The process shutdown token.
    pub fn shutdown_token(&self) -> &CancellationToken {
        &self.shutdown
    }

    /// The leadership fence, also in every term's [`Term::fence`]; for clients built before
    /// [`run`](Runtime::run) (the MAAS gateway checks it before every mutating MAAS call).
    pub fn fence(&self) -> &Fence {
        &self.fence
    }

    /// Bound address of `/metrics`, if enabled.
    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        self.admin.metrics_addr()
    }

    /// Bound address of `/healthz` and `/readyz`, if enabled.
    pub fn health_addr(&self) -> Option<std::net::SocketAddr> {
        self.admin.health_addr()
    }

    /// Serves the admin endpoints, elects, and runs `controller` during each leadership term
    /// until shutdown. Returns the controller's error if it fails; then everything is shut down
    /// too (the pod restarts).
    pub async fn run<F, Fut, E>(self, mut controller: F) -> Result<()>
    where
        F: FnMut(Term) -> Fut,
        Fut: Future<Output = Result<(), E>>,
        E: Into<BoxError>,
    {
        let Self {
            settings,
            clients,
            metrics,
            reconcile_metrics,
            health,
            shutdown,
            admin,
            telemetry,
            drain_timeout,
            fence,
        } = self;
        info!(
            binary = %settings.binary,
            namespace = settings.namespace.as_deref().unwrap_or("<all>"),
            concurrency = settings.concurrency,
            sync_period = ?settings.sync_period,
            leader_election = settings.leader_election.is_some(),
            "starting"
        );
        let leader_gauge = reconcile_metrics.controller(&settings.binary);
        let on_change = move |leader: bool| leader_gauge.set_leader(leader);
        let (election, clients) = match &settings.leader_election {
            Some(config) => {
                let election = leader::spawn_election(
                    clients.api.clone(),
                    config.clone(),
                    fence.clone(),
                    shutdown.clone(),
                    on_change,
                )?;
                // The terms write only while the fence holds, also while they drain.
                let fenced = KubeClients {
                    api: crate::fence::fenced_client(clients.api, fence.clone()),
                    watch: crate::fence::fenced_client(clients.watch, fence.clone()),
                };
                (election, fenced)
            }
            None => (leader::always_leader(shutdown.clone(), on_change), clients),
        };
        let admin_task = tokio::spawn(admin.serve(shutdown.clone()));

        let (term_health, standby_health) = (health.clone(), health.clone());
        let leader_rx = election.leader.clone();
        let result = run_while_leader(
            election.leader.clone(),
            shutdown.clone(),
            drain_timeout,
            |cancel| {
                term_health.mark_not_ready();
                controller(Term {
                    clients: clients.clone(),
                    settings: settings.clone(),
                    metrics: metrics.clone(),
                    reconcile: reconcile_metrics.clone(),
                    health: term_health.clone(),
                    cancel,
                    leader: leader_rx.clone(),
                    fence: fence.clone(),
                })
            },
            || standby_health.mark_ready(),
        )
        .await;

        if let Err(e) = &result {
            warn!(error = %error_chain(e), "stopping after error");
        }
        health.mark_not_ready();
        shutdown.cancel();
        join_with_timeout(
            "leader election",
            election.task,
            leader::RELEASE_TIMEOUT * 2,
        )
        .await;
        join_with_timeout("admin server", admin_task, server::DRAIN_TIMEOUT * 2).await;
        info!("stopped");
        telemetry.shutdown().await;
        result
    }
}

async fn join_with_timeout(
    task: &'static str,
    handle: tokio::task::JoinHandle<()>,
    limit: Duration,
) {
    match tokio::time::timeout(limit, handle).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => warn!(task, error = %e, "background task failed"),
        Err(_) => warn!(task, "background task did not stop in time"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::tests::get;

    fn args(extra: &[&str]) -> CommonArgs {
        let mut v = vec![
            "test",
            "--metrics-bind-addr=127.0.0.1:0",
            "--health-addr=127.0.0.1:0",
        ];
        v.extend_from_slice(extra);
        CommonArgs::try_parse_from(v).unwrap()
    }

    async fn runtime(extra: &[&str], token: CancellationToken) -> Runtime {
        Runtime::builder("test-controller")
            .with_args(args(extra))
            .with_kube_config(kube::Config::new("https://127.0.0.1:1".parse().unwrap()))
            .without_telemetry()
            .with_shutdown_token(token)
            .default_concurrency(6)
            .drain_timeout(Duration::from_secs(2))
            .build()
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn settings_resolve_defaults_and_flags() {
        let rt = runtime(
            &["--namespace=team-a", "--sync-period=5m"],
            CancellationToken::new(),
        )
        .await;
        let s = rt.settings();
        assert_eq!(s.binary, "test-controller");
        assert_eq!(s.field_manager, "capmaas-test-controller");
        assert_eq!(s.namespace.as_deref(), Some("team-a"));
        assert_eq!(s.sync_period, Duration::from_secs(300));
        assert_eq!(s.concurrency, 6);
        assert!(s.leader_election.is_none());

        let rt = runtime(
            &[
                "--concurrency=2",
                "--leader-elect",
                "--leader-election-namespace=ops",
            ],
            CancellationToken::new(),
        )
        .await;
        let s = rt.settings();
        assert_eq!(s.concurrency, 2);
        let le = s.leader_election.as_ref().unwrap();
        assert_eq!(le.lease_name, "capmaas-test-controller-leader");
        assert_eq!(le.namespace, "ops");
        assert!(!le.identity.is_empty());
    }

    #[tokio::test]
    async fn run_serves_admin_and_stops_on_shutdown() {
        let token = CancellationToken::new();
        let rt = runtime(&[], token.clone()).await;
        let health_addr = rt.health_addr().unwrap();
        let metrics_addr = rt.metrics_addr().unwrap();
        let (started_tx, started_rx) = tokio::sync::oneshot::channel();
        let mut started_tx = Some(started_tx);
        let task = tokio::spawn(rt.run(move |ctx: Term| {
            let tx = started_tx.take();
            async move {
                assert!(*ctx.leader.borrow());
                assert_eq!(ctx.settings.binary, "test-controller");
                if let Some(tx) = tx {
                    let _ = tx.send(ctx.health.clone());
                }
                ctx.cancel.cancelled().await;
                Ok::<(), BoxError>(())
            }
        }));
        let health = started_rx.await.unwrap();
        assert_eq!(get(health_addr, "/healthz").await.0, 200);
        assert_eq!(
            get(health_addr, "/readyz").await.0,
            503,
            "not ready until the controller says so"
        );
        health.mark_ready();
        assert_eq!(get(health_addr, "/readyz").await.0, 200);
        let (_, body) = get(metrics_addr, "/metrics").await;
        assert!(
            body.contains(r#"capmaas_leader{controller="test-controller"} 1"#),
            "{body}"
        );

        token.cancel();
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert!(tokio::net::TcpStream::connect(health_addr).await.is_err());
    }

    #[tokio::test]
    async fn controller_error_stops_everything() {
        let token = CancellationToken::new();
        let rt = runtime(&[], token.clone()).await;
        let err = rt
            .run(|_ctx| async { Err::<(), BoxError>("cache sync failed".into()) })
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Controller(_)));
        assert!(token.is_cancelled());
    }
}
