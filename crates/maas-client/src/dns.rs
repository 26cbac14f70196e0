//! The MaasDNSRecord reconciler: creates the MAAS DNS resource, updates it only when the
//! address set changes, and deletes it (finalizer) when the object goes.
//!
//! The finalizer is the kit's ([`capmaas_runtime::controller::finalizer`]): added in the same
//! reconcile that then creates the resource, removed once the MAAS resource is deleted.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::Arc;

use capmaas_api::conditions::{self as cond, reasons};
use capmaas_api::keys::FINALIZER_MAAS_DNS_RECORD;
use capmaas_api::{MaasDNSRecord, MaasDNSRecordStatus};
use capmaas_runtime::conditions::{ConditionStatus, NewCondition, set_condition, summarize_ready};
use capmaas_runtime::controller::finalizer;
use capmaas_runtime::status::{apply_status, now};
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use maas_api_client::{DnsResource, DnsResourceSpec, MaasError};
use tracing::info;

use crate::context::Gateway;
use crate::error::{Error, Result};

/// What to do with the MAAS resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DnsAction {
    /// Create it with the addresses.
    Create,
    /// Replace its addresses (they differ).
    Update {
        /// MAAS id.
        id: i64,
    },
    /// It already holds exactly the addresses.
    None {
        /// MAAS id.
        id: i64,
    },
}

/// Parses the wanted addresses as a set; a malformed one is an invalid spec.
pub fn wanted_addresses(spec: Option<&[String]>) -> Result<BTreeSet<IpAddr>> {
    spec.unwrap_or_default()
        .iter()
        .map(|a| {
            a.trim()
                .parse()
                .map_err(|_| Error::InvalidSpec(format!("{a:?} is not an IP address")))
        })
        .collect()
}

/// Decides from the resources MAAS lists for the FQDN.
pub fn plan_dns(existing: &[DnsResource], wanted: &BTreeSet<IpAddr>) -> DnsAction {
    match existing.iter().find(|r| r.id >= 0) {
        None => DnsAction::Create,
        Some(r) => {
            let current: BTreeSet<IpAddr> = r.ips().into_iter().collect();
            if &current == wanted {
                DnsAction::None { id: r.id }
            } else {
                DnsAction::Update { id: r.id }
            }
        }
    }
}

/// Whether the status proves MAAS holds the wanted set for this generation (no call needed).
pub fn in_sync(record: &MaasDNSRecord, wanted: &BTreeSet<IpAddr>) -> bool {
    let Some(status) = record.status.as_ref() else {
        return false;
    };
    let observed: Option<BTreeSet<IpAddr>> = status
        .observed_addresses
        .as_ref()
        .map(|a| a.iter().filter_map(|s| s.parse().ok()).collect());
    status.ready == Some(true)
        && status.dns_resource_id.is_some()
        && status.observed_generation == record.metadata.generation
        && observed.as_ref() == Some(wanted)
}

/// What the finalizer asks for, given whether the record is being deleted and carries ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinalizerStep {
    /// Add the finalizer, then apply in the same reconcile.
    AddThenApply,
    /// Create or update the MAAS resource.
    Apply,
    /// Delete the MAAS resource, then remove the finalizer.
    CleanupThenRemove,
    /// Deleted and not ours (any more): nothing to do.
    Nothing,
}

/// The finalizer step for a record that is (or is not) `deleting` and has (or has not) our
/// finalizer.
pub fn finalizer_step(deleting: bool, has_finalizer: bool) -> FinalizerStep {
    match (deleting, has_finalizer) {
        (false, false) => FinalizerStep::AddThenApply,
        (false, true) => FinalizerStep::Apply,
        (true, true) => FinalizerStep::CleanupThenRemove,
        (true, false) => FinalizerStep::Nothing,
    }
}

/// Reconciles one MaasDNSRecord.
pub async fn reconcile(record: Arc<MaasDNSRecord>, gw: Arc<Gateway>) -> Result<Action> {
    let api: Api<MaasDNSRecord> =
        Api::namespaced(gw.kube.clone(), &record.namespace().unwrap_or_default());
    let manager = &gw.settings.field_manager;
    let step = finalizer_step(
        record.meta().deletion_timestamp.is_some(),
        finalizer::has(record.as_ref(), FINALIZER_MAAS_DNS_RECORD),
    );
    match step {
        FinalizerStep::AddThenApply => {
            let record = finalizer::add(&api, &record, FINALIZER_MAAS_DNS_RECORD, manager)
                .await
                .map_err(Error::Finalizer)?;
            apply(&record, &gw, &api).await
        }
        FinalizerStep::Apply => apply(&record, &gw, &api).await,
        FinalizerStep::CleanupThenRemove => {
            cleanup(&record, &gw).await?;
            finalizer::remove(&api, &record, FINALIZER_MAAS_DNS_RECORD, manager)
                .await
                .map_err(Error::Finalizer)?;
            Ok(Action::await_change())
        }
        FinalizerStep::Nothing => Ok(Action::await_change()),
    }
}

