//! The `IPAddress` reconciler: the finalizer of a deleted `IPAddress` of a MaasIPPool goes when
//! its claim lets it go — the claim is gone (also when the claim vanished before its address
//! was created: garbage collection deletes the orphan, Metal3 IPAM issue #694), is a new claim
//! of the same name, or is deleting with only our finalizer left. While the claim lives the
//! address (and its name, the allocation lock) stays. Once the address is gone its
//! installation-wide lock goes too, and a live address without one (older than the lock, or
//! moved in) gets it.

use capmaas_runtime::error::{Failed, failed};
use std::sync::Arc;

use capmaas_api::capi_ipam::{IPAddress, IPAddressClaim};
use capmaas_api::keys::FINALIZER_IP_ADDRESS;
use capmaas_runtime::controller::finalizer;
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use tracing::{debug, info};

use super::address_lock;
use super::context::Ctx;
use super::decide::{is_orphan, may_release_address};
use super::error::Result;
use super::index::AddressEntry;
use crate::writes;

/// Reconciles one `IPAddress` (the function the kit runs).
pub async fn reconcile(address: Arc<IPAddress>, ctx: Arc<Ctx>) -> Result<Action> {
    let Some(entry) = AddressEntry::of(&address) else {
        return Ok(Action::await_change());
    };
    let ns = address.namespace().ok_or(Failed::missing("namespace"))?;
    if !entry.deleting {
        return collect_orphan(&address, &entry, &ns, &ctx).await;
    }
    if !finalizer::has(address.as_ref(), FINALIZER_IP_ADDRESS) {
        return Ok(Action::await_change());
    }
    // A deleted address is rare: ask the API server rather than a cache that may lag.
    let claim = Api::<IPAddressClaim>::namespaced(ctx.base.client.clone(), &ns)
        .get_opt(&entry.claim)
        .await
        .map_err(failed("get IPAddressClaim"))?;
    if let Some(claim) = &claim
        && let Some(why) = ctx.claim_pause(claim, ctx.pool(&ns, &entry.pool.name).as_deref())
    {
        debug!(why, "paused");
        return Ok(Action::await_change());
    }
    if !may_release_address(&entry, claim.as_ref()) {
        debug!(claim = entry.claim, "deleted, but its claim still holds it");
        return Ok(Action::await_change());
    }
    let api: Api<IPAddress> = Api::namespaced(ctx.base.client.clone(), &ns);
    writes::remove_finalizer(&ctx.base, &api, address.as_ref(), FINALIZER_IP_ADDRESS).await?;
    info!(claim = entry.claim, "address released");
    address_lock::release_of(&ctx, &address).await?;
    Ok(Action::await_change())
}

/// Deletes a live address whose claim is gone (see [`is_orphan`]); the deletion then comes back
/// here and releases the finalizer. A live address whose claim holds it keeps its lock
/// ([`address_lock::ensure`]). The claim cache answers the common case (the claim is there); only an
/// address whose claim the cache does not show costs a read.
async fn collect_orphan(
    address: &IPAddress,
    entry: &AddressEntry,
    ns: &str,
    ctx: &Ctx,
) -> Result<Action> {
    if entry.claim_uid.is_none() {
        return Ok(Action::await_change());
    }
    let cached = ctx
        .claims
        .get(&kube::runtime::reflector::ObjectRef::new(&entry.claim).within(ns));
    if let Some(claim) = cached.filter(|c| !is_orphan(entry, Some(c))) {
        address_lock::ensure(ctx, address, entry, &claim).await?;
        return Ok(Action::await_change());
    }
    let claim = Api::<IPAddressClaim>::namespaced(ctx.base.client.clone(), ns)
        .get_opt(&entry.claim)
        .await
        .map_err(failed("get IPAddressClaim"))?;
    if !is_orphan(entry, claim.as_ref()) {
        if let Some(claim) = &claim {
            address_lock::ensure(ctx, address, entry, claim).await?;
        }
        return Ok(Action::await_change());
    }
    let api: Api<IPAddress> = Api::namespaced(ctx.base.client.clone(), ns);
    // Conditional on the UID read: a same-named address of a later allocation is left alone.
    if writes::delete_same(&api, address, "delete IPAddress").await? {
        info!(
            claim = entry.claim,
            "orphaned address deleted: its claim is gone"
        );
    }
    Ok(Action::await_change())
}
