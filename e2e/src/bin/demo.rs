//! `just demo`: a Cluster API cluster of 3 control-plane and 5 worker machines on 20
//! simulated MAAS servers, shown live until it is ready; Ctrl-C stops everything. The workers
//! take static addresses, hostnames and metadata from a MaasDataTemplate and a MaasIPPool.
#![allow(clippy::print_stdout)]

use std::time::{Duration, Instant};

use capmaas_e2e::progress::{render, snapshot};
use capmaas_e2e::{ClusterSpec, Harness, HarnessConfig, WorkerAddresses, apply, kubeconfig_secret};

const CLEAR: &str = "\x1b[2J\x1b[H";

#[tokio::main]
async fn main() -> Result<(), capmaas_e2e::Error> {
    let started = Instant::now();
    println!(
        "starting the management and workload API servers, Cluster API core, the MAAS simulator and our controllers..."
    );
    let harness = Harness::start(HarnessConfig::default()).await?;
    let ns = harness.management.create_namespace("demo").await?;
    let mut spec = ClusterSpec::story(&ns);
    // Room to scale the workers up a little and watch the pool run out.
    spec.worker_addresses = Some(WorkerAddresses::in_default_subnet(8));
    let kubeconfig = harness.workload.kubeconfig_yaml()?;
    apply(
        &harness.management.client(),
        &kubeconfig_secret(&spec.name, &ns, &kubeconfig),
    )
    .await?;
    for object in spec.objects() {
        apply(&harness.management.client(), &object).await?;
    }
    let expected = spec.control_plane + spec.workers;
    let applied = Instant::now();
    let client = harness.management.client();
    let ready = loop {
        let snap = snapshot(&client, &ns, &harness.sim.state()).await?;
        print!(
            "{CLEAR}cluster {} in namespace {ns}\n\n{}",
            spec.name,
            render(&snap, expected, applied.elapsed())
        );
        if snap.running == expected {
            break applied.elapsed();
        }
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {
                println!("\nstopping...");
                return Ok(());
            }
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    };
    let kubectl = capmaas_testenv::kubectl();
    let mgmt = harness.management.kubeconfig_path().display().to_string();
    let workload = harness.workload.kubeconfig_path().display().to_string();
    println!(
        "\nThe cluster is ready: {expected} machines running {:.1}s after it was declared ({:.1}s in all).\n\n\
         Look around:\n  {k} --kubeconfig {mgmt} get clusters,machines,maasmachines,maashosts -n {ns}\n  \
         {k} --kubeconfig {mgmt} get maasippools,ipaddressclaims,ipaddresses,maasdata -n {ns}\n  \
         {k} --kubeconfig {mgmt} get cluster-api -n {ns}\n  {k} --kubeconfig {workload} get nodes -o wide\n  \
         curl {sim}_sim/machines\n\nLogs of every process are in {logs}. Press Ctrl-C to stop everything.",
        ready.as_secs_f64(),
        started.elapsed().as_secs_f64(),
        k = kubectl.display(),
        sim = harness.sim.url().trim_end_matches("MAAS/"),
        logs = harness.dir().display(),
    );
    let _ = tokio::signal::ctrl_c().await;
    println!("stopping...");
    drop(harness);
    Ok(())
}