async fn apply(record: &MaasDNSRecord, gw: &Gateway, api: &Api<MaasDNSRecord>) -> Result<Action> {
    let wanted = wanted_addresses(record.spec.addresses.as_deref())?;
    if in_sync(record, &wanted) {
        return Ok(Action::requeue(gw.settings.resync));
    }
    let fqdn = record.spec.fqdn();
    let existing = gw
        .maas
        .find_dns_resources(&fqdn)
        .await
        .map_err(Error::maas("find DNS resource"))?;
    let spec = DnsResourceSpec {
        fqdn: fqdn.clone(),
        ip_addresses: wanted.iter().copied().collect(),
        address_ttl: record.spec.ttl.and_then(|t| u32::try_from(t).ok()),
    };
    let resource = match plan_dns(&existing, &wanted) {
        DnsAction::Create => {
            info!(fqdn, "creating MAAS DNS resource");
            gw.maas
                .create_dns_resource(&spec)
                .await
                .map_err(Error::maas("create DNS resource"))?
        }
        DnsAction::Update { id } => {
            info!(fqdn, id, "updating MAAS DNS resource addresses");
            gw.maas
                .update_dns_resource(id, &spec)
                .await
                .map_err(Error::maas("update DNS resource"))?
        }
        DnsAction::None { id } => existing
            .into_iter()
            .find(|r| r.id == id)
            .ok_or_else(|| Error::InvalidSpec(format!("DNS resource {id} vanished")))?,
    };
    let observed: BTreeSet<IpAddr> = resource.ips().into_iter().collect();
    let ready = observed == wanted;
    let time = now();
    let mut conditions = record
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let generation = record.metadata.generation;
    let synced = if ready {
        NewCondition::new(
            cond::DNS_RECORD_SYNCED,
            ConditionStatus::True,
            reasons::RECONCILED,
        )
    } else {
        NewCondition::new(
            cond::DNS_RECORD_SYNCED,
            ConditionStatus::False,
            reasons::LOAD_BALANCER_FAILED,
        )
        .message("MAAS holds other addresses than requested")
    };
    set_condition(
        &mut conditions,
        synced.observed_generation(generation),
        &time,
    );
    let summary = summarize_ready(&conditions, &[cond::DNS_RECORD_SYNCED], generation);
    set_condition(&mut conditions, summary, &time);
    let status = MaasDNSRecordStatus {
        dns_resource_id: Some(resource.id),
        observed_addresses: Some(observed.iter().map(ToString::to_string).collect()),
        ready: Some(ready),
        observed_generation: generation,
        conditions: Some(conditions),
    };
    apply_status(api, &record.name_any(), &gw.settings.field_manager, &status).await?;
    Ok(Action::requeue(gw.settings.resync))
}

async fn cleanup(record: &MaasDNSRecord, gw: &Gateway) -> Result<()> {
    let fqdn = record.spec.fqdn();
    // Look up by name rather than trusting the recorded id alone: a create whose answer was
    // lost left no id in status.
    let existing = gw
        .maas
        .find_dns_resources(&fqdn)
        .await
        .map_err(Error::maas("find DNS resource"))?;
    for resource in existing.iter().filter(|r| r.id >= 0) {
        match gw.maas.delete_dns_resource(resource.id).await {
            Ok(()) | Err(MaasError::NotFound { .. }) => {}
            Err(e) => return Err(Error::maas("delete DNS resource")(e)),
        }
        info!(fqdn, id = resource.id, "deleted MAAS DNS resource");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(id: i64, ips: &[&str]) -> DnsResource {
        serde_json::from_value(serde_json::json!({
            "id": id,
            "fqdn": "api.maas",
            "ip_addresses": ips.iter().map(|ip| serde_json::json!({"ip": ip})).collect::<Vec<_>>(),
        }))
        .unwrap()
    }

    #[test]
    fn updates_only_when_the_set_changes() {
        let wanted = wanted_addresses(Some(&["10.0.0.2".into(), "10.0.0.1".into()])).unwrap();
        assert_eq!(plan_dns(&[], &wanted), DnsAction::Create);
        assert_eq!(plan_dns(&[resource(-1, &[])], &wanted), DnsAction::Create);
        assert_eq!(
            plan_dns(&[resource(4, &["10.0.0.1", "10.0.0.2"])], &wanted),
            DnsAction::None { id: 4 },
            "order does not matter"
        );
        assert_eq!(
            plan_dns(&[resource(4, &["10.0.0.1"])], &wanted),
            DnsAction::Update { id: 4 }
        );
        assert!(wanted_addresses(Some(&["nope".into()])).is_err());
        assert!(wanted_addresses(None).unwrap().is_empty());
    }

    #[test]
    fn finalizer_is_added_then_applied_and_removed_after_cleanup() {
        assert_eq!(finalizer_step(false, false), FinalizerStep::AddThenApply);
        assert_eq!(finalizer_step(false, true), FinalizerStep::Apply);
        assert_eq!(finalizer_step(true, true), FinalizerStep::CleanupThenRemove);
        assert_eq!(finalizer_step(true, false), FinalizerStep::Nothing);
    }
}
