//! A herd of remediations against a real kube-apiserver (capmaas-testenv, no
//! kube-controller-manager), which is also the workload cluster. Prints numbers, asserts nothing
//! but setup (`cargo bench -p remediation-controller --bench remediations`).
//!
//! `BENCH_REMEDIATIONS` (100) unhealthy machines of one Cluster in one namespace (Machine,
//! MaasMachine, deployed MaasHost, NotReady Node: the herd of `tests/common`), then as many
//! MaasRemediations (`retryLimit: 2`, `timeoutSeconds: 600`) created at once (32 requests in
//! flight), listed every 100 ms until every one is `Ready=True Remediated`. The controller runs
//! in-process with the binary's defaults (`--concurrency=10`, `--poll-interval=5s`,
//! `--fence=taint`); the fake gateway and kubelets of `tests/common` serve every host, each
//! power transition taking `BENCH_POWER_SECONDS` (0).
//!
//! Writes are the API server's own count (`apiserver_request_total`, verbs POST, PUT, PATCH,
//! DELETE, APPLY, any response code) from just before the remediations are created until the
//! controller has gone quiet after the last one is done, less the bench's creates, less every
//! request of the fake gateway and kubelets, less `leases` (the API server's own). GETs are
//! counted the same way (the controller's reads: one observe reads the Machine once). A host
//! power-cycled other than once is printed as an `ERROR` line; `RUST_LOG` logs to stderr.
#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::cast_precision_loss
)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use capmaas_api::MaasRemediation;
use capmaas_runtime::embedded::Running;
use capmaas_testenv::{ApiRequests, TestEnv, env_or};
use common::{condition, create_herd, create_herd_remediations, herd_host, start_herd_gateway};
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use remediation_controller::{BINARY, ControllerArgs, DEFAULT_CONCURRENCY};

/// How long the remediations may take until every one is done.
const DONE_TIMEOUT: Duration = Duration::from_secs(600);
/// How often the remediations are listed while waiting.
const POLL: Duration = Duration::from_millis(100);
/// The controller counts as quiet when no write happened for this long.
const QUIET: Duration = Duration::from_secs(2);

/// Requests since `before` once no write happened for [`QUIET`].
async fn settled(client: &Client, before: &ApiRequests) -> ApiRequests {
    ApiRequests::settled(client, before, QUIET).await.unwrap()
}

/// `capmaas_reconcile_total` of this controller: (all, failed).
fn reconciles(metrics: &capmaas_runtime::MetricsRegistry) -> (f64, f64) {
    let text = metrics.encode().unwrap_or_default();
    let mut out = (0.0, 0.0);
    let prefix = format!(
        "capmaas_reconcile_total{{controller=\"{}\"",
        remediation_controller::CONTROLLER
    );
    for line in text.lines().filter(|l| l.starts_with(&prefix)) {
        let value: f64 = line
            .rsplit_once(' ')
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0.0);
        out.0 += value;
        if line.contains("result=\"error\"") {
            out.1 += value;
        }
    }
    out
}

