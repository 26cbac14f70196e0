//! Counters read around a run: the API server's write counters, our binaries' reconcile
//! counters, and the peak memory of every process.

use std::collections::BTreeMap;
use std::time::Duration;

use capmaas_testenv::ApiRequests;
use capmaas_testenv::api_requests::{label, samples};

use crate::error::{Error, Result};
use crate::harness::{CONTROLLERS, Harness};

/// `apiserver_request_total` write counters, by `resource[/subresource]`.
#[derive(Debug, Default)]
pub(super) struct Writes(BTreeMap<String, f64>);

impl Writes {
    /// (writes to our `maas*` resources, all writes) since `before`.
    pub(super) fn delta(&self, before: &Self) -> (f64, f64) {
        let mut ours = 0.0;
        let mut all = 0.0;
        for (resource, count) in &self.0 {
            let d = count - before.0.get(resource).copied().unwrap_or(0.0);
            all += d;
            if resource.starts_with("maas") {
                ours += d;
            }
        }
        (ours, all)
    }
}

pub(super) async fn api_writes(client: &kube::Client) -> Result<Writes> {
    let requests = ApiRequests::scrape(client)
        .await
        .map_err(Error::kube("reading API server metrics"))?;
    Ok(Writes(requests.writes().by_resource()))
}

/// Sums `capmaas_reconcile_total` by controller (any result).
fn parse_reconciles(metrics: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for (labels, value) in samples(metrics, "capmaas_reconcile_total") {
        *out.entry(label(labels, "controller")).or_default() += value;
    }
    out
}

/// Reconciles so far per `<binary>/<controller>`, from each running binary's metrics
/// endpoint; none when no binary answered (none runs, or none exports the counter).
pub(super) async fn reconciles(harness: &Harness) -> Option<BTreeMap<String, f64>> {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .ok()?;
    let mut out = BTreeMap::new();
    for binary in CONTROLLERS {
        let Some(url) = harness.metrics_url(binary) else {
            continue;
        };
        let Ok(response) = http.get(&url).send().await else {
            continue;
        };
        let Ok(text) = response.text().await else {
            continue;
        };
        for (controller, value) in parse_reconciles(&text) {
            out.insert(format!("{binary}/{controller}"), value);
        }
    }
    (!out.is_empty()).then_some(out)
}

/// Time the gateway's MAAS calls waited for its rate limit (`--maas-rate-limit`), from
/// `capmaas_maas_rate_limit_wait_seconds`, all operations together.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct RateLimitWait {
    /// Seconds waited, summed over the calls.
    pub seconds: f64,
    /// Calls that took a permit.
    pub calls: f64,
}

impl RateLimitWait {
    fn parse(metrics: &str) -> Self {
        let sum = |name: &str| samples(metrics, name).map(|(_, v)| v).sum::<f64>();
        Self {
            seconds: sum("capmaas_maas_rate_limit_wait_seconds_sum"),
            calls: sum("capmaas_maas_rate_limit_wait_seconds_count"),
        }
    }

    /// The waits between `before` and `self`.
    pub(super) fn since(self, before: Self) -> Self {
        Self {
            seconds: self.seconds - before.seconds,
            calls: self.calls - before.calls,
        }
    }

    /// Mean wait per call, seconds (0 without calls).
    pub fn mean_seconds(self) -> f64 {
        if self.calls > 0.0 {
            self.seconds / self.calls
        } else {
            0.0
        }
    }
}

/// The gateway's rate-limit waits so far; none when `maas-client` does not run or answer.
pub(super) async fn rate_limit_wait(harness: &Harness) -> Option<RateLimitWait> {
    let url = harness.metrics_url("maas-client")?;
    let response = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .ok()?
        .get(&url)
        .send()
        .await
        .ok()?;
    Some(RateLimitWait::parse(&response.text().await.ok()?))
}

/// `after − before` per key (a key missing before counts from 0).
pub(super) fn delta(
    after: &BTreeMap<String, f64>,
    before: &BTreeMap<String, f64>,
) -> BTreeMap<String, f64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0.0)))
        .collect()
}

/// Name under which the bench process's own memory is shown.
pub(super) const BENCH_PROCESS: &str = "bench (simulator, kubelets, watches)";

/// Our binaries, CAPI core and the management cluster's processes.
fn measured_processes(harness: &Harness) -> impl Iterator<Item = &capmaas_testenv::Process> {
    harness
        .controllers()
        .iter()
        .chain(std::iter::once(harness.capi_manager()))
        .chain(harness.management.processes())
}

