//! The `MaasIPAddressLock` reconciler: a lock whose claim holds no `IPAddress` of its address
//! (a crash between the lock and the create, an address whose finalizer was removed by hand)
//! is deleted once it is [`STALE_AFTER`] old, after a fresh list confirms it. Taking and
//! letting go of locks is [`super::address_lock`]'s.

use capmaas_runtime::error::failed;
use std::sync::Arc;
use std::time::Duration;

use capmaas_api::MaasIPAddressLock;
use capmaas_api::capi_ipam::IPAddress;
use kube::api::ListParams;
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use tracing::info;

use super::address_lock::delete_exact;
use super::context::Ctx;
use super::decide::{LockDecision, decide_lock};
use super::error::Result;
use super::index::AddressEntry;

/// Age after which a lock whose claim holds no `IPAddress` of its address is deleted. Far
/// longer than the two calls between taking the lock and creating the address.
pub const STALE_AFTER: Duration = Duration::from_secs(300);

/// Reconciles one lock (the function the kit runs): a stale one goes.
pub async fn reconcile(lock: Arc<MaasIPAddressLock>, ctx: Arc<Ctx>) -> Result<Action> {
    if !ctx.wait_synced().await {
        return Ok(Action::await_change());
    }
    let claim = &lock.spec.claim;
    let holding = ctx
        .index()
        .claim_addresses(&claim.namespace, &claim.name)
        .iter()
        .any(|e| holds(e, &lock));
    let age = lock
        .creation_timestamp()
        .and_then(|t| Duration::try_from(jiff::Timestamp::now().duration_since(t.0)).ok());
    match decide_lock(holding, age, STALE_AFTER) {
        LockDecision::Keep => Ok(Action::await_change()),
        LockDecision::Recheck(after) => Ok(Action::requeue(after)),
        LockDecision::Sweep => sweep(&lock, &ctx).await,
    }
}

fn holds(entry: &AddressEntry, lock: &MaasIPAddressLock) -> bool {
    entry.claim_uid.as_deref() == Some(lock.spec.claim.uid.as_str())
        && entry.address.map(|a| a.to_string()).as_deref() == Some(lock.spec.address.as_str())
}

/// Deletes a stale lock once the API server, not only the cache, shows no `IPAddress` of its
/// claim for its address.
async fn sweep(lock: &MaasIPAddressLock, ctx: &Ctx) -> Result<Action> {
    let ns = &lock.spec.claim.namespace;
    let addresses = Api::<IPAddress>::namespaced(ctx.base.client.clone(), ns)
        .list(&ListParams::default())
        .await
        .map_err(failed("list IPAddress"))?;
    if addresses
        .items
        .iter()
        .filter_map(AddressEntry::of)
        .any(|e| holds(&e, lock))
    {
        return Ok(Action::requeue(STALE_AFTER));
    }
    delete_exact(ctx, lock).await?;
    info!(
        address = lock.spec.address,
        claim = format!("{ns}/{}", lock.spec.claim.name),
        "stale address lock deleted: its claim holds no IPAddress of it"
    );
    Ok(Action::await_change())
}
