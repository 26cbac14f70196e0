//! Starting our binaries: each against the management API server with its own kubeconfig,
//! ports, log and environment; webhook-server first, registered once it answers; every binary
//! waited for until it is alive, so one that exits at start fails fast (or is started again).

use std::time::Duration;

use capmaas_testenv::objects::load_yaml_documents;
use capmaas_testenv::{Process, free_port, repo_root};

use crate::error::Result;
use crate::harness::{DEPLOY_NAMESPACE, Harness, WEBHOOK_CONFIGURATIONS, binary};

impl Harness {
    /// Starts webhook-server, waits until it answers, and registers the webhook configurations
    /// that ship in `deploy/` (pointed at it), so every later write passes through it.
    pub(crate) async fn start_webhook_server(&mut self) -> Result<()> {
        let health_port = free_port()?;
        let mut process = self.start_process("webhook-server", health_port)?;
        process
            .wait_ready(
                &format!("http://127.0.0.1:{health_port}/readyz"),
                Duration::from_secs(60),
            )
            .await?;
        self.controllers.push(process);
        let configurations = load_yaml_documents(&repo_root().join(WEBHOOK_CONFIGURATIONS))?;
        self.management
            .register_webhooks(&configurations, &self.webhook)
            .await?;
        Ok(())
    }

    /// Starts (or restarts) one of our binaries against the management API server and waits
    /// until it is alive (`/healthz`). A binary that exits at start is started again on fresh
    /// ports (the free ports are chosen before the binary binds them, and another process can
    /// take one in between); exiting a third time is an error with its log tail, instead of a
    /// scenario waiting for its timeout.
    pub async fn start_controller(&self, name: &'static str) -> Result<Process> {
        const ATTEMPTS: usize = 3;
        let mut attempt = 1;
        loop {
            let health_port = free_port()?;
            let mut process = self.start_process(name, health_port)?;
            let alive = process
                .wait_ready(
                    &format!("http://127.0.0.1:{health_port}/healthz"),
                    Duration::from_secs(60),
                )
                .await;
            match alive {
                Ok(()) => return Ok(process),
                Err(capmaas_testenv::Error::ProcessExited { status, .. }) if attempt < ATTEMPTS => {
                    tracing::warn!(binary = name, %status, attempt, "exited at start; starting it again");
                    attempt += 1;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    fn start_process(&self, name: &'static str, health_port: u16) -> Result<Process> {
        let binary = binary(name)?;
        let metrics_port = free_port()?;
        self.metrics_ports
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(name, metrics_port);
        let mut args = vec![
            format!("--kubeconfig={}", self.kubeconfig_of(name).display()),
            format!("--health-addr=127.0.0.1:{health_port}"),
            format!("--metrics-bind-addr=127.0.0.1:{metrics_port}"),
            "--log-format=text".into(),
        ];
        if name == "maas-client" {
            args.extend(self.gateway_args.iter().cloned());
        }
        if name == "webhook-server" {
            // A restart serves the same port and certificate the configurations point at.
            let cert_dir = self
                .webhook
                .write_files(&self.run_dir().join("webhook-certs"))?;
            args.extend([
                "--webhook-host=127.0.0.1".into(),
                format!("--webhook-port={}", self.webhook.port),
                format!("--webhook-cert-dir={}", cert_dir.display()),
            ]);
        }
        let url = self.sim.url();
        let key = self.sim.api_key();
        // As in a pod of deploy/: Leases (leader election, the gateway's host bindings) live in
        // the provider's namespace, where its Roles grant them.
        let mut env: Vec<(&str, &str)> = vec![
            ("RUST_LOG", &self.log_filter),
            ("POD_NAMESPACE", DEPLOY_NAMESPACE),
        ];
        if name == "maas-client" {
            env.push(("MAAS_ENDPOINT", &url));
            env.push(("MAAS_API_KEY", &key));
            // The simulator serves plain http on loopback; the gateway refuses that unless told.
            env.push(("MAAS_ALLOW_INSECURE_HTTP", "true"));
        }
        // As the overlay's Deployment sets it (deploy/components/namespaced).
        if let Some(namespace) = self.access.watch_namespace(name) {
            env.push(("CAPMAAS_WATCH_NAMESPACE", namespace));
        }
        for (key, value) in &self.binary_env {
            env.push((key, value));
        }
        Ok(Process::start(name, &binary, &args, &env, &self.run_dir())?)
    }
}
