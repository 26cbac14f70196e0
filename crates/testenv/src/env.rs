//! [`TestEnv`]: a running control plane, its clients and kubeconfigs, its CRD installs, and
//! the teardown when it is dropped. [`Builder`](crate::builder::Builder) starts one.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::Api;

use crate::crds;
use crate::error::{Error, Result};
use crate::kubeconfig;
use crate::paths::kubectl;
use crate::pki::Authority;
use crate::process::Process;
use crate::webhooks::{self, WebhookServing};

const CRD_TIMEOUT: Duration = Duration::from_secs(30);

/// A running control plane. Dropping it stops every process and removes its files.
pub struct TestEnv {
    pub(crate) dir: Option<tempfile::TempDir>,
    pub(crate) processes: Vec<Process>,
    pub(crate) client: kube::Client,
    pub(crate) server: String,
    pub(crate) serving_ca_pem: String,
    pub(crate) client_ca: Authority,
    pub(crate) kubeconfig_path: PathBuf,
    pub(crate) startup: Duration,
    pub(crate) audit_log: Option<PathBuf>,
}

impl std::fmt::Debug for TestEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestEnv")
            .field("server", &self.server)
            .field("dir", &self.dir())
            .field("processes", &self.processes)
            .finish_non_exhaustive()
    }
}

impl TestEnv {
    /// An admin (`system:masters`) client.
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// The API server URL, `https://127.0.0.1:<port>`.
    pub fn server_url(&self) -> &str {
        &self.server
    }

