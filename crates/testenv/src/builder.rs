//! [`Builder`]: what to start and install, and the start-up of the control plane.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::Api;

use crate::env::TestEnv;
use crate::error::{Error, Result};
use crate::kubeconfig;
use crate::paths::{cache_dir, repo_root};
use crate::pki::{self, Authority};
use crate::ports;
use crate::process::Process;

const START_ATTEMPTS: usize = 3;

/// Audit policy of [`Builder::audit_log`]: who wrote what. Metadata (user, verb, resource,
/// response code, no bodies) for the write verbs, nothing for reads and watches, which would
/// multiply the log for no answer it is read for; one event per request (`ResponseComplete`).
const AUDIT_POLICY: &str = "\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    verbs: [create, update, patch, delete, deletecollection]
  - level: None
";

/// File name of the audit log in the environment's folder.
const AUDIT_LOG: &str = "audit.log";
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// What to start and install.
#[derive(Debug, Clone)]
pub struct Builder {
    controller_manager: bool,
    our_crds: bool,
    capi_crds: bool,
    extra_crd_dirs: Vec<PathBuf>,
    audit_log: bool,
}

impl Default for Builder {
    fn default() -> Self {
        Self {
            controller_manager: true,
            our_crds: true,
            capi_crds: true,
            extra_crd_dirs: Vec::new(),
            audit_log: false,
        }
    }
}

impl Builder {
    /// Run kube-controller-manager (garbage collector and namespace controllers). Default on.
    #[must_use]
    pub fn controller_manager(mut self, on: bool) -> Self {
        self.controller_manager = on;
        self
    }

    /// Install the project's CRDs from `deploy/crds`. Default on.
    #[must_use]
    pub fn our_crds(mut self, on: bool) -> Self {
        self.our_crds = on;
        self
    }

    /// Install the Cluster API core and IPAM CRDs from the cache. Default on.
    #[must_use]
    pub fn capi_crds(mut self, on: bool) -> Self {
        self.capi_crds = on;
        self
    }

    /// Write the API server's audit log (JSON lines, one per write request: user, verb,
    /// resource, response code; no reads) to [`TestEnv::audit_log_path`]. Default off.
    #[must_use]
    pub fn audit_log(mut self, on: bool) -> Self {
        self.audit_log = on;
        self
    }

