//! Pure decisions of the IPAM controllers: what a claim, a pool or an address needs next,
//! from what was observed; and the `IPAddress` object an allocation creates.

use std::net::IpAddr;
use std::time::Duration;

use capmaas_api::capi::Cluster;
use capmaas_api::capi_ipam::{IPAddress, IPAddressClaim, IPAddressClaimReference, IPAddressSpec};
use capmaas_api::ipam_preallocation::{ANNOTATION_MACHINE, PreAllocated, pre_allocation_for};
use capmaas_api::keys::{
    ANNOTATION_PAUSED, FINALIZER_IP_ADDRESS, FINALIZER_IP_ADDRESS_CLAIM, FINALIZER_MAAS_IP_POOL,
    LABEL_CLUSTER_NAME,
};
use capmaas_api::{LockHolder, MaasIPAddressLock, MaasIPPool};
use capmaas_runtime::controller::finalizer;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::{Resource, ResourceExt};

use super::index::{AddressEntry, LayoutResult};
use super::layout::{PoolLayout, to_u128};

/// What a claim needs next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClaimStep {
    /// Not a claim of a MaasIPPool: someone else's.
    Ignore,
    /// Reconciliation is paused (why).
    Paused(String),
    /// Deleting without our finalizer: nothing left to do.
    Forget,
    /// Deleting, but consumers still hold the claim with their finalizers: the address stays.
    InUse(Vec<String>),
    /// Deleting and only our finalizer is left: release these `IPAddress` objects, then drop
    /// the finalizer.
    Release(Vec<String>),
    /// Add our finalizer before anything is allocated.
    AddFinalizer,
    /// The claim cannot be served now: `Ready=False` with this reason and message.
    Fail {
        /// Condition reason.
        reason: &'static str,
        /// Condition message.
        message: String,
    },
    /// The claim has its address: point `status.addressRef` at `keep`, then release `extras`
    /// (second addresses a race between replicas created).
    Bind {
        /// The `IPAddress` the claim keeps.
        keep: AddressEntry,
        /// Other `IPAddress` objects of this claim, to release once the claim points at `keep`.
        extras: Vec<String>,
    },
    /// Allocate an address: the pre-allocated one, or the next free one.
    Allocate {
        /// The address `spec.preAllocations` reserves for this claim's name or, failing that,
        /// its Machine's name.
        pre_allocated: Option<PreAllocated>,
    },
}

/// What the claim reconciler observed.
#[derive(Clone, Copy, Debug)]
pub struct Observed<'a> {
    /// The claim.
    pub claim: &'a IPAddressClaim,
    /// Its MaasIPPool, when it exists.
    pub pool: Option<&'a MaasIPPool>,
    /// The pool's layout (when the pool exists).
    pub layout: Option<&'a LayoutResult>,
    /// Why reconciliation is paused, if it is.
    pub paused: Option<&'a str>,
    /// `IPAddress` objects naming this claim (from the index).
    pub addresses: &'a [AddressEntry],
}

/// Whether the `IPAddress` entry is this claim's: same pool, and owned by this very claim (a
/// claim deleted and created again under the same name must not inherit the old address;
/// an address without a claim owner, made by hand, counts as the claim's).
pub fn belongs_to(entry: &AddressEntry, claim: &IPAddressClaim) -> bool {
    let pool = &claim.spec.pool_ref;
    entry.claim == claim.name_any()
        && entry.pool.name == pool.name
        && entry.pool.namespace == claim.namespace().unwrap_or_default()
        && match (&entry.claim_uid, &claim.metadata.uid) {
            (Some(owner), Some(uid)) => owner == uid,
            _ => true,
        }
}

/// The next step for a claim.
pub fn decide_claim(view: &Observed<'_>) -> ClaimStep {
    let claim = view.claim;
    if !claim.spec.pool_ref.is_maas_ip_pool() {
        return ClaimStep::Ignore;
    }
    if let Some(why) = view.paused {
        return ClaimStep::Paused(why.to_owned());
    }
    let mine: Vec<&AddressEntry> = view
        .addresses
        .iter()
        .filter(|e| belongs_to(e, claim))
        .collect();
    if claim.metadata.deletion_timestamp.is_some() {
        if !finalizer::has(claim, FINALIZER_IP_ADDRESS_CLAIM) {
            return ClaimStep::Forget;
        }
        let others: Vec<String> = claim
            .finalizers()
            .iter()
            .filter(|f| *f != FINALIZER_IP_ADDRESS_CLAIM)
            .cloned()
            .collect();
        if !others.is_empty() {
            return ClaimStep::InUse(others);
        }
        return ClaimStep::Release(mine.iter().map(|e| e.name.clone()).collect());
    }
    if !finalizer::has(claim, FINALIZER_IP_ADDRESS_CLAIM) {
        return ClaimStep::AddFinalizer;
    }
    if let Some(keep) = choose(&mine, claim.address_ref()) {
        let extras = mine
            .iter()
            .filter(|e| e.name != keep.name)
            .map(|e| e.name.clone())
            .collect();
        return ClaimStep::Bind {
            keep: keep.clone(),
            extras,
        };
    }
    let pool_name = format!(
        "MaasIPPool {}/{}",
        claim.namespace().unwrap_or_default(),
        claim.spec.pool_ref.name
    );
    let fail = |message: String| ClaimStep::Fail {
        reason: REASON_ALLOCATION_FAILED,
        message,
    };
    let (Some(pool), Some(layout)) = (view.pool, view.layout) else {
        return fail(format!("{pool_name} not found"));
    };
    if pool.metadata.deletion_timestamp.is_some() {
        return fail(format!("{pool_name} is being deleted"));
    }
    match layout {
        Err(e) => fail(format!("{pool_name} is invalid: {e}")),
        Ok(layout) => ClaimStep::Allocate {
            pre_allocated: pre_allocation_for(layout, &claim.name_any(), machine_of(claim)),
        },
    }
}

