//! The MaasDNSRecord reconciler: creates the MAAS DNS resource, updates it only when the
//! address set changes, and deletes it (finalizer) when the object goes.
//!
//! Ownership: an FQDN is served for one MaasDNSRecord in the whole cluster, the oldest of those
//! naming it ([`fqdn_holder`]); the others report `DNSNameConflict` and never touch MAAS. A
//! MAAS resource is this record's only when its id is recorded in status, or while
//! `status.creating` says a create was sent whose answer may have been lost; any other resource
//! of that name (made by hand, or by another installation) is reported as `DNSNameTaken` and
//! never updated or deleted.
//!
//! The finalizer is the kit's ([`capmaas_runtime::controller::finalizer`]): added in the same
//! reconcile that then creates the resource, removed once the MAAS resource is deleted.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use capmaas_api::conditions::{self as cond, reasons};
use capmaas_api::keys::{self, FINALIZER_MAAS_DNS_RECORD};
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
use crate::ownership::{Deletion, Proofs};

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
    /// A resource of this name exists and is not ours: leave it alone.
    Foreign {
        /// MAAS id.
        id: i64,
    },
}

/// What status says this record owns in MAAS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Owned {
    /// The id recorded in status.
    pub id: Option<i64>,
    /// A create was sent and its answer not recorded.
    pub creating: bool,
}

impl Owned {
    /// From the record's status, else (status lost in a `clusterctl move`) from its signed
    /// annotation ([`crate::ownership`]).
    pub fn of(record: &MaasDNSRecord, proofs: &Proofs) -> Self {
        let status = record.status.as_ref();
        let creating = status.and_then(|s| s.creating) == Some(true);
        let id = match status.and_then(|s| s.dns_resource_id) {
            Some(id) => Some(id),
            // A create whose answer was lost is found by name, not by a proof.
            None if creating => None,
            None => proofs.proven_dns_resource(record),
        };
        Self { id, creating }
    }
}

/// Retry of a record whose FQDN another record holds (it takes over once that one is gone).
const CONFLICT_RETRY: Duration = Duration::from_secs(30);

