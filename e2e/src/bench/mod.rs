//! Provisioning benchmark: N worker Machines of one MachineDeployment on N
//! simulated MAAS servers whose deployments take MAAS-like times; the time until all are
//! Running with a Node, MAAS calls, API writes (per kind and per writer) and reconciles per
//! machine, where a machine spends its time, and the peak memory of each process. The same
//! Machines with a null provider give the ceiling of the test world. Numbers are printed,
//! never asserted.
//!
//! - [`run`]: our six binaries ([`run::run`]); [`run_ceiling`]: a null stand-in instead
//!   ([`ceiling`]).
//! - [`timeline`]: watches in the bench process date each step of each machine; joined with
//!   the simulator's status history.
//! - [`audit`]: the management API server's audit log, per writer, resource and verb.
//! - [`table`]: the Markdown of `e2e/bench-results.md`.
//! - [`deletion`]: the mass-deletion run ([`run_deletion`]), reported by [`deletion_report`].

mod audit;
mod ceiling;
mod deletion;
mod deletion_report;
mod growth;
mod metrics;
mod release_steps;
mod run;
mod stats;
mod table;
mod timeline;
mod watch;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

pub use audit::{AuditCounts, NULL_PROVIDER_USER, WriteCount, WriteKey, writer_name};
pub use ceiling::run_ceiling;
pub use deletion::{RELEASE_TIME, deletion_size, late_count, run_deletion};
pub use deletion_report::{DELETION_HEADING, DeletionResult, PROVISIONING_OPS, deletion_report};
pub use metrics::RateLimitWait;
pub use release_steps::{ReleaseStep, ReleaseStepRow};
pub use run::{Counters, count_hosts, run};
pub use stats::{p50_p99, percentile};
pub use table::{HEADING, ReportContext, detail_run, merge_report, report};
pub use timeline::{Milestone, MilestoneRow, TimelineSummary};

use crate::error::{Error, Result};

/// Spread of a deployment time given in seconds alone (`CAPMAAS_BENCH_DEPLOYS=30`): MAAS
/// deployments of one batch commonly differ by about this much.
pub const DEFAULT_SPREAD_PERCENT: u32 = 30;

/// Machines per run when only `CAPMAAS_BENCH_DEPLOYS` is given.
pub const DEFAULT_SIZE: usize = 200;

/// Machines of the default plan's largest run, beside [`DEFAULT_SIZE`] with the same
/// deployment time: how each per-machine figure grows with size.
pub const LARGE_SIZE: usize = 1000;

/// Simulated deployment time of a run: `base` × a factor in [1 − spread, 1 + spread] per
/// server, fixed by the simulator's seed and the server's system id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeployTime {
    /// The mean deployment time.
    pub base: Duration,
    /// The spread, percent (0–100).
    pub spread_percent: u32,
}

impl DeployTime {
    /// Every deployment takes exactly `seconds`.
    pub const fn exact(seconds: u64) -> Self {
        Self {
            base: Duration::from_secs(seconds),
            spread_percent: 0,
        }
    }

    /// `seconds` ± [`DEFAULT_SPREAD_PERCENT`].
    pub const fn spread(seconds: u64) -> Self {
        Self {
            base: Duration::from_secs(seconds),
            spread_percent: DEFAULT_SPREAD_PERCENT,
        }
    }

    /// 0–2 s: the fastest MAAS-like profile (1 s ± 100 %).
    pub const fn fast() -> Self {
        Self {
            base: Duration::from_secs(1),
            spread_percent: 100,
        }
    }

    /// One entry of `CAPMAAS_BENCH_DEPLOYS`: `0` is 0–2 s ([`Self::fast`]), `N` is N s ± 30 %,
    /// `N:P` is N s ± P % (`0:0`: every deployment done at the next read).
    pub fn parse(token: &str) -> Option<Self> {
        let token = token.trim();
        let (seconds, spread) = match token.split_once(':') {
            Some((seconds, spread)) => (seconds.trim(), Some(spread.trim().parse().ok()?)),
            None => (token, None),
        };
        let seconds: u64 = seconds.parse().ok()?;
        match (seconds, spread) {
            (0, None) => Some(Self::fast()),
            (_, Some(spread)) if spread > 100 => None,
            (seconds, spread) => Some(Self {
                base: Duration::from_secs(seconds),
                spread_percent: spread.unwrap_or(DEFAULT_SPREAD_PERCENT),
            }),
        }
    }

