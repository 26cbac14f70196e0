//! Flags of the remediation-controller beyond the common ones.

use std::time::Duration;

use capmaas_runtime::flags::parse_duration;

/// What `--help` says the binary is.
pub const ABOUT: &str = "The MaasRemediation controller of the MAAS Cluster API provider.";
/// Binary name; also gives the field manager and event reporter
/// `capmaas-remediation-controller` and the Lease name.
pub const BINARY: &str = "remediation-controller";
/// `--concurrency` default: remediations mostly wait, and many may run at once when a rack
/// goes down.
pub const DEFAULT_CONCURRENCY: u16 = 10;

/// How the Node of a machine being power-cycled is fenced off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum FenceMode {
    /// Taint it `node.kubernetes.io/out-of-service=nodeshutdown:NoExecute`: its pods are
    /// force-deleted and their volumes detached, so they can start elsewhere at once.
    #[default]
    Taint,
    /// Delete the Node (its labels and annotations are restored from the backup when the
    /// kubelet registers it again): for clusters older than the out-of-service taint.
    Delete,
    /// Leave the Node alone.
    None,
}

/// remediation-controller flags.
#[derive(Debug, Clone, clap::Args)]
pub struct ControllerArgs {
    /// How the Node is fenced before its server is powered off.
    #[arg(long, value_enum, default_value_t = FenceMode::Taint)]
    pub fence: FenceMode,

    /// Re-read interval of a remediation in progress: the host's power state and the workload
    /// Node are not all watched.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    pub poll_interval: Duration,
}

impl Default for ControllerArgs {
    fn default() -> Self {
        Self {
            fence: FenceMode::Taint,
            poll_interval: Duration::from_secs(5),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: ControllerArgs,
    }

    #[test]
    fn defaults_match_and_flags_parse() {
        let cli = Cli::try_parse_from(["x"]).unwrap();
        let default = ControllerArgs::default();
        assert_eq!(cli.args.fence, default.fence);
        assert_eq!(cli.args.poll_interval, default.poll_interval);
        let cli = Cli::try_parse_from(["x", "--fence=delete", "--poll-interval=500ms"]).unwrap();
        assert_eq!(cli.args.fence, FenceMode::Delete);
        assert_eq!(cli.args.poll_interval, Duration::from_millis(500));
        assert!(Cli::try_parse_from(["x", "--fence=drain"]).is_err());
        assert_eq!(
            Cli::try_parse_from(["x", "--fence=none"])
                .unwrap()
                .args
                .fence,
            FenceMode::None
        );
    }
}