/// The Machine a claim is for, as its annotation names it.
pub fn machine_of(claim: &IPAddressClaim) -> Option<&str> {
    claim
        .annotations()
        .get(ANNOTATION_MACHINE)
        .map(String::as_str)
        .filter(|m| !m.is_empty())
}

/// The address a claim keeps among its own: the one its status already names, else the lowest
/// (every replica picks the same).
fn choose<'a>(mine: &[&'a AddressEntry], address_ref: Option<&str>) -> Option<&'a AddressEntry> {
    if let Some(named) = mine.iter().find(|e| Some(e.name.as_str()) == address_ref) {
        return Some(named);
    }
    mine.iter()
        .min_by_key(|e| (e.address.map(|a| (a.is_ipv6(), to_u128(a))), e.name.clone()))
        .copied()
}

/// Why a claim or pool is paused: its own annotation, its pool's, or a paused Cluster (the
/// claim's `spec.clusterName` / cluster label, or the pool's `spec.clusterName`). A Cluster that
/// does not exist pauses nothing (a deleted Cluster must not block the release of addresses).
pub fn pause_reason(
    claim: Option<&IPAddressClaim>,
    pool: Option<&MaasIPPool>,
    claim_cluster: Option<&Cluster>,
    pool_cluster: Option<&Cluster>,
) -> Option<String> {
    let annotated = |meta: &ObjectMeta| {
        meta.annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(ANNOTATION_PAUSED))
    };
    if let Some(c) = claim
        && annotated(&c.metadata)
    {
        return Some(format!(
            "annotation {ANNOTATION_PAUSED} is set on the IPAddressClaim"
        ));
    }
    if let Some(p) = pool
        && annotated(&p.metadata)
    {
        return Some(format!(
            "annotation {ANNOTATION_PAUSED} is set on MaasIPPool {}",
            p.name_any()
        ));
    }
    [claim_cluster, pool_cluster]
        .into_iter()
        .flatten()
        .find(|c| c.is_paused())
        .map(|c| format!("Cluster {} is paused", c.name_any()))
}

/// Condition reason: an address is allocated.
pub const REASON_ALLOCATED: &str = "AddressAllocated";
/// Condition reason: no free address in the pool (retried when one is released).
pub const REASON_POOL_EXHAUSTED: &str = capmaas_api::conditions::reasons::POOL_EXHAUSTED;
/// Condition reason: the address could not be allocated for another reason.
pub const REASON_ALLOCATION_FAILED: &str = capmaas_api::conditions::reasons::ALLOCATION_FAILED;

/// Name of the `IPAddress` of `addr` in a pool with `name_prefix`: `<prefix>-10-0-0-5`,
/// `<prefix>-fd00--5`. One name per address and prefix, so the API server refuses a second
/// `IPAddress` of the same address: the name is the allocation lock.
pub fn address_name(name_prefix: &str, addr: IpAddr) -> String {
    let mut text = match addr {
        IpAddr::V4(a) => a.to_string().replace('.', "-"),
        // Canonical (RFC 5952) text; the dots of `::ffff:10.0.0.5` stay, so that it cannot
        // meet `::ffff:10:0:0:5`.
        IpAddr::V6(a) => a.to_string().replace(':', "-"),
    };
    if text.ends_with('-') {
        // `fd00::` → `fd00--0`: names end with an alphanumeric. Canonical IPv6 text never ends
        // in `::0`, so no other address maps to the same name.
        text.push('0');
    }
    format!("{name_prefix}-{text}")
}

