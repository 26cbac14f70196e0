//! Gateway benchmark (printed, not asserted).
//!
//! - Inventory at 10, 100, 1,000 and 5,000 MAAS machines in one MaasInventory: import time,
//!   MAAS calls and API writes during the import (by operation and by resource), then an idle
//!   window of several syncs: MAAS calls per sync, API writes of every kind (counted by the API
//!   server itself, `apiserver_request_total`, so even a write that changes nothing counts),
//!   host reconciles per sync, and the gateway's resident memory (now and peak).
//! - Provisioning of 20 hosts: MAAS calls and gateway API writes per provisioned host.
//!
//! Runs the built `maas-client` binary against a real API server (testenv) and the MAAS
//! simulator (in this process).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout
)]
// Figures are printed as ratios of small counts; exactness beyond 2^52 is irrelevant.
#![allow(clippy::cast_precision_loss, clippy::wildcard_imports)]

#[path = "../tests/support/mod.rs"]
mod support;

#[path = "gateway/probes.rs"]
mod probes;

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use capmaas_api::{MaasHost, MaasInventory};
use futures::StreamExt;
use kube::Api;
use kube::runtime::{reflector, watcher};
use maas_sim::NodeStatus;
use probes::{cpu_ticks, free_port, gateway_metrics};
use support::*;
use tokio::process::{Child, Command};

/// Inventory sizes measured.
const SIZES: [usize; 4] = [10, 100, 1_000, 5_000];
/// Idle syncs measured per size.
const IDLE_SYNCS: u32 = 5;

/// The sync interval of a size: 2 s, longer where one sync of the simulator's listing alone
/// would take a good part of that on two shared cores.
fn sync_interval(n: usize) -> Duration {
    Duration::from_secs(if n >= 5_000 { 5 } else { 2 })
}

fn spawn(
    sim: &maas_sim::RunningSim,
    env: &capmaas_testenv::TestEnv,
    ns: &str,
    sync: Duration,
    metrics_port: u16,
) -> Child {
    let args = gateway_args(
        sim,
        ns,
        &[
            &format!("--inventory-sync-interval={}s", sync.as_secs()),
            &format!("--metrics-bind-addr=127.0.0.1:{metrics_port}"),
            "--orphan-sweep-interval=1h",
            "--maas-rate-limit=1000",
            "--concurrency=16",
            // Each size in its own binding namespace: the simulators of two sizes share
            // system ids, and the earlier size's hosts would hold them.
            &format!("--host-binding-namespace={ns}"),
        ],
    );
    // `CAPMAAS_BENCH_MAAS_CLIENT=<path>` measures another build of the gateway (before/after).
    let binary = std::env::var_os("CAPMAAS_BENCH_MAAS_CLIENT")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_maas-client").into());
    Command::new(binary)
        .args(&args[1..])
        .arg(format!("--kubeconfig={}", env.kubeconfig_path().display()))
        .env("MAAS_API_KEY", sim.api_key())
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

fn total(counts: &BTreeMap<String, u64>) -> u64 {
    counts.values().sum()
}

/// Counts MaasHost writes (watch events other than the initial list) in a namespace.
fn count_writes(client: &kube::Client, ns: &str) -> (Arc<AtomicU64>, tokio::task::JoinHandle<()>) {
    let writes = Arc::new(AtomicU64::new(0));
    let counter = writes.clone();
    let api: Api<MaasHost> = Api::namespaced(client.clone(), ns);
    let task = tokio::spawn(async move {
        let mut initial_done = false;
        let mut stream = watcher(api, watcher::Config::default()).boxed();
        while let Some(event) = stream.next().await {
            match event {
                Ok(watcher::Event::InitDone) => initial_done = true,
                Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_)) if initial_done => {
                    counter.fetch_add(1, Ordering::Relaxed);
                }
                _ => {}
            }
        }
    });
    (writes, task)
}

/// What one inventory size measured.
struct InventoryFigures {
    n: usize,
    sync: Duration,
    import: Duration,
    import_calls: BTreeMap<String, u64>,
    import_writes: ApiWrites,
    idle_syncs: u64,
    idle_calls: BTreeMap<String, u64>,
    idle_writes: ApiWrites,
    import_cpu_ticks: u64,
    idle_host_reconciles: f64,
    idle_inventory_reconciles: f64,
    idle_inventory_seconds: f64,
    idle_cpu_ticks: u64,
    rss_kib: u64,
    peak_kib: u64,
}

