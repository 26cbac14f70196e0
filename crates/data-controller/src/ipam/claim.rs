//! The `IPAddressClaim` reconciler: observe the claim's pool, pause and addresses
//! ([`ClaimState`]: caches and the usage index, no API lists), [`decide_claim`], and do the
//! I/O of that step.
//!
//! Allocation takes the address's installation-wide lock ([`address_lock::acquire`]), then creates an
//! `IPAddress` named after the pool's `namePrefix` and the address. A lock another claim holds,
//! or a second create of the same address (another replica, a stale cache), means the next
//! free address is tried. Releasing deletes the `IPAddress` first and the lock after it.

use capmaas_runtime::error::{Failed, failed};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use capmaas_api::MaasIPPool;
use capmaas_api::capi_ipam::{IPAddress, IPAddressClaim};
use capmaas_api::ipam_preallocation::PreAllocated;
use capmaas_api::keys::{FINALIZER_IP_ADDRESS, FINALIZER_IP_ADDRESS_CLAIM};
use capmaas_runtime::conditions::NewCondition;
use capmaas_runtime::status::{Guard, now};
use kube::api::PostParams;
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use tracing::{debug, info};

use super::address_lock::{self, Acquired};
use super::context::Ctx;
use super::decide::{
    ClaimStep, REASON_ALLOCATION_FAILED, REASON_POOL_EXHAUSTED, address_object, belongs_to,
    decide_claim,
};
use super::decide::{LockState, lock_state};
use super::error::Result;
use super::index::{AddressEntry, PoolKey};
use super::layout::PoolLayout;
use super::state::{ClaimState, fetch_own};
use super::status::{
    claim_status, claim_status_differs, exhausted_message, not_ready_condition, ready_condition,
};
use crate::writes;

/// Creates tried per reconcile before giving the turn to other claims (each `409` means the
/// cache was behind; the watch catches up meanwhile).
const MAX_ATTEMPTS: usize = 16;
/// Backstop requeue of a claim waiting for a free address (a release wakes it sooner).
const EXHAUSTED_RETRY: Duration = Duration::from_secs(300);
/// Requeue of a claim that found no address but skipped some locked by other claims.
const LOCKED_RETRY: Duration = Duration::from_secs(2);
/// Requeue after `MAX_ATTEMPTS` lost races.
const RACE_RETRY: Duration = Duration::from_millis(200);

/// Reconciles one `IPAddressClaim` (the function the kit runs).
pub async fn reconcile(claim: Arc<IPAddressClaim>, ctx: Arc<Ctx>) -> Result<Action> {
    if !claim.spec.pool_ref.is_maas_ip_pool() || !ctx.wait_synced().await {
        return Ok(Action::await_change());
    }
    let ns = claim.namespace().ok_or(Failed::missing("namespace"))?;
    let api: Api<IPAddressClaim> = Api::namespaced(ctx.base.client.clone(), &ns);
    let mut claim = claim.as_ref().clone();
    loop {
        let state = ClaimState::observe(&ctx, &ns, &claim).await?;
        let step = decide_claim(&state.observed(&claim));
        debug!(?step, "step");
        return match step {
            ClaimStep::Ignore | ClaimStep::Forget => Ok(Action::await_change()),
            ClaimStep::Paused(why) => {
                debug!(why, "paused");
                Ok(Action::await_change())
            }
            ClaimStep::InUse(finalizers) => {
                debug!(
                    ?finalizers,
                    "deleting; the address stays while consumers hold the claim"
                );
                Ok(Action::await_change())
            }
            ClaimStep::Release(names) => {
                for name in &names {
                    release_address(&ctx, &claim, name).await?;
                }
                let key = FINALIZER_IP_ADDRESS_CLAIM;
                writes::remove_finalizer(&ctx.base, &api, &claim, key).await?;
                info!(addresses = ?names, "claim released");
                Ok(Action::await_change())
            }
            ClaimStep::AddFinalizer => {
                let key = FINALIZER_IP_ADDRESS_CLAIM;
                claim = writes::add_finalizer(&ctx.base, &api, &claim, key).await?;
                continue;
            }
            ClaimStep::Fail { reason, message } => {
                let condition = not_ready_condition(reason, message.clone());
                // Said once, when the claim's status first says it (a missing or invalid
                // pool, one being deleted), not on every resync.
                if write_status(&api, &claim, None, condition, &ctx).await? {
                    ctx.base.events.warning(&claim, reason, &message).await;
                }
                Ok(Action::await_change())
            }
            ClaimStep::Bind { keep, extras } => {
                let (keep, extras) = keep_what_the_claim_names(&ctx, &claim, keep, extras).await?;
                bind(&api, &claim, &keep, &extras, &ctx).await
            }
            ClaimStep::Allocate { pre_allocated } => {
                let (Some(pool), Some(Ok(layout))) = (state.pool, state.layout) else {
                    return Ok(Action::await_change());
                };
                allocate(Allocation {
                    api: &api,
                    claim: &claim,
                    pool: &pool,
                    layout: &layout,
                    pre_allocated: pre_allocated.as_ref(),
                    ctx: &ctx,
                })
                .await
            }
        };
    }
}

