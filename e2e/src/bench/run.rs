//! One measured run with our binaries, and what every run shares ([`Session`]): the declared
//! cluster, the counters read before and after, the watches, the result.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use maas_sim::LatencyProfile;

use crate::error::{Error, Result};
use crate::harness::{Harness, HarnessConfig, apply};
use crate::objects::{ClusterSpec, kubeconfig_secret};

use super::audit::AuditCounts;
use super::timeline::{self, SimView};
use super::watch::Watches;
use super::{BenchResult, DeployTime, Provider, RunPlan, audit, metrics};

/// How long the inventory may take to import the servers.
const IMPORT_TIMEOUT: Duration = Duration::from_secs(120);

/// Measures `plan` with our six binaries; `gateway_args` are extra flags of `maas-client`
/// (empty: its defaults), `maas_latency` how long the simulated MAAS takes to answer.
pub async fn run(
    plan: RunPlan,
    gateway_args: &[String],
    maas_latency: &LatencyProfile,
    timeout: Duration,
) -> Result<BenchResult> {
    Box::pin(run_inner(plan, gateway_args, maas_latency, timeout)).await
}

async fn run_inner(
    plan: RunPlan,
    gateway_args: &[String],
    maas_latency: &LatencyProfile,
    timeout: Duration,
) -> Result<BenchResult> {
    let harness = Harness::start(harness_config(
        plan.machines,
        plan.deploy,
        Duration::ZERO,
        gateway_args,
        maas_latency,
    ))
    .await?;
    let spec = declare(&harness, plan.machines).await?;
    // Hosts first, so the measurement starts from an imported inventory.
    import(&harness, &spec, plan.machines).await?;
    let session = Session::begin(&harness, &spec).await?;
    session
        .measure(&harness, &spec, Provider::Ours, Some(plan), timeout)
        .await
}

/// The test world of a measured run: `servers` simulated servers deploying in `deploy` and
/// releasing in `release`, the gateway with `gateway_args`, MAAS answering as `maas_latency`
/// says, quiet logs and the API server's audit log.
pub(super) fn harness_config(
    servers: usize,
    deploy: DeployTime,
    release: Duration,
    gateway_args: &[String],
    maas_latency: &LatencyProfile,
) -> HarnessConfig {
    HarnessConfig {
        machines: servers,
        deploy_time: deploy.base,
        deploy_spread_percent: deploy.spread_percent,
        release_time: release,
        log_filter: "warn".into(),
        audit_log: true,
        gateway_args: gateway_args.to_vec(),
        maas_latency: maas_latency.clone(),
        ..HarnessConfig::default()
    }
}

