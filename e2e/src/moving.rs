//! `clusterctl move` to a second management cluster: a new API server with CAPI core and our
//! six binaries (each with its own ServiceAccount and webhooks, as in `deploy/`), then the real
//! clusterctl (built from the test control plane's CAPI release) moves a namespace there. The
//! source's processes keep running until [`Harness::retire_source`], as they would while an
//! operator pivots, so a test sees whether they do any harm.

use std::process::Command;

use capmaas_testenv::{TestEnv, WebhookServing, cache_dir};

use crate::error::{Error, Result};
use crate::harness::{CONTROLLERS, Harness, Retired};

/// clusterctl finds the kinds to move by the `clusterctl.cluster.x-k8s.io` CRD label, which
/// `clusterctl init` puts on every provider's CRDs (ours ship with it; the test control plane
/// installs CAPI's from the module, without it).
fn label_crds_for_clusterctl(env: &TestEnv) -> Result<()> {
    let out = env
        .kubectl()
        .args([
            "label",
            "crd",
            "--all",
            "--overwrite",
            "clusterctl.cluster.x-k8s.io=",
        ])
        .output()
        .map_err(Error::io("running kubectl label"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(Error::Command {
            what: "kubectl label crd".into(),
            output: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }
}

impl Harness {
    /// Starts a second management cluster with the provider installed (CAPI core, our
    /// binaries under their ServiceAccounts, webhook-server registered), as an operator
    /// prepares the target of a move. From then on [`Harness::management`] and the harness's
    /// processes are the target's; the source's keep running ([`Harness::source`]).
    pub async fn start_new_management(&mut self) -> Result<()> {
        let target = TestEnv::start().await?;
        label_crds_for_clusterctl(&self.management)?;
        label_crds_for_clusterctl(&target)?;
        let run_dir = self.management_dir(self.retired.len() + 1);
        std::fs::create_dir_all(&run_dir).map_err(Error::io("creating the target's folder"))?;
        let capi = crate::capi::start_core_manager(&target, &run_dir).await?;
        let source = Retired {
            env: std::mem::replace(&mut self.management, target),
            capi: std::mem::replace(&mut self.capi, capi),
            controllers: std::mem::take(&mut self.controllers),
        };
        self.retired.push(source);
        self.webhook = WebhookServing::generate()?;
        self.grant_deploy_rbac().await?;
        self.start_webhook_server().await?;
        for name in CONTROLLERS.into_iter().filter(|n| *n != "webhook-server") {
            let process = self.start_controller(name).await?;
            self.controllers.push(process);
        }
        Ok(())
    }

    /// `clusterctl move --namespace <namespace>` from the cluster [`Harness::start_new_management`]
    /// replaced to the current one; returns clusterctl's output (also in the target's folder).
    pub fn clusterctl_move(&self, namespace: &str) -> Result<String> {
        let run_dir = self.run_dir();
        let source_kubeconfig = self
            .retired
            .last()
            .map(|r| r.env.kubeconfig_path().to_path_buf())
            .ok_or_else(|| Error::Command {
                what: "clusterctl move".into(),
                output: "no source cluster".into(),
            })?;
        let clusterctl = cache_dir().join("bin/clusterctl");
        if !clusterctl.is_file() {
            return Err(Error::MissingBinary { path: clusterctl });
        }
        let out = Command::new(&clusterctl)
            .args(["move", "--namespace", namespace, "--kubeconfig"])
            .arg(&source_kubeconfig)
            .arg("--to-kubeconfig")
            .arg(self.management.kubeconfig_path())
            .args(["-v", "3"])
            // Nothing from the user's clusterctl configuration.
            .env("HOME", &run_dir)
            .env("XDG_CONFIG_HOME", &run_dir)
            .output()
            .map_err(Error::io("running clusterctl move"))?;
        let log = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::write(run_dir.join("clusterctl-move.log"), &log)
            .map_err(Error::io("writing the clusterctl log"))?;
        if out.status.success() {
            Ok(log)
        } else {
            Err(Error::Command {
                what: "clusterctl move".into(),
                output: log,
            })
        }
    }

    /// Stops the processes of every management cluster moved away from, as an operator tears
    /// the source down once the move is done; their logs stay.
    pub async fn retire_source(&mut self) {
        for retired in &mut self.retired {
            for process in retired.controllers.iter_mut().chain([&mut retired.capi]) {
                process.kill().await;
            }
        }
    }

    /// The API server of the management cluster the last move left.
    pub fn source(&self) -> Option<&TestEnv> {
        self.retired.last().map(|r| &r.env)
    }
}
