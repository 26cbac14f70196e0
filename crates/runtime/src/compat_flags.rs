//! Flags that manifests written for CAPMAAS may carry, accepted so that a reused patch never
//! crash-loops a Deployment: klog's (`--v`, `--logtostderr`, …, which Go controllers built on
//! klog accept) and the CAPMAAS manager flag that has no counterpart here (`--feature-gates`;
//! `--machine-concurrency` is machine-controller's alias of `--concurrency`). `--v` sets the log level when `--log-level`
//! (or `RUST_LOG`) does not; every other one is ignored with a warning at start
//! ([`CompatArgs::ignored`]). None of them shows in `--help`.

/// The accepted foreign flags; flattened into [`crate::CommonArgs`].
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct CompatArgs {
    /// klog verbosity: 0–1 is `info`, 2–4 `debug`, 5 and more `trace`.
    #[arg(short = 'v', long = "v", value_name = "LEVEL", hide = true)]
    pub verbosity: Option<u8>,

    /// CAPI's feature gates flag, which CAPMAAS's manager registers.
    #[arg(long, value_name = "GATES", hide = true)]
    pub feature_gates: Option<String>,

    /// klog switches (`--logtostderr`, `--logtostderr=false`, …).
    #[arg(
        long = "logtostderr",
        value_name = "BOOL",
        hide = true,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true"
    )]
    pub logtostderr: Option<String>,
    #[arg(
        long = "alsologtostderr",
        value_name = "BOOL",
        hide = true,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true"
    )]
    /// klog's `--alsologtostderr`.
    pub alsologtostderr: Option<String>,
    #[arg(
        long = "skip-headers",
        value_name = "BOOL",
        hide = true,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true"
    )]
    /// klog's `--skip-headers`.
    pub skip_headers: Option<String>,
    #[arg(
        long = "skip-log-headers",
        value_name = "BOOL",
        hide = true,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true"
    )]
    /// klog's `--skip-log-headers`.
    pub skip_log_headers: Option<String>,
    #[arg(
        long = "add-dir-header",
        value_name = "BOOL",
        hide = true,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true"
    )]
    /// klog's `--add-dir-header`.
    pub add_dir_header: Option<String>,
    #[arg(
        long = "one-output",
        value_name = "BOOL",
        hide = true,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true"
    )]
    /// klog's `--one-output`.
    pub one_output: Option<String>,

    /// klog settings with a value.
    #[arg(long = "log-dir", value_name = "DIR", hide = true)]
    pub log_dir: Option<String>,
    #[arg(long = "log-file", value_name = "FILE", hide = true)]
    /// klog's `--log-file`.
    pub log_file: Option<String>,
    #[arg(long = "log-file-max-size", value_name = "MB", hide = true)]
    /// klog's `--log-file-max-size`.
    pub log_file_max_size: Option<String>,
    #[arg(long = "log-flush-frequency", value_name = "DURATION", hide = true)]
    /// klog's `--log-flush-frequency`.
    pub log_flush_frequency: Option<String>,
    #[arg(long = "stderrthreshold", value_name = "SEVERITY", hide = true)]
    /// klog's `--stderrthreshold`.
    pub stderrthreshold: Option<String>,
    #[arg(long = "vmodule", value_name = "PATTERNS", hide = true)]
    /// klog's `--vmodule`.
    pub vmodule: Option<String>,
    #[arg(
        long = "log-backtrace-at",
        alias = "log_backtrace_at",
        value_name = "FILE:LINE",
        hide = true
    )]
    /// klog's `--log-backtrace-at`.
    pub log_backtrace_at: Option<String>,
}

impl CompatArgs {
    /// The log filter `--v` stands for.
    pub fn verbosity_filter(&self) -> Option<&'static str> {
        self.verbosity.map(|v| match v {
            0 | 1 => "info",
            2..=4 => "debug",
            _ => "trace",
        })
    }

    /// The flags given that change nothing here, as `--name=value`, for the warning at start.
    pub fn ignored(&self) -> Vec<String> {
        [
            ("feature-gates", &self.feature_gates),
            ("logtostderr", &self.logtostderr),
            ("alsologtostderr", &self.alsologtostderr),
            ("skip-headers", &self.skip_headers),
            ("skip-log-headers", &self.skip_log_headers),
            ("add-dir-header", &self.add_dir_header),
            ("one-output", &self.one_output),
            ("log-dir", &self.log_dir),
            ("log-file", &self.log_file),
            ("log-file-max-size", &self.log_file_max_size),
            ("log-flush-frequency", &self.log_flush_frequency),
            ("stderrthreshold", &self.stderrthreshold),
            ("vmodule", &self.vmodule),
            ("log-backtrace-at", &self.log_backtrace_at),
        ]
        .into_iter()
        .filter_map(|(name, value)| value.as_ref().map(|v| format!("--{name}={v}")))
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use crate::CommonArgs;

    #[test]
    fn capmaas_and_klog_flags_are_accepted_and_v_sets_the_level() {
        let a = CommonArgs::try_parse_from([
            "x",
            "--v=4",
            "--logtostderr",
            "--alsologtostderr=false",
            "--log-dir",
            "/tmp",
            "--vmodule=foo=2",
            "--feature-gates=MachinePool=true",
            "--leader-elect",
        ])
        .unwrap();
        assert!(a.leader_elect);
        assert_eq!(a.log_filter(), "debug");
        assert_eq!(
            a.compat.ignored(),
            [
                "--feature-gates=MachinePool=true",
                "--logtostderr=true",
                "--alsologtostderr=false",
                "--log-dir=/tmp",
                "--vmodule=foo=2",
            ]
        );
        let short = CommonArgs::try_parse_from(["x", "-v", "6"]).unwrap();
        assert_eq!(short.log_filter(), "trace");
    }

    #[test]
    fn log_level_wins_over_v_and_info_is_the_default() {
        let both = CommonArgs::try_parse_from(["x", "--v=9", "--log-level=warn"]).unwrap();
        assert_eq!(both.log_filter(), "warn");
        let none = CommonArgs::try_parse_from(["x"]).unwrap();
        assert_eq!(none.log_filter(), "info");
        assert!(none.compat.ignored().is_empty());
        let quiet = CommonArgs::try_parse_from(["x", "--v=0"]).unwrap();
        assert_eq!(quiet.log_filter(), "info");
    }

    #[test]
    fn foreign_flags_stay_out_of_help() {
        let help = <crate::flags::CommonArgsOnly as clap::CommandFactory>::command()
            .render_long_help()
            .to_string();
        assert!(!help.contains("logtostderr"), "{help}");
        assert!(!help.contains("feature-gates"), "{help}");
    }
}
