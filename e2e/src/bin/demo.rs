//! `just demo`: a CAPMAAS user's first day, told the way the user lives it (the path of
//! `e2e/tests/first_day.rs`): the commands of `docs/install.md` with the variables of CAPMAAS's
//! README, the real `clusterctl init` of Cluster API core, the kubeadm bootstrap and control-plane
//! providers and ours, every installed Deployment started from what clusterctl installed, and
//! `clusterctl generate cluster --flavor remediation | kubectl apply -f -`. Then, shown live:
//! the 3 control-plane and 3 worker machines come up on simulated MAAS servers whose first boot
//! brings up the workload control plane; one worker goes silent and its MachineHealthCheck has
//! it rebooted through MAAS and back; a Kubernetes upgrade as a user does it rolls every
//! machine. Everything is left running for a look around; Ctrl-C stops it.
#![allow(clippy::print_stdout)]

use std::path::Path;
use std::time::{Duration, Instant};

use capmaas_e2e::first_day::{self, UserShell, UserWorld};
use capmaas_e2e::installed::Installation;
use capmaas_e2e::progress::{Snapshot, render, snapshot};
use maas_sim::{NodeStatus, SimHandle};

const CLEAR: &str = "\x1b[2J\x1b[H";
const CLUSTER: &str = "t-cluster";
const NAMESPACE: &str = "default";
const EXPECTED: usize = 6;
const UPGRADED: &str = "v1.33.2";
/// The remediation flavor's variables, set for a demo's patience (its defaults are minutes).
const REMEDIATION_VARIABLES: &str =
    "WORKER_UNHEALTHY_TIMEOUT_SECONDS: 10\nWORKER_REMEDIATION_TIMEOUT_SECONDS: 120\n";