    /// How the table shows it: `0 s`, `0–2 s`, `30 s ± 30 %`.
    pub fn label(&self) -> String {
        let base = self.base.as_secs_f64();
        match self.spread_percent {
            0 => format!("{base:.0} s"),
            100 => format!("0–{:.0} s", 2.0 * base),
            spread => format!("{base:.0} s ± {spread} %"),
        }
    }
}

/// One measured configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunPlan {
    /// Worker Machines (and simulated servers).
    pub machines: usize,
    /// Simulated deployment time.
    pub deploy: DeployTime,
}

/// The runs of `just bench`: 200 machines with 0–2 s, 30 s ± 30 % and 120 s ± 30 %
/// deployments, 50 with instant ones, and 1,000 with 0–2 s.
pub fn default_plan() -> Vec<RunPlan> {
    let mut plan: Vec<RunPlan> = [
        DeployTime::fast(),
        DeployTime::spread(30),
        DeployTime::spread(120),
    ]
    .into_iter()
    .map(|deploy| RunPlan {
        machines: DEFAULT_SIZE,
        deploy,
    })
    .collect();
    plan.push(RunPlan {
        machines: 50,
        deploy: DeployTime::exact(0),
    });
    plan.push(RunPlan {
        machines: LARGE_SIZE,
        deploy: DeployTime::fast(),
    });
    plan
}

/// The runs for `CAPMAAS_BENCH_SIZES` and `CAPMAAS_BENCH_DEPLOYS` (comma-separated): every size
/// with every deployment time; a variable left unset is 200, resp. `0,30,120`. Neither set:
/// [`default_plan`].
pub fn plan(sizes: Option<&str>, deploys: Option<&str>) -> Result<Vec<RunPlan>> {
    if sizes.is_none() && deploys.is_none() {
        return Ok(default_plan());
    }
    let sizes: Vec<usize> = match sizes {
        Some(list) => parse_list(list, "CAPMAAS_BENCH_SIZES", |t| {
            t.parse().ok().filter(|n| *n > 0)
        })?,
        None => vec![DEFAULT_SIZE],
    };
    let deploys = parse_list(
        deploys.unwrap_or("0,30,120"),
        "CAPMAAS_BENCH_DEPLOYS",
        DeployTime::parse,
    )?;
    Ok(sizes
        .iter()
        .flat_map(|&machines| {
            deploys
                .iter()
                .map(move |&deploy| RunPlan { machines, deploy })
        })
        .collect())
}

fn parse_list<T>(list: &str, name: &str, parse: impl Fn(&str) -> Option<T>) -> Result<Vec<T>> {
    let tokens: Vec<&str> = list
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect();
    if tokens.is_empty() {
        return Err(Error::BenchConfig {
            name: name.into(),
            message: "empty list".into(),
        });
    }
    tokens
        .into_iter()
        .map(|t| {
            parse(t).ok_or_else(|| Error::BenchConfig {
                name: name.into(),
                message: format!("cannot read {t:?}"),
            })
        })
        .collect()
}

/// Who played the infrastructure provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// Our six binaries.
    Ours,
    /// The null stand-in: the ceiling of the test world.
    Null,
}

/// One measured run.
#[derive(Debug, Clone)]
pub struct BenchResult {
    /// Who provisioned.
    pub provider: Provider,
    /// Machines provisioned.
    pub machines: usize,
    /// Simulated deployment time (none for the null provider, which asks MAAS nothing).
    pub deploy: Option<DeployTime>,
    /// From declaring the MachineDeployment to every Machine Running with a nodeRef.
    pub elapsed: Duration,
    /// MAAS API calls per operation key (`machines.read`, `machine.deploy`, ...), inventory
    /// syncs included.
    pub maas_calls: BTreeMap<String, u64>,
    /// How long the gateway's MAAS calls waited for its rate limit; none for the null
    /// provider.
    pub maas_rate_limit_wait: Option<RateLimitWait>,
    /// Write requests (create, update, patch, delete) the management API server served for
    /// our kinds (`maas*` resources), by anyone (`apiserver_request_total`).
    pub our_kind_writes: f64,
    /// Write requests for every resource (CAPI core and Events included).
    pub all_writes: f64,
    /// Reconciles per `<binary>/<controller>` (`capmaas_reconcile_total`); none when no
    /// binary's metrics could be read (the null provider runs none).
    pub reconciles: Option<BTreeMap<String, f64>>,
    /// Peak resident memory (VmHWM) per process, MiB.
    pub peak_rss_mib: BTreeMap<String, f64>,
    /// CPU time per process during the run (user and system), seconds.
    pub cpu_seconds: BTreeMap<String, f64>,
    /// Where the machines spent their time.
    pub timeline: TimelineSummary,
    /// Writes per writer, resource and verb, from the audit log.
    pub audit: Option<AuditCounts>,
}

