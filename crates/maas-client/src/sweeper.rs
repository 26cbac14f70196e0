//! Adoption and the orphan sweeper.
//!
//! At the start of every leadership term, and then periodically, one call lists the MAAS
//! machines allocated with our agent_name. Each is matched to a MaasHost by system id; a
//! machine claimed by a consumed host that asks for provisioning is adopted (the host
//! controller records it). Any other is an orphan: after the grace period (it may be a host
//! being created or an allocation about to be recorded) it is released, with the erase the
//! host's release policy asked for: the policy is recorded on the MAAS machine itself (workload
//! annotations, see [`crate::host::annotations`]), so it is found although the host is gone;
//! without a record the erase is the safest ([`ann::SAFEST_ERASE`]). A release that failed
//! (5xx, Releasing failed, Failed disk erasing: MAAS keeps our agent_name until an erase
//! succeeds) is sent again on a later pass with the same flags.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use capmaas_api::MaasHost;
use kube::Resource;
use maas_api_client::{Machine, MachineFilter, MachineStatus, ReleaseRequest};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::context::Gateway;
use crate::host::annotations as ann;

/// An orphan to release now, with the request built from the policy recorded on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrphanRelease {
    /// MAAS system id.
    pub system_id: String,
    /// The release, erase flags included.
    pub request: ReleaseRequest,
}

/// The sweep's decision for this pass.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SweepPlan {
    /// System ids claimed by a host (adopted).
    pub adopted: Vec<String>,
    /// Orphans to release now.
    pub release: Vec<OrphanRelease>,
    /// First-seen times of orphans still within the grace period (carried to the next pass).
    pub pending: BTreeMap<String, Instant>,
}

/// Decides which of our allocations are claimed, and which orphans to release.
///
/// `ours` are the machines MAAS lists with our agent_name (`installation`); `claimed` the
/// system ids of consumed hosts with `provisioning` set; `first_seen` the orphans seen in
/// earlier passes. Machines on their way back (Releasing, Disk erasing) are left alone; a
/// failed release (Releasing failed, Failed disk erasing) is an orphan like any other and is
/// released again, with the same erase flags.
pub fn plan_sweep(
    ours: &[Machine],
    claimed: &BTreeSet<String>,
    first_seen: &BTreeMap<String, Instant>,
    now: Instant,
    grace: Duration,
    installation: &str,
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
            let comment = format!(
                "capmaas orphan sweep: no MaasHost claims this allocation of {installation}"
            );
            plan.release.push(OrphanRelease {
                system_id: id.clone(),
                request: ann::release_request(machine.annotations(), None, comment),
            });
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
    // Lenient: an allocation that does not decode is skipped (its state is unknown, so it is
    // never released) and reported; the others are swept.
    let listing = gw
        .maas
        .list_machines_lenient(&MachineFilter::new().agent_name(installation.clone()))
        .await?;
    for skipped in &listing.skipped {
        warn!(%skipped, "orphan sweep skipped an allocation of ours that does not decode");
    }
    let ours = listing.machines;
    let claimed = claimed_system_ids(&gw.hosts.state());
    let plan = plan_sweep(
        &ours,
        &claimed,
        first_seen,
        Instant::now(),
        gw.settings.orphan_grace_period,
        installation,
    );
    if !plan.adopted.is_empty() {
        info!(
            count = plan.adopted.len(),
            "allocations of ours matched to hosts"
        );
    }
    for OrphanRelease { system_id, request } in &plan.release {
        // A failure is retried on a later pass, from the same record: same erase flags.
        match gw.maas.release(system_id, request).await {
            Ok(m) => warn!(
                system_id,
                erase = request.erase,
                secure_erase = request.secure_erase,
                quick_erase = request.quick_erase,
                status = %m.status,
                "release of an orphaned allocation requested"
            ),
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
    use capmaas_api::common::{EraseMode, ReleasePolicy};

    fn released(plan: &SweepPlan) -> Vec<&str> {
        plan.release.iter().map(|r| r.system_id.as_str()).collect()
    }

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
        let plan = plan_sweep(&ours, &claimed, &seen, now, grace, "i");
        assert_eq!(plan.adopted, vec!["claimed".to_owned()]);
        assert_eq!(released(&plan), vec!["old"]);
        assert_eq!(plan.pending.keys().collect::<Vec<_>>(), vec!["orphan"]);

        // Claimed again before the grace period ends: forgotten, never released.
        let claimed = BTreeSet::from(["claimed".to_owned(), "orphan".to_owned()]);
        let plan = plan_sweep(
            &ours[..2],
            &claimed,
            &plan.pending,
            now + grace * 2,
            grace,
            "i",
        );
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
            "i",
        );
        assert_eq!(released(&plan), vec!["x"]);
    }

    #[test]
    fn orphans_are_released_with_the_recorded_erase_and_failed_releases_again() {
        let now = Instant::now();
        let policy = |erase| ReleasePolicy {
            erase,
            force: false,
        };
        let annotated = |id: &str, status: i64, erase| {
            let mut m = machine(id, status);
            m.workload_annotations =
                ann::desired_machine_annotations("i", "ns", id, None, Some(&policy(erase)));
            m
        };
        let ours = [
            annotated("deployed", 6, EraseMode::Secure),
            // Failed disk erasing (15) and Releasing failed (13): sent again.
            annotated("erase-failed", 15, EraseMode::Quick),
            annotated("release-failed", 13, EraseMode::None),
            // Nothing recorded (allocated, never annotated): the safest erase.
            machine("bare", 10),
            // Disk erasing (14): in progress, left alone.
            annotated("erasing", 14, EraseMode::Secure),
        ];
        let plan = plan_sweep(
            &ours,
            &BTreeSet::new(),
            &BTreeMap::new(),
            now,
            Duration::ZERO,
            "i",
        );
        assert_eq!(
            released(&plan),
            vec!["deployed", "erase-failed", "release-failed", "bare"]
        );
        let flags = |r: &OrphanRelease| {
            (
                r.request.erase,
                r.request.secure_erase,
                r.request.quick_erase,
            )
        };
        let got: Vec<_> = plan.release.iter().map(flags).collect();
        assert_eq!(
            got,
            vec![
                (true, true, false),
                (true, false, true),
                (false, false, false),
                (true, true, false),
            ]
        );
    }
}
