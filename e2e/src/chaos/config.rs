//! The size and severity of a chaos run, and the simulator faults they make.

use std::path::PathBuf;
use std::time::Duration;

use maas_sim::{FaultConfig, LostAnswer, OpFault, TimeoutFault};

use super::evidence::Erase;

/// The gateway's MAAS request timeout (the `maas-api-client` default; the gateway has no flag
/// for it). Pre-effect timeouts must hold connections longer than this to be timeouts.
pub const GATEWAY_REQUEST_TIMEOUT: Duration = Duration::from_secs(90);

/// Size and severity of a chaos run. The default is the issue's full size.
#[derive(Debug, Clone)]
pub struct ChaosConfig {
    /// Machines to provision (control plane + workers).
    pub machines: usize,
    /// Control-plane Machines among them.
    pub control_plane: usize,
    /// Simulated servers beyond `machines`.
    pub spare_servers: usize,
    /// Machines after the scale-down (the control plane stays).
    pub scale_to: usize,
    /// Time between two SIGKILLs.
    pub kill_interval: Duration,
    /// Share of MAAS calls answered 503.
    pub error_rate: f64,
    /// Share of MAAS calls that time out without taking effect.
    pub timeout_rate: f64,
    /// How long a timed-out call's connection is held.
    pub timeout_hold: Duration,
    /// Share of successful MAAS calls whose answer is replaced by a 503 after they took effect.
    pub lost_answer_rate: f64,
    /// Length of the MAAS outage.
    pub outage: Duration,
    /// The outage starts once this share of `machines` servers are in use (allocated,
    /// deploying or deployed), so it hits most machines part-way.
    pub outage_at: f64,
    /// The erase every release must carry.
    pub erase: Erase,
    /// Simulated deployment time.
    pub deploy_time: Duration,
    /// The gateway's `--orphan-grace-period` (`None`: its default, 5 m).
    pub orphan_grace_period: Option<Duration>,
    /// The gateway's `--orphan-sweep-interval` (`None`: its default, 60 s).
    pub orphan_sweep_interval: Option<Duration>,
    /// Limit of the provisioning phase.
    pub provision_timeout: Duration,
    /// Limit of the scale-down phase.
    pub scale_timeout: Duration,
    /// Limit of the deletion phase.
    pub delete_timeout: Duration,
    /// How long the servers may take to come back to Ready once the chaos stopped.
    pub settle_timeout: Duration,
    /// Seed of the simulator's fault rolls and of the choice of the controller to kill.
    pub seed: u64,
    /// `RUST_LOG` of our binaries.
    pub log_filter: String,
    /// Folder under which the process logs are copied (`chaos-<unix time>`), if any.
    pub keep_logs: Option<PathBuf>,
}

impl Default for ChaosConfig {
    fn default() -> Self {
        Self {
            machines: 200,
            control_plane: 3,
            spare_servers: 20,
            scale_to: 100,
            kill_interval: Duration::from_secs(5),
            error_rate: 0.10,
            timeout_rate: 0.02,
            timeout_hold: GATEWAY_REQUEST_TIMEOUT + Duration::from_secs(5),
            lost_answer_rate: 0.02,
            outage: Duration::from_secs(60),
            outage_at: 0.25,
            erase: Erase::Quick,
            deploy_time: Duration::from_secs(2),
            orphan_grace_period: None,
            orphan_sweep_interval: None,
            provision_timeout: Duration::from_secs(45 * 60),
            scale_timeout: Duration::from_secs(20 * 60),
            delete_timeout: Duration::from_secs(30 * 60),
            settle_timeout: Duration::from_secs(8 * 60),
            seed: 10,
            log_filter: "info".into(),
            keep_logs: Some(capmaas_testenv::repo_root().join("target/chaos-logs")),
        }
    }
}

impl ChaosConfig {
    /// The test-suite size: 12 machines (1 control plane), a kill every 3 s, a 10 s outage,
    /// down to 6, a 20 s orphan grace period.
    pub fn small() -> Self {
        Self {
            machines: 12,
            control_plane: 1,
            spare_servers: 2,
            scale_to: 6,
            kill_interval: Duration::from_secs(3),
            outage: Duration::from_secs(10),
            orphan_grace_period: Some(Duration::from_secs(20)),
            orphan_sweep_interval: Some(Duration::from_secs(5)),
            provision_timeout: Duration::from_secs(150),
            scale_timeout: Duration::from_secs(90),
            delete_timeout: Duration::from_secs(120),
            settle_timeout: Duration::from_secs(60),
            ..Self::default()
        }
    }

    pub(crate) fn faults(&self) -> FaultConfig {
        FaultConfig {
            ops: vec![OpFault {
                op: "*".into(),
                error_rate: self.error_rate,
                status: 503,
                latency_ms: 0,
                retry_after: None,
                body: None,
            }],
            timeouts: vec![
                TimeoutFault::new("*", self.timeout_hold)
                    .rate(share_of_rest(self.timeout_rate, self.error_rate)),
            ],
            lost_answers: vec![LostAnswer::error("*", 503).rate(share_of_rest(
                self.lost_answer_rate,
                self.error_rate + self.timeout_rate,
            ))],
            ..FaultConfig::default()
        }
    }

    pub(crate) fn gateway_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        if let Some(grace) = self.orphan_grace_period {
            args.push(format!("--orphan-grace-period={}s", grace.as_secs()));
        }
        if let Some(every) = self.orphan_sweep_interval {
            args.push(format!("--orphan-sweep-interval={}s", every.as_secs()));
        }
        args
    }
}

/// The simulator decides its faults one after the other (errors, then timeouts of the calls
/// left, then lost answers of the calls carried out): the rate to give a later fault so that it
/// hits `share` of all calls when `before` of them were already taken by earlier ones.
fn share_of_rest(share: f64, before: f64) -> f64 {
    (share / (1.0 - before).max(f64::EPSILON)).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_make_the_issue_rates_of_all_calls() {
        let config = ChaosConfig::default();
        let faults = config.faults();
        assert!(faults.validate().is_ok());
        assert!((faults.ops[0].error_rate - 0.10).abs() < f64::EPSILON);
        // 2 % of all calls: 2/90 of those without an injected error, 2/88 of those carried out.
        let rate = faults.timeouts[0].rate;
        assert!((rate * 0.9 - 0.02).abs() < 1e-9, "{rate}");
        assert!(Duration::from_millis(faults.timeouts[0].hold_ms) > GATEWAY_REQUEST_TIMEOUT);
        let rate = faults.lost_answers[0].rate;
        assert!((rate * 0.88 - 0.02).abs() < 1e-9, "{rate}");
        assert!((share_of_rest(0.5, 1.0) - 1.0).abs() < f64::EPSILON);
        assert_eq!(
            ChaosConfig::small().gateway_args(),
            ["--orphan-grace-period=20s", "--orphan-sweep-interval=5s"]
        );
        assert!(ChaosConfig::default().gateway_args().is_empty());
    }
}