impl BenchResult {
    /// Machines per second.
    pub fn rate(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            count(self.machines) / secs
        } else {
            0.0
        }
    }

    /// `total` divided by the number of machines.
    pub fn per_machine(&self, total: f64) -> f64 {
        total / count(self.machines).max(1.0)
    }

    /// All MAAS calls.
    pub fn maas_calls_total(&self) -> u64 {
        self.maas_calls.values().sum()
    }
}

/// `n` as a float, for rates (machine counts are far below 2^32).
pub(crate) fn count(n: usize) -> f64 {
    f64::from(u32::try_from(n).unwrap_or(u32::MAX))
}

/// `n` as a float (counters of one run are far below 2^32).
pub(crate) fn count_u64(n: u64) -> f64 {
    f64::from(u32::try_from(n).unwrap_or(u32::MAX))
}

/// How the benchmarked binaries were built, in words that hold on any machine: the cargo
/// profile (from the folder name, `target/<profile>`) and the folder, relative to the
/// repository when it is inside it.
pub fn describe_binaries(bin_dir: &Path, repo_root: &Path) -> String {
    let profile = match bin_dir.file_name().and_then(|name| name.to_str()) {
        Some("release") => "release build (`cargo build --release`)",
        Some("debug") => "debug build (`cargo build`)",
        _ => "build profile unknown",
    };
    let folder = if bin_dir.is_relative() {
        format!("`{}`", bin_dir.display())
    } else if let Ok(inside) = bin_dir.strip_prefix(repo_root) {
        format!("`{}`", inside.display())
    } else {
        "a folder outside the repository (`CAPMAAS_BIN_DIR`)".to_owned()
    };
    format!("{profile}, binaries from {folder}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployment_times_are_read_and_labelled() {
        assert_eq!(DeployTime::parse("0"), Some(DeployTime::fast()));
        assert_eq!(DeployTime::fast().label(), "0–2 s");
        let thirty = DeployTime::parse(" 30 ").unwrap();
        assert_eq!(
            (thirty.base, thirty.spread_percent),
            (Duration::from_secs(30), 30)
        );
        assert_eq!(thirty.label(), "30 s ± 30 %");
        assert_eq!(DeployTime::parse("0:0"), Some(DeployTime::exact(0)));
        assert_eq!(DeployTime::exact(0).label(), "0 s");
        assert_eq!(DeployTime::parse("120:10").unwrap().label(), "120 s ± 10 %");
        for bad in ["", "x", "-1", "5:101", "5:x"] {
            assert_eq!(DeployTime::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_default_plan_is_the_issues_and_the_variables_narrow_it() {
        let default = plan(None, None).unwrap();
        let rows: Vec<(usize, String)> = default
            .iter()
            .map(|p| (p.machines, p.deploy.label()))
            .collect();
        assert_eq!(
            rows,
            [
                (200, "0–2 s".to_owned()),
                (200, "30 s ± 30 %".to_owned()),
                (200, "120 s ± 30 %".to_owned()),
                (50, "0 s".to_owned()),
                (1000, "0–2 s".to_owned()),
            ]
        );
        let small = plan(Some("20"), Some("0,5")).unwrap();
        let rows: Vec<(usize, String)> = small
            .iter()
            .map(|p| (p.machines, p.deploy.label()))
            .collect();
        assert_eq!(
            rows,
            [(20, "0–2 s".to_owned()), (20, "5 s ± 30 %".to_owned())]
        );
        assert_eq!(plan(Some("50,200"), None).unwrap().len(), 6);
        assert_eq!(plan(None, Some("30")).unwrap()[0].machines, 200);
        assert!(plan(Some("0"), None).is_err());
        assert!(plan(None, Some("fast")).is_err());
        assert!(plan(Some(" , "), None).is_err());
    }

    #[test]
    fn binaries_are_described_by_profile_and_repository_folder() {
        let repo = Path::new("/home/someone/capmaas-rs");
        assert_eq!(
            describe_binaries(&repo.join("target/release"), repo),
            "release build (`cargo build --release`), binaries from `target/release`"
        );
        assert_eq!(
            describe_binaries(Path::new("target/debug"), repo),
            "debug build (`cargo build`), binaries from `target/debug`"
        );
        assert_eq!(
            describe_binaries(Path::new("/opt/bin"), repo),
            "build profile unknown, binaries from a folder outside the repository (`CAPMAAS_BIN_DIR`)"
        );
    }
}
