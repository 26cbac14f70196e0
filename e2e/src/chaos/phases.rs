//! The phases of a chaos run: provision (with the outage part-way), scale down, delete,
//! settle.

use std::time::{Duration, Instant};

use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use maas_sim::SimHandle;
use serde_json::json;

use super::config::ChaosConfig;
use super::evidence;
use super::report::Phase;
use crate::error::{Error, Result};
use crate::harness::{apply, dynamic_api};
use crate::objects::ClusterSpec;
use crate::progress::{Snapshot, snapshot};

const POLL: Duration = Duration::from_secs(1);

/// Everything the phases share (clones; the harness itself belongs to the killer).
pub(crate) struct Run {
    pub(crate) client: kube::Client,
    pub(crate) ns: String,
    pub(crate) sim: SimHandle,
    pub(crate) spec: ClusterSpec,
}

/// What the phases did.
pub(crate) struct Outcome {
    pub(crate) phases: Vec<Phase>,
    /// Machines running when provisioning ended.
    pub(crate) provisioned: usize,
    /// When the outage began (since the cluster was declared) and how many servers were in
    /// use (allocated, deploying or deployed) then.
    pub(crate) outage_began: (Duration, usize),
}

/// Provision (with the outage part-way), scale down, delete.
pub(crate) async fn chaos_phases(run: &Run, config: &ChaosConfig) -> Result<Outcome> {
    let declared = Instant::now();
    for object in run.spec.objects() {
        if object["kind"] != "MaasInventory" {
            apply(&run.client, &object).await?;
        }
    }
    let outage_at = outage_threshold(config.machines, config.outage_at);
    let mut outage_began = None;
    let (provision, provisioned) = wait_machines(
        run,
        "provision",
        config.machines,
        config.provision_timeout,
        |snap| {
            let in_use = in_use(snap);
            if outage_began.is_none() && in_use >= outage_at {
                run.sim.start_outage(config.outage);
                outage_began = Some((declared.elapsed(), in_use));
            }
        },
    )
    .await?;
    // Provisioning ended before the threshold (a timeout): the outage still happens.
    let outage_began = outage_began.unwrap_or_else(|| {
        run.sim.start_outage(config.outage);
        (declared.elapsed(), provisioned)
    });
    let mut phases = vec![provision];

    let deployments = dynamic_api(
        &run.client,
        &run.ns,
        "cluster.x-k8s.io",
        "v1beta2",
        "MachineDeployment",
    )
    .await?;
    let workers = config.scale_to.saturating_sub(config.control_plane);
    deployments
        .patch(
            &format!("{}-workers", run.spec.name),
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"replicas": workers}})),
        )
        .await
        .map_err(Error::kube("scaling the MachineDeployment"))?;
    phases.push(
        wait_machines(run, "scale", config.scale_to, config.scale_timeout, |_| {})
            .await?
            .0,
    );

    let clusters = dynamic_api(
        &run.client,
        &run.ns,
        "cluster.x-k8s.io",
        "v1beta2",
        "Cluster",
    )
    .await?;
    clusters
        .delete(&run.spec.name, &DeleteParams::default())
        .await
        .map_err(Error::kube("deleting the Cluster"))?;
    phases.push(wait_gone(run, config.delete_timeout).await?);
    Ok(Outcome {
        phases,
        provisioned,
        outage_began,
    })
}

/// Servers in use at which the outage starts (at least one).
fn outage_threshold(machines: usize, share: f64) -> usize {
    let machines_f = f64::from(u32::try_from(machines).unwrap_or(u32::MAX));
    // The product is within 0..=machines, so the conversion cannot truncate.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let at = (machines_f * share.clamp(0.0, 1.0)).ceil() as usize;
    at.clamp(1, machines.max(1))
}

/// Servers taken out of Ready: allocated, deploying, deployed (or failed).
fn in_use(snap: &Snapshot) -> usize {
    snap.servers
        .iter()
        .filter(|(state, _)| state.as_str() != "Ready")
        .map(|(_, n)| n)
        .sum()
}

/// Waits until exactly `count` Machines exist and all run with a Node; `each` sees the
/// number running at every poll. Returns the phase and the number running at its end.
async fn wait_machines(
    run: &Run,
    name: &'static str,
    count: usize,
    timeout: Duration,
    mut each: impl FnMut(&Snapshot),
) -> Result<(Phase, usize)> {
    let started = Instant::now();
    loop {
        let snap = snapshot(&run.client, &run.ns, &run.sim).await?;
        each(&snap);
        let done = snap.running == count && snap.machines.len() == count;
        if done || started.elapsed() > timeout {
            let servers: Vec<String> = snap
                .servers
                .iter()
                .map(|(s, n)| format!("{s} {n}"))
                .collect();
            let phase = Phase {
                name,
                elapsed: started.elapsed(),
                completed: done,
                note: format!(
                    "{} of {} Machines running (want {count}); servers: {}",
                    snap.running,
                    snap.machines.len(),
                    servers.join(", ")
                ),
            };
            return Ok((phase, snap.running));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Kinds that must all be gone once the Cluster is deleted.
const CLUSTER_KINDS: [(&str, &str, &str); 7] = [
    ("cluster.x-k8s.io", "v1beta2", "Cluster"),
    ("cluster.x-k8s.io", "v1beta2", "MachineDeployment"),
    ("cluster.x-k8s.io", "v1beta2", "MachineSet"),
    ("cluster.x-k8s.io", "v1beta2", "Machine"),
    ("infrastructure.cluster.x-k8s.io", "v1beta1", "MaasCluster"),
    ("infrastructure.cluster.x-k8s.io", "v1beta1", "MaasMachine"),
    (
        "infrastructure.cluster.x-k8s.io",
        "v1beta1",
        "MaasDNSRecord",
    ),
];

async fn wait_gone(run: &Run, timeout: Duration) -> Result<Phase> {
    let mut apis: Vec<(&str, Api<DynamicObject>)> = Vec::new();
    for (group, version, kind) in CLUSTER_KINDS {
        apis.push((
            kind,
            dynamic_api(&run.client, &run.ns, group, version, kind).await?,
        ));
    }
    let started = Instant::now();
    loop {
        let mut left = Vec::new();
        for (kind, api) in &apis {
            let n = api
                .list(&ListParams::default())
                .await
                .map_err(Error::kube(format!("listing {kind}")))?
                .items
                .len();
            if n > 0 {
                left.push(format!("{n} {kind}"));
            }
        }
        if left.is_empty() || started.elapsed() > timeout {
            return Ok(Phase {
                name: "delete",
                elapsed: started.elapsed(),
                completed: left.is_empty(),
                note: format!("left: {}", left.join(", ")),
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Waits (up to `timeout`) until every server is Ready and unowned.
pub(crate) async fn settle(run: &Run, timeout: Duration) -> Phase {
    let started = Instant::now();
    loop {
        let leaked = evidence::leaked_machines(&run.sim.machines());
        if leaked.is_empty() || started.elapsed() > timeout {
            return Phase {
                name: "settle",
                elapsed: started.elapsed(),
                completed: leaked.is_empty(),
                note: format!("{} servers not Ready or owned", leaked.len()),
            };
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_outage_starts_at_a_share_of_the_machines() {
        assert_eq!(outage_threshold(200, 0.25), 50);
        assert_eq!(outage_threshold(10, 0.25), 3);
        assert_eq!(outage_threshold(10, 0.0), 1);
        assert_eq!(outage_threshold(10, 2.0), 10);
    }
}
