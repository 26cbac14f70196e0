//! Provisioning benchmark: N worker Machines from one MachineDeployment on N simulated
//! servers; time until all are Running with a Node, MAAS calls and API writes per
//! machine, and the peak resident memory of each process. Numbers are printed, never
//! asserted.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::harness::{Harness, HarnessConfig, apply};
use crate::objects::{ClusterSpec, kubeconfig_secret};
use crate::progress::snapshot;

/// One measured run.
#[derive(Debug, Clone)]
pub struct BenchResult {
    /// Machines provisioned.
    pub machines: usize,
    /// Simulated deployment time per server.
    pub deploy_time: Duration,
    /// From declaring the MachineDeployment to every Machine Running with a nodeRef.
    pub elapsed: Duration,
    /// MAAS API calls per machine (all operations, inventory syncs included).
    pub maas_calls_per_machine: f64,
    /// Write requests (create, update, patch, delete) per machine that the management
    /// API server served for our kinds (`maas*` resources), by anyone.
    pub our_kind_writes_per_machine: f64,
    /// Write requests per machine for every resource (CAPI core and Events included).
    pub all_writes_per_machine: f64,
    /// Peak resident memory (VmHWM) per process, MiB.
    pub peak_rss_mib: BTreeMap<String, f64>,
}

