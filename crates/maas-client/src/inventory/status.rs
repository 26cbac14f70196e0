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

use super::decide::InventoryCounts;

/// How the gateway reaches MAAS, said on every inventory (`MAASConnectionSecure`) so that an
/// operator who accepted plain http sees the risk where they look at the hosts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// `https://`, the certificate verified.
    Tls,
    /// `http://`, accepted with `--maas-allow-insecure-http`.
    PlainHttp {
        /// The endpoint, for the message.
        endpoint: String,
    },
}

impl Transport {
    /// The condition this transport sets.
    fn condition(&self, generation: Option<i64>) -> NewCondition {
        match self {
            Self::Tls => NewCondition::new(
                cond::MAAS_CONNECTION_SECURE,
                ConditionStatus::True,
                reasons::TLS,
            )
            .message("MAAS is reached over https".to_owned()),
            Self::PlainHttp { endpoint } => NewCondition::new(
                cond::MAAS_CONNECTION_SECURE,
                ConditionStatus::False,
                reasons::PLAIN_HTTP,
            )
            .message(plain_http_message(endpoint)),
        }
        .observed_generation(generation)
    }

    /// The Warning an inventory gets when it first reports plain http (once, not every sync:
    /// the condition keeps saying it).
    pub fn warning(&self, current: Option<&MaasInventoryStatus>) -> Option<String> {
        let Self::PlainHttp { endpoint } = self else {
            return None;
        };
        let said = current
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == cond::MAAS_CONNECTION_SECURE))
            .is_some_and(|c| c.status == "False" && c.reason == reasons::PLAIN_HTTP);
        (!said).then(|| plain_http_message(endpoint))
    }
}

fn plain_http_message(endpoint: &str) -> String {
    format!(
        "MAAS endpoint {endpoint} is plain http: the MAAS API key and every MAAS answer travel in clear; use https:// (a private CA goes in MAAS_CA_CERT_B64 / --maas-ca-file)"
    )
}

/// The status after a successful sync with `counts` and the `Synced` message `report`, or
/// `None` when `current` already says exactly that (nothing to write). `lastSyncTime` becomes
/// `now` only with another change.
pub fn synced_status(
    current: Option<&MaasInventoryStatus>,
    counts: &InventoryCounts,
    report: String,
    transport: &Transport,
    generation: Option<i64>,
    now: &Time,
) -> Option<MaasInventoryStatus> {
    let mut conditions = current
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    set_condition(&mut conditions, transport.condition(generation), now);
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
    transport: &Transport,
    generation: Option<i64>,
    now: &Time,
) -> Option<MaasInventoryStatus> {
    let mut status = current.cloned().unwrap_or_default();
    let mut conditions = status.conditions.take().unwrap_or_default();
    let transport_changed = set_condition(&mut conditions, transport.condition(generation), now);
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
    if !changed && !transport_changed {
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