    /// Also install the CRDs found in `dir`.
    #[must_use]
    pub fn crd_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.extra_crd_dirs.push(dir.into());
        self
    }

    /// Starts the control plane; retried a few times because a free port can be taken
    /// between choosing it and binding it.
    pub async fn start(self) -> Result<TestEnv> {
        let mut last = None;
        for _ in 0..START_ATTEMPTS {
            match self.start_once().await {
                Ok(env) => return Ok(env),
                Err(e @ Error::MissingBinary { .. }) => return Err(e),
                Err(e) => {
                    tracing::warn!(error = %e, "test control plane did not start, retrying");
                    last = Some(e);
                }
            }
        }
        Err(last.unwrap_or(Error::Timeout {
            what: "the test control plane".into(),
            seconds: READY_TIMEOUT.as_secs(),
        }))
    }

    async fn start_once(&self) -> Result<TestEnv> {
        // kube's client and reqwest share rustls with no built-in provider.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let started = Instant::now();
        let bin = cache_dir().join("bin");
        let dir = tempfile::Builder::new()
            .prefix("capmaas-testenv-")
            .tempdir()
            .map_err(Error::io("creating the temporary directory"))?;
        let root = dir.path().to_path_buf();

        let serving_ca = Authority::new("capmaas-testenv-serving-ca")?;
        let client_ca = Authority::new("capmaas-testenv-client-ca")?;
        let serving = serving_ca.serving_cert()?;
        let admin = client_ca.client_cert("admin", &["system:masters"])?;
        let sa_key = pki::ServiceAccountKey::generate()?;
        let certs = root.join("certs");
        write(&certs.join("apiserver.crt"), &serving.cert_pem)?;
        write(&certs.join("apiserver.key"), &serving.key_pem)?;
        write(&root.join("client-ca.crt"), client_ca.cert_pem())?;
        write(&root.join("sa.key"), &sa_key.private_pem)?;
        write(&root.join("sa.pub"), &sa_key.public_pem)?;

        let etcd_port = ports::free_port()?;
        let etcd_peer_port = ports::free_port()?;
        let api_port = ports::free_port()?;
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let server = format!("https://127.0.0.1:{api_port}");

        let mut processes = Vec::new();
        let mut etcd = Process::spawn(
            "etcd",
            &bin.join("etcd"),
            &[
                format!("--data-dir={}", root.join("etcd").display()),
                format!("--listen-client-urls={etcd_url}"),
                format!("--advertise-client-urls={etcd_url}"),
                format!("--listen-peer-urls=http://127.0.0.1:{etcd_peer_port}"),
                format!("--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer_port}"),
                format!("--initial-cluster=default=http://127.0.0.1:{etcd_peer_port}"),
                "--unsafe-no-fsync=true".into(),
                "--quota-backend-bytes=4294967296".into(),
                "--log-level=warn".into(),
            ],
            &root,
        )?;
        wait_http_ok(&mut etcd, &format!("{etcd_url}/health"), None).await?;
        processes.push(etcd);

        let mut apiserver_args = vec![
            format!("--etcd-servers={etcd_url}"),
            format!("--secure-port={api_port}"),
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
            format!("--cert-dir={}", certs.display()),
            format!("--client-ca-file={}", root.join("client-ca.crt").display()),
            "--authorization-mode=RBAC".into(),
            "--service-cluster-ip-range=10.0.0.0/24".into(),
            "--allow-privileged=true".into(),
            "--disable-admission-plugins=ServiceAccount".into(),
            format!("--service-account-issuer={server}/"),
            format!(
                "--service-account-key-file={}",
                root.join("sa.pub").display()
            ),
            format!(
                "--service-account-signing-key-file={}",
                root.join("sa.key").display()
            ),
            "--endpoint-reconciler-type=none".into(),
            // Go's pprof handlers (`/debug/pprof/`, admin only) when asked for, to see where the
            // API server's CPU goes during a benchmark.
            format!(
                "--profiling={}",
                std::env::var_os("CAPMAAS_TESTENV_PROFILING").is_some()
            ),
        ];
        let audit_log = if self.audit_log {
            let policy = root.join("audit-policy.yaml");
            write(&policy, AUDIT_POLICY)?;
            let log = root.join(AUDIT_LOG);
            apiserver_args.extend([
                format!("--audit-policy-file={}", policy.display()),
                format!("--audit-log-path={}", log.display()),
                "--audit-log-format=json".into(),
                // Rotation would split a measurement over several files (lumberjack's default
                // is 100 MB); a gigabyte is far more than any test writes.
                "--audit-log-maxsize=1024".into(),
            ]);
            Some(log)
        } else {
            None
        };
        let mut apiserver = Process::spawn(
            "kube-apiserver",
            &bin.join("kube-apiserver"),
            &apiserver_args,
            &root,
        )?;
        wait_http_ok(
            &mut apiserver,
            &format!("{server}/readyz"),
            Some(serving_ca.cert_pem()),
        )
        .await?;
        processes.push(apiserver);

        let admin_config = kubeconfig::kubeconfig(&server, serving_ca.cert_pem(), &admin);
        let kubeconfig_path = root.join("kubeconfig");
        write(&kubeconfig_path, &kubeconfig::to_yaml(&admin_config)?)?;
        let client = kubeconfig::client(admin_config).await?;
        wait_for_default_namespace(&client).await?;

        if self.controller_manager {
            // Its own user (still a system:masters member), so that an audit log tells its
            // writes from the test's admin client.
            let kcm_cert =
                client_ca.client_cert("system:kube-controller-manager", &["system:masters"])?;
            let kcm_config = kubeconfig::kubeconfig(&server, serving_ca.cert_pem(), &kcm_cert);
            let kcm_kubeconfig = root.join("kube-controller-manager.kubeconfig");
            write(&kcm_kubeconfig, &kubeconfig::to_yaml(&kcm_config)?)?;
            let mut kcm = Process::spawn(
                "kube-controller-manager",
                &bin.join("kube-controller-manager"),
                &[
                    format!("--kubeconfig={}", kcm_kubeconfig.display()),
                    // ClusterRole aggregation too: Cluster API's installed managers are
                    // bound to aggregated ClusterRoles, empty without it. And every
                    // namespace's `default` ServiceAccount, which a Deployment naming none
                    // (CAPMAAS's manager) runs as.
                    "--controllers=garbage-collector-controller,namespace-controller,clusterrole-aggregation-controller,serviceaccount-controller".into(),
                    "--leader-elect=false".into(),
                    "--secure-port=0".into(),
                    "--concurrent-gc-syncs=5".into(),
                ],
                &root,
            )?;
            tokio::time::sleep(Duration::from_millis(200)).await;
            kcm.ensure_running()?;
            processes.push(kcm);
        }

        let mut env = TestEnv {
            dir: Some(dir),
            processes,
            client,
            server,
            serving_ca_pem: serving_ca.cert_pem().to_owned(),
            client_ca,
            kubeconfig_path,
            startup: Duration::ZERO,
            audit_log,
        };
        let mut dirs = Vec::new();
        if self.our_crds {
            dirs.push(repo_root().join("deploy/crds"));
        }
        if self.capi_crds {
            dirs.push(cache_dir().join("capi-crds"));
        }
        dirs.extend(self.extra_crd_dirs.iter().cloned());
        for dir in dirs {
            env.install_crd_dir(&dir).await?;
        }
        env.startup = started.elapsed();
        tracing::info!(server = %env.server, startup = ?env.startup, "test control plane ready");
        Ok(env)
    }
}

