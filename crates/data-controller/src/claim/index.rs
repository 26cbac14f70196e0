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
use kube::api::{Api, ObjectMeta, PostParams};
use kube::{Resource, ResourceExt};
use tracing::{debug, info};

use crate::claim::owned::{list_made_for, made_for};
use crate::context::Ctx;
use crate::error::{Error, Result};
use crate::writes;

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
    let made = list_made_for(&api, claim, "list MaasData of the claim").await?;
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
            let key = keys::FINALIZER_MAAS_DATA;
            return Ok(writes::add_finalizer(&ctx.base, &api, &keep, key).await?);
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
                && made_for::<MaasData>(d, claim)
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

/// Deletes exactly this object: the finalizer off, then a delete with a uid precondition;
/// gone already is fine.
pub async fn delete_exact(ctx: &Ctx, api: &Api<MaasData>, data: &MaasData) -> Result<()> {
    let key = keys::FINALIZER_MAAS_DATA;
    writes::let_go_and_delete(&ctx.base, api, data, key, "delete MaasData").await?;
    Ok(())
}

#[cfg(test)]
#[path = "index_tests.rs"]
mod tests;
