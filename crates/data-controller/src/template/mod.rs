//! The MaasDataTemplate reconciler: `status.indexes` rebuilt from the MaasData of the template
//! (the API server's record of who holds which index), and a finalizer that keeps the template
//! while any MaasData still uses it (deleting a template in use would leave claims unable to
//! render again). It also lets go of MaasData that are being deleted with no live claim left to
//! release them (the claim's finalizer was removed by hand): [`orphaned`].

use capmaas_runtime::error::{Failed, failed};
use std::sync::Arc;

use capmaas_api::conditions as cond;
use capmaas_api::data::{IndexAllocation, MaasDataTemplateStatus};
use capmaas_api::{MaasData, MaasDataClaim, MaasDataTemplate, keys};
use capmaas_runtime::conditions::{ConditionStatus, NewCondition, set_condition};
use capmaas_runtime::controller::finalizer;
use capmaas_runtime::status::{apply_status, now};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};
use tracing::info;

use crate::context::Ctx;
use crate::error::Result;

/// Reason of `Ready=False` on a template being deleted while MaasData still use it.
pub const REASON_IN_USE: &str = "InUse";

/// The template status for these MaasData (sorted by index; times kept when nothing changed).
pub fn template_status(
    previous: Option<&MaasDataTemplateStatus>,
    data: &[Arc<MaasData>],
    deleting: bool,
    generation: Option<i64>,
    now: &Time,
) -> MaasDataTemplateStatus {
    let mut indexes: Vec<IndexAllocation> = data
        .iter()
        .map(|d| IndexAllocation {
            name: d.spec.claim.name.clone(),
            index: d.spec.index,
        })
        .collect();
    indexes.sort_by(|a, b| (a.index, &a.name).cmp(&(b.index, &b.name)));
    // Two replicas racing for one claim may briefly have made two MaasData; the list is keyed
    // by claim, so each claim is listed once, with its lowest index.
    let mut seen = std::collections::BTreeSet::new();
    indexes.retain(|i| seen.insert(i.name.clone()));
    let previous = previous.cloned().unwrap_or_default();
    let mut conditions = previous.conditions.clone().unwrap_or_default();
    let ready = if deleting && !indexes.is_empty() {
        NewCondition::new(cond::READY, ConditionStatus::False, REASON_IN_USE).message(format!(
            "deletion waits for {} MaasData still using the template",
            indexes.len()
        ))
    } else {
        NewCondition::new(cond::READY, ConditionStatus::True, "Reconciled")
    };
    set_condition(&mut conditions, ready.observed_generation(generation), now);
    let mut status = MaasDataTemplateStatus {
        allocated_indexes: Some(i32::try_from(indexes.len()).unwrap_or(i32::MAX)),
        indexes: Some(indexes),
        conditions: Some(conditions),
        last_updated: previous.last_updated.clone(),
    };
    let unchanged = MaasDataTemplateStatus {
        last_updated: None,
        ..status.clone()
    } == MaasDataTemplateStatus {
        last_updated: None,
        ..previous
    };
    if !unchanged || status.last_updated.is_none() {
        status.last_updated = Some(now.clone());
    }
    status
}

/// The MaasData being deleted whose claim no longer holds them: still carrying our finalizer
/// (which only the claim's release removes), with an owner claim that `live_claim_uid` (the
/// UID of the claim of that name now, if any) shows gone or re-created.
pub fn orphaned(
    data: &[Arc<MaasData>],
    live_claim_uid: impl Fn(&str) -> Option<String>,
) -> Vec<&MaasData> {
    data.iter()
        .map(AsRef::as_ref)
        .filter(|d| {
            d.metadata.deletion_timestamp.is_some()
                && finalizer::has(*d, keys::FINALIZER_MAAS_DATA)
                && claim_uid_of(d) != live_claim_uid(&d.spec.claim.name)
        })
        .collect()
}

fn claim_uid_of(data: &MaasData) -> Option<String> {
    data.owner_references()
        .iter()
        .find(|o| o.kind == "MaasDataClaim")
        .map(|o| o.uid.clone())
}

/// Removes our finalizer from an [`orphaned`] MaasData once the API server, not only the cache,
/// shows its claim gone or re-created.
async fn let_go_of_orphan(ctx: &Ctx, ns: &str, data: &MaasData) -> Result<()> {
    let claim = Api::<MaasDataClaim>::namespaced(ctx.base.client.clone(), ns)
        .get_opt(&data.spec.claim.name)
        .await
        .map_err(failed("get MaasDataClaim"))?;
    if claim.and_then(|c| c.uid()) == claim_uid_of(data) {
        return Ok(());
    }
    let api: Api<MaasData> = Api::namespaced(ctx.base.client.clone(), ns);
    finalizer::remove(
        &api,
        data,
        keys::FINALIZER_MAAS_DATA,
        &ctx.base.field_manager,
    )
    .await
    .map_err(failed("updating the finalizer"))?;
    info!(data = %data.name_any(), claim = %data.spec.claim.name, "MaasData of a claim that is gone let go");
    Ok(())
}

