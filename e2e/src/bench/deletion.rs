//! The mass-deletion run (`CAPMAAS_BENCH_RUN=deletion`): N workers provisioned, then at once
//! their MachineDeployment scaled to 0 and a second MachineDeployment of a few workers declared.
//! A mass deletion must not fill the reconcile slots or the MAAS budget so that status reports
//! and new provisionings wait: the run measures how long until every server is back (Machines
//! gone, servers Ready in MAAS, MaasHosts `Available`), what the releases cost (MAAS calls, API
//! writes) and how the provisionings started meanwhile fare (Deployed→Running of those only).
//! The report is [`super::deletion_report`].

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kube::api::{Patch, PatchParams};
use maas_sim::{LatencyProfile, NodeStatus, StatusChange};
use serde_json::{Value, json};

use super::deletion_report::DeletionResult;
use super::release_steps::{self, Released};
use super::run::{Session, declare, harness_config, import, sim_view};
use super::timeline::{self, Milestone, Recorder};
use super::{BenchResult, DEFAULT_SIZE, DeployTime, Provider, RunPlan, parse_list};
use crate::error::{Error, Result};
use crate::harness::{Harness, apply, dynamic_api};
use crate::objects::ClusterSpec;

/// Simulated MAAS release time (Releasing → Ready) of the run: a release without disk erase,
/// the API's default, only powers the server off and hands it back, which takes a real MAAS a
/// few seconds (the BMC's power-off and the next power poll); an erase would take minutes and
/// measure the disks rather than the provider.
pub const RELEASE_TIME: Duration = Duration::from_secs(5);

/// How often the run looks at what its watches and the simulator recorded, in-process; the
/// moments reported come from those records, not from this.
const LOOK_EVERY: Duration = Duration::from_millis(200);

/// Provisionings declared together with the deletion of `machines`: one in twenty, at least 5.
pub fn late_count(machines: usize) -> usize {
    (machines / 20).max(5)
}

/// Machines to delete: the first size of `CAPMAAS_BENCH_SIZES`, else [`DEFAULT_SIZE`].
pub fn deletion_size(sizes: Option<&str>) -> Result<usize> {
    let Some(list) = sizes else {
        return Ok(DEFAULT_SIZE);
    };
    let sizes = parse_list(list, "CAPMAAS_BENCH_SIZES", |t| {
        t.parse().ok().filter(|n| *n > 0)
    })?;
    Ok(sizes.into_iter().next().unwrap_or(DEFAULT_SIZE))
}

/// The second MachineDeployment, `<cluster>-late`: the workers' template and bootstrap data,
/// its own name and labels, `replicas` workers.
pub(super) fn late_deployment(spec: &ClusterSpec, replicas: usize) -> Value {
    let name = format!("{}-late", spec.name);
    let labels = json!({
        "cluster.x-k8s.io/cluster-name": spec.name,
        "cluster.x-k8s.io/deployment-name": name,
    });
    let mut deployment = spec.machine_deployment(&spec.image);
    deployment["metadata"]["name"] = json!(name);
    deployment["spec"]["replicas"] = json!(replicas);
    deployment["spec"]["selector"]["matchLabels"] = labels.clone();
    deployment["spec"]["template"]["metadata"]["labels"] = labels;
    deployment
}

/// Deletes `machines` Machines while `late_count(machines)` new ones are provisioned.
/// `on_provisioned` is told of the provisioning before (not measured) when it is done.
pub async fn run_deletion(
    machines: usize,
    gateway_args: &[String],
    maas_latency: &LatencyProfile,
    timeout: Duration,
    on_provisioned: impl FnOnce(&BenchResult),
) -> Result<DeletionResult> {
    Box::pin(run_inner(
        machines,
        gateway_args,
        maas_latency,
        timeout,
        on_provisioned,
    ))
    .await
}

