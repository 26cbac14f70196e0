//! Index allocation: each MaasDataClaim gets the lowest free index of its template.
//!
//! The API server is the lock: one MaasData per index, named `<template>-<index>`, so a second
//! create of a taken index answers 409 whatever the timing, the replica or a crash in
//! between. A claim first looks for a MaasData already made for it (by label, from the API
//! server, not the cache), so a crash after the create never costs a second index. Two
//! replicas racing for one claim with different views can each create one; the claim's
//! `status.renderedData`, written under the claim's resourceVersion, picks the winner, and only
//! once it is recorded are the others deleted ([`keep_one`]) — never one that may be recorded.

use capmaas_runtime::error::{Failed, failed};
use std::collections::BTreeSet;
use std::time::Instant;

use capmaas_api::common::LocalObjectReference;
use capmaas_api::data::MaasDataSpec;
use capmaas_api::data_checks::maas_data_name;
use capmaas_api::{MaasData, MaasDataClaim, keys};
use capmaas_runtime::controller::finalizer;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams, Preconditions};
use kube::{Resource, ResourceExt};
use tracing::{debug, info};

pub use crate::claim::reservations::{Reservations, lowest_free};
use crate::context::Ctx;
use crate::error::{Error, Result};

/// Creates tried per reconcile before giving up on a contended template.
const ATTEMPTS: usize = 16;

/// Of the MaasData made for one claim, the one to use and the ones to delete: the one the
/// claim records (then every other is deleted), else the lowest index (and none is deleted
/// yet: another replica may be about to record one of them).
pub fn keep_one(
    mut made: Vec<MaasData>,
    recorded: Option<&str>,
) -> Option<(MaasData, Vec<MaasData>)> {
    made.sort_by_key(|d| (d.spec.index, d.name_any()));
    if let Some(position) = made
        .iter()
        .position(|d| Some(d.name_any().as_str()) == recorded)
    {
        let keep = made.remove(position);
        return Some((keep, made));
    }
    made.into_iter().next().map(|keep| (keep, Vec::new()))
}

fn owner(claim: &MaasDataClaim) -> Result<OwnerReference> {
    claim
        .controller_owner_ref(&())
        .map(|mut o| {
            o.block_owner_deletion = Some(true);
            o
        })
        .ok_or_else(|| Failed::missing("uid").into())
}

fn new_data(claim: &MaasDataClaim, index: i32) -> Result<MaasData> {
    let template = &claim.spec.template.name;
    let mut data = MaasData::new(
        &maas_data_name(template, index),
        MaasDataSpec {
            index,
            template: LocalObjectReference::new(template),
            claim: LocalObjectReference::new(claim.name_any()),
            meta_data: None,
            network_data: None,
        },
    );
    data.metadata = ObjectMeta {
        name: Some(maas_data_name(template, index)),
        labels: Some(
            [
                (keys::LABEL_DATA_TEMPLATE.to_owned(), template.clone()),
                (keys::LABEL_DATA_CLAIM.to_owned(), claim.name_any()),
            ]
            .into(),
        ),
        owner_references: Some(vec![owner(claim)?]),
        // Deleted by hand while its claim lives, it stays (terminating) and so does its index:
        // a second server would otherwise be rendered the same index, hostname and addresses.
        finalizers: Some(vec![keys::FINALIZER_MAAS_DATA.to_owned()]),
        ..ObjectMeta::default()
    };
    Ok(data)
}

/// The MaasData of `claim`: the one already made for it, or a new one at the lowest free
/// index. Duplicates (two replicas raced) are deleted, keeping the lowest index.
pub async fn ensure(ctx: &Ctx, claim: &MaasDataClaim, ns: &str) -> Result<MaasData> {
    let api: Api<MaasData> = Api::namespaced(ctx.base.client.clone(), ns);
    let mine =
        ListParams::default().labels(&format!("{}={}", keys::LABEL_DATA_CLAIM, claim.name_any()));
    let made: Vec<MaasData> = api
        .list(&mine)
        .await
        .map_err(failed("list MaasData of the claim"))?
        .items
        .into_iter()
        .filter(|d| owned_by(d, claim))
        .collect();
    let recorded = claim
        .status
        .as_ref()
        .and_then(|s| s.rendered_data.as_ref())
        .map(|r| r.name.as_str());
    if let Some((keep, extra)) = keep_one(made, recorded) {
        for d in extra {
            delete_exact(ctx, &api, &d).await?;
        }
        // Made by a version without the finalizer: it gets it now.
        if keep.metadata.deletion_timestamp.is_none()
            && !finalizer::has(&keep, keys::FINALIZER_MAAS_DATA)
        {
            return finalizer::add(
                &api,
                &keep,
                keys::FINALIZER_MAAS_DATA,
                &ctx.base.field_manager,
            )
            .await
            .map_err(|e| failed("updating the finalizer")(e).into());
        }
        return Ok(keep);
    }
    let template = &claim.spec.template.name;
    let mut used: BTreeSet<i32> = ctx
        .data
        .state()
        .iter()
        .filter(|d| d.namespace().as_deref() == Some(ns) && d.spec.template.name == *template)
        .map(|d| d.spec.index)
        .collect();
    for _ in 0..ATTEMPTS {
        let index = ctx.reservations.take(ns, template, &used, Instant::now());
        let data = match new_data(claim, index) {
            Ok(data) => data,
            Err(e) => {
                ctx.reservations.give_back(ns, template, index);
                return Err(e);
            }
        };
        match api.create(&PostParams::default(), &data).await {
            Ok(data) => {
                info!(template = %template, index, "index allocated");
                return Ok(data);
            }
            Err(kube::Error::Api(e)) if e.code == 409 => {
                debug!(template = %template, index, "index taken meanwhile; trying the next");
                used.insert(index);
            }
            Err(e) => {
                // A timeout may have taken effect: the claim's own MaasData is found by label
                // next time, so the index is only given back to this process's picks.
                ctx.reservations.give_back(ns, template, index);
                return Err(failed("create MaasData")(e).into());
            }
        }
    }
    Err(Error::IndexContended {
        template: template.clone(),
    })
}