/// Peak resident memory (VmHWM) of our binaries, CAPI core, the management cluster's etcd,
/// kube-apiserver and kube-controller-manager, and the bench process, MiB.
pub(super) fn peak_rss(harness: &Harness) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for process in measured_processes(harness) {
        if let Some(kib) = process.peak_resident_memory_kib() {
            out.insert(process.name().to_owned(), kib_to_mib(kib));
        }
    }
    if let Some(kib) = capmaas_testenv::peak_rss_kib(std::process::id()) {
        out.insert(BENCH_PROCESS.to_owned(), kib_to_mib(kib));
    }
    out
}

/// CPU time used so far by the same processes as [`peak_rss`] and the workload cluster's etcd
/// and kube-apiserver (prefixed `workload`), seconds. A run's share is the difference of two
/// readings ([`delta`]).
pub(super) fn cpu_seconds(harness: &Harness) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for process in measured_processes(harness) {
        if let Some(time) = process.cpu_time() {
            out.insert(process.name().to_owned(), time.as_secs_f64());
        }
    }
    for process in harness.workload.processes() {
        if let Some(time) = process.cpu_time() {
            out.insert(format!("workload {}", process.name()), time.as_secs_f64());
        }
    }
    if let Some(time) = capmaas_testenv::cpu_time_of(std::process::id()) {
        out.insert(BENCH_PROCESS.to_owned(), time.as_secs_f64());
    }
    out
}

/// Restarts the bench process's peak-memory count (Linux: `5` to `/proc/self/clear_refs`), so
/// each run reports its own peak rather than the largest so far. Best effort: without it the
/// figure is the peak since the bench started, which the notes say.
pub(super) fn reset_own_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn kib_to_mib(kib: u64) -> f64 {
    f64::from(u32::try_from(kib).unwrap_or(u32::MAX)) / 1024.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_to_our_kinds_are_told_apart() {
        // Parsing the counter is `capmaas_testenv::ApiRequests`' (tested there).
        let after = Writes(BTreeMap::from([
            ("maashosts/status".to_owned(), 7.0),
            ("events".to_owned(), 3.0),
        ]));
        let before = Writes(BTreeMap::from([("maashosts/status".to_owned(), 2.0)]));
        assert_eq!(after.delta(&Writes::default()), (7.0, 10.0));
        assert_eq!(after.delta(&before), (5.0, 8.0));
    }

    #[test]
    fn rate_limit_waits_are_summed_over_operations() {
        let metrics = concat!(
            "capmaas_maas_rate_limit_wait_seconds_bucket{operation=\"allocate\",le=\"0.1\"} 3\n",
            "capmaas_maas_rate_limit_wait_seconds_sum{operation=\"allocate\"} 1.5\n",
            "capmaas_maas_rate_limit_wait_seconds_count{operation=\"allocate\"} 4\n",
            "capmaas_maas_rate_limit_wait_seconds_sum{operation=\"deploy\"} 2.5\n",
            "capmaas_maas_rate_limit_wait_seconds_count{operation=\"deploy\"} 4\n",
        );
        let after = RateLimitWait::parse(metrics);
        assert_eq!(
            after,
            RateLimitWait {
                seconds: 4.0,
                calls: 8.0
            }
        );
        let waits = after.since(RateLimitWait {
            seconds: 1.0,
            calls: 2.0,
        });
        assert!((waits.mean_seconds() - 0.5).abs() < 1e-9, "{waits:?}");
        assert!(RateLimitWait::default().mean_seconds().abs() < f64::EPSILON);
    }

    #[test]
    fn reconciles_are_summed_per_controller_over_results() {
        let metrics = concat!(
            "# TYPE capmaas_reconcile counter\n",
            "capmaas_reconcile_total{controller=\"machine\",result=\"success\"} 12\n",
            "capmaas_reconcile_total{controller=\"machine\",result=\"error\"} 1\n",
            "capmaas_reconcile_total{controller=\"host\",result=\"success\"} 30\n",
            "capmaas_reconcile_errors_total{controller=\"machine\",category=\"kube\"} 1\n",
        );
        let counts = parse_reconciles(metrics);
        assert_eq!(
            counts,
            BTreeMap::from([("host".to_owned(), 30.0), ("machine".to_owned(), 13.0)])
        );
        let before = BTreeMap::from([("machine".to_owned(), 3.0)]);
        assert_eq!(
            delta(&counts, &before),
            BTreeMap::from([("host".to_owned(), 30.0), ("machine".to_owned(), 10.0)])
        );
    }
}
