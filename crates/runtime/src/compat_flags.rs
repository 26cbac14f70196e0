//! Flags that manifests written for CAPMAAS may carry, accepted so that a reused patch never
//! crash-loops a Deployment: klog's (`--v`, `--logtostderr`, …, which Go controllers built on
//! klog accept, with klog's own underscore spellings such as `--log_dir`) and the CAPMAAS manager
//! flags that have no counterpart here (`--feature-gates`; `--machine-concurrency` and
//! `--webhook-port` outside the one binary that has them, [`FOREIGN_VALUE_FLAGS`]). `--v` sets the
//! log level when `--log-level` (or `RUST_LOG`) does not; every other one is ignored with a warning at start
//! ([`CompatArgs::ignored`]). None of them shows in `--help`.

/// CAPMAAS manager flags with a value that one binary defines (machine-controller's
/// `--machine-concurrency`, webhook-server's `--webhook-port`) and every other binary accepts
/// and ignores.
pub const FOREIGN_VALUE_FLAGS: [&str; 2] = ["machine-concurrency", "webhook-port"];

/// The accepted foreign flags; flattened into [`crate::CommonArgs`].
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct CompatArgs {
    /// klog verbosity: 0–1 is `info`, 2–4 `debug`, 5 and more `trace`.
    #[arg(short = 'v', long = "v", value_name = "LEVEL", hide = true)]
    pub verbosity: Option<u8>,

    /// CAPI's feature gates flag, which CAPMAAS's manager registers.
    #[arg(long, value_name = "GATES", hide = true)]
    pub feature_gates: Option<String>,

    // klog's switches: `--name`, `--name=true`, `--name=false`, as Go's bool flags take them.
    /// klog's `--logtostderr`.
    #[arg(long, hide = true, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub logtostderr: Option<String>,
    /// klog's `--alsologtostderr`.
    #[arg(long, hide = true, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub alsologtostderr: Option<String>,
    /// klog's `--skip-headers`.
    #[arg(long, alias = "skip_headers", hide = true, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub skip_headers: Option<String>,
    /// klog's `--skip-log-headers`.
    #[arg(long, alias = "skip_log_headers", hide = true, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub skip_log_headers: Option<String>,
    /// klog's `--add-dir-header`.
    #[arg(long, alias = "add_dir_header", hide = true, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub add_dir_header: Option<String>,
    /// klog's `--one-output`.
    #[arg(long, alias = "one_output", hide = true, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub one_output: Option<String>,

    // klog's settings with a value.
    /// klog's `--log-dir`.
    #[arg(long, alias = "log_dir", hide = true, value_name = "DIR")]
    pub log_dir: Option<String>,
    /// klog's `--log-file`.
    #[arg(long, alias = "log_file", hide = true, value_name = "FILE")]
    pub log_file: Option<String>,
    /// klog's `--log-file-max-size`.
    #[arg(long, alias = "log_file_max_size", hide = true, value_name = "MB")]
    pub log_file_max_size: Option<String>,
    /// klog's `--log-flush-frequency`.
    #[arg(
        long,
        alias = "log_flush_frequency",
        hide = true,
        value_name = "DURATION"
    )]
    pub log_flush_frequency: Option<String>,
    /// klog's `--stderrthreshold`.
    #[arg(long, hide = true, value_name = "SEVERITY")]
    pub stderrthreshold: Option<String>,
    /// klog's `--vmodule`.
    #[arg(long, hide = true, value_name = "PATTERNS")]
    pub vmodule: Option<String>,
    /// klog's `--log-backtrace-at` (also spelled `--log_backtrace_at`).
    #[arg(
        long,
        alias = "log_backtrace_at",
        hide = true,
        value_name = "FILE:LINE"
    )]
    pub log_backtrace_at: Option<String>,

    /// CAPMAAS manager flags this binary has no use for (`--machine-concurrency` outside
    /// machine-controller, `--webhook-port` outside webhook-server), as given: accepted by
    /// [`crate::binary::main`] and ignored with a warning.
    #[arg(skip)]
    pub foreign: Vec<String>,
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
        .chain(self.foreign.iter().cloned())
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
        let klog_spelling = CommonArgs::try_parse_from([
            "x",
            "--log_dir=/tmp",
            "--skip_headers",
            "--add_dir_header=false",
            "--log_file_max_size=1800",
            "--one_output",
        ])
        .unwrap();
        assert_eq!(klog_spelling.compat.ignored().len(), 5);
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