/// The `IPAddress` that allocates `addr` of `pool` to `claim`: owned by the claim (controller,
/// so garbage collection removes it when the claim is gone, also when the claim vanished before
/// the address was created) and by the pool; our finalizer; the claim's cluster label.
pub fn address_object(
    claim: &IPAddressClaim,
    pool: &MaasIPPool,
    layout: &PoolLayout,
    addr: IpAddr,
) -> Option<IPAddress> {
    let info = layout.address_info(addr)?;
    let claim_owner = OwnerReference {
        block_owner_deletion: Some(true),
        controller: Some(true),
        ..claim.controller_owner_ref(&())?
    };
    let pool_owner = OwnerReference {
        controller: Some(false),
        block_owner_deletion: None,
        ..pool.controller_owner_ref(&())?
    };
    let labels = claim
        .cluster_name()
        .map(|c| [(LABEL_CLUSTER_NAME.to_owned(), c.to_owned())].into());
    Some(IPAddress {
        metadata: ObjectMeta {
            name: Some(address_name(&pool.spec.name_prefix, addr)),
            namespace: claim.namespace(),
            labels,
            owner_references: Some(vec![claim_owner, pool_owner]),
            finalizers: Some(vec![FINALIZER_IP_ADDRESS.to_owned()]),
            ..ObjectMeta::default()
        },
        spec: IPAddressSpec {
            claim_ref: IPAddressClaimReference {
                name: claim.name_any(),
            },
            pool_ref: claim.spec.pool_ref.clone(),
            address: addr.to_string(),
            prefix: i32::from(info.prefix),
            gateway: info.gateway.map(|g| g.to_string()),
        },
    })
}

/// What a pool needs next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PoolStep {
    /// Reconciliation is paused (why): only the `Paused` condition is written.
    Paused(String),
    /// Deleting without our finalizer.
    Forget,
    /// Add our finalizer.
    AddFinalizer,
    /// Deleting: wait until no `IPAddress` of the pool is left (how many are).
    WaitForAddresses(usize),
    /// Deleting and no address is left: drop the finalizer.
    RemoveFinalizer,
    /// Write the status.
    Status,
}

/// The next step for a pool with `objects` `IPAddress` objects.
pub fn decide_pool(pool: &MaasIPPool, paused: Option<&str>, objects: usize) -> PoolStep {
    let ours = finalizer::has(pool, FINALIZER_MAAS_IP_POOL);
    if let Some(why) = paused {
        return PoolStep::Paused(why.to_owned());
    }
    match (pool.metadata.deletion_timestamp.is_some(), ours) {
        (true, false) => PoolStep::Forget,
        (true, true) if objects > 0 => PoolStep::WaitForAddresses(objects),
        (true, true) => PoolStep::RemoveFinalizer,
        (false, false) => PoolStep::AddFinalizer,
        (false, true) => PoolStep::Status,
    }
}

/// Whether the finalizer of a deleting `IPAddress` may go: its claim is gone, is another
/// claim of the same name, or is deleting with nothing but our finalizer left. While the claim
/// lives (or a consumer still holds it) the address stays, and with it its name: the lock.
pub fn may_release_address(entry: &AddressEntry, claim: Option<&IPAddressClaim>) -> bool {
    let Some(claim) = claim else {
        return true;
    };
    if !belongs_to(entry, claim) {
        return true;
    }
    claim.metadata.deletion_timestamp.is_some()
        && claim
            .finalizers()
            .iter()
            .all(|f| f == FINALIZER_IP_ADDRESS_CLAIM)
}

/// Whether a live `IPAddress` is an orphan to delete: it carries an owner reference to an
/// `IPAddressClaim` UID, and that claim (read live) is gone or is another incarnation. That
/// happens when a claim is deleted while a replica is allocating for it; garbage collection
/// would delete the orphan too, but only once it has discovered the resource, which can take
/// minutes after a start. An address made by hand (no claim owner) is never an orphan.
pub fn is_orphan(entry: &AddressEntry, claim: Option<&IPAddressClaim>) -> bool {
    if entry.deleting || entry.claim_uid.is_none() {
        return false;
    }
    claim.is_none_or(|c| !belongs_to(entry, c))
}

/// What the lock of an address says to the claim with UID `uid`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LockState {
    /// No lock: the address is free installation-wide.
    Free,
    /// The claim holds it.
    Ours,
    /// Another claim (of any pool and namespace) holds it.
    Theirs(LockHolder),
}

/// The [`LockState`] of `lock` for the claim `uid`.
pub fn lock_state(lock: Option<&MaasIPAddressLock>, uid: &str) -> LockState {
    match lock {
        None => LockState::Free,
        Some(l) if l.held_by(uid) => LockState::Ours,
        Some(l) => LockState::Theirs(l.spec.claim.clone()),
    }
}

/// What a lock needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockDecision {
    /// Its claim holds an `IPAddress` of its address.
    Keep,
    /// Nothing holds it, but it may be an allocation between the lock and the create: look
    /// again after this long.
    Recheck(Duration),
    /// Nothing has held it for `stale_after`: delete it (after a fresh read).
    Sweep,
}

/// Whether a lock `age` old, whose claim is `holding` an `IPAddress` of its address or not,
/// stays.
pub fn decide_lock(holding: bool, age: Option<Duration>, stale_after: Duration) -> LockDecision {
    if holding {
        return LockDecision::Keep;
    }
    match age.map(|age| stale_after.checked_sub(age)) {
        None => LockDecision::Recheck(stale_after),
        Some(Some(left)) if !left.is_zero() => LockDecision::Recheck(left),
        Some(_) => LockDecision::Sweep,
    }
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