/// Declares the inventory of `spec` and waits until the gateway has reported on `hosts`
/// MaasHosts.
pub(super) async fn import(harness: &Harness, spec: &ClusterSpec, hosts: usize) -> Result<()> {
    let client = harness.management.client();
    apply(&client, &spec.inventory()).await?;
    let deadline = Instant::now() + IMPORT_TIMEOUT;
    while count_hosts(&client, &spec.namespace).await? < hosts {
        if Instant::now() > deadline {
            return Err(Error::Timeout {
                what: format!("{hosts} MaasHosts to be imported"),
                seconds: IMPORT_TIMEOUT.as_secs(),
            });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Ok(())
}

/// A namespace with the `<cluster>-kubeconfig` Secret, and the cluster to declare in it: no
/// control plane, one MachineDeployment of `machines` workers, no zones.
pub(super) async fn declare(harness: &Harness, machines: usize) -> Result<ClusterSpec> {
    let client = harness.management.client();
    let ns = harness.management.create_namespace("bench").await?;
    let mut spec = ClusterSpec::story(&ns);
    spec.name = "bench".into();
    spec.control_plane = 0;
    spec.workers = machines;
    spec.zones = Vec::new();
    let kubeconfig = harness.workload.kubeconfig_yaml()?;
    apply(&client, &kubeconfig_secret(&spec.name, &ns, &kubeconfig)).await?;
    Ok(spec)
}

/// What the counters of a [`Session`] moved by since it began.
#[derive(Debug, Clone, Default)]
pub struct Counters {
    /// MAAS API calls per operation key (none counted for the null provider).
    pub maas_calls: BTreeMap<String, u64>,
    /// The gateway's rate-limit waits; none when it does not run.
    pub maas_rate_limit_wait: Option<metrics::RateLimitWait>,
    /// Writes the management API server served for `maas*` resources.
    pub our_kind_writes: f64,
    /// Writes for every resource.
    pub all_writes: f64,
    /// Reconciles per `<binary>/<controller>`.
    pub reconciles: Option<BTreeMap<String, f64>>,
    /// Peak resident memory (VmHWM) per process now, MiB.
    pub peak_rss_mib: BTreeMap<String, f64>,
    /// CPU seconds per process.
    pub cpu_seconds: BTreeMap<String, f64>,
    /// Writes per writer, resource and verb.
    pub audit: Option<AuditCounts>,
}

/// Counters and watches of one measurement, from just before the cluster is declared.
pub(super) struct Session {
    watches: Watches,
    writes_before: metrics::Writes,
    reconciles_before: Option<BTreeMap<String, f64>>,
    rate_limit_wait_before: Option<metrics::RateLimitWait>,
    cpu_before: BTreeMap<String, f64>,
    audit_offset: Option<u64>,
}

impl Session {
    /// Starts the watches and reads every counter; zeroes the simulator's call counts.
    pub(super) async fn begin(harness: &Harness, spec: &ClusterSpec) -> Result<Self> {
        let watches = Watches::start(
            &harness.management.client(),
            &harness.workload.client(),
            &spec.namespace,
        )
        .await?;
        let writes_before = metrics::api_writes(&harness.management.client()).await?;
        let reconciles_before = metrics::reconciles(harness).await;
        let rate_limit_wait_before = metrics::rate_limit_wait(harness).await;
        let cpu_before = metrics::cpu_seconds(harness);
        let audit_offset = harness.management.audit_log_path().map(audit::log_len);
        harness.sim.state().reset_counts();
        metrics::reset_own_peak();
        Ok(Self {
            watches,
            writes_before,
            reconciles_before,
            rate_limit_wait_before,
            cpu_before,
            audit_offset,
        })
    }

    /// Declares the cluster (everything but the inventory), waits until every Machine runs
    /// and reads the counters again.
    pub(super) async fn measure(
        mut self,
        harness: &Harness,
        spec: &ClusterSpec,
        provider: Provider,
        plan: Option<RunPlan>,
        timeout: Duration,
    ) -> Result<BenchResult> {
        let client = harness.management.client();
        let started = Instant::now();
        for object in spec.objects() {
            if object["kind"] != "MaasInventory" {
                apply(&client, &object).await?;
            }
        }
        let last_running = self.watches.all_running(spec.workers, timeout).await?;
        let elapsed = last_running.saturating_duration_since(started);
        let counters = self.counters(harness, provider).await?;
        let joined = timeline::join(&self.watches.lock(), &sim_view(harness), started);
        let timeline = timeline::summarize(&joined, started);
        Ok(BenchResult {
            provider,
            machines: spec.workers,
            deploy: plan.map(|p| p.deploy),
            elapsed,
            maas_calls: counters.maas_calls,
            maas_rate_limit_wait: counters.maas_rate_limit_wait,
            our_kind_writes: counters.our_kind_writes,
            all_writes: counters.all_writes,
            reconciles: counters.reconciles,
            peak_rss_mib: counters.peak_rss_mib,
            cpu_seconds: counters.cpu_seconds,
            timeline,
            audit: counters.audit,
        })
    }

    /// Reads every counter again: what moved since [`Self::begin`].
    pub(super) async fn counters(&self, harness: &Harness, provider: Provider) -> Result<Counters> {
        let maas_calls = match provider {
            Provider::Ours => harness.sim.state().call_counts(),
            Provider::Null => BTreeMap::new(),
        };
        let cpu_seconds = metrics::delta(&metrics::cpu_seconds(harness), &self.cpu_before);
        let writes_after = metrics::api_writes(&harness.management.client()).await?;
        let (our_kind_writes, all_writes) = writes_after.delta(&self.writes_before);
        let reconciles = match (metrics::reconciles(harness).await, &self.reconciles_before) {
            (Some(after), Some(before)) => Some(metrics::delta(&after, before)),
            (after, _) => after,
        };
        let maas_rate_limit_wait = metrics::rate_limit_wait(harness)
            .await
            .map(|after| after.since(self.rate_limit_wait_before.unwrap_or_default()));
        let audit = match (harness.management.audit_log_path(), self.audit_offset) {
            (Some(path), Some(offset)) => Some(audit::read_since(path, offset)?),
            _ => None,
        };
        Ok(Counters {
            maas_calls,
            maas_rate_limit_wait,
            our_kind_writes,
            all_writes,
            reconciles,
            peak_rss_mib: metrics::peak_rss(harness),
            cpu_seconds,
            audit,
        })
    }

    /// What the session's watches saw.
    pub(super) fn watches(&self) -> &Watches {
        &self.watches
    }
}

/// The simulator's status history and hostnames, for [`timeline::join`].
pub(super) fn sim_view(harness: &Harness) -> SimView {
    let state = harness.sim.state();
    SimView {
        changes: state.status_history(),
        hostnames: state
            .machines()
            .into_iter()
            .map(|m| (m.system_id, m.hostname))
            .collect(),
    }
}

/// MaasHosts of `ns` that the gateway has reported on (a provisioning state in status).
pub async fn count_hosts(client: &kube::Client, ns: &str) -> Result<usize> {
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
