//! The chaos run: a cluster provisioned through Cluster API while
//! everything around it fails, then scaled down and deleted; harm is counted from evidence
//! outside our controllers.
//!
//! **Injected**, from the moment the cluster is declared until it is gone:
//! - every [`ChaosConfig::kill_interval`] a random one of our Deployments (`maas-client`,
//!   `cluster-controller`, `machine-controller`) is SIGKILLed and started again;
//! - the simulator answers 5xx (503) to [`ChaosConfig::error_rate`] of all MAAS calls;
//! - [`ChaosConfig::timeout_rate`] of the calls time out *before* taking effect (held
//!   [`ChaosConfig::timeout_hold`], longer than the gateway's 90 s request timeout, then dropped);
//! - [`ChaosConfig::lost_answer_rate`] of the successful calls take effect and then answer 503
//!   ("commit then fail", on every operation: for reads it is a plain error, for allocate,
//!   deploy, release, annotations, hostname and DNS writes the gateway must find out what
//!   happened);
//! - once servers for a quarter of the machines are taken (allocated, deploying or deployed),
//!   MAAS goes away for [`ChaosConfig::outage`] (every call answers 503).
//!
//! **Flow**: hosts imported, faults and killer on, the cluster declared (control-plane Machines
//! plus a MachineDeployment, every machine with `releasePolicy.erase` = [`ChaosConfig::erase`]),
//! all Running with a Node, scale to [`ChaosConfig::scale_to`], delete the Cluster until every
//! CAPI and MAAS object of it is gone; then killer stopped, faults cleared, and the servers
//! given [`ChaosConfig::settle_timeout`] to come back to Ready.
//!
//! **Counted** ([`ChaosReport`]; the four harm counts must be 0):
//! - machines provisioned: Machines Running with a nodeRef;
//! - MAAS machines leaked: simulated servers not Ready, or owned, at the end (simulator state);
//! - hosts claimed twice: a watch on every MaasMachine records which host each live one points
//!   at (`spec.systemID`, `spec.providerID`; `status.hostRef` is only the intent recorded before
//!   a claim); two at the same moment count
//!   (MAAS itself refuses to deploy a deployed server, so no second deploy without a release can
//!   happen underneath);
//! - addresses given twice: addresses held by two deploying/deployed servers at the same moment
//!   (simulator samples; they are MAAS's addresses, we have no IPAM yet);
//! - servers released without the requested erase: releases in the simulator's history whose
//!   erase flags are weaker than the policy;
//! - MAAS calls per machine, time per phase, kills, injected faults.

mod config;
mod evidence;
mod phases;
mod report;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use maas_sim::FaultConfig;
use tokio_util::sync::CancellationToken;

pub use config::{ChaosConfig, GATEWAY_REQUEST_TIMEOUT};
pub use evidence::{Claims, Erase, Evidence, Monitor};
pub use report::{ChaosReport, Injected, Phase};

use crate::bench::count_hosts;
use crate::error::{Error, Result};
use crate::harness::{CONTROLLERS, Harness, HarnessConfig, apply, dynamic_api};
use crate::objects::{ClusterSpec, WorkerAddresses, kubeconfig_secret};
use phases::{Run, chaos_phases, settle};

/// Runs the chaos described by `config` and reports what it found.
pub async fn run(config: ChaosConfig) -> Result<ChaosReport> {
    Box::pin(run_inner(config)).await
}

async fn run_inner(config: ChaosConfig) -> Result<ChaosReport> {
    let servers = config.machines + config.spare_servers;
    let mut harness = Harness::start(HarnessConfig {
        machines: servers,
        deploy_time: config.deploy_time,
        log_filter: config.log_filter.clone(),
        gateway_args: config.gateway_args(),
        seed: config.seed,
        ..HarnessConfig::default()
    })
    .await?;
    let result = Box::pin(chaos(&mut harness, &config, servers)).await;
    let log_dir = match &config.keep_logs {
        Some(parent) => Some(copy_logs(harness.dir(), parent)?),
        None => None,
    };
    match (result, log_dir) {
        (Ok(report), log_dir) => Ok(ChaosReport { log_dir, ..report }),
        (Err(e), Some(dir)) => Err(Error::Chaos(format!(
            "{e} (process logs in {})",
            dir.display()
        ))),
        (Err(e), None) => Err(e),
    }
}

