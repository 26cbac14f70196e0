//! Which change of another object wakes which claim, pool or address: pure mappers over the
//! caches, and the predicates that keep status-only changes from waking anything.

use capmaas_api::capi::Cluster;
use capmaas_api::capi_ipam::{IPAddress, IPAddressClaim};
use capmaas_api::ipam_lock::lock_name;
use capmaas_api::keys::ANNOTATION_PAUSED;
use capmaas_api::{MaasIPAddressLock, MaasIPPool};
use capmaas_runtime::controller::predicate_hash as hash_of;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};

use super::index::{PoolKey, UsageIndex};
use crate::lookup::namespace_mates;

/// The pool a claim asks for, when it is a MaasIPPool.
pub fn claim_pool(claim: &IPAddressClaim) -> Option<PoolKey> {
    claim.spec.pool_ref.is_maas_ip_pool().then(|| PoolKey {
        namespace: claim.namespace().unwrap_or_default(),
        name: claim.spec.pool_ref.name.clone(),
    })
}

/// Whether a claim waits for an address: a live claim of a MaasIPPool without `addressRef`.
pub fn is_waiting(claim: &IPAddressClaim) -> bool {
    claim.metadata.deletion_timestamp.is_none()
        && claim.address_ref().is_none()
        && claim.spec.pool_ref.is_maas_ip_pool()
}

/// The claims of `pool` that wait for an address: woken when an address of the pool is
/// released (the fix of Metal3's never-retried exhausted claims).
pub fn waiting_claims(
    claims: &Store<IPAddressClaim>,
    pool: &PoolKey,
) -> Vec<ObjectRef<IPAddressClaim>> {
    claims_of(claims, pool, is_waiting)
}

/// Every waiting claim of every pool (after a re-list, when deletions may have been missed).
pub fn all_waiting_claims(claims: &Store<IPAddressClaim>) -> Vec<ObjectRef<IPAddressClaim>> {
    claims
        .state()
        .iter()
        .filter(|c| is_waiting(c))
        .map(|c| ObjectRef::from_obj(c.as_ref()))
        .collect()
}

fn claims_of(
    claims: &Store<IPAddressClaim>,
    pool: &PoolKey,
    keep: impl Fn(&IPAddressClaim) -> bool,
) -> Vec<ObjectRef<IPAddressClaim>> {
    claims
        .state()
        .iter()
        .filter(|c| claim_pool(c).as_ref() == Some(pool) && keep(c))
        .map(|c| ObjectRef::from_obj(c.as_ref()))
        .collect()
}

/// An `IPAddress` wakes the claim it names (a creation confirms it, a deletion frees it).
pub fn address_to_claim(address: &IPAddress) -> Option<ObjectRef<IPAddressClaim>> {
    let pool = PoolKey::of_address(address)?;
    let name = &address.spec.claim_ref.name;
    (!name.is_empty()).then(|| ObjectRef::new(name).within(&pool.namespace))
}

/// An `IPAddress` wakes the lock of its address (a deletion may leave it stale).
pub fn address_to_lock(address: &IPAddress) -> Option<ObjectRef<MaasIPAddressLock>> {
    PoolKey::of_address(address)?;
    let ip: std::net::IpAddr = address.spec.address.parse().ok()?;
    Some(ObjectRef::new(&lock_name(ip)))
}

/// A lock wakes the `IPAddress` of its claim and address: one deleted by hand (or swept while
/// its claim was allocating) is taken again at once.
pub fn lock_to_addresses(
    index: &UsageIndex,
    lock: &MaasIPAddressLock,
) -> Vec<ObjectRef<IPAddress>> {
    let claim = &lock.spec.claim;
    index
        .claim_addresses(&claim.namespace, &claim.name)
        .into_iter()
        .filter(|e| e.address.map(|a| a.to_string()).as_deref() == Some(lock.spec.address.as_str()))
        .map(|e| ObjectRef::new(&e.name).within(&claim.namespace))
        .collect()
}

/// An `IPAddress` wakes its pool (counts, deletion waiting for addresses).
pub fn address_to_pool(address: &IPAddress) -> Option<ObjectRef<MaasIPPool>> {
    let pool = PoolKey::of_address(address)?;
    Some(ObjectRef::new(&pool.name).within(&pool.namespace))
}

/// A change of a pool's spec, pause or deletion wakes its waiting and deleting claims.
pub fn pool_to_claims(
    claims: &Store<IPAddressClaim>,
    pool: &MaasIPPool,
) -> Vec<ObjectRef<IPAddressClaim>> {
    claims_of(claims, &PoolKey::of(pool), |c| {
        is_waiting(c) || c.metadata.deletion_timestamp.is_some()
    })
}

/// A Cluster's pause change wakes the claims of the cluster and the claims of its pools.
pub fn cluster_to_claims(
    claims: &Store<IPAddressClaim>,
    pools: &Store<MaasIPPool>,
    cluster: &Cluster,
) -> Vec<ObjectRef<IPAddressClaim>> {
    let ns = cluster.namespace().unwrap_or_default();
    let name = cluster.name_any();
    let cluster_pools: Vec<PoolKey> = pools
        .state()
        .iter()
        .filter(|p| {
            p.namespace().as_deref() == Some(ns.as_str())
                && p.spec.cluster_name.as_deref() == Some(name.as_str())
        })
        .map(|p| PoolKey::of(p))
        .collect();
    claims
        .state()
        .iter()
        .filter(|c| c.namespace().as_deref() == Some(ns.as_str()))
        .filter(|c| {
            c.cluster_name() == Some(name.as_str())
                || claim_pool(c).is_some_and(|p| cluster_pools.contains(&p))
        })
        .map(|c| ObjectRef::from_obj(c.as_ref()))
        .collect()
}

/// A Cluster's pause change wakes its pools (`spec.clusterName`).
pub fn cluster_to_pools(
    pools: &Store<MaasIPPool>,
    cluster: &Cluster,
) -> Vec<ObjectRef<MaasIPPool>> {
    namespace_mates(pools, cluster, |p, name| {
        p.spec.cluster_name.as_deref() == Some(name)
    })
}

/// A deleting claim wakes its addresses (their finalizer goes when the claim lets them go).
pub fn claim_to_addresses(index: &UsageIndex, claim: &IPAddressClaim) -> Vec<ObjectRef<IPAddress>> {
    if claim.metadata.deletion_timestamp.is_none() {
        return Vec::new();
    }
    let ns = claim.namespace().unwrap_or_default();
    index
        .claim_addresses(&ns, &claim.name_any())
        .into_iter()
        .map(|e| ObjectRef::new(&e.name).within(&ns))
        .collect()
}

/// Predicate: what of a pool matters to its claims (spec generation, pause annotation,
/// deletion, cluster) — not its status, which changes with every allocation.
pub fn pool_change(pool: &MaasIPPool) -> Option<u64> {
    Some(hash_of((
        pool.metadata.uid.as_deref(),
        pool.metadata.generation,
        pool.annotations().contains_key(ANNOTATION_PAUSED),
        pool.metadata.deletion_timestamp.is_some(),
    )))
}

/// Predicate: only a Cluster's pause matters here.
pub fn cluster_pause(cluster: &Cluster) -> Option<u64> {
    Some(hash_of((
        cluster.metadata.uid.as_deref(),
        cluster.is_paused(),
    )))
}

#[cfg(test)]
#[path = "watch_tests.rs"]
mod tests;