/// Reconciles one MaasDataTemplate.
pub async fn reconcile(template: Arc<MaasDataTemplate>, ctx: Arc<Ctx>) -> Result<Action> {
    let ns = template.namespace().ok_or(Failed::missing("namespace"))?;
    let name = template.name_any();
    let api: Api<MaasDataTemplate> = Api::namespaced(ctx.base.client.clone(), &ns);
    let data: Vec<Arc<MaasData>> = ctx
        .data
        .state()
        .into_iter()
        .filter(|d| d.namespace().as_deref() == Some(ns.as_str()) && d.spec.template.name == name)
        .collect();
    let live_claim_uid = |claim: &str| {
        ctx.claims
            .get(&ObjectRef::new(claim).within(&ns))
            .and_then(|c| c.uid())
    };
    for orphan in orphaned(&data, live_claim_uid) {
        let_go_of_orphan(&ctx, &ns, orphan).await?;
    }
    let deleting = template.metadata.deletion_timestamp.is_some();
    let ours = finalizer::has(template.as_ref(), keys::FINALIZER_MAAS_DATA_TEMPLATE);
    if deleting && data.is_empty() {
        if ours {
            finalizer::remove(
                &api,
                &template,
                keys::FINALIZER_MAAS_DATA_TEMPLATE,
                &ctx.base.field_manager,
            )
            .await
            .map_err(failed("updating the finalizer"))?;
        }
        return Ok(Action::await_change());
    }
    if !deleting && !ours {
        finalizer::add(
            &api,
            &template,
            keys::FINALIZER_MAAS_DATA_TEMPLATE,
            &ctx.base.field_manager,
        )
        .await
        .map_err(failed("updating the finalizer"))?;
        return Ok(Action::await_change());
    }
    let status = template_status(
        template.status.as_ref(),
        &data,
        deleting,
        template.metadata.generation,
        &now(),
    );
    if template.status.as_ref() != Some(&status) {
        apply_status(&api, &name, &ctx.base.field_manager, &status)
            .await
            .map_err(failed("writing the status"))?;
    }
    Ok(Action::requeue(ctx.base.sync_period))
}

/// The template a MaasData belongs to.
pub fn map_data(data: &MaasData) -> Option<ObjectRef<MaasDataTemplate>> {
    Some(ObjectRef::new(&data.spec.template.name).within(&data.namespace()?))
}

#[cfg(test)]
mod tests {
    use capmaas_api::common::LocalObjectReference;
    use capmaas_api::data::MaasDataSpec;

    use super::*;

    fn data(claim: &str, index: i32) -> Arc<MaasData> {
        Arc::new(MaasData::new(
            &format!("t-{index}"),
            MaasDataSpec {
                index,
                template: LocalObjectReference::new("t"),
                claim: LocalObjectReference::new(claim),
                meta_data: None,
                network_data: None,
            },
        ))
    }

    fn t(s: i64) -> Time {
        Time(jiff::Timestamp::from_second(s).unwrap())
    }

    fn owned(claim: &str, index: i32, uid: &str, deleting: bool, ours: bool) -> Arc<MaasData> {
        let mut d = data(claim, index).as_ref().clone();
        d.metadata.owner_references = Some(vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                kind: "MaasDataClaim".into(),
                name: claim.into(),
                uid: uid.into(),
                api_version: capmaas_api::API_VERSION.into(),
                ..Default::default()
            },
        ]);
        if deleting {
            d.metadata.deletion_timestamp = Some(t(1));
        }
        if ours {
            d.metadata.finalizers = Some(vec![keys::FINALIZER_MAAS_DATA.into()]);
        }
        Arc::new(d)
    }

    #[test]
    fn only_deleting_data_whose_claim_is_gone_or_re_created_are_let_go() {
        let all = [
            owned("live", 0, "u-live", true, true),
            owned("gone", 1, "u-gone", true, true),
            owned("again", 2, "u-old", true, true),
            owned("gone-too", 3, "u-x", false, true),
            owned("gone-also", 4, "u-y", true, false),
        ];
        let live = |claim: &str| match claim {
            "live" => Some("u-live".to_owned()),
            "again" => Some("u-new".to_owned()),
            _ => None,
        };
        let names: Vec<i32> = orphaned(&all, live).iter().map(|d| d.spec.index).collect();
        // Not deleting (garbage collection will) or without our finalizer: nothing to do.
        assert_eq!(names, [1, 2]);
    }

    #[test]
    fn indexes_are_listed_in_order_and_an_unchanged_status_keeps_its_time() {
        let all = [data("c", 2), data("a", 0), data("b", 1), data("c", 7)];
        let first = template_status(None, &all, false, Some(1), &t(1));
        let indexes = first.indexes.clone().unwrap();
        assert_eq!(
            indexes
                .iter()
                .map(|i| (i.name.as_str(), i.index))
                .collect::<Vec<_>>(),
            vec![("a", 0), ("b", 1), ("c", 2)]
        );
        assert_eq!(first.allocated_indexes, Some(3));
        assert_eq!(
            template_status(Some(&first), &all, false, Some(1), &t(2)),
            first
        );
        let deleting = template_status(Some(&first), &all, true, Some(1), &t(3));
        let conditions = deleting.conditions.unwrap();
        let ready = conditions.iter().find(|c| c.type_ == "Ready").unwrap();
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("False", REASON_IN_USE)
        );
    }
}