/// What to bind when the claim names an address the cache does not show (yet) — another
/// replica made it: that address, if it exists, and everything else is an extra. Switching the
/// claim away from an address that exists would let a replica that read the claim just before
/// the switch release the address the claim then names (and the pool hand it to another claim).
async fn keep_what_the_claim_names(
    ctx: &Ctx,
    claim: &IPAddressClaim,
    keep: AddressEntry,
    extras: Vec<String>,
) -> Result<(AddressEntry, Vec<String>)> {
    let Some(named) = claim.address_ref().filter(|named| *named != keep.name) else {
        return Ok((keep, extras));
    };
    let Some(named_entry) = fetch_own(ctx, claim, named).await? else {
        return Ok((keep, extras));
    };
    let mut extras: Vec<String> = extras.into_iter().filter(|e| e != named).collect();
    extras.push(keep.name);
    Ok((named_entry, extras))
}

/// Points the claim at `keep` (Ready), then releases the extras a race left behind.
async fn bind(
    api: &Api<IPAddressClaim>,
    claim: &IPAddressClaim,
    keep: &AddressEntry,
    extras: &[String],
    ctx: &Ctx,
) -> Result<Action> {
    let address = keep.address.map(|a| a.to_string()).unwrap_or_default();
    let condition = ready_condition(&keep.name, &address, keep.prefix, &keep.pool.name);
    write_status(api, claim, Some(&keep.name), condition, ctx).await?;
    if !extras.is_empty() {
        // Only once the claim, read now, names `keep`: a cache that lags must never release
        // the address a consumer may already be using.
        let fresh = api
            .get_opt(&claim.name_any())
            .await
            .map_err(failed("get IPAddressClaim"))?;
        if fresh.as_ref().and_then(|c| c.address_ref()) != Some(keep.name.as_str()) {
            return Ok(Action::requeue(RACE_RETRY));
        }
        for name in extras {
            info!(
                address = name,
                kept = keep.name,
                "releasing a second address of the claim"
            );
            release_address(ctx, claim, name).await?;
        }
    }
    Ok(Action::await_change())
}

/// Allocates an address to the claim: the pre-allocated one or the next free one, by taking its
/// lock and creating its `IPAddress`. Addresses found locked by another pool's claim are
/// skipped now and guessed again next time (their lock may be gone by then: a lock's deletion
/// wakes the waiting claims).
async fn allocate(request: Allocation<'_>) -> Result<Action> {
    let mut locked_elsewhere = Vec::new();
    let result = allocate_skipping(request, &mut locked_elsewhere).await;
    if locked_elsewhere.is_empty() {
        return result;
    }
    let key = PoolKey::of(request.pool);
    let mut index = request.ctx.index();
    for addr in locked_elsewhere {
        index.unreserve(&key, addr);
    }
    // A lock seen in the cache may be on its way out (released a moment ago): its deletion
    // wakes waiting claims, but this claim's own waiting status may reach the cache after that
    // wake, so look again soon rather than at the exhaustion backstop.
    result.map(|action| {
        if action == Action::requeue(EXHAUSTED_RETRY) {
            Action::requeue(LOCKED_RETRY)
        } else {
            action
        }
    })
}

