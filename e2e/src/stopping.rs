//! Stopping our binaries as the kubelet stops a pod (SIGTERM, then a grace period), so that
//! what they do on the way out (the last batch of trace spans, Leases released) is done before
//! a test looks; starting them again, possibly with another environment.

use std::time::Duration;

use capmaas_testenv::Process;

use crate::error::{Error, Result};
use crate::harness::{CONTROLLERS, Harness, HarnessConfig, archive_log};

/// Sets `key` to `value` in `env`, replacing an earlier value.
fn set(env: &mut Vec<(String, String)>, key: String, value: String) {
    env.retain(|(k, _)| *k != key);
    env.push((key, value));
}

impl HarnessConfig {
    /// Adds `key=value` to the environment of all our binaries (replacing an earlier value of
    /// `key`), e.g. `OTEL_EXPORTER_OTLP_ENDPOINT`.
    #[must_use]
    pub fn binary_env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        set(&mut self.binary_env, key.into(), value.into());
        self
    }
}

/// How one of our binaries ended in [`Harness::stop_controllers`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stopped {
    /// The binary.
    pub name: &'static str,
    /// Its exit status, e.g. `exit status: 0`.
    pub status: String,
    /// It outlived the grace period and was SIGKILLed.
    pub killed: bool,
}

impl Harness {
    /// Sets `key=value` in the environment of our binaries started from now on
    /// ([`Self::start_controllers`], [`Self::restart_controller`]).
    pub fn set_binary_env(&mut self, key: impl Into<String>, value: impl Into<String>) {
        set(&mut self.binary_env, key.into(), value.into());
    }

    /// Stops all our running binaries: SIGTERM to each, then up to `grace` for it to exit
    /// (SIGKILL after); webhook-server last, so the others' last writes are still admitted.
    /// Each log is appended to `<name>.previous.log` in [`Self::dir`], as on a restart.
    pub async fn stop_controllers(&mut self, grace: Duration) -> Result<Vec<Stopped>> {
        let (webhook, others): (Vec<Process>, Vec<Process>) = std::mem::take(&mut self.controllers)
            .into_iter()
            .partition(|p| p.name() == "webhook-server");
        let mut stopped = Vec::new();
        for group in [others, webhook] {
            for process in &group {
                terminate(process).await?;
            }
            for mut process in group {
                stopped.push(wait_exit(&mut process, grace).await);
                self.restarts += 1;
                archive_log(
                    process.log_path(),
                    &self
                        .run_dir()
                        .join(format!("{}.previous.log", process.name())),
                    self.restarts,
                )?;
            }
        }
        Ok(stopped)
    }

    /// Starts those of our binaries that are not running (after [`Self::stop_controllers`]):
    /// webhook-server first, registered again and answering, then the others in start order.
    pub async fn start_controllers(&mut self) -> Result<()> {
        let running = |h: &Self, name: &str| h.controllers.iter().any(|p| p.name() == name);
        if !running(self, "webhook-server") {
            self.start_webhook_server().await?;
        }
        for name in CONTROLLERS {
            if !running(self, name) {
                let process = self.start_controller(name).await?;
                self.controllers.push(process);
            }
        }
        Ok(())
    }
}

/// Sends SIGTERM (through `kill(1)`: this crate has no unsafe code for `kill(2)`).
async fn terminate(process: &Process) -> Result<()> {
    let Some(pid) = process.pid() else {
        return Ok(()); // Already gone.
    };
    let status = tokio::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .await
        .map_err(Error::io(format!("sending SIGTERM to {}", process.name())))?;
    if status.success() {
        Ok(())
    } else {
        Err(Error::Command {
            what: format!("kill -TERM {pid} ({})", process.name()),
            output: status.to_string(),
        })
    }
}

/// Waits up to `grace` for `process` to exit, then SIGKILLs it.
async fn wait_exit(process: &mut Process, grace: Duration) -> Stopped {
    let deadline = tokio::time::Instant::now() + grace;
    loop {
        match process.ensure_running() {
            Err(capmaas_testenv::Error::ProcessExited { status, .. }) => {
                return Stopped {
                    name: process.name(),
                    status,
                    killed: false,
                };
            }
            Err(other) => {
                return Stopped {
                    name: process.name(),
                    status: other.to_string(),
                    killed: false,
                };
            }
            Ok(()) if tokio::time::Instant::now() >= deadline => {
                process.kill().await;
                return Stopped {
                    name: process.name(),
                    status: format!("still running {} s after SIGTERM", grace.as_secs()),
                    killed: true,
                };
            }
            Ok(()) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}
