//! The status an inventory sync leaves, and whether it is worth a write at all.
//!
//! An idle sync (nothing changed in MAAS or among the hosts) writes nothing: every status
//! write is an API write and wakes every watcher of MaasInventories, and an installation with
//! thousands of machines syncs all the time. So the status is written only when its content
//! changes: the counts, a condition (status, reason, message, observed generation) or the
//! observed generation.
//!
//! `lastSyncTime` is therefore the time of the last sync that *changed* the status, not a
//! heartbeat. Chosen over refreshing it every N minutes, which would cost each inventory a
//! write per N minutes that nobody acts upon: liveness is shown elsewhere — a failed sync sets
//! `Synced=False` at once, and a gateway that stops is seen in its readiness, its leader Lease
//! and `capmaas_reconcile_total{controller="maasinventory"}`. When the next sync is due is
//! kept in the gateway's memory ([`super::schedule`]).

use capmaas_api::MaasInventoryStatus;
use capmaas_api::conditions::{self as cond, reasons};
use capmaas_runtime::conditions::{ConditionStatus, NewCondition, set_condition, summarize_ready};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::plan::InventoryCounts;

/// The status after a successful sync with `counts` and the `Synced` message `report`, or
/// `None` when `current` already says exactly that (nothing to write). `lastSyncTime` becomes
/// `now` only with another change.
pub fn synced_status(
    current: Option<&MaasInventoryStatus>,
    counts: &InventoryCounts,
    report: String,
    generation: Option<i64>,
    now: &Time,
) -> Option<MaasInventoryStatus> {
    let mut conditions = current
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    set_condition(
        &mut conditions,
        NewCondition::new(cond::SYNCED, ConditionStatus::True, reasons::RECONCILED)
            .message(report)
            .observed_generation(generation),
        now,
    );
    let ready = summarize_ready(&conditions, &[cond::SYNCED], generation);
    set_condition(&mut conditions, ready, now);
    let next = MaasInventoryStatus {
        host_count: Some(counts.hosts),
        available: Some(counts.available),
        consumed: Some(counts.consumed),
        provisioning: Some(counts.provisioning),
        deployed: Some(counts.deployed),
        missing: Some(counts.missing),
        failed: Some(counts.failed),
        last_sync_time: current.and_then(|s| s.last_sync_time.clone()),
        observed_generation: generation,
        conditions: Some(conditions),
    };
    changed(current, next, now)
}

/// The status after a failed sync (`Synced=False` with the error), or `None` when `current`
/// already reports that error. Counts and `lastSyncTime` stay those of the last success.
pub fn failed_status(
    current: Option<&MaasInventoryStatus>,
    error: String,
    generation: Option<i64>,
    now: &Time,
) -> Option<MaasInventoryStatus> {
    let mut status = current.cloned().unwrap_or_default();
    let mut conditions = status.conditions.take().unwrap_or_default();
    let changed = set_condition(
        &mut conditions,
        NewCondition::new(
            cond::SYNCED,
            ConditionStatus::False,
            reasons::MAAS_UNAVAILABLE,
        )
        .message(error)
        .observed_generation(generation),
        now,
    );
    if !changed {
        return None;
    }
    let ready = summarize_ready(&conditions, &[cond::SYNCED], generation);
    set_condition(&mut conditions, ready, now);
    status.conditions = Some(conditions);
    Some(status)
}

/// `next` with `lastSyncTime = now` when it differs from `current`, else `None`.
fn changed(
    current: Option<&MaasInventoryStatus>,
    mut next: MaasInventoryStatus,
    now: &Time,
) -> Option<MaasInventoryStatus> {
    if current == Some(&next) {
        return None;
    }
    next.last_sync_time = Some(now.clone());
    Some(next)
}

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;