/// What [`allocate`] works on; one value so the retry wrapper and the loop it wraps take the
/// same inputs.
#[derive(Clone, Copy)]
struct Allocation<'a> {
    api: &'a Api<IPAddressClaim>,
    claim: &'a IPAddressClaim,
    pool: &'a MaasIPPool,
    layout: &'a PoolLayout,
    pre_allocated: Option<&'a PreAllocated>,
    ctx: &'a Ctx,
}

async fn allocate_skipping(
    request: Allocation<'_>,
    locked_elsewhere: &mut Vec<IpAddr>,
) -> Result<Action> {
    let Allocation {
        api,
        claim,
        pool,
        layout,
        pre_allocated,
        ctx,
    } = request;
    let ns = claim.namespace().unwrap_or_default();
    let key = PoolKey::of(pool);
    let addresses: Api<IPAddress> = Api::namespaced(ctx.base.client.clone(), &ns);
    let uid = claim.uid().ok_or(Failed::missing("uid"))?;
    // An allocation this claim began before a crash (its lock taken, its IPAddress not created)
    // is finished on that address first; choosing another would keep the locked one from every
    // claim until the lock is swept as stale.
    let mut resume = match pre_allocated {
        None => address_lock::held_by_claim(ctx, &uid, &pool.name_any()),
        Some(_) => None,
    };
    let mut attempts = 0;
    while attempts < MAX_ATTEMPTS {
        let picked = {
            let mut index = ctx.index();
            let now = Instant::now();
            match (pre_allocated, resume.take()) {
                (Some(p), _) => index.reserve(&key, p.address, now).then_some(p.address),
                (None, Some(held)) if index.reserve(&key, held, now) => Some(held),
                (None, _) => {
                    index.allocate(&key, pool.spec.allocation_strategy, fastrand::u128(..), now)
                }
            }
        };
        let Some(addr) = picked else {
            return unavailable(api, claim, pool, pre_allocated, ctx).await;
        };
        let Some(object) = address_object(claim, pool, layout, addr) else {
            ctx.index().unreserve(&key, addr);
            return Err(Failed::missing("uid").into());
        };
        let name = object.name_any();
        // Locked by a claim of another pool (an overlap the webhook warned about), or one
        // released a moment ago whose lock is not gone yet: the cache says so for free.
        let free_here = !matches!(
            lock_state(address_lock::cached(ctx, addr).as_deref(), &uid),
            LockState::Theirs(_)
        );
        if free_here {
            attempts += 1;
        }
        let held = free_here
            && match address_lock::acquire(ctx, claim, &pool.name_any(), addr).await {
                Ok(acquired) => acquired == Acquired::Held,
                Err(e) => {
                    ctx.index().unreserve(&key, addr);
                    return Err(e);
                }
            };
        if !held {
            debug!(address = %addr, "address locked by another claim; trying the next");
            locked_elsewhere.push(addr);
            if pre_allocated.is_some() {
                return unavailable(api, claim, pool, pre_allocated, ctx).await;
            }
            continue;
        }
        match addresses.create(&PostParams::default(), &object).await {
            Ok(created) => {
                ctx.index().note_created(&created);
                info!(address = %addr, ipaddress = name, "address allocated");
                let condition = ready_condition(
                    &name,
                    &object.spec.address,
                    object.spec.prefix,
                    &pool.name_any(),
                );
                write_status(api, claim, Some(&name), condition, ctx).await?;
                ctx.base
                    .events
                    .normal(
                        claim,
                        "AddressAllocated",
                        &format!("{addr} (IPAddress {name})"),
                    )
                    .await;
                return Ok(Action::await_change());
            }
            Err(kube::Error::Api(s)) if s.code == 409 => {
                // Taken meanwhile (the reservation holds the address until the watch says who
                // has it) — or created by an earlier attempt for this very claim.
                if let Some(entry) = fetch_own(ctx, claim, &name).await? {
                    return bind(api, claim, &entry, &[], ctx).await;
                }
                debug!(address = %addr, "address taken meanwhile; trying the next");
                // Held by an address older than the locks (its lock comes with
                // `address_lock::ensure`): this claim's lock must not stand in its way.
                address_lock::release(ctx, addr, &uid).await?;
                if pre_allocated.is_some() {
                    return unavailable(api, claim, pool, pre_allocated, ctx).await;
                }
            }
            Err(e) => {
                ctx.index().unreserve(&key, addr);
                return Err(failed("create IPAddress")(e).into());
            }
        }
    }
    Ok(Action::requeue(RACE_RETRY))
}