async fn run_inner(
    machines: usize,
    gateway_args: &[String],
    maas_latency: &LatencyProfile,
    timeout: Duration,
    on_provisioned: impl FnOnce(&BenchResult),
) -> Result<DeletionResult> {
    let late = late_count(machines);
    let deploy = DeployTime::fast();
    let harness = Harness::start(harness_config(
        machines + late,
        deploy,
        RELEASE_TIME,
        gateway_args,
        maas_latency,
    ))
    .await?;
    let spec = declare(&harness, machines).await?;
    import(&harness, &spec, machines + late).await?;
    // The machines to delete, provisioned as a provisioning run does (not the measured part).
    let provisioned = Session::begin(&harness, &spec)
        .await?
        .measure(
            &harness,
            &spec,
            Provider::Ours,
            Some(RunPlan { machines, deploy }),
            timeout,
        )
        .await?;
    on_provisioned(&provisioned);

    // The measured part: fresh counters and watches.
    let session = Session::begin(&harness, &spec).await?;
    let old = Old::of(&session.watches().lock());
    if old.machines.len() != machines || old.hosts.len() != machines {
        tracing::warn!(
            machines = old.machines.len(),
            hosts = old.hosts.len(),
            expected = machines,
            "the deletion does not start from one claimed host per Machine"
        );
    }
    let client = harness.management.client();
    let deployments = dynamic_api(
        &client,
        &spec.namespace,
        "cluster.x-k8s.io",
        "v1beta2",
        "MachineDeployment",
    )
    .await?;
    let workers = format!("{}-workers", spec.name);
    let scale_to_zero = Patch::Merge(json!({"spec": {"replicas": 0}}));
    let patch_params = PatchParams::default();
    let late_deployment = late_deployment(&spec, late);
    let started = Instant::now();
    let (scaled, declared) = tokio::join!(
        deployments.patch(&workers, &patch_params, &scale_to_zero),
        apply(&client, &late_deployment),
    );
    scaled.map_err(Error::kube(format!("scaling {workers} to 0")))?;
    declared?;
    let ends = wait(&harness, &session, &old, late, started, timeout).await?;
    let counters = session.counters(&harness, Provider::Ours).await?;
    let sim = sim_view(&harness);
    let release_steps = release_steps::release_steps(
        &session.watches().lock(),
        &sim.changes,
        &old.released,
        started,
    );
    let joined = timeline::join(&session.watches().lock(), &sim, started);
    let created = Milestone::MachineCreated.index();
    let late_marks: Vec<timeline::Marks> = joined
        .into_iter()
        .filter(|marks| marks[created].is_some_and(|at| at >= started))
        .collect();
    let late_claim_to_deployed = late_marks
        .iter()
        .filter_map(|marks| {
            let claimed = marks[Milestone::HostClaimed.index()]?;
            let deployed = marks[Milestone::MaasDeployed.index()]?;
            Some(deployed.saturating_duration_since(claimed).as_secs_f64())
        })
        .collect();
    Ok(DeletionResult {
        machines: old.machines.len(),
        late,
        deploy,
        release: RELEASE_TIME,
        provisioning: provisioned.elapsed,
        provisioning_deployed_to_running: provisioned.timeline.deployed_to_running,
        gone: ends.gone.saturating_duration_since(started),
        servers_ready: ends.servers_ready.saturating_duration_since(started),
        hosts_free: ends.hosts_free.saturating_duration_since(started),
        late_running: ends.late_running.saturating_duration_since(started),
        counters,
        late_timeline: timeline::summarize(&late_marks, started),
        late_claim_to_deployed,
        release_steps,
    })
}

/// What is deleted: the Machines present and the claimed hosts (name → system id) when the
/// measured part starts.
#[derive(Debug, Clone, Default)]
pub(super) struct Old {
    pub(super) machines: Vec<String>,
    pub(super) hosts: BTreeMap<String, Option<String>>,
    /// Each host with its Machine, for [`release_steps`].
    pub(super) released: Vec<Released>,
}

impl Old {
    pub(super) fn of(recorder: &Recorder) -> Self {
        let machines = recorder.present_machines();
        let hosts = recorder.claimed_hosts();
        let released = release_steps::released(recorder, &machines, &hosts);
        Self {
            machines,
            hosts,
            released,
        }
    }
}