/// Deletes the MaasData made for `claim` other than the one it records (two replicas raced,
/// or a create timed out after it took effect), from the cache; each delete is exact.
pub async fn delete_unrecorded(
    ctx: &Ctx,
    claim: &MaasDataClaim,
    ns: &str,
    recorded: &str,
) -> Result<()> {
    let extra: Vec<_> = ctx
        .data
        .state()
        .into_iter()
        .filter(|d| {
            d.namespace().as_deref() == Some(ns)
                && d.spec.claim.name == claim.name_any()
                && d.name_any() != recorded
                && owned_by(d, claim)
        })
        .collect();
    if extra.is_empty() {
        return Ok(());
    }
    let api: Api<MaasData> = Api::namespaced(ctx.base.client.clone(), ns);
    for d in extra {
        info!(data = %d.name_any(), kept = recorded, "deleting a second MaasData made for one claim");
        delete_exact(ctx, &api, &d).await?;
    }
    Ok(())
}

/// Whether `data` was made for this very claim (same UID: a re-created claim of the same name
/// is someone else).
pub fn owned_by(data: &MaasData, claim: &MaasDataClaim) -> bool {
    let uid = claim.uid();
    data.owner_references()
        .iter()
        .any(|o| o.kind == MaasDataClaim::kind(&()) && Some(&o.uid) == uid.as_ref())
}

/// Deletes exactly this object: the finalizer off, then a delete with a uid precondition;
/// gone already is fine.
pub async fn delete_exact(ctx: &Ctx, api: &Api<MaasData>, data: &MaasData) -> Result<()> {
    let Some(data) = finalizer::remove(
        api,
        data,
        keys::FINALIZER_MAAS_DATA,
        &ctx.base.field_manager,
    )
    .await
    .map_err(failed("updating the finalizer"))?
    else {
        return Ok(());
    };
    if data.metadata.deletion_timestamp.is_some() {
        // Deleted by hand earlier: the finalizer was all that kept it.
        return Ok(());
    }
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: data.uid(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(&data.name_any(), &params).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if matches!(e.code, 404 | 409) => Ok(()),
        Err(e) => Err(failed("delete MaasData")(e).into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(v: &[i32]) -> BTreeSet<i32> {
        v.iter().copied().collect()
    }

    #[test]
    fn the_lowest_free_index_fills_gaps_first() {
        assert_eq!(lowest_free(&set(&[])), 0);
        assert_eq!(lowest_free(&set(&[0, 1, 2])), 3);
        assert_eq!(lowest_free(&set(&[0, 2, 3])), 1);
        assert_eq!(lowest_free(&set(&[1, 2])), 0);
        assert_eq!(
            lowest_free(&set(&[-4, 0, 1])),
            2,
            "negative indexes do not exist"
        );
    }

    #[test]
    fn of_two_made_for_one_claim_the_recorded_one_stays() {
        let data = |i: i32| {
            let mut d = MaasData::new(
                &maas_data_name("t", i),
                MaasDataSpec {
                    index: i,
                    template: LocalObjectReference::new("t"),
                    claim: LocalObjectReference::new("c"),
                    meta_data: None,
                    network_data: None,
                },
            );
            d.metadata.name = Some(maas_data_name("t", i));
            d
        };
        let (keep, extra) = keep_one(vec![data(4), data(1), data(7)], None).unwrap();
        assert_eq!(keep.spec.index, 1);
        assert!(extra.is_empty(), "nothing deleted before one is recorded");
        let (keep, extra) = keep_one(vec![data(4), data(1), data(7)], Some("t-4")).unwrap();
        assert_eq!(keep.spec.index, 4, "the recorded one wins");
        assert_eq!(
            extra.iter().map(|d| d.spec.index).collect::<Vec<_>>(),
            vec![1, 7]
        );
        assert!(keep_one(Vec::new(), None).is_none());
    }
}
