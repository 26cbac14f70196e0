//! Addresses handed from one machine's data claim to the next on the same host (node reuse):
//! a released claim's IPAddressClaims become holds (`crate::hold`) instead of being deleted,
//! and the next data claim on the host takes them over. Both writes carry the resourceVersion
//! read, and so does the hold reconciler's release: an IPAddressClaim is taken over, or
//! released, once.

use std::collections::BTreeMap;

use capmaas_api::capi_ipam::IPAddressClaim;
use capmaas_api::common::PoolReference;
use capmaas_api::ipam_preallocation::ANNOTATION_MACHINE;
use capmaas_api::{MaasDataClaim, MaasHost, keys};
use capmaas_runtime::controller::finalizer;
use capmaas_runtime::error::{Failed, failed};
use capmaas_runtime::status::now;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};
use tracing::info;

use crate::claim::owned::list_made_for;
use crate::context::Ctx;
use crate::error::{Error, Result};
use crate::hold::decide::{
    ANNOTATION_HELD_FOR_HOST, ANNOTATION_HELD_FOR_OWNER, ANNOTATION_HELD_UNTIL, Hold, HoldTerms,
    adoptable, hold_terms, host_of,
};
use crate::writes;

/// A merge patch of `obj`'s metadata guarded by the resourceVersion read: `Ok(false)` when the
/// object changed meanwhile (the caller looks again).
async fn guarded_patch(
    api: &Api<IPAddressClaim>,
    obj: &IPAddressClaim,
    mut metadata: Value,
    action: &'static str,
) -> Result<bool> {
    metadata["resourceVersion"] = json!(obj.resource_version());
    let patch = json!({ "metadata": metadata });
    match api
        .patch(
            &obj.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if matches!(e.code, 404 | 409) => Ok(false),
        Err(e) => Err(failed(action)(e).into()),
    }
}

/// What the released `claim` keeps for its host: read from the API server (the host, and the
/// next machine's data claim), not the caches, since this is decided once.
async fn terms(ctx: &Ctx, claim: &MaasDataClaim, ns: &str) -> Result<Option<HoldTerms>> {
    let Some((host_ns, host_name)) = host_of(claim) else {
        return Ok(None);
    };
    let host = Api::<MaasHost>::namespaced(ctx.base.client.clone(), &host_ns)
        .get_opt(&host_name)
        .await
        .map_err(failed("read MaasHost"))?;
    let Some(host) = host else { return Ok(None) };
    let claims = Api::<MaasDataClaim>::namespaced(ctx.base.client.clone(), ns)
        .list(&ListParams::default())
        .await
        .map_err(failed("list MaasDataClaims"))?
        .items;
    let mine = host_of(claim);
    let successor = claims
        .iter()
        .find(|c| c.uid() != claim.uid() && host_of(c) == mine);
    Ok(hold_terms(claim, Some(&host), successor, now().0))
}

