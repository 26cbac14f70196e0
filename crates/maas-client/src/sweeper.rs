//! Adoption and the orphan sweeper.
//!
//! At the start of every leadership term, and then periodically, one call lists the MAAS
//! machines allocated with our agent_name. Each is matched to a MaasHost by system id; a
//! machine claimed by a consumed host that asks for provisioning is adopted (the host
//! controller records it). Any other is an orphan: after the grace period (it may be a host
//! being created or an allocation about to be recorded) it is released.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use capmaas_api::MaasHost;
use kube::Resource;
use maas_api_client::{Machine, MachineFilter, MachineStatus, ReleaseRequest};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::context::Gateway;

/// The sweep's decision for this pass.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SweepPlan {
    /// System ids claimed by a host (adopted).
    pub adopted: Vec<String>,
    /// System ids to release now.
    pub release: Vec<String>,
    /// First-seen times of orphans still within the grace period (carried to the next pass).
    pub pending: BTreeMap<String, Instant>,
}

/// Decides which of our allocations are claimed, and which orphans to release.
///
/// `ours` are the machines MAAS lists with our agent_name; `claimed` the system ids of
/// consumed hosts with `provisioning` set; `first_seen` the orphans seen in earlier passes.
pub fn plan_sweep(
    ours: &[Machine],
    claimed: &BTreeSet<String>,
    first_seen: &BTreeMap<String, Instant>,
    now: Instant,
    grace: Duration,
) -> SweepPlan {
    let mut plan = SweepPlan::default();
    for machine in ours {
        let id = &machine.system_id;
        if claimed.contains(id) {
            plan.adopted.push(id.clone());
            continue;
        }
        // Already on its way back, nothing to do.
        if matches!(
            machine.status,
            MachineStatus::Ready | MachineStatus::Releasing | MachineStatus::DiskErasing
        ) {
            continue;
        }
        let seen = first_seen.get(id).copied().unwrap_or(now);
        if now.saturating_duration_since(seen) >= grace {
            plan.release.push(id.clone());
        } else {
            plan.pending.insert(id.clone(), seen);
        }
    }
    plan
}

fn claimed_system_ids(hosts: &[Arc<MaasHost>]) -> BTreeSet<String> {
    hosts
        .iter()
        .filter(|h| h.spec.consumer_ref.is_some() && h.spec.provisioning.is_some())
        .filter(|h| h.meta().deletion_timestamp.is_none())
        .map(|h| h.spec.system_id.clone())
        .collect()
}

/// One pass; returns the orphans to remember.
pub async fn sweep_once(
    gw: &Gateway,
    first_seen: &BTreeMap<String, Instant>,
) -> Result<BTreeMap<String, Instant>, maas_api_client::MaasError> {
    let installation = &gw.settings.installation_id;
    let ours = gw
        .maas
        .list_machines(&MachineFilter::new().agent_name(installation.clone()))
        .await?;
    let claimed = claimed_system_ids(&gw.hosts.state());
    let plan = plan_sweep(
        &ours,
        &claimed,
        first_seen,
        Instant::now(),
        gw.settings.orphan_grace_period,
    );
    if !plan.adopted.is_empty() {
        info!(
            count = plan.adopted.len(),
            "allocations of ours matched to hosts"
        );
    }
    for system_id in &plan.release {
        let request = ReleaseRequest {
            comment: Some(format!(
                "capmaas orphan sweep: no MaasHost claims this allocation of {installation}"
            )),
            ..ReleaseRequest::default()
        };
        match gw.maas.release(system_id, &request).await {
            Ok(_) => warn!(system_id, "released an orphaned allocation"),
            Err(e) => warn!(system_id, error = %e, "cannot release orphaned allocation"),
        }
    }
    Ok(plan.pending)
}

/// Runs the sweeper until `cancel`; the first pass waits for the host cache.
pub async fn run(gw: Arc<Gateway>, cancel: CancellationToken) {
    tokio::select! {
        () = cancel.cancelled() => return,
        _ = gw.hosts.wait_until_ready() => {}
    }
    let mut first_seen = BTreeMap::new();
    loop {
        match sweep_once(&gw, &first_seen).await {
            Ok(pending) => first_seen = pending,
            Err(e) => warn!(error = %e, "orphan sweep failed"),
        }
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(gw.settings.orphan_sweep_interval) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::tests::machine;

    #[test]
    fn orphans_are_released_after_the_grace_period_only() {
        let now = Instant::now();
        let grace = Duration::from_secs(60);
        let ours = [
            machine("claimed", 6),
            machine("orphan", 10),
            machine("old", 6),
            machine("going", 12),
        ];
        let claimed = BTreeSet::from(["claimed".to_owned()]);
        let seen = BTreeMap::from([("old".to_owned(), now.checked_sub(grace).unwrap())]);
        let plan = plan_sweep(&ours, &claimed, &seen, now, grace);
        assert_eq!(plan.adopted, vec!["claimed".to_owned()]);
        assert_eq!(plan.release, vec!["old".to_owned()]);
        assert_eq!(plan.pending.keys().collect::<Vec<_>>(), vec!["orphan"]);

        // Claimed again before the grace period ends: forgotten, never released.
        let claimed = BTreeSet::from(["claimed".to_owned(), "orphan".to_owned()]);
        let plan = plan_sweep(&ours[..2], &claimed, &plan.pending, now + grace * 2, grace);
        assert!(plan.pending.is_empty());
        assert!(plan.release.is_empty());
    }

    #[test]
    fn zero_grace_releases_at_once() {
        let now = Instant::now();
        let plan = plan_sweep(
            &[machine("x", 10)],
            &BTreeSet::new(),
            &BTreeMap::new(),
            now,
            Duration::ZERO,
        );
        assert_eq!(plan.release, vec!["x".to_owned()]);
    }
}