/// `namespace/name` of the MaasDNSRecord that holds `record`'s FQDN, when it is another one:
/// the oldest record naming that FQDN (creation time, then namespace/name), so every replica
/// and every restart picks the same one.
pub fn fqdn_holder<'a>(
    record: &MaasDNSRecord,
    records: impl IntoIterator<Item = &'a MaasDNSRecord>,
) -> Option<String> {
    let fqdn = record.spec.fqdn();
    let rank = |r: &MaasDNSRecord| {
        (
            r.metadata.creation_timestamp.as_ref().map(|t| t.0),
            r.namespace().unwrap_or_default(),
            r.name_any(),
        )
    };
    let mine = rank(record);
    let holder = records
        .into_iter()
        .filter(|r| r.spec.fqdn() == fqdn && r.uid() != record.uid())
        .map(rank)
        .filter(|theirs| *theirs < mine)
        .min()?;
    Some(format!("{}/{}", holder.1, holder.2))
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

/// Decides from the resources MAAS lists for the FQDN and what status says is ours.
pub fn plan_dns(existing: &[DnsResource], wanted: &BTreeSet<IpAddr>, owned: Owned) -> DnsAction {
    let live: Vec<&DnsResource> = existing.iter().filter(|r| r.id >= 0).collect();
    let mine = match owned.id {
        Some(id) => live.iter().find(|r| r.id == id),
        // The create's answer was lost: the resource it made is ours.
        None if owned.creating => live.first(),
        None => None,
    };
    match (mine, live.first()) {
        (Some(r), _) => {
            let current: BTreeSet<IpAddr> = r.ips().into_iter().collect();
            if &current == wanted {
                DnsAction::None { id: r.id }
            } else {
                DnsAction::Update { id: r.id }
            }
        }
        (None, Some(other)) => DnsAction::Foreign { id: other.id },
        (None, None) => DnsAction::Create,
    }
}

/// The MAAS resources among `existing` that deleting `owned`'s record may delete.
pub fn deletable(existing: &[DnsResource], owned: Owned) -> Vec<i64> {
    existing
        .iter()
        .filter(|r| r.id >= 0 && (owned.id == Some(r.id) || (owned.id.is_none() && owned.creating)))
        .map(|r| r.id)
        .collect()
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
    /// Deleted by `clusterctl move`: remove the finalizer and leave the MAAS resource to the
    /// record's copy in the target cluster.
    RemoveOnly,
    /// Deleted and not ours (any more): nothing to do.
    Nothing,
}

/// The finalizer step for a record going as `deletion` says, with (or without) our finalizer.
pub fn finalizer_step(deletion: Deletion, has_finalizer: bool) -> FinalizerStep {
    match (deletion, has_finalizer) {
        (Deletion::No, false) => FinalizerStep::AddThenApply,
        (Deletion::No, true) => FinalizerStep::Apply,
        (Deletion::Moving, true) => FinalizerStep::RemoveOnly,
        (Deletion::Deleting, true) => FinalizerStep::CleanupThenRemove,
        (_, false) => FinalizerStep::Nothing,
    }
}

/// Reconciles one MaasDNSRecord.
pub async fn reconcile(record: Arc<MaasDNSRecord>, gw: Arc<Gateway>) -> Result<Action> {
    let api: Api<MaasDNSRecord> = Api::namespaced(
        gw.base.client.clone(),
        &record.namespace().unwrap_or_default(),
    );
    let manager = &gw.base.field_manager;
    let step = finalizer_step(
        Deletion::of(record.meta()),
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
        FinalizerStep::CleanupThenRemove | FinalizerStep::RemoveOnly => {
            if step == FinalizerStep::CleanupThenRemove {
                cleanup(&record, &gw).await?;
            }
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
    let fqdn = record.spec.fqdn();
    let allowed = &gw.settings.dns_domains;
    if !allowed.allows(&record.spec.domain) {
        // Whoever may create MaasClusters chooses the domain; the key may write many.
        let message = format!(
            "domain {:?} is not one this installation publishes in (--dns-domains: {}); nothing is written to MAAS",
            record.spec.domain,
            allowed.describe()
        );
        refuse(record, gw, api, reasons::DNS_DOMAIN_NOT_ALLOWED, &message).await?;
        return Ok(Action::requeue(gw.base.sync_period));
    }
    let owned = Owned::of(record, &gw.settings.proofs);
    if owned.id.is_none() && !owned.creating {
        let records = gw.dns_records.state();
        if let Some(holder) = fqdn_holder(record, records.iter().map(AsRef::as_ref)) {
            let message = format!(
                "{fqdn} is served for the older MaasDNSRecord {holder}; this one waits until that one is gone"
            );
            refuse(record, gw, api, reasons::DNS_NAME_CONFLICT, &message).await?;
            return Ok(Action::requeue(CONFLICT_RETRY));
        }
    }
    if in_sync(record, &wanted) {
        // In sync means an id in status; its annotation may be missing after a crash between
        // the status write and the annotation.
        if let Some(id) = owned.id {
            prove(record, id, gw, api).await?;
        }
        return Ok(Action::requeue(gw.base.sync_period));
    }
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
    let resource = match plan_dns(&existing, &wanted, owned) {
        DnsAction::Foreign { id } => {
            let message = format!(
                "MAAS already has a DNS resource {fqdn} (id {id}) that this provider did not create; it is left alone: delete it in MAAS or choose another name"
            );
            refuse(record, gw, api, reasons::DNS_NAME_TAKEN, &message).await?;
            return Ok(Action::requeue(gw.base.sync_period));
        }
        DnsAction::Create => {
            // Recorded first: if the answer is lost, the resource found next time is ours.
            let mut intent = record.status.clone().unwrap_or_default();
            intent.creating = Some(true);
            apply_status(api, &record.name_any(), &gw.base.field_manager, &intent).await?;
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
    let (mut status, _) = status_with(record, synced);
    status.dns_resource_id = Some(resource.id);
    status.observed_addresses = Some(observed.iter().map(ToString::to_string).collect());
    status.ready = Some(ready);
    apply_status(api, &record.name_any(), &gw.base.field_manager, &status).await?;
    prove(record, resource.id, gw, api).await?;
    Ok(Action::requeue(gw.base.sync_period))
}

/// Writes the signed annotation naming resource `id` as the record's, unless it is there.
async fn prove(
    record: &MaasDNSRecord,
    id: i64,
    gw: &Gateway,
    api: &Api<MaasDNSRecord>,
) -> Result<()> {
    let proof = gw.settings.proofs.dns_annotation(record, id);
    if record.annotations().get(keys::ANNOTATION_DNS_RESOURCE) == Some(&proof) {
        return Ok(());
    }
    let patch =
        serde_json::json!({"metadata": {"annotations": {keys::ANNOTATION_DNS_RESOURCE: proof}}});
    let params = kube::api::PatchParams {
        field_manager: Some(gw.base.field_manager.clone()),
        ..kube::api::PatchParams::default()
    };
    api.patch(
        &record.name_any(),
        &params,
        &kube::api::Patch::Merge(&patch),
    )
    .await
    .map_err(Error::kube(
        "annotating the MaasDNSRecord with its resource",
    ))?;
    Ok(())
}

/// The status after `synced`, with the summary `Ready`, for `record`'s generation; whether the
/// `DNSRecordSynced` condition changed. Id, addresses and `ready` are cleared: a record that
/// owns nothing in MAAS shows nothing.
fn status_with(record: &MaasDNSRecord, synced: NewCondition) -> (MaasDNSRecordStatus, bool) {
    let time = now();
    let generation = record.metadata.generation;
    let mut conditions = record
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let changed = set_condition(
        &mut conditions,
        synced.observed_generation(generation),
        &time,
    );
    let summary = summarize_ready(&conditions, &[cond::DNS_RECORD_SYNCED], generation);
    set_condition(&mut conditions, summary, &time);
    let status = MaasDNSRecordStatus {
        ready: Some(false),
        observed_generation: generation,
        conditions: Some(conditions),
        ..MaasDNSRecordStatus::default()
    };
    (status, changed)
}

/// Reports that this record does not own its FQDN: `DNSRecordSynced=False` with `reason`, and a
/// Warning Event when that is news.
async fn refuse(
    record: &MaasDNSRecord,
    gw: &Gateway,
    api: &Api<MaasDNSRecord>,
    reason: &str,
    message: &str,
) -> Result<()> {
    let condition =
        NewCondition::new(cond::DNS_RECORD_SYNCED, ConditionStatus::False, reason).message(message);
    let (status, changed) = status_with(record, condition);
    if record.status.as_ref() != Some(&status) {
        apply_status(api, &record.name_any(), &gw.base.field_manager, &status).await?;
    }
    if changed {
        info!(fqdn = record.spec.fqdn(), reason, "DNS name not ours");
        gw.base.events.warning(record, reason, message).await;
    }
    Ok(())
}

async fn cleanup(record: &MaasDNSRecord, gw: &Gateway) -> Result<()> {
    let owned = Owned::of(record, &gw.settings.proofs);
    if owned.id.is_none() && !owned.creating {
        // Never created anything (a conflict, a foreign name, or deleted before its first sync).
        return Ok(());
    }
    let fqdn = record.spec.fqdn();
    // Look up by name rather than trusting the recorded id alone: a create whose answer was
    // lost left no id in status.
    let existing = gw
        .maas
        .find_dns_resources(&fqdn)
        .await
        .map_err(Error::maas("find DNS resource"))?;
    for id in deletable(&existing, owned) {
        match gw.maas.delete_dns_resource(id).await {
            Ok(()) | Err(MaasError::NotFound { .. }) => {}
            Err(e) => return Err(Error::maas("delete DNS resource")(e)),
        }
        info!(fqdn, id, "deleted MAAS DNS resource");
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

    const OURS: Owned = Owned {
        id: Some(4),
        creating: false,
    };

    #[test]
    fn updates_only_when_the_set_changes() {
        let wanted = wanted_addresses(Some(&["10.0.0.2".into(), "10.0.0.1".into()])).unwrap();
        assert_eq!(plan_dns(&[], &wanted, Owned::default()), DnsAction::Create);
        assert_eq!(
            plan_dns(&[resource(-1, &[])], &wanted, Owned::default()),
            DnsAction::Create
        );
        assert_eq!(
            plan_dns(&[resource(4, &["10.0.0.1", "10.0.0.2"])], &wanted, OURS),
            DnsAction::None { id: 4 },
            "order does not matter"
        );
        assert_eq!(
            plan_dns(&[resource(4, &["10.0.0.1"])], &wanted, OURS),
            DnsAction::Update { id: 4 }
        );
        assert_eq!(
            plan_dns(&[], &wanted, OURS),
            DnsAction::Create,
            "deleted in MAAS: made again"
        );
        assert!(wanted_addresses(Some(&["nope".into()])).is_err());
        assert!(wanted_addresses(None).unwrap().is_empty());
    }

    #[test]
    fn resources_not_ours_are_never_taken_over_or_deleted() {
        let wanted = wanted_addresses(Some(&["10.0.0.1".into()])).unwrap();
        let by_hand = [resource(7, &["192.0.2.1"])];
        assert_eq!(
            plan_dns(&by_hand, &wanted, Owned::default()),
            DnsAction::Foreign { id: 7 }
        );
        assert_eq!(
            plan_dns(&by_hand, &wanted, OURS),
            DnsAction::Foreign { id: 7 }
        );
        assert!(deletable(&by_hand, Owned::default()).is_empty());
        assert!(deletable(&by_hand, OURS).is_empty());
        let lost_answer = Owned {
            id: None,
            creating: true,
        };
        assert_eq!(
            plan_dns(&by_hand, &wanted, lost_answer),
            DnsAction::Update { id: 7 },
            "a create whose answer was lost made it"
        );
        assert_eq!(deletable(&by_hand, lost_answer), [7]);
        assert_eq!(deletable(&[resource(4, &[])], OURS), [4]);
    }

    fn record(namespace: &str, name: &str, created: i64) -> MaasDNSRecord {
        let mut r = MaasDNSRecord::new(
            name,
            capmaas_api::MaasDNSRecordSpec {
                name: "prod".into(),
                domain: "maas".into(),
                addresses: None,
                ttl: None,
            },
        );
        r.metadata.namespace = Some(namespace.into());
        r.metadata.uid = Some(format!("{namespace}-{name}"));
        r.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            jiff::Timestamp::from_second(created).unwrap(),
        ));
        r
    }

    #[test]
    fn the_oldest_record_holds_an_fqdn() {
        let a = record("team-a", "prod", 100);
        let b = record("team-b", "prod", 200);
        let mut other = record("team-c", "prod", 50);
        other.spec.name = "other".into();
        let all = [a.clone(), b.clone(), other];
        assert_eq!(fqdn_holder(&a, &all), None);
        assert_eq!(fqdn_holder(&b, &all).as_deref(), Some("team-a/prod"));
        let same_time = record("team-0", "prod", 200);
        assert_eq!(
            fqdn_holder(&b, [&same_time]).as_deref(),
            Some("team-0/prod"),
            "ties go by namespace/name"
        );
        assert_eq!(fqdn_holder(&b, []), None, "alone, it holds its name");
    }

    #[test]
    fn finalizer_is_added_then_applied_and_removed_after_cleanup() {
        use Deletion::{Deleting, Moving, No};
        assert_eq!(finalizer_step(No, false), FinalizerStep::AddThenApply);
        assert_eq!(finalizer_step(No, true), FinalizerStep::Apply);
        assert_eq!(
            finalizer_step(Deleting, true),
            FinalizerStep::CleanupThenRemove
        );
        assert_eq!(finalizer_step(Deleting, false), FinalizerStep::Nothing);
        // Moved by clusterctl: the copy in the target cluster keeps the MAAS resource.
        assert_eq!(finalizer_step(Moving, true), FinalizerStep::RemoveOnly);
        assert_eq!(finalizer_step(Moving, false), FinalizerStep::Nothing);
    }
}