/// No address for the claim now: `Ready=False` naming the pool and the claim. A release of an
/// address of the pool wakes the claim (see the `IPAddress` feed); the requeue is a backstop.
async fn unavailable(
    api: &Api<IPAddressClaim>,
    claim: &IPAddressClaim,
    pool: &MaasIPPool,
    pre_allocated: Option<&PreAllocated>,
    ctx: &Ctx,
) -> Result<Action> {
    let ns = claim.namespace().unwrap_or_default();
    let (reason, message) = match pre_allocated {
        Some(p) => (
            REASON_ALLOCATION_FAILED,
            format!(
                "address {} of MaasIPPool {ns}/{} is pre-allocated to IPAddressClaim {ns}/{} by \
                 {} but is in use; it is served as soon as the address is released",
                p.address,
                pool.name_any(),
                claim.name_any(),
                p.describe()
            ),
        ),
        None => (
            REASON_POOL_EXHAUSTED,
            exhausted_message(&ns, &pool.name_any(), &claim.name_any()),
        ),
    };
    let changed =
        write_status(api, claim, None, not_ready_condition(reason, &message), ctx).await?;
    if changed {
        info!(reason, "no address available");
        ctx.base.events.warning(claim, reason, &message).await;
    }
    Ok(Action::requeue(EXHAUSTED_RETRY))
}

/// Writes the claim status this provider owns unless it is already there; returns whether it
/// wrote. Guarded by the claim's resourceVersion: a claim that moved meanwhile answers `409`.
async fn write_status(
    api: &Api<IPAddressClaim>,
    claim: &IPAddressClaim,
    address_ref: Option<&str>,
    ready: NewCondition,
    ctx: &Ctx,
) -> Result<bool> {
    let status = claim_status(claim, address_ref, ready, &now());
    let unchanged = !claim_status_differs(claim, &status);
    let guard = Guard::ResourceVersion;
    Ok(writes::write_status(&ctx.base, api, claim, &status, unchanged, guard).await?)
}

/// Releases one `IPAddress` of `claim`: our finalizer off, then deleted. Gone already, or
/// by now another claim's (released and handed out again meanwhile), is left alone: the
/// delete is conditional on the UID that was checked.
pub(crate) async fn release_address(ctx: &Ctx, claim: &IPAddressClaim, name: &str) -> Result<()> {
    let ns = claim.namespace().unwrap_or_default();
    let api: Api<IPAddress> = Api::namespaced(ctx.base.client.clone(), &ns);
    let Some(address) = api.get_opt(name).await.map_err(failed("get IPAddress"))? else {
        return Ok(());
    };
    if !AddressEntry::of(&address).is_some_and(|e| belongs_to(&e, claim)) {
        debug!(ipaddress = name, "no longer this claim's; left alone");
        return Ok(());
    }
    let removed = writes::remove_finalizer(&ctx.base, &api, &address, FINALIZER_IP_ADDRESS);
    let Some(address) = removed.await? else {
        return Ok(());
    };
    if writes::delete_same(&api, &address, "delete IPAddress").await? {
        info!(ipaddress = name, "address released");
    }
    address_lock::release_of(ctx, &address).await
}