impl InventoryFigures {
    fn print(&self) {
        let per_sync = |v: u64| v as f64 / self.idle_syncs.max(1) as f64;
        println!(
            "inventory {:>5} machines (sync every {} s)\n  import: {:.1} s, {} MAAS calls {:?}, {} API writes {}\n  \
             gateway CPU during the import: {:.1} s\n  \
             idle: {} syncs: {:.1} MAAS calls per sync {:?}, {:.1} API writes per sync ({} in all: {}), \
             {:.1} host and {:.1} inventory reconciles per sync, {:.0} ms in the inventory reconciler \
             and {:.0} ms of gateway CPU per sync\n  \
             memory: RSS {:.1} MiB, peak RSS {:.1} MiB",
            self.n,
            self.sync.as_secs(),
            self.import.as_secs_f64(),
            total(&self.import_calls),
            self.import_calls,
            self.import_writes.total(),
            self.import_writes,
            self.import_cpu_ticks as f64 / 100.0,
            self.idle_syncs,
            per_sync(total(&self.idle_calls)),
            self.idle_calls,
            per_sync(self.idle_writes.total()),
            self.idle_writes.total(),
            self.idle_writes,
            self.idle_host_reconciles / self.idle_syncs.max(1) as f64,
            self.idle_inventory_reconciles / self.idle_syncs.max(1) as f64,
            self.idle_inventory_seconds * 1000.0 / self.idle_syncs.max(1) as f64,
            per_sync(self.idle_cpu_ticks) * 10.0,
            self.rss_kib as f64 / 1024.0,
            self.peak_kib as f64 / 1024.0,
        );
    }

    fn row(&self) -> String {
        let per_sync = |v: u64| v as f64 / self.idle_syncs.max(1) as f64;
        format!(
            "| {} | {} s | {:.1} s | {} | {} | {:.1} | {:.1} | {:.1} | {:.0} ms | {:.0} | {:.0} |",
            self.n,
            self.sync.as_secs(),
            self.import.as_secs_f64(),
            total(&self.import_calls),
            self.import_writes.total(),
            per_sync(total(&self.idle_calls)),
            per_sync(self.idle_writes.total()),
            self.idle_host_reconciles / self.idle_syncs.max(1) as f64,
            per_sync(self.idle_cpu_ticks) * 10.0,
            self.rss_kib as f64 / 1024.0,
            self.peak_kib as f64 / 1024.0,
        )
    }
}

/// Waits until the gateway imported every machine: `n` hosts with a status, and the
/// inventory's status counting them. Watches the hosts rather than listing thousands of
/// them per poll.
async fn imported(client: &kube::Client, ns: &str, n: usize) {
    let (store, writer) = reflector::store();
    let hosts: Api<MaasHost> = Api::namespaced(client.clone(), ns);
    let watch = tokio::spawn(
        reflector(writer, watcher(hosts, watcher::Config::default()))
            .for_each(|_| std::future::ready(())),
    );
    let inventories: Api<MaasInventory> = Api::namespaced(client.clone(), ns);
    let timeout = Duration::from_secs(60 + u64::try_from(n).unwrap() / 5);
    eventually("import", timeout, || async {
        let with_status = store
            .state()
            .iter()
            .filter(|h: &&Arc<MaasHost>| h.status.is_some())
            .count();
        if with_status < n {
            return None;
        }
        let inventory = inventories.get("inv").await.ok()?;
        let counted = inventory.status.and_then(|s| s.host_count);
        (counted == i32::try_from(n).ok()).then_some(())
    })
    .await;
    watch.abort();
}