async fn chaos(harness: &mut Harness, config: &ChaosConfig, servers: usize) -> Result<ChaosReport> {
    let client = harness.management.client();
    let ns = harness.management.create_namespace("chaos").await?;
    let mut spec = ClusterSpec::story(&ns);
    spec.name = "chaos".into();
    spec.control_plane = config.control_plane;
    spec.workers = config.machines - config.control_plane;
    spec.release_erase = Some(config.erase.policy().into());
    // Workers take static addresses from a pool (data-controller and IPAM under the same
    // chaos); a pool address on two deployed servers is counted as given twice.
    spec.worker_addresses = Some(WorkerAddresses::in_default_subnet(
        u16::try_from(spec.workers).unwrap_or(u16::MAX),
    ));
    let kubeconfig = harness.workload.kubeconfig_yaml()?;
    apply(&client, &kubeconfig_secret(&spec.name, &ns, &kubeconfig)).await?;
    apply(&client, &spec.inventory()).await?;
    wait_for_hosts(&client, &ns, servers).await?;

    let run = Run {
        client: client.clone(),
        ns: ns.clone(),
        sim: harness.sim.state(),
        spec,
    };
    let maas_machines = dynamic_api(
        &client,
        &ns,
        "infrastructure.cluster.x-k8s.io",
        "v1beta1",
        "MaasMachine",
    )
    .await?;
    let monitor = Monitor::start(maas_machines, run.sim.clone(), Duration::from_millis(500));
    run.sim.reset_counts();
    run.sim.set_faults(config.faults()).map_err(sim_error)?;
    let started = Instant::now();
    let stop_killer = CancellationToken::new();
    let killer_failed = CancellationToken::new();
    let (killed, outcome) = tokio::join!(
        async {
            let result = killer(harness, config.kill_interval, config.seed, &stop_killer).await;
            if result.is_err() {
                killer_failed.cancel();
            }
            result
        },
        async {
            let outcome = tokio::select! {
                outcome = chaos_phases(&run, config) => outcome,
                () = killer_failed.cancelled() => Err(Error::Chaos(
                    "the killer could not restart a controller".into(),
                )),
            };
            stop_killer.cancel();
            outcome
        },
    );
    let (mut injected, outcome) = (killed?, outcome?);
    let mut phases = outcome.phases;
    run.sim
        .set_faults(FaultConfig::default())
        .map_err(sim_error)?;
    run.sim.start_outage(Duration::ZERO);
    phases.push(settle(&run, config.settle_timeout).await);
    let elapsed = started.elapsed();
    let evidence = monitor.finish().await;
    let machines = run.sim.machines();
    let sum = |counts: std::collections::BTreeMap<String, u64>| counts.values().sum::<u64>();
    injected.errors = sum(run.sim.injected_error_counts());
    injected.timeouts = sum(run.sim.timeout_counts());
    injected.lost_answers = sum(run.sim.lost_answer_counts());
    injected.outage = Some((
        config.outage,
        outcome.outage_began.0,
        outcome.outage_began.1,
    ));
    Ok(ChaosReport {
        machines: config.machines,
        scale_to: config.scale_to,
        servers,
        provisioned: outcome.provisioned,
        leaked: evidence::leaked_machines(&machines),
        claimed_twice: evidence.claimed_twice,
        addresses_given_twice: Some(evidence.shared_addresses),
        requested_erase: config.erase,
        weak_erase_releases: evidence::weak_erase_releases(&machines, config.erase),
        releases: machines.iter().map(|m| m.releases.len()).sum(),
        maas_calls: sum(run.sim.call_counts()),
        injected,
        phases,
        elapsed,
        monitor: (evidence.events, evidence.samples, evidence.watch_errors),
        log_dir: None,
    })
}

#[allow(clippy::needless_pass_by_value)] // used as `map_err(sim_error)`
fn sim_error(e: maas_sim::HandleError) -> Error {
    Error::Chaos(format!("the simulator refused the faults: {e}"))
}

async fn wait_for_hosts(client: &kube::Client, ns: &str, servers: usize) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    while count_hosts(client, ns).await? < servers {
        if Instant::now() > deadline {
            return Err(Error::Timeout {
                what: format!("{servers} MaasHosts to be imported"),
                seconds: 120,
            });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Ok(())
}

/// Every [`ChaosConfig::kill_interval`], SIGKILLs a random controller and starts it again;
/// controllers that exited by themselves are restarted and reported.
async fn killer(
    harness: &mut Harness,
    interval: Duration,
    seed: u64,
    stop: &CancellationToken,
) -> Result<Injected> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut injected = Injected::default();
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(interval) => {}
        }
        for (name, status) in harness.restart_exited_controllers().await? {
            injected.unexpected_exits.push(format!("{name}: {status}"));
        }
        let name = CONTROLLERS[rng.usize(..CONTROLLERS.len())];
        harness.restart_controller(name).await?;
        *injected.kills.entry(name).or_default() += 1;
    }
    for (name, status) in harness.restart_exited_controllers().await? {
        injected.unexpected_exits.push(format!("{name}: {status}"));
    }
    Ok(injected)
}

/// Copies every `*.log` of `from` into a new `chaos-<unix time>` folder under `parent`.
fn copy_logs(from: &Path, parent: &Path) -> Result<PathBuf> {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let to = parent.join(format!("chaos-{stamp}"));
    std::fs::create_dir_all(&to).map_err(Error::io(format!("creating {}", to.display())))?;
    let entries =
        std::fs::read_dir(from).map_err(Error::io(format!("reading {}", from.display())))?;
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "log") {
            let target = to.join(entry.file_name());
            std::fs::copy(&path, &target)
                .map_err(Error::io(format!("copying {}", path.display())))?;
        }
    }
    Ok(to)
}
