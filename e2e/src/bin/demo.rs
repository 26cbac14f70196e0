//! `just demo`: a Cluster API cluster of 3 control-plane and 5 worker machines on 20
//! simulated MAAS servers, shown live until it is ready. The workers take static addresses,
//! hostnames and metadata from a MaasDataTemplate and a MaasIPPool. Then the rest of the story:
//! one worker goes silent and is rebooted back through MAAS by its MachineHealthCheck and
//! remediation-controller, and an image upgrade with node reuse re-images the same servers.
//! Everything is left running for a look around; Ctrl-C stops it.
#![allow(clippy::print_stdout)]

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use capmaas_e2e::progress::{Snapshot, render, snapshot};
use capmaas_e2e::{
    ClusterSpec, Harness, HarnessConfig, WorkerAddresses, WorkerRemediation, apply,
    kubeconfig_secret,
};
use maas_sim::{NodeStatus, SimHandle};

const CLEAR: &str = "\x1b[2J\x1b[H";
const UPGRADE_IMAGE: &str = "ubuntu/noble";

/// Shows the cluster live under `headline` until `done` holds; `None` when Ctrl-C was pressed.
async fn live(
    harness: &Harness,
    spec: &ClusterSpec,
    headline: &str,
    done: impl Fn(&Snapshot, &SimHandle) -> bool,
) -> Result<Option<Duration>, capmaas_e2e::Error> {
    let started = Instant::now();
    let client = harness.management.client();
    let expected = spec.control_plane + spec.workers;
    loop {
        let sim = harness.sim.state();
        let snap = snapshot(&client, &spec.namespace, &sim).await?;
        print!(
            "{CLEAR}cluster {} in namespace {}\n{headline}\n\n{}",
            spec.name,
            spec.namespace,
            render(&snap, expected, started.elapsed())
        );
        if done(&snap, &sim) {
            return Ok(Some(started.elapsed()));
        }
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {
                println!("\nstopping...");
                return Ok(None);
            }
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

/// The servers deployed for the workers (by system id), from the Machines' provider ids.
fn worker_servers(snap: &Snapshot) -> BTreeSet<String> {
    snap.machines
        .iter()
        .filter(|[name, ..]| name.contains("workers"))
        .filter_map(|[_, _, _, provider, _]| provider.rsplit('/').next())
        .filter(|id| !id.is_empty() && *id != "-")
        .map(str::to_owned)
        .collect()
}

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
    spec.worker_remediation = Some(WorkerRemediation {
        retry_limit: 2,
        timeout_seconds: 120,
        unhealthy_after_seconds: 5,
    });
    spec.node_reuse = true;
    let client = harness.management.client();
    let kubeconfig = harness.workload.kubeconfig_yaml()?;
    apply(&client, &kubeconfig_secret(&spec.name, &ns, &kubeconfig)).await?;
    for object in spec.objects() {
        apply(&client, &object).await?;
    }
    let expected = spec.control_plane + spec.workers;
    let all_running = |snap: &Snapshot, _: &SimHandle| snap.running == expected;

    let Some(ready) = live(&harness, &spec, "declared; coming up", all_running).await? else {
        return Ok(());
    };
    println!(
        "\nReady: {expected} machines running {:.1}s after the cluster was declared ({:.1}s in all).",
        ready.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    tokio::time::sleep(Duration::from_secs(3)).await;

    // Act 2: a worker's kubelet goes silent until its server is power-cycled.
    let before = snapshot(&client, &ns, &harness.sim.state()).await?;
    let Some(victim) = worker_servers(&before).into_iter().next() else {
        return Ok(());
    };
    let Some(server) = harness.sim.state().machine(&victim) else {
        return Ok(());
    };
    harness
        .kubelets()
        .until_power_cycle(&server.hostname, server.power_on_count);
    let headline = format!(
        "act 2: the kubelet on {} ({victim}) went silent. The MachineHealthCheck notices, \
         remediation-controller asks maas-client for a power cycle and fences the Node once MAAS reports the server off",
        server.hostname
    );
    let silence = harness.kubelets().clone();
    let hostname = server.hostname.clone();
    let back = |snap: &Snapshot, _: &SimHandle| {
        !silence.is_silent(&hostname)
            && snap.running == expected
            && snap.machines.iter().all(|m| m[4].is_empty())
    };
    let Some(rebooted) = live(&harness, &spec, &headline, back).await? else {
        return Ok(());
    };
    let power_ons = harness
        .sim
        .state()
        .machine(&victim)
        .map_or(0, |m| m.power_on_count);
    println!(
        "\n{} is back after {:.1}s: one power cycle in MAAS (power-ons {} -> {power_ons}), its \
         Node restored, no Machine replaced.",
        server.hostname,
        rebooted.as_secs_f64(),
        server.power_on_count
    );
    tokio::time::sleep(Duration::from_secs(3)).await;

    // Act 3: an image upgrade with node reuse re-images the same servers.
    apply(&client, &spec.worker_template(UPGRADE_IMAGE)).await?;
    apply(&client, &spec.machine_deployment(UPGRADE_IMAGE)).await?;
    let servers_before = worker_servers(&before);
    let headline = format!(
        "act 3: the workers move to {UPGRADE_IMAGE}; with nodeReuse the same servers are re-imaged, \
         one at a time"
    );
    let upgraded = |snap: &Snapshot, sim: &SimHandle| {
        let on_new_image = sim
            .machines()
            .iter()
            .filter(|m| m.status == NodeStatus::Deployed && m.distro_series.contains("noble"))
            .count();
        on_new_image == spec.workers && snap.running == expected
    };
    let Some(took) = live(&harness, &spec, &headline, upgraded).await? else {
        return Ok(());
    };
    let after = snapshot(&client, &ns, &harness.sim.state()).await?;
    let same = worker_servers(&after) == servers_before;
    println!(
        "\nUpgraded in {:.1}s; {}.",
        took.as_secs_f64(),
        if same {
            "every worker runs on the server it ran on before"
        } else {
            "some workers moved to other servers"
        }
    );

    let kubectl = capmaas_testenv::kubectl();
    let mgmt = harness.management.kubeconfig_path().display().to_string();
    let workload = harness.workload.kubeconfig_path().display().to_string();
    println!(
        "\nLook around:\n  {k} --kubeconfig {mgmt} get clusters,machines,maasmachines,maashosts -n {ns}\n  \
         {k} --kubeconfig {mgmt} get maasippools,ipaddressclaims,ipaddresses,maasdata -n {ns}\n  \
         {k} --kubeconfig {mgmt} get machinehealthchecks,maasremediations -n {ns}\n  \
         {k} --kubeconfig {mgmt} get cluster-api -n {ns}\n  {k} --kubeconfig {workload} get nodes -o wide\n  \
         curl {sim}_sim/machines\n\nLogs of every process are in {logs}. Press Ctrl-C to stop everything.",
        k = kubectl.display(),
        sim = harness.sim.url().trim_end_matches("MAAS/"),
        logs = harness.dir().display(),
    );
    let _ = tokio::signal::ctrl_c().await;
    println!("stopping...");
    drop(harness);
    Ok(())
}