async fn inventory_case(env: &capmaas_testenv::TestEnv, n: usize) -> InventoryFigures {
    let client = env.client();
    let ns = env.create_namespace(&format!("bench{n}")).await.unwrap();
    let sim = instant_sim(n).await;
    let state = sim.state();
    let sync = sync_interval(n);
    let port = free_port();
    let mut child = spawn(&sim, env, &ns, sync, port);
    let pid = child.id().unwrap();
    // The gateway is ready (caches synced) before the clock starts.
    let before = ApiWrites::scrape(&client).await;
    let cpu_before = cpu_ticks(pid);
    let start = Instant::now();
    create_inventory(&client, &ns, "inv", "default").await;
    imported(&client, &ns, n).await;
    let import = start.elapsed();
    // Let the last writes of the import (events, the inventory status) land.
    tokio::time::sleep(sync * 2).await;
    let import_calls = state.call_counts();
    let after_import = ApiWrites::scrape(&client).await;
    let import_cpu_ticks = cpu_ticks(pid) - cpu_before;
    let import_writes = after_import.since(&before);

    state.reset_counts();
    let background = BackgroundLeases::start(&client).await;
    let reconciles_before = gateway_metrics(port).await;
    let idle_start = ApiWrites::scrape(&client).await;
    let idle_cpu = cpu_ticks(pid);
    tokio::time::sleep(sync * IDLE_SYNCS).await;
    let idle_cpu_ticks = cpu_ticks(pid) - idle_cpu;
    let idle_end = ApiWrites::scrape(&client).await;
    let reconciles_after = gateway_metrics(port).await;
    let idle_calls = state.call_counts();
    let idle_writes = idle_end
        .since(&idle_start)
        .without_leases(background.stop());
    let reconciles = reconciles_after.since(&reconciles_before);
    let (rss_kib, peak_kib) = (
        capmaas_testenv::rss_kib(pid).unwrap_or(0),
        capmaas_testenv::peak_rss_kib(pid).unwrap_or(0),
    );
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    sim.shutdown().await;
    InventoryFigures {
        n,
        sync,
        import,
        import_calls,
        import_writes,
        idle_syncs: idle_calls.get("machines.read").copied().unwrap_or(0),
        idle_calls,
        idle_writes,
        import_cpu_ticks,
        idle_host_reconciles: reconciles.get(&["_total{", r#"controller="maashost""#]),
        idle_inventory_reconciles: reconciles.get(&["_total{", r#"controller="maasinventory""#]),
        idle_inventory_seconds: reconciles.get(&["_sum{", r#"controller="maasinventory""#]),
        idle_cpu_ticks,
        rss_kib,
        peak_kib,
    }
}

async fn provisioning_case(env: &capmaas_testenv::TestEnv, n: usize) {
    let client = env.client();
    let ns = env.create_namespace("benchprov").await.unwrap();
    let sim = instant_sim(n).await;
    let state = sim.state();
    let sync = Duration::from_secs(2);
    let mut child = spawn(&sim, env, &ns, sync, free_port());
    create_deployable_inventory(&client, &ns).await;
    let ids = imported_within(&client, &ns, n, Duration::from_secs(120)).await;
    tokio::time::sleep(sync).await;
    let (writes, watch) = count_writes(&client, &ns);
    tokio::time::sleep(Duration::from_millis(500)).await;
    state.reset_counts();
    let start = Instant::now();
    for (i, id) in ids.iter().enumerate() {
        request_deploy(&client, &ns, id, &format!("m{i}")).await;
    }
    eventually("all deployed", Duration::from_secs(300), || async {
        let hosts = hosts(&client, &ns).await;
        hosts
            .iter()
            .all(|h| provisioning_state(h).as_deref() == Some("Deployed"))
            .then_some(())
    })
    .await;
    let elapsed = start.elapsed();
    let counts = state.call_counts();
    let ours = writes.load(Ordering::Relaxed).saturating_sub(n as u64); // minus the requests
    assert!(
        state
            .machines()
            .iter()
            .all(|m| m.status == NodeStatus::Deployed)
    );
    println!(
        "provisioning {n} hosts: {:.1} s, {:.1} MAAS calls per host ({counts:?}), {:.1} gateway MaasHost writes per host (inventory syncs every {}s included)",
        elapsed.as_secs_f64(),
        total(&counts) as f64 / n as f64,
        ours as f64 / n as f64,
        sync.as_secs(),
    );
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    watch.abort();
    sim.shutdown().await;
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    // `CAPMAAS_BENCH_INVENTORY_SIZES=10,100` measures other sizes (a quick look).
    let sizes: Vec<usize> = std::env::var("CAPMAAS_BENCH_INVENTORY_SIZES").map_or_else(
        |_| SIZES.to_vec(),
        |v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect(),
    );
    runtime.block_on(async {
        let env = bare_api_server().await;
        let mut figures = Vec::new();
        for n in sizes {
            let f = inventory_case(&env, n).await;
            f.print();
            figures.push(f);
        }
        println!(
            "\n| machines | sync interval | import | import MAAS calls | import API writes | MAAS calls/idle sync | API writes/idle sync | host reconciles/idle sync | gateway CPU/idle sync | RSS (MiB) | peak RSS (MiB) |"
        );
        println!("|---|---|---|---|---|---|---|---|---|---|---|");
        for f in &figures {
            println!("{}", f.row());
        }
        println!();
        provisioning_case(&env, 20).await;
    });
}