    /// The admin kubeconfig file, for kubectl and Go tools.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig_path
    }

    /// `kubectl --kubeconfig <admin> --cache-dir <this env's folder>`. The discovery cache is
    /// this environment's own: kubectl's default cache is keyed by host and port, and a later
    /// environment reusing a port would otherwise get an earlier one's resource list (a
    /// category naming CRDs this API server never had).
    pub fn kubectl(&self) -> std::process::Command {
        let mut command = std::process::Command::new(kubectl());
        command
            .arg("--kubeconfig")
            .arg(&self.kubeconfig_path)
            .arg("--cache-dir")
            .arg(self.dir().join("kubectl-cache"));
        command
    }

    /// An admin kubeconfig as YAML (e.g. for a `<cluster>-kubeconfig` Secret).
    pub fn kubeconfig_yaml(&self) -> Result<String> {
        std::fs::read_to_string(&self.kubeconfig_path).map_err(Error::io("reading the kubeconfig"))
    }

    /// The admin client configuration (for a runtime built with
    /// `capmaas_runtime::Runtime::embedded`).
    pub async fn kube_config(&self) -> Result<kube::Config> {
        kubeconfig::client_config(self.admin_kubeconfig()?).await
    }

    /// An admin kubeconfig (YAML) whose user authenticates with an exec credential plugin
    /// instead: a script written to `dir` that creates the returned marker file when it runs.
    /// For tests proving that a workload-kubeconfig guard refuses it and never runs it.
    pub fn exec_plugin_kubeconfig_yaml(&self, dir: &Path) -> Result<(String, PathBuf)> {
        let (config, marker) = kubeconfig::with_exec_plugin(self.admin_kubeconfig()?, dir)?;
        Ok((kubeconfig::to_yaml(&config)?, marker))
    }

    fn admin_kubeconfig(&self) -> Result<kube::config::Kubeconfig> {
        kube::config::Kubeconfig::from_yaml(&self.kubeconfig_yaml()?)
            .map_err(|e| Error::Kubeconfig(e.to_string()))
    }

    /// The CA that signed the API server's serving certificate.
    pub fn serving_ca_pem(&self) -> &str {
        &self.serving_ca_pem
    }

    /// How long `start` took, from nothing to CRDs served.
    pub fn startup_duration(&self) -> Duration {
        self.startup
    }

    /// The API server's audit log (JSON lines, one per write request), when the environment
    /// was built with [`Builder::audit_log`].
    pub fn audit_log_path(&self) -> Option<&Path> {
        self.audit_log.as_deref()
    }

    /// The running processes (etcd, kube-apiserver, kube-controller-manager).
    pub fn processes(&self) -> &[Process] {
        &self.processes
    }

    /// The temporary directory holding certificates, data and logs.
    pub fn dir(&self) -> &Path {
        self.dir
            .as_ref()
            .map_or_else(|| Path::new("."), tempfile::TempDir::path)
    }

    /// A kubeconfig (YAML) and client for `user` in `groups`, authenticated by a client
    /// certificate; RBAC applies (no `system:masters`).
    pub async fn user_kubeconfig(
        &self,
        user: &str,
        groups: &[&str],
    ) -> Result<(String, kube::Client)> {
        let cert = self.client_ca.client_cert(user, groups)?;
        let config = kubeconfig::kubeconfig(&self.server, &self.serving_ca_pem, &cert);
        let yaml = kubeconfig::to_yaml(&config)?;
        Ok((yaml, kubeconfig::client(config).await?))
    }

    /// A client for `user` in `groups` (see [`TestEnv::user_kubeconfig`]).
    pub async fn user_client(&self, user: &str, groups: &[&str]) -> Result<kube::Client> {
        Ok(self.user_kubeconfig(user, groups).await?.1)
    }

    /// A client that the API server sees as ServiceAccount `namespace/name` (user
    /// `system:serviceaccount:<ns>:<name>` with the ServiceAccount groups), for RBAC tests.
    pub async fn service_account_client(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<kube::Client> {
        Ok(self.service_account_kubeconfig(namespace, name).await?.1)
    }

    /// A kubeconfig (YAML) and client that authenticate as ServiceAccount `namespace/name`
    /// (user `system:serviceaccount:<namespace>:<name>` in its groups), so RBAC bound to the
    /// ServiceAccount applies, e.g. to run a binary with exactly its Deployment's permissions.
    pub async fn service_account_kubeconfig(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<(String, kube::Client)> {
        let user = format!("system:serviceaccount:{namespace}:{name}");
        let ns_group = format!("system:serviceaccounts:{namespace}");
        self.user_kubeconfig(
            &user,
            &["system:serviceaccounts", &ns_group, "system:authenticated"],
        )
        .await
    }

    /// A kubeconfig (YAML) that authenticates with a real token of the existing ServiceAccount
    /// `namespace/name` ([`TestEnv::service_account_token`]): what a pod of that ServiceAccount
    /// is given, so RBAC bound to it applies exactly as in a cluster.
    pub async fn service_account_token_kubeconfig(
        &self,
        namespace: &str,
        name: &str,
        hours: i64,
    ) -> Result<String> {
        let token = self.service_account_token(namespace, name, hours).await?;
        kubeconfig::to_yaml(&kubeconfig::token_kubeconfig(
            &self.server,
            &self.serving_ca_pem,
            &token,
        ))
    }

    /// A token of the existing ServiceAccount `namespace/name`, issued by the API server's
    /// TokenRequest API and valid `hours`: what the kubelet projects into its pods.
    pub async fn service_account_token(
        &self,
        namespace: &str,
        name: &str,
        hours: i64,
    ) -> Result<String> {
        use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
        use k8s_openapi::api::core::v1::ServiceAccount;
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                audiences: None,
                expiration_seconds: Some(hours * 3600),
                ..TokenRequestSpec::default()
            }),
            ..TokenRequest::default()
        };
        let issued = Api::<ServiceAccount>::namespaced(self.client.clone(), namespace)
            .create_token_request(name, &kube::api::PostParams::default(), &request)
            .await
            .map_err(Error::kube(format!(
                "requesting a token of {namespace}/{name}"
            )))?;
        Ok(issued.status.and_then(|s| s.token).unwrap_or_default())
    }

    /// Installs every CRD in `dir` and waits until they are served.
    pub async fn install_crd_dir(&self, dir: &Path) -> Result<()> {
        let crds = crds::load_dir(dir)?;
        crds::install(&self.client, &crds).await?;
        crds::wait_served(&self.client, &crds, CRD_TIMEOUT).await
    }

    /// Registers webhook configurations (Mutating/Validating, as JSON values) with every
    /// webhook pointed at `serving`'s local URL and CA.
    pub async fn register_webhooks(
        &self,
        configurations: &[serde_json::Value],
        serving: &WebhookServing,
    ) -> Result<()> {
        webhooks::register(
            &self.client,
            configurations,
            &serving.base_url(),
            &serving.ca_pem,
        )
        .await
    }

    /// Creates a namespace with a unique name starting with `prefix`.
    pub async fn create_namespace(&self, prefix: &str) -> Result<String> {
        let api: Api<Namespace> = Api::all(self.client.clone());
        let ns: Namespace = serde_json::from_value(serde_json::json!({
            "metadata": { "generateName": format!("{prefix}-") }
        }))
        .map_err(|e| Error::Kubeconfig(e.to_string()))?;
        let created = api
            .create(&kube::api::PostParams::default(), &ns)
            .await
            .map_err(Error::kube("creating a namespace"))?;
        Ok(created.metadata.name.unwrap_or_default())
    }

    /// The tail of every process log, for diagnostics.
    pub fn logs(&self, lines: usize) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        for p in &self.processes {
            let _ = writeln!(
                out,
                "===== {} ({}) =====\n{}",
                p.name(),
                p.log_path().display(),
                p.log_tail(lines)
            );
        }
        out
    }

    /// Stops every process now (they are also stopped on drop).
    pub async fn stop(mut self) {
        for process in self.processes.iter_mut().rev() {
            process.kill().await;
        }
    }
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "test control plane logs (test panicked):\n{}",
                self.logs(60)
            );
        }
        // Processes are killed by `kill_on_drop`; the reverse order stops the API
        // server before etcd.
        while let Some(process) = self.processes.pop() {
            drop(process);
        }
        if std::env::var_os("CAPMAAS_TESTENV_KEEP").is_some()
            && let Some(dir) = self.dir.take()
        {
            eprintln!(
                "keeping test control plane files in {}",
                dir.keep().display()
            );
        }
    }
}
