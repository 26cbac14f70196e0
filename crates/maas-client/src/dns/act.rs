//! `reconcile` for MaasDNSRecords: reads MAAS, applies the plan of [`super::decide`], writes the status.

use capmaas_runtime::error::failed;
use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::Arc;

use capmaas_api::conditions::{self as cond, reasons};
use capmaas_api::keys::{self, FINALIZER_MAAS_DNS_RECORD};
use capmaas_api::{MaasDNSRecord, MaasDNSRecordStatus};
use capmaas_runtime::conditions::{ConditionStatus, NewCondition, set_condition, summarize_ready};
use capmaas_runtime::controller::finalizer;
use capmaas_runtime::status::{apply_status, now};
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use maas_api_client::{DnsResourceSpec, MaasError};
use tracing::info;

use super::decide::{
    CONFLICT_RETRY, DnsAction, FinalizerStep, Owned, adopting, deletable, finalizer_step,
    fqdn_holder, in_sync, plan_dns, wanted_addresses,
};
use crate::context::Gateway;
use crate::error::{Error, Result};
use crate::ownership::Deletion;

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
                .map_err(failed("updating the finalizer"))?;
            apply(&record, &gw, &api).await
        }
        FinalizerStep::Apply => apply(&record, &gw, &api).await,
        FinalizerStep::CleanupThenRemove | FinalizerStep::RemoveOnly => {
            if step == FinalizerStep::CleanupThenRemove {
                cleanup(&record, &gw).await?;
            }
            finalizer::remove(&api, &record, FINALIZER_MAAS_DNS_RECORD, manager)
                .await
                .map_err(failed("updating the finalizer"))?;
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
    let action = plan_dns(&existing, &wanted, owned, record.spec.adopts_existing());
    let adopted = adopting(owned, record.spec.adopts_existing())
        && matches!(action, DnsAction::Update { .. } | DnsAction::None { .. });
    let resource = match action {
        DnsAction::Ambiguous { ids } => {
            let listed: Vec<String> = ids.iter().map(ToString::to_string).collect();
            let message = format!(
                "MAAS has {} DNS resources {fqdn} (ids {}); spec.adoptExisting takes over only a single one, so none is touched: delete the extra ones in MAAS",
                ids.len(),
                listed.join(", ")
            );
            refuse(record, gw, api, reasons::DNS_NAME_TAKEN, &message).await?;
            return Ok(Action::requeue(gw.base.sync_period));
        }
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
    if adopted {
        // Only now, with the id in status, is the resource the record's (and deleted with it).
        let id = resource.id;
        info!(fqdn, id, "adopted MAAS DNS resource");
        let note = format!("adopted MAAS DNS resource {id} ({fqdn}) created by CAPMAAS");
        gw.base
            .events
            .normal(record, "DNSResourceAdopted", &note)
            .await;
    }
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
    .map_err(failed("annotating the MaasDNSRecord with its resource"))?;
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