/// When each end of the run was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Ends {
    /// The last old Machine seen deleted.
    pub(super) gone: Instant,
    /// The last old server Ready in MAAS again (the simulator's history).
    pub(super) servers_ready: Instant,
    /// The last old MaasHost seen `Available` again.
    pub(super) hosts_free: Instant,
    /// The last late Machine seen Running.
    pub(super) late_running: Instant,
}

/// How far the run is: each end, once reached, and how many have got there.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Look {
    pub(super) gone: (usize, Option<Instant>),
    pub(super) servers_ready: (usize, Option<Instant>),
    pub(super) hosts_free: (usize, Option<Instant>),
    pub(super) late_running: (usize, Option<Instant>),
}

impl Look {
    /// Every end, once all are reached.
    pub(super) fn ends(&self) -> Option<Ends> {
        Some(Ends {
            gone: self.gone.1?,
            servers_ready: self.servers_ready.1?,
            hosts_free: self.hosts_free.1?,
            late_running: self.late_running.1?,
        })
    }

    fn progress(&self, old: &Old, late: usize) -> String {
        format!(
            "{} of {} Machines gone, {} of {} servers Ready in MAAS, {} of {} MaasHosts Available, \
             {} of {late} late Machines Running",
            self.gone.0,
            old.machines.len(),
            self.servers_ready.0,
            old.hosts.len(),
            self.hosts_free.0,
            old.hosts.len(),
            self.late_running.0,
        )
    }
}

/// How many of `marks` are set, and the latest of them once all are (`since` when there are
/// none).
fn all_set(
    marks: impl IntoIterator<Item = Option<Instant>>,
    since: Instant,
) -> (usize, Option<Instant>) {
    let (mut set, mut unset, mut last) = (0, 0, since);
    for mark in marks {
        match mark {
            Some(at) => {
                set += 1;
                last = last.max(at);
            }
            None => unset += 1,
        }
    }
    (set, (unset == 0).then_some(last))
}

/// The ends of the deletion started at `started`, from the watches and the simulator's
/// status history: each old Machine gone, its server's first Ready since `started`, its
/// MaasHost's first `Available` since `started`, and `late` Machines created since `started`
/// Running.
pub(super) fn look(
    recorder: &Recorder,
    history: &BTreeMap<String, Vec<StatusChange>>,
    old: &Old,
    late: usize,
    started: Instant,
) -> Look {
    let ready = |system_id: &Option<String>| {
        timeline::first_change(history, system_id.as_deref()?, NodeStatus::Ready, started)
    };
    let running: Vec<Instant> = recorder
        .running_of_created_since(started)
        .into_iter()
        .flatten()
        .collect();
    let late_running = (
        running.len(),
        (running.len() >= late).then(|| running.iter().copied().max().unwrap_or(started)),
    );
    Look {
        gone: all_set(old.machines.iter().map(|m| recorder.deleted_at(m)), started),
        servers_ready: all_set(old.hosts.values().map(ready), started),
        hosts_free: all_set(
            old.hosts.keys().map(|h| recorder.freed_since(h, started)),
            started,
        ),
        late_running,
    }
}

/// Waits until every end is reached, looking every [`LOOK_EVERY`] at the watches and the
/// simulator (in-process: nothing asks the API server).
async fn wait(
    harness: &Harness,
    session: &Session,
    old: &Old,
    late: usize,
    started: Instant,
    timeout: Duration,
) -> Result<Ends> {
    loop {
        let history = harness.sim.state().status_history();
        let now = look(&session.watches().lock(), &history, old, late, started);
        if let Some(ends) = now.ends() {
            return Ok(ends);
        }
        if started.elapsed() > timeout {
            return Err(Error::Timeout {
                what: format!("the mass deletion ({})", now.progress(old, late)),
                seconds: timeout.as_secs(),
            });
        }
        tokio::time::sleep(LOOK_EVERY).await;
    }
}