/// Runs one measurement: `machines` workers with `deploy_time` per server.
pub async fn run(machines: usize, deploy_time: Duration, timeout: Duration) -> Result<BenchResult> {
    let config = HarnessConfig {
        machines,
        deploy_time,
        release_time: Duration::ZERO,
        log_filter: "warn".into(),
        ..HarnessConfig::default()
    };
    let harness = Harness::start(config).await?;
    let client = harness.management.client();
    let ns = harness.management.create_namespace("bench").await?;
    let mut spec = ClusterSpec::story(&ns);
    spec.name = "bench".into();
    spec.control_plane = 0;
    spec.workers = machines;
    spec.zones = Vec::new();
    let kubeconfig = harness.workload.kubeconfig_yaml()?;
    apply(&client, &kubeconfig_secret(&spec.name, &ns, &kubeconfig)).await?;
    // Hosts first, so the measurement starts from an imported inventory.
    apply(&client, &spec.inventory()).await?;
    let hosts_ready = Instant::now() + Duration::from_secs(120);
    while count_hosts(&client, &ns).await? < machines {
        if Instant::now() > hosts_ready {
            return Err(Error::Timeout {
                what: format!("{machines} MaasHosts to be imported"),
                seconds: 120,
            });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    let writes_before = api_writes(&client).await?;
    harness.sim.state().reset_counts();
    let started = Instant::now();
    for object in spec.objects() {
        if object["kind"] != "MaasInventory" {
            apply(&client, &object).await?;
        }
    }
    loop {
        let snap = snapshot(&client, &ns, &harness.sim.state()).await?;
        if snap.running == machines {
            break;
        }
        if started.elapsed() > timeout {
            return Err(Error::Timeout {
                what: format!("{machines} machines to run ({} did)", snap.running),
                seconds: timeout.as_secs(),
            });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let elapsed = started.elapsed();
    let maas_calls: u64 = harness.sim.state().call_counts().values().sum();
    let writes_after = api_writes(&client).await?;
    let (ours, all) = writes_after.delta(&writes_before);

    let mut peak_rss_mib = BTreeMap::new();
    for process in harness
        .controllers()
        .iter()
        .chain(std::iter::once(harness.capi_manager()))
    {
        if let Some(kib) = process.peak_resident_memory_kib() {
            peak_rss_mib.insert(process.name().to_owned(), kib_to_mib(kib));
        }
    }
    let per = |n: f64| n / f64::from(u32::try_from(machines).unwrap_or(u32::MAX).max(1));
    Ok(BenchResult {
        machines,
        deploy_time,
        elapsed,
        maas_calls_per_machine: per(u64_to_f64(maas_calls)),
        our_kind_writes_per_machine: per(ours),
        all_writes_per_machine: per(all),
        peak_rss_mib,
    })
}

pub(crate) async fn count_hosts(client: &kube::Client, ns: &str) -> Result<usize> {
    let api: kube::Api<capmaas_api::MaasHost> = kube::Api::namespaced(client.clone(), ns);
    Ok(api
        .list(&kube::api::ListParams::default())
        .await
        .map_err(Error::kube("listing MaasHosts"))?
        .items
        .iter()
        .filter(|h| {
            h.status
                .as_ref()
                .and_then(|s| s.provisioning_state.as_ref())
                .is_some()
        })
        .count())
}

/// `apiserver_request_total` write counters, by resource.
#[derive(Debug, Default)]
struct Writes(BTreeMap<String, f64>);

impl Writes {
    /// (writes to our `maas*` resources, all writes) since `before`.
    fn delta(&self, before: &Self) -> (f64, f64) {
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

async fn api_writes(client: &kube::Client) -> Result<Writes> {
    let request = http::Request::get("/metrics")
        .body(Vec::new())
        .map_err(|e| Error::Io {
            context: "building the metrics request".into(),
            source: std::io::Error::other(e),
        })?;
    let text = client
        .request_text(request)
        .await
        .map_err(Error::kube("reading API server metrics"))?;
    Ok(parse_writes(&text))
}

/// Sums `apiserver_request_total` samples of write verbs by resource.
fn parse_writes(metrics: &str) -> Writes {
    let mut writes = Writes::default();
    for line in metrics
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
    {
        let Some((labels, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let label = |name: &str| {
            labels
                .split(&format!("{name}=\""))
                .nth(1)
                .and_then(|rest| rest.split('"').next())
                .unwrap_or_default()
                .to_owned()
        };
        if !matches!(
            label("verb").as_str(),
            "POST" | "PUT" | "PATCH" | "DELETE" | "APPLY"
        ) {
            continue;
        }
        if let Ok(value) = value.parse::<f64>() {
            *writes.0.entry(label("resource")).or_default() += value;
        }
    }
    writes
}

fn kib_to_mib(kib: u64) -> f64 {
    f64::from(u32::try_from(kib).unwrap_or(u32::MAX)) / 1024.0
}

fn u64_to_f64(n: u64) -> f64 {
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

/// A Markdown table of the results.
pub fn table(results: &[BenchResult]) -> String {
    let names: Vec<String> = results
        .iter()
        .flat_map(|r| r.peak_rss_mib.keys().cloned())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut out = String::from(
        "| machines | deploy | time to all running | machines/s | MAAS calls/machine | writes/machine (maas* kinds) | writes/machine (all) |",
    );
    for name in &names {
        let _ = write!(out, " peak RSS {name} (MiB) |");
    }
    out.push('\n');
    out.push_str(&"|---".repeat(7 + names.len()));
    out.push_str("|\n");
    for r in results {
        let secs = r.elapsed.as_secs_f64();
        let rate = if secs > 0.0 {
            f64::from(u32::try_from(r.machines).unwrap_or(u32::MAX)) / secs
        } else {
            0.0
        };
        let _ = write!(
            out,
            "| {} | {:.0} s | {:.1} s | {:.2} | {:.1} | {:.1} | {:.1} |",
            r.machines,
            r.deploy_time.as_secs_f64(),
            secs,
            rate,
            r.maas_calls_per_machine,
            r.our_kind_writes_per_machine,
            r.all_writes_per_machine
        );
        for name in &names {
            let _ = write!(
                out,
                " {:.0} |",
                r.peak_rss_mib.get(name).copied().unwrap_or(0.0)
            );
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_counters_are_summed_by_resource_for_write_verbs_only() {
        let metrics = concat!(
            "# TYPE apiserver_request_total counter\n",
            "apiserver_request_total{code=\"200\",component=\"apiserver\",group=\"infrastructure.cluster.x-k8s.io\",resource=\"maashosts\",scope=\"resource\",subresource=\"status\",verb=\"APPLY\",version=\"v1beta1\"} 7\n",
            "apiserver_request_total{code=\"201\",component=\"apiserver\",group=\"\",resource=\"events\",scope=\"resource\",subresource=\"\",verb=\"POST\",version=\"v1\"} 3\n",
            "apiserver_request_total{code=\"200\",component=\"apiserver\",group=\"\",resource=\"events\",scope=\"resource\",subresource=\"\",verb=\"GET\",version=\"v1\"} 100\n",
        );
        let after = parse_writes(metrics);
        assert_eq!(after.0.get("maashosts"), Some(&7.0));
        assert_eq!(after.0.get("events"), Some(&3.0));
        assert_eq!(after.delta(&Writes::default()), (7.0, 10.0));
    }

    #[test]
    fn the_table_has_a_row_per_run_and_a_column_per_process() {
        let result = BenchResult {
            machines: 50,
            deploy_time: Duration::ZERO,
            elapsed: Duration::from_secs(10),
            maas_calls_per_machine: 6.0,
            our_kind_writes_per_machine: 12.0,
            all_writes_per_machine: 30.0,
            peak_rss_mib: BTreeMap::from([("maas-client".to_owned(), 40.0)]),
        };
        let table = table(&[result]);
        assert!(
            table.contains("| 50 | 0 s | 10.0 s | 5.00 | 6.0 | 12.0 | 30.0 | 40 |"),
            "{table}"
        );
        assert!(table.contains("peak RSS maas-client"));
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
