//! The installation-wide address lock ([`MaasIPAddressLock`], one cluster-scoped object named
//! after the address): taken before an `IPAddress` is created, let go after it is gone, so the
//! API server refuses a second holder of an address whatever its pool and namespace. The lock
//! carries a finalizer: deleted by hand, it stays (terminating) and still holds.
//!
//! - [`acquire`]: create the lock; `409` means another holder, unless the lock is this claim's
//!   (an earlier attempt).
//! - [`release`]: let go of the lock of a released address, conditional on its holder.
//! - [`ensure`]: a live `IPAddress` without its lock (allocated before the lock existed, or
//!   moved by `clusterctl move`) gets one; an address another claim locked is reported.
//!
//! Stale locks are the lock reconciler's ([`super::lock`]).

use capmaas_runtime::error::{Failed, failed};
use std::net::IpAddr;
use std::sync::Arc;

use capmaas_api::capi_ipam::{IPAddress, IPAddressClaim};
use capmaas_api::ipam_lock::lock_name;
use capmaas_api::keys::FINALIZER_MAAS_IP_ADDRESS_LOCK;
use capmaas_api::{LockHolder, MaasIPAddressLock};
use kube::api::PostParams;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};
use tracing::{debug, info, warn};

use super::context::Ctx;
use super::decide::{LockState, lock_state};
use super::error::{Error, Result};
use super::index::AddressEntry;
use crate::writes;

/// The outcome of [`acquire`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Acquired {
    /// The claim holds the lock (taken now or by an earlier attempt).
    Held,
    /// Another claim holds it.
    TakenBy(LockHolder),
}

/// The lock of `address` from the cache.
pub(crate) fn cached(ctx: &Ctx, address: IpAddr) -> Option<Arc<MaasIPAddressLock>> {
    ctx.locks.get(&ObjectRef::new(&lock_name(address)))
}

/// The address of `pool` whose lock the claim `claim_uid` holds (the lowest, should there be
/// several): an allocation begun before a crash, between the lock and the `IPAddress`.
pub(crate) fn held_by_claim(ctx: &Ctx, claim_uid: &str, pool: &str) -> Option<IpAddr> {
    ctx.locks
        .state()
        .iter()
        .filter(|lock| lock.held_by(claim_uid) && lock.spec.pool == pool)
        .filter_map(|lock| lock.spec.address.parse::<IpAddr>().ok())
        .min()
}

fn holder_of(claim: &IPAddressClaim) -> Result<LockHolder> {
    Ok(LockHolder {
        namespace: claim.namespace().ok_or(Failed::missing("namespace"))?,
        name: claim.name_any(),
        uid: claim.uid().ok_or(Failed::missing("uid"))?,
    })
}

fn api(ctx: &Ctx) -> Api<MaasIPAddressLock> {
    Api::all(ctx.base.client.clone())
}

/// Takes the lock of `address` for `claim`, allocated from `pool`.
pub(crate) async fn acquire(
    ctx: &Ctx,
    claim: &IPAddressClaim,
    pool: &str,
    address: IpAddr,
) -> Result<Acquired> {
    let holder = holder_of(claim)?;
    if let LockState::Theirs(other) = lock_state(cached(ctx, address).as_deref(), &holder.uid) {
        return Ok(Acquired::TakenBy(other));
    }
    let lock = MaasIPAddressLock::for_address(address, holder.clone(), pool);
    // A lock released between the create and the read is created again.
    for _ in 0..3 {
        match api(ctx).create(&PostParams::default(), &lock).await {
            Ok(_) => return Ok(Acquired::Held),
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(failed("create MaasIPAddressLock")(e).into()),
        }
        let found = api(ctx)
            .get_opt(&lock_name(address))
            .await
            .map_err(failed("get MaasIPAddressLock"))?;
        match lock_state(found.as_ref(), &holder.uid) {
            LockState::Theirs(other) => return Ok(Acquired::TakenBy(other)),
            // Taken by an earlier attempt for this claim.
            LockState::Ours => return Ok(Acquired::Held),
            LockState::Free => {}
        }
    }
    Err(Error::LockChurn(lock_name(address)))
}

/// Deletes the lock of `address` if the claim `claim_uid` holds it; a lock that is gone or
/// another claim's is left alone.
pub(crate) async fn release(ctx: &Ctx, address: IpAddr, claim_uid: &str) -> Result<()> {
    let name = lock_name(address);
    let lock = match cached(ctx, address) {
        Some(lock) if lock.held_by(claim_uid) => Some(lock.as_ref().clone()),
        // The cache may lag behind a lock taken a moment ago: ask.
        _ => api(ctx)
            .get_opt(&name)
            .await
            .map_err(failed("get MaasIPAddressLock"))?,
    };
    let Some(lock) = lock.filter(|l| l.held_by(claim_uid)) else {
        return Ok(());
    };
    delete_exact(ctx, &lock).await?;
    debug!(%address, "address lock released");
    Ok(())
}

/// Lets go of `lock`: its finalizer off, then deleted with a UID precondition (a lock of a
/// later holder of the address is left alone).
pub(crate) async fn delete_exact(ctx: &Ctx, lock: &MaasIPAddressLock) -> Result<()> {
    let (key, action) = (FINALIZER_MAAS_IP_ADDRESS_LOCK, "delete MaasIPAddressLock");
    writes::let_go_and_delete(&ctx.base, &api(ctx), lock, key, action).await?;
    Ok(())
}

/// Lets go of the lock of `address` (gone or going, with no finalizer of ours left); a crash
/// before this leaves a stale lock that [`super::lock::reconcile`] deletes.
pub(crate) async fn release_of(ctx: &Ctx, address: &IPAddress) -> Result<()> {
    let Some(entry) = AddressEntry::of(address) else {
        return Ok(());
    };
    match (entry.address, entry.claim_uid.as_deref()) {
        (Some(addr), Some(uid)) => release(ctx, addr, uid).await,
        _ => Ok(()),
    }
}

/// Makes sure the live `address` (`entry`) of a claim that still holds it has its lock.
pub(crate) async fn ensure(
    ctx: &Ctx,
    address: &IPAddress,
    entry: &AddressEntry,
    claim: &IPAddressClaim,
) -> Result<()> {
    let (Some(addr), Some(uid)) = (entry.address, entry.claim_uid.as_deref()) else {
        return Ok(());
    };
    if matches!(
        lock_state(cached(ctx, addr).as_deref(), uid),
        LockState::Ours
    ) {
        return Ok(());
    }
    match acquire(ctx, claim, &entry.pool.name, addr).await? {
        Acquired::Held => {
            info!(%addr, ipaddress = entry.name, "address lock taken for an existing address");
        }
        Acquired::TakenBy(other) => {
            let message = format!(
                "{addr} is also held by IPAddressClaim {}/{} (MaasIPAddressLock {}): two pools \
                 handed out the same address before the lock existed; release one of them",
                other.namespace,
                other.name,
                lock_name(addr)
            );
            warn!(%addr, ipaddress = entry.name, "{message}");
            ctx.base
                .events
                .warning(address, "AddressHeldTwice", &message)
                .await;
        }
    }
    Ok(())
}