fn remediated(r: &MaasRemediation) -> bool {
    condition(r, "Ready").is_some_and(|c| c.status == "True" && c.reason == "Remediated")
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    capmaas_testenv::bench::log_to_stderr_if_asked();
    let n = env_or("BENCH_REMEDIATIONS", 100_usize).max(1);
    let power = env_or("BENCH_POWER_SECONDS", 0.0_f64).max(0.0);
    let (profile, cores) = capmaas_testenv::bench::profile_and_cores();
    let args = ControllerArgs::default();
    println!(
        "remediation-controller against a real kube-apiserver: {profile} build, {cores} cores, \
         controller in-process with --concurrency={DEFAULT_CONCURRENCY} --poll-interval={:?} \
         --fence=taint, BENCH_REMEDIATIONS={n}, BENCH_POWER_SECONDS={power}, fake gateway and \
         kubelets in the bench process",
        args.poll_interval
    );
    let env = TestEnv::without_controller_manager().await.unwrap();
    let client = env.client();
    println!(
        "API server with CRDs up after {:.1} s",
        env.startup_duration().as_secs_f64()
    );
    let ns = env.create_namespace("bench-rem").await.unwrap();
    let herd = create_herd(&env, &ns, n).await;
    let concurrency = format!("--concurrency={DEFAULT_CONCURRENCY}");
    let config = env.kube_config().await.unwrap();
    let controller = Running::start(BINARY, config, &[&concurrency], move |term| {
        remediation_controller::run(term, args.clone())
    })
    .await
    .unwrap();
    let metrics = controller.metrics().clone();
    let gateway = start_herd_gateway(&client, &herd, Duration::from_secs_f64(power));

    let before = settled(&client, &ApiRequests::default()).await;
    let reconciles_before = reconciles(&metrics);
    let start = Instant::now();
    create_herd_remediations(&client, &herd, 2, 600).await;
    let created = start.elapsed();
    let api = Api::<MaasRemediation>::namespaced(client.clone(), &ns);
    let mut done_at: BTreeMap<String, Duration> = BTreeMap::new();
    while done_at.len() < n && start.elapsed() < DONE_TIMEOUT {
        for r in api.list(&ListParams::default()).await.unwrap().items {
            if remediated(&r) {
                done_at
                    .entry(r.name_any())
                    .or_insert_with(|| start.elapsed());
            }
        }
        tokio::time::sleep(POLL).await;
    }
    let elapsed = done_at.values().max().copied().unwrap_or(start.elapsed());
    let mut requests = settled(&client, &before)
        .await
        .minus("maasremediations", "POST", n as f64)
        .minus("machines", "GET", n as f64);
    let mut errors = Vec::new();
    {
        let counts = gateway.counts();
        for ((resource, verb), count) in &counts.requests {
            requests = requests.minus(resource, verb, f64::from(*count));
        }
        for i in 0..n {
            let host = herd_host(i);
            let cycle = (
                counts.offs.get(&host).copied().unwrap_or(0),
                counts.ons.get(&host).copied().unwrap_or(0),
            );
            if cycle != (1, 1) {
                errors.push(format!("ERROR: {host} saw {cycle:?} power-offs/ons"));
            }
        }
        if !counts.fenced_before_off.is_empty() {
            errors.push(format!(
                "ERROR: fenced while the server still ran: {:?}",
                counts.fenced_before_off
            ));
        }
    }
    let (reconciled, failed) = {
        let now = reconciles(&metrics);
        (now.0 - reconciles_before.0, now.1 - reconciles_before.1)
    };

    let mut times: Vec<Duration> = done_at.values().copied().collect();
    times.sort();
    let secs = |d: Option<&Duration>| d.map_or(f64::NAN, Duration::as_secs_f64);
    println!(
        "{n} remediations created in {:.2} s; {} of {n} Ready=True Remediated after {:.2} s \
         (first {:.2} s, median {:.2} s): {:.1} remediations/s",
        created.as_secs_f64(),
        done_at.len(),
        elapsed.as_secs_f64(),
        secs(times.first()),
        secs(times.get(times.len() / 2)),
        done_at.len() as f64 / elapsed.as_secs_f64().max(1e-9)
    );
    println!(
        "reconciles: {:.2} per remediation ({reconciled:.0}, {failed:.0} failed)",
        reconciled / n as f64
    );
    let writes = requests.clone().writes();
    println!(
        "API writes: {:.2} per remediation ({:.0}, {:.0} not 2xx)\n    {}",
        writes.total() / n as f64,
        writes.total(),
        writes.refused(),
        writes.per(n)
    );
    let gets = requests.verbs(&["GET"]);
    println!(
        "API GETs: {:.2} per remediation ({:.0}, {:.0} not 2xx)\n    {}",
        gets.total() / n as f64,
        gets.total(),
        gets.refused(),
        gets.per(n)
    );
    for e in &errors {
        println!("{e}");
    }
    let (bench, apiserver) = capmaas_testenv::bench::peak_rss_mib(&env);
    println!(
        "bench process peak RSS (controller, fake gateway and kubelets, bench; API server \
         excluded): {bench} MiB; kube-apiserver peak RSS: {apiserver} MiB",
    );
    drop(gateway);
    let _ = controller.stop(Duration::from_secs(10)).await;
}