fn write(path: &Path, contents: &str) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(Error::io(format!("creating {}", parent.display())))?;
    }
    std::fs::write(path, contents).map_err(Error::io(format!("writing {}", path.display())))
}

/// Polls `url` until it answers 200, failing early when the process exits.
async fn wait_http_ok(process: &mut Process, url: &str, ca_pem: Option<&str>) -> Result<()> {
    let mut builder = reqwest::Client::builder().timeout(Duration::from_secs(2));
    if let Some(ca) = ca_pem {
        let cert = reqwest::Certificate::from_pem(ca.as_bytes())
            .map_err(|e| Error::Kubeconfig(format!("invalid CA: {e}")))?;
        builder = builder.tls_certs_only([cert]);
    }
    let http = builder
        .build()
        .map_err(|e| Error::Kubeconfig(format!("building a probe client: {e}")))?;
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        process.ensure_running()?;
        if let Ok(resp) = http.get(url).send().await
            && resp.status().is_success()
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(Error::Timeout {
                what: format!(
                    "{} at {url}; log tail:\n{}",
                    process.name(),
                    process.log_tail(30)
                ),
                seconds: READY_TIMEOUT.as_secs(),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn wait_for_default_namespace(client: &kube::Client) -> Result<()> {
    let api: Api<Namespace> = Api::all(client.clone());
    for _ in 0..100 {
        if api
            .get_opt("default")
            .await
            .map_err(Error::kube("reading namespace default"))?
            .is_some()
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(Error::Timeout {
        what: "namespace default".into(),
        seconds: 5,
    })
}

/// The ways to start a [`TestEnv`], beside the [`Builder`] itself.
impl TestEnv {
    /// Starts etcd, kube-apiserver and kube-controller-manager and installs our CRDs and
    /// the CAPI CRDs.
    pub async fn start() -> Result<Self> {
        Builder::default().start().await
    }

    /// A builder to choose what runs and what is installed.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// Only etcd and kube-apiserver: no controller-manager, no CRDs (tests of generic
    /// Kubernetes behaviour, or a stand-in workload cluster).
    pub async fn api_server_only() -> Result<Self> {
        Self::builder()
            .controller_manager(false)
            .our_crds(false)
            .capi_crds(false)
            .start()
            .await
    }

    /// Only etcd and kube-apiserver with our CRDs: no controller-manager, no CAPI CRDs (tests
    /// of the CRDs themselves and of the admission webhooks and policies).
    pub async fn our_crds_only() -> Result<Self> {
        Self::builder()
            .controller_manager(false)
            .capi_crds(false)
            .start()
            .await
    }

    /// Our CRDs and CAPI's, without kube-controller-manager (no garbage collection, no
    /// namespace deletion): what most controller tests need, and faster to start.
    pub async fn without_controller_manager() -> Result<Self> {
        Self::builder().controller_manager(false).start().await
    }
}
