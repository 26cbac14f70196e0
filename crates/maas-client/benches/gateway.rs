//! Gateway benchmark (printed, not asserted): MAAS calls per inventory sync for 10, 100 and
//! 1000 hosts; MAAS calls and Kubernetes API writes per provisioned host; resident memory of
//! the `maas-client` binary with 1000 hosts. Runs the built binary against a real API server
//! (testenv) and the MAAS simulator.
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

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use capmaas_api::MaasHost;
use futures::StreamExt;
use kube::Api;
use kube::runtime::watcher;
use maas_sim::{NodeStatus, SimConfig, Simulator};
use support::*;
use tokio::process::{Child, Command};

const SYNC: Duration = Duration::from_secs(2);

fn spawn(sim: &maas_sim::RunningSim, env: &capmaas_testenv::TestEnv, ns: &str) -> Child {
    let args = gateway_args(
        sim,
        ns,
        &[
            "--inventory-sync-interval=2s",
            "--orphan-sweep-interval=1h",
            "--maas-rate-limit=1000",
            "--concurrency=16",
        ],
    );
    Command::new(env!("CARGO_BIN_EXE_maas-client"))
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

fn rss_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
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

async fn inventory_case(env: &capmaas_testenv::TestEnv, n: usize) {
    let client = env.client();
    let ns = env.create_namespace(&format!("bench{n}")).await.unwrap();
    let sim = Simulator::start(SimConfig {
        machines: n,
        ..SimConfig::instant()
    })
    .await
    .unwrap();
    let state = sim.state();
    let (writes, watch) = count_writes(&client, &ns);
    let mut child = spawn(&sim, env, &ns);
    let start = Instant::now();
    create_inventory(&client, &ns, "inv", "default").await;
    eventually("import", Duration::from_secs(600), || async {
        let hosts = hosts(&client, &ns).await;
        (hosts.len() == n && hosts.iter().all(|h| h.status.is_some())).then_some(())
    })
    .await;
    let import = start.elapsed();
    let import_calls = total(&state.call_counts());
    let import_writes = writes.load(Ordering::Relaxed);
    tokio::time::sleep(SYNC).await;
    state.reset_counts();
    writes.store(0, Ordering::Relaxed);
    let window = SYNC * 5;
    tokio::time::sleep(window).await;
    let idle = state.call_counts();
    let syncs = idle.get("machines.read").copied().unwrap_or(0).max(1);
    println!(
        "inventory {n:>5} hosts: import {:>6.1} s, {import_calls} MAAS calls, {import_writes} API writes; \
         steady state: {:.1} MAAS calls per sync ({syncs} syncs in {}s, calls {idle:?}), {} API writes",
        import.as_secs_f64(),
        total(&idle) as f64 / syncs as f64,
        window.as_secs(),
        writes.load(Ordering::Relaxed),
    );
    if n == 1000 {
        let pid = child.id().unwrap();
        let (rss, peak) = rss_kib(pid);
        println!(
            "maas-client binary with {n} hosts: RSS {:.1} MiB (peak {:.1} MiB)",
            rss as f64 / 1024.0,
            peak as f64 / 1024.0
        );
    }
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    watch.abort();
    sim.shutdown().await;
}

async fn provisioning_case(env: &capmaas_testenv::TestEnv, n: usize) {
    let client = env.client();
    let ns = env.create_namespace("benchprov").await.unwrap();
    let sim = Simulator::start(SimConfig {
        machines: n,
        ..SimConfig::instant()
    })
    .await
    .unwrap();
    let state = sim.state();
    let mut child = spawn(&sim, env, &ns);
    create_inventory(&client, &ns, "inv", "default").await;
    create_user_data(&client, &ns, "user-data", "#cloud-config\n").await;
    let ids = eventually("import", Duration::from_secs(120), || async {
        let hosts = hosts(&client, &ns).await;
        (hosts.len() == n && hosts.iter().all(|h| h.status.is_some())).then(|| {
            hosts
                .iter()
                .map(|h| h.spec.system_id.clone())
                .collect::<Vec<_>>()
        })
    })
    .await;
    tokio::time::sleep(SYNC).await;
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
        "provisioning {n} hosts: {:.1} s, {:.1} MAAS calls per host ({counts:?}), {:.1} gateway API writes per host (inventory syncs every {}s included)",
        elapsed.as_secs_f64(),
        total(&counts) as f64 / n as f64,
        ours as f64 / n as f64,
        SYNC.as_secs(),
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
    runtime.block_on(async {
        let env = capmaas_testenv::TestEnv::builder()
            .controller_manager(false)
            .capi_crds(false)
            .start()
            .await
            .unwrap();
        for n in [10, 100, 1000] {
            inventory_case(&env, n).await;
        }
        provisioning_case(&env, 20).await;
    });
}