/// Releases the IPAddressClaims of a data claim being let go: each served one becomes a hold
/// for the host when the host is kept for node reuse ([`hold_terms`]); the others are deleted
/// and their in-use finalizer removed (the pool frees the address).
pub async fn release_addresses(ctx: &Ctx, claim: &MaasDataClaim, ns: &str) -> Result<()> {
    let api: Api<IPAddressClaim> = Api::namespaced(ctx.base.client.clone(), ns);
    let made = list_made_for(&api, claim, "list IPAddressClaims of the data claim").await?;
    let terms = if made.is_empty() {
        None
    } else {
        terms(ctx, claim, ns).await?
    };
    for ip_claim in &made {
        let servable =
            ip_claim.meta().deletion_timestamp.is_none() && ip_claim.address_ref().is_some();
        if let (Some(t), true) = (&terms, servable) {
            let kept: Vec<Value> = ip_claim
                .owner_references()
                .iter()
                .filter(|o| o.kind != MaasDataClaim::kind(&()))
                .map(|o| json!(o))
                .collect();
            let metadata = json!({
                "ownerReferences": kept,
                "annotations": {
                    ANNOTATION_HELD_FOR_HOST: t.host,
                    ANNOTATION_HELD_UNTIL: t.until.to_string(),
                    ANNOTATION_HELD_FOR_OWNER: t.owner_uid,
                },
            });
            if !guarded_patch(&api, ip_claim, metadata, "hold IPAddressClaim").await? {
                return Err(Error::HoldRaced(ip_claim.name_any()));
            }
            info!(ipaddressclaim = %ip_claim.name_any(), host = %t.host, until = %t.until, "address kept for the host");
            continue;
        }
        writes::delete_same(&api, ip_claim, "delete IPAddressClaim").await?;
        // The server is released (the data claim is let go only then): the address may go.
        let in_use = keys::FINALIZER_ADDRESS_IN_USE;
        if finalizer::has(ip_claim, in_use) {
            writes::remove_finalizer(&ctx.base, &api, ip_claim, in_use).await?;
        }
    }
    Ok(())
}

/// Takes over `held` (pool → held IPAddressClaim) for `claim`, read fresh from the API server
/// and checked again; returns the pools taken over. `machine` is the claim's Machine.
pub async fn adopt(
    ctx: &Ctx,
    claim: &MaasDataClaim,
    ns: &str,
    held: &BTreeMap<PoolReference, IPAddressClaim>,
    machine: Option<&str>,
) -> Result<Vec<PoolReference>> {
    let api: Api<IPAddressClaim> = Api::namespaced(ctx.base.client.clone(), ns);
    let owner = claim
        .controller_owner_ref(&())
        .ok_or(Failed::missing("uid"))?;
    let mut taken = Vec::new();
    for (pool, ip_claim) in held {
        let metadata = json!({
            "ownerReferences": [owner],
            "labels": {keys::LABEL_DATA_CLAIM: claim.name_any()},
            "annotations": {
                ANNOTATION_HELD_FOR_HOST: null,
                ANNOTATION_HELD_UNTIL: null,
                ANNOTATION_HELD_FOR_OWNER: null,
                ANNOTATION_MACHINE: machine,
            },
        });
        if guarded_patch(&api, ip_claim, metadata, "take over IPAddressClaim").await? {
            info!(ipaddressclaim = %ip_claim.name_any(), pool = %pool.name, "address of the host taken over");
            taken.push(pool.clone());
        }
    }
    Ok(taken)
}

/// The holds `claim` may take over for `pools`, from a fresh list of the namespace (a hold the
/// cache does not show yet must not be missed: the address would go to waste until it lapses).
pub async fn live_holds(
    ctx: &Ctx,
    claim: &MaasDataClaim,
    ns: &str,
    pools: &[PoolReference],
) -> Result<BTreeMap<PoolReference, IPAddressClaim>> {
    if claim.spec.host_ref.is_none() {
        return Ok(BTreeMap::new());
    }
    let api: Api<IPAddressClaim> = Api::namespaced(ctx.base.client.clone(), ns);
    let listed = api
        .list(&ListParams::default().labels(keys::LABEL_DATA_CLAIM))
        .await
        .map_err(failed("list IPAddressClaims"))?
        .items;
    Ok(holds_for(claim, pools, &listed.iter().collect::<Vec<_>>()))
}

/// The first adoptable hold of each pool among `candidates`.
pub fn holds_for(
    claim: &MaasDataClaim,
    pools: &[PoolReference],
    candidates: &[&IPAddressClaim],
) -> BTreeMap<PoolReference, IPAddressClaim> {
    let t = now().0;
    pools
        .iter()
        .filter_map(|pool| {
            candidates
                .iter()
                .copied()
                .find(|c| Hold::of(c).is_some_and(|h| adoptable(&h, c, claim, pool, t)))
                .map(|c| (pool.clone(), c.clone()))
        })
        .collect()
}