/// Shows the cluster live under `headline` until `done` holds; `None` when Ctrl-C was pressed.
async fn live(
    client: &kube::Client,
    sim: &SimHandle,
    headline: &str,
    done: impl Fn(&Snapshot, &SimHandle) -> bool,
) -> Result<Option<Duration>, capmaas_e2e::Error> {
    let started = Instant::now();
    loop {
        let snap = snapshot(client, NAMESPACE, sim).await?;
        print!(
            "{CLEAR}cluster {CLUSTER} in namespace {NAMESPACE}\n{headline}\n\n{}",
            render(&snap, EXPECTED, started.elapsed())
        );
        if done(&snap, sim) {
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

/// The documented commands' clusterctl arguments: `init`, then `generate cluster`.
fn documented() -> Result<(Vec<String>, Vec<String>), capmaas_e2e::Error> {
    let guide = std::fs::read_to_string(capmaas_testenv::repo_root().join("docs/install.md"))
        .map_err(|source| capmaas_e2e::Error::Io {
            context: "reading docs/install.md".into(),
            source,
        })?;
    let mut commands = first_day::documented_commands(&guide)?.into_iter();
    match (commands.next(), commands.next()) {
        (Some((init, false)), Some((generate, true))) => Ok((init, generate)),
        _ => Err(capmaas_e2e::Error::Manifest {
            name: "docs/install.md".into(),
            message:
                "expected clusterctl init, then clusterctl generate cluster | kubectl apply -f -"
                    .into(),
        }),
    }
}

#[tokio::main]
async fn main() -> Result<(), capmaas_e2e::Error> {
    let started = Instant::now();
    println!(
        "starting a management API server and a MAAS simulator with the servers of CAPMAAS's README..."
    );
    // Kept after the demo: the logs of every process are there.
    let dir = tempfile::Builder::new()
        .prefix("capmaas-demo-")
        .tempdir()
        .map_err(|source| capmaas_e2e::Error::Io {
            context: "creating the demo folder".into(),
            source,
        })?
        .keep();
    let world = UserWorld::start(&dir, 4, 6).await?;
    let sim = world.sim.state();
    let variables =
        first_day::capmaas_readme_variables(&world.sim.url(), &world.sim.api_key(), "v1.33.1");
    let shell = UserShell::render(
        &dir.join("repository"),
        world.management.kubeconfig_path(),
        &format!("{variables}{REMEDIATION_VARIABLES}"),
    )
    .await?;
    let (init, mut generate) = documented()?;
    println!("$ clusterctl {}", init.join(" "));
    let init: Vec<&str> = init.iter().map(String::as_str).collect();
    shell.clusterctl(&init).await?;
    println!("starting the nine Deployments clusterctl installed, each from its own manifest...");
    let installation = Installation::start(
        &world.management,
        &dir.join("installed"),
        Some(&world.boots.hosts_file()),
    )
    .await?;
    generate.extend(["--flavor".to_owned(), "remediation".to_owned()]);
    println!("$ clusterctl {} | kubectl apply -f -", generate.join(" "));
    let generate: Vec<&str> = generate.iter().map(String::as_str).collect();
    let manifest = shell.clusterctl(&generate).await?;
    shell
        .kubectl(&["apply", "-n", NAMESPACE, "-f", "-"], Some(&manifest))
        .await?;
    let client = world.management.client();

    let all_running = |snap: &Snapshot, _: &SimHandle| snap.running == EXPECTED;
    let headline = "act 1: the generated cluster comes up. The first server's boot starts the \
                    workload control plane, KubeadmControlPlane adds two more, the workers join";
    let Some(ready) = live(&client, &sim, headline, all_running).await? else {
        return Ok(());
    };
    println!(
        "\nReady: {EXPECTED} machines running {:.1}s after the cluster was applied ({:.1}s in all).",
        ready.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    tokio::time::sleep(Duration::from_secs(3)).await;

    // Act 2: a worker's kubelet goes silent until its server is power-cycled.
    let before = snapshot(&client, NAMESPACE, &sim).await?;
    let Some(victim) = before
        .machines
        .iter()
        .filter(|[name, ..]| name.contains("-md-"))
        .find_map(|[_, _, _, provider, _]| provider.rsplit('/').next().map(str::to_owned))
    else {
        return Ok(());
    };
    let Some(server) = sim.machine(&victim) else {
        return Ok(());
    };
    let kubelets = world.boots.kubelets().clone();
    kubelets.until_power_cycle(&server.hostname, server.power_on_count);
    let headline = format!(
        "act 2: the kubelet on {} ({victim}) went silent. The MachineHealthCheck notices, \
         remediation-controller asks maas-client for a power cycle and fences the Node once MAAS \
         reports the server off",
        server.hostname
    );
    let back = |snap: &Snapshot, _: &SimHandle| {
        !kubelets.is_silent(&server.hostname)
            && snap.running == EXPECTED
            && snap.machines.iter().all(|m| m[4].is_empty())
    };
    let Some(rebooted) = live(&client, &sim, &headline, back).await? else {
        return Ok(());
    };
    let power_ons = sim.machine(&victim).map_or(0, |m| m.power_on_count);
    println!(
        "\n{} is back after {:.1}s: one power cycle in MAAS (power-ons {} -> {power_ons}), no \
         Machine replaced.",
        server.hostname,
        rebooted.as_secs_f64(),
        server.power_on_count
    );
    tokio::time::sleep(Duration::from_secs(3)).await;

    // Act 3: the Kubernetes upgrade a user makes.
    let image = format!("custom/{}", first_day::UPGRADE_IMAGE);
    first_day::upgrade(&shell, NAMESPACE, CLUSTER, UPGRADED, &image).await?;
    let headline = format!(
        "act 3: Kubernetes {UPGRADED} on {image}: KubeadmControlPlane replaces the control plane \
         one server at a time (etcd members added and removed), then the MachineDeployment the workers"
    );
    let upgraded = |snap: &Snapshot, sim: &SimHandle| {
        let on_new_image = sim
            .machines()
            .iter()
            .filter(|m| {
                m.status == NodeStatus::Deployed && m.distro_series == first_day::UPGRADE_IMAGE
            })
            .count();
        on_new_image == EXPECTED && snap.running == EXPECTED && snap.machines.len() == EXPECTED
    };
    let Some(took) = live(&client, &sim, &headline, upgraded).await? else {
        return Ok(());
    };
    println!("\nUpgraded in {:.1}s.", took.as_secs_f64());

    let workload = dir.join("workload.kubeconfig");
    write_workload_kubeconfig(&world, &workload).await?;
    let kubectl = capmaas_testenv::kubectl();
    let cache = dir.join("kubectl-cache");
    let management = world.management.kubeconfig_path().display().to_string();
    println!(
        "\nLook around:\n  {k} --kubeconfig {management} --cache-dir {c} get clusters,kubeadmcontrolplanes,machines,maasmachines -n {NAMESPACE}\n  \
         {k} --kubeconfig {management} --cache-dir {c} get maashosts,maasinventories -A\n  \
         {k} --kubeconfig {management} --cache-dir {c} get machinehealthchecks,maasremediations -n {NAMESPACE}\n  \
         {k} --kubeconfig {w} --cache-dir {c} get nodes,pods -A -o wide\n  \
         curl {sim_url}_sim/machines\n\nLogs of every process are under {logs}. Press Ctrl-C to stop everything.",
        k = kubectl.display(),
        c = cache.display(),
        w = workload.display(),
        sim_url = world.sim.url().trim_end_matches("MAAS/"),
        logs = dir.display(),
    );
    let _ = tokio::signal::ctrl_c().await;
    println!("stopping...");
    drop(installation);
    world.boots.stop().await;
    Ok(())
}

/// The workload cluster's kubeconfig as KubeadmControlPlane generated it, its server set to the
/// first address MAAS's DNS serves for the endpoint (this shell does not use MAAS's DNS) and
/// the certificate checked for the endpoint's name.
async fn write_workload_kubeconfig(
    world: &UserWorld,
    path: &Path,
) -> Result<(), capmaas_e2e::Error> {
    let fqdn = format!("{CLUSTER}.{}", first_day::DNS_DOMAIN);
    let kubeconfig = first_day::workload_kubeconfig(
        &world.management.client(),
        NAMESPACE,
        CLUSTER,
        &world.boots.resolve(&fqdn),
    )
    .await?;
    let text = serde_saphyr::to_string(&kubeconfig).map_err(|e| capmaas_e2e::Error::Manifest {
        name: "workload kubeconfig".into(),
        message: e.to_string(),
    })?;
    std::fs::write(path, text).map_err(|source| capmaas_e2e::Error::Io {
        context: format!("writing {}", path.display()),
        source,
    })
}
