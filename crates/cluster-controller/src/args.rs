//! Flags of the cluster-controller beyond the common ones.

use std::time::Duration;

use capmaas_runtime::flags::parse_duration;

use crate::hosted::{HostedKind, HostedKinds};
use crate::prober::ProberConfig;

/// What `--help` says the binary is.
pub const ABOUT: &str = "The MaasCluster controller of the MAAS Cluster API provider.";
/// Binary name; also gives the field manager `capmaas-cluster-controller` and the Lease name.
pub const BINARY: &str = "cluster-controller";
/// `--concurrency` default: cluster reconciles are cheap and few.
pub const DEFAULT_CONCURRENCY: u16 = 4;

/// cluster-controller flags.
#[derive(Debug, Clone, clap::Args)]
pub struct ControllerArgs {
    /// Limit of one workload API-server probe (Secret read, `/version` call).
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    pub api_probe_timeout: Duration,

    /// Interval between probes of a workload API server that answers.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    pub api_probe_interval: Duration,

    /// First retry delay of a workload API server that does not answer; doubles on each failure.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    pub api_probe_min_backoff: Duration,

    /// Largest retry delay of a workload API server that does not answer.
    #[arg(long, value_name = "DURATION", default_value = "2m", value_parser = parse_duration)]
    pub api_probe_max_backoff: Duration,

    /// Control-plane kinds that are hosted (their provider runs the API server elsewhere and sets
    /// the endpoint), besides the built-in KamajiControlPlane, K0smotronControlPlane and
    /// HostedControlPlane of controlplane.cluster.x-k8s.io: comma-separated `Kind` or
    /// `Kind.group`. A MaasCluster of a Cluster whose controlPlaneRef names one gets no
    /// generated endpoint and no DNS record.
    #[arg(
        long,
        env = "CAPMAAS_HOSTED_CONTROL_PLANE_KINDS",
        value_name = "KINDS",
        value_delimiter = ',',
        value_parser = HostedKind::parse
    )]
    pub hosted_control_plane_kinds: Vec<HostedKind>,
}

impl Default for ControllerArgs {
    fn default() -> Self {
        let d = ProberConfig::default();
        Self {
            api_probe_timeout: d.timeout,
            api_probe_interval: d.refresh,
            api_probe_min_backoff: d.min_backoff,
            api_probe_max_backoff: d.max_backoff,
            hosted_control_plane_kinds: Vec::new(),
        }
    }
}

impl ControllerArgs {
    /// The prober configuration these flags describe.
    pub fn prober_config(&self) -> ProberConfig {
        ProberConfig {
            timeout: self.api_probe_timeout,
            refresh: self.api_probe_interval,
            min_backoff: self.api_probe_min_backoff,
            max_backoff: self.api_probe_max_backoff.max(self.api_probe_min_backoff),
            jitter: true,
        }
    }

    /// The hosted control-plane kinds: the built-in ones and `--hosted-control-plane-kinds`.
    pub fn hosted_kinds(&self) -> HostedKinds {
        HostedKinds::with_extra(&self.hosted_control_plane_kinds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: ControllerArgs,
    }

    #[test]
    fn defaults_match_prober_defaults_and_flags_parse() {
        let cli = Cli::try_parse_from(["x"]).unwrap();
        let expected = ProberConfig {
            jitter: true,
            ..ProberConfig::default()
        };
        assert_eq!(cli.args.prober_config(), expected);
        assert_eq!(ControllerArgs::default().prober_config(), expected);
        let cli = Cli::try_parse_from([
            "x",
            "--api-probe-interval=5m",
            "--api-probe-max-backoff=100ms",
            "--api-probe-min-backoff=1s",
        ])
        .unwrap();
        let c = cli.args.prober_config();
        assert_eq!(c.refresh, Duration::from_secs(300));
        assert_eq!(c.max_backoff, Duration::from_secs(1), "max never below min");
    }

    #[test]
    fn hosted_kinds_extend_the_built_in_ones() {
        let cli = Cli::try_parse_from(["x"]).unwrap();
        assert_eq!(cli.args.hosted_kinds(), HostedKinds::default());
        let cli = Cli::try_parse_from([
            "x",
            "--hosted-control-plane-kinds=StandInControlPlane, VClusterControlPlane.controlplane.example.com",
        ])
        .unwrap();
        let extra: Vec<String> = cli
            .args
            .hosted_control_plane_kinds
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            extra,
            [
                "StandInControlPlane",
                "VClusterControlPlane.controlplane.example.com"
            ]
        );
        let err = Cli::try_parse_from(["x", "--hosted-control-plane-kinds=not a kind"])
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("is not a kind"), "{err}");
    }
}
