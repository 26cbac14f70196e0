//! What this process knows about the addresses of every MaasIPPool, kept up to date from the
//! `IPAddress` watch: which object holds which address of which pool for which claim, one
//! [`Allocator`] per pool built lazily from the pool's [`PoolLayout`], and short-lived
//! reservations for addresses whose `IPAddress` is being created by a reconcile of this process.
//!
//! Synchronous and free of I/O (the controller holds it behind a mutex and never awaits while
//! holding it). It is a cache: the API server decides uniqueness (the `IPAddress` name is the
//! lock), so a stale index costs a `409` and a second try, never a double booking.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use capmaas_api::MaasIPPool;
use capmaas_api::capi_ipam::IPAddress;
use capmaas_api::ipam::AllocationStrategy;
use kube::ResourceExt;

use super::allocator::Allocator;
use super::layout::{LayoutError, PoolLayout};

/// How long a reservation holds an address without its `IPAddress` showing up in the watch
/// (after a `409`, the address belongs to someone else; the watch normally says so sooner).
pub const RESERVATION_TTL: Duration = Duration::from_secs(60);
/// How many deleted `IPAddress` UIDs are remembered, so that a late note of a creation cannot
/// resurrect an object the watch already saw go.
const TOMBSTONES: usize = 4096;

/// A MaasIPPool: namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PoolKey {
    /// Namespace of the pool (and of its claims and addresses).
    pub namespace: String,
    /// Pool name.
    pub name: String,
}

impl PoolKey {
    /// The key of `pool`.
    pub fn of(pool: &MaasIPPool) -> Self {
        Self {
            namespace: pool.namespace().unwrap_or_default(),
            name: pool.name_any(),
        }
    }

    /// The pool an `IPAddress` comes from, when it is a MaasIPPool.
    pub fn of_address(address: &IPAddress) -> Option<Self> {
        address.spec.pool_ref.is_maas_ip_pool().then(|| Self {
            namespace: address.namespace().unwrap_or_default(),
            name: address.spec.pool_ref.name.clone(),
        })
    }
}

/// The layout of a pool, or why its spec cannot be served.
pub type LayoutResult = Result<Arc<PoolLayout>, LayoutError>;

/// One `IPAddress` of a MaasIPPool, as the index keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddressEntry {
    /// Object name.
    pub name: String,
    /// Object UID.
    pub uid: Option<String>,
    /// The pool.
    pub pool: PoolKey,
    /// `spec.claimRef.name`.
    pub claim: String,
    /// UID of the `IPAddressClaim` owner reference, if there is one.
    pub claim_uid: Option<String>,
    /// `spec.address`, when it parses.
    pub address: Option<IpAddr>,
    /// `spec.prefix`.
    pub prefix: i32,
    /// Whether the object is being deleted.
    pub deleting: bool,
}

impl AddressEntry {
    /// The entry for `address`, when it comes from a MaasIPPool.
    pub fn of(address: &IPAddress) -> Option<Self> {
        let pool = PoolKey::of_address(address)?;
        let claim_uid = address
            .owner_references()
            .iter()
            .find(|o| o.kind == "IPAddressClaim")
            .map(|o| o.uid.clone());
        Some(Self {
            name: address.name_any(),
            uid: address.uid(),
            pool,
            claim: address.spec.claim_ref.name.clone(),
            claim_uid,
            address: address.spec.address.parse().ok(),
            prefix: address.spec.prefix,
            deleting: address.metadata.deletion_timestamp.is_some(),
        })
    }
}

#[derive(Debug, Default)]
struct PoolUsage {
    /// Objects holding each address.
    counts: HashMap<IpAddr, u32>,
    /// Objects of the pool (also those whose address does not parse).
    objects: usize,
    /// Addresses this process is creating an `IPAddress` for, since when.
    reserved: HashMap<IpAddr, Instant>,
    /// The layout, and the `(uid, generation)` of the spec it was built from.
    layout: Option<((String, i64), LayoutResult)>,
    /// The allocator of the current layout, built on first use.
    allocator: Option<Allocator>,
}

impl PoolUsage {
    fn held(&self, addr: IpAddr) -> bool {
        self.counts.contains_key(&addr) || self.reserved.contains_key(&addr)
    }

    fn allocator(&mut self) -> Option<&mut Allocator> {
        if self.allocator.is_none() {
            let Some((_, Ok(layout))) = &self.layout else {
                return None;
            };
            let held = self.counts.keys().chain(self.reserved.keys()).copied();
            self.allocator = Some(Allocator::with_used(layout.clone(), held));
        }
        self.allocator.as_mut()
    }

    fn add(&mut self, addr: Option<IpAddr>) {
        self.objects += 1;
        let Some(addr) = addr else { return };
        let count = self.counts.entry(addr).or_insert(0);
        *count += 1;
        if *count == 1 {
            // A reservation of ours turns into the object it was made for.
            if self.reserved.remove(&addr).is_none()
                && let Some(a) = self.allocator.as_mut()
            {
                a.take(addr);
            }
        }
    }

    fn sub(&mut self, addr: Option<IpAddr>) {
        self.objects = self.objects.saturating_sub(1);
        let Some(addr) = addr else { return };
        let Some(count) = self.counts.get_mut(&addr) else {
            return;
        };
        *count -= 1;
        if *count == 0 {
            self.counts.remove(&addr);
            if !self.reserved.contains_key(&addr)
                && let Some(a) = self.allocator.as_mut()
            {
                a.put(addr);
            }
        }
    }

    fn unreserve(&mut self, addr: IpAddr) {
        if self.reserved.remove(&addr).is_some()
            && !self.counts.contains_key(&addr)
            && let Some(a) = self.allocator.as_mut()
        {
            a.put(addr);
        }
    }

    fn expire(&mut self, now: Instant) {
        let stale: Vec<IpAddr> = self
            .reserved
            .iter()
            .filter(|(_, since)| now.saturating_duration_since(**since) >= RESERVATION_TTL)
            .map(|(a, _)| *a)
            .collect();
        for addr in stale {
            self.unreserve(addr);
        }
    }
}

/// Counts for a pool's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolCounts {
    /// Distinct addresses held by `IPAddress` objects of the pool.
    pub in_use: u128,
    /// Allocatable addresses nobody holds.
    pub free: u128,
}

/// The addresses of every MaasIPPool this process watches.
#[derive(Debug, Default)]
pub struct UsageIndex {
    /// `(namespace, name)` of each `IPAddress` of a MaasIPPool.
    objects: HashMap<(String, String), AddressEntry>,
    pools: HashMap<PoolKey, PoolUsage>,
    /// `(namespace, claim)` → names of the `IPAddress` objects naming that claim.
    claims: HashMap<(String, String), BTreeSet<String>>,
    gone: HashSet<String>,
    gone_order: VecDeque<String>,
}

impl UsageIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records `address` (created or changed); other pools' kinds are ignored.
    pub fn apply(&mut self, address: &IPAddress) {
        let Some(entry) = AddressEntry::of(address) else {
            return;
        };
        let key = (entry.pool.namespace.clone(), entry.name.clone());
        if let Some(old) = self.objects.get(&key)
            && old.pool == entry.pool
            && old.address == entry.address
            && old.claim == entry.claim
        {
            self.objects.insert(key, entry);
            return;
        }
        self.forget(&key);
        self.pools
            .entry(entry.pool.clone())
            .or_default()
            .add(entry.address);
        self.claims
            .entry((entry.pool.namespace.clone(), entry.claim.clone()))
            .or_default()
            .insert(entry.name.clone());
        self.objects.insert(key, entry);
    }

    /// Records an `IPAddress` this process just created, unless the watch already saw it go.
    pub fn note_created(&mut self, address: &IPAddress) {
        if address.uid().is_some_and(|uid| self.gone.contains(&uid)) {
            return;
        }
        self.apply(address);
    }

    /// Forgets a deleted `IPAddress`; returns its pool when it was one of ours.
    pub fn remove(&mut self, address: &IPAddress) -> Option<PoolKey> {
        if let Some(uid) = address.uid() {
            if self.gone_order.len() >= TOMBSTONES
                && let Some(old) = self.gone_order.pop_front()
            {
                self.gone.remove(&old);
            }
            if self.gone.insert(uid.clone()) {
                self.gone_order.push_back(uid);
            }
        }
        let key = (address.namespace().unwrap_or_default(), address.name_any());
        self.forget(&key)
    }

    fn forget(&mut self, key: &(String, String)) -> Option<PoolKey> {
        let old = self.objects.remove(key)?;
        if let Some(usage) = self.pools.get_mut(&old.pool) {
            usage.sub(old.address);
        }
        let claim_key = (old.pool.namespace.clone(), old.claim.clone());
        if let Some(names) = self.claims.get_mut(&claim_key) {
            names.remove(&old.name);
            if names.is_empty() {
                self.claims.remove(&claim_key);
            }
        }
        Some(old.pool)
    }

    /// Replaces everything known about objects by `addresses` (after a full list); layouts
    /// and reservations are kept, allocators are rebuilt on next use.
    pub fn reset<'a>(&mut self, addresses: impl IntoIterator<Item = &'a IPAddress>) {
        self.objects.clear();
        self.claims.clear();
        for usage in self.pools.values_mut() {
            usage.counts.clear();
            usage.objects = 0;
            usage.allocator = None;
        }
        for address in addresses {
            self.apply(address);
        }
    }

    /// The layout of `pool`'s current spec, built when the spec changed since the last call.
    pub fn layout(&mut self, pool: &MaasIPPool) -> LayoutResult {
        let version = (
            pool.uid().unwrap_or_default(),
            pool.metadata.generation.unwrap_or_default(),
        );
        let usage = self.pools.entry(PoolKey::of(pool)).or_default();
        match &usage.layout {
            Some((v, layout)) if *v == version => layout.clone(),
            _ => {
                let layout = PoolLayout::from_spec(&pool.spec).map(Arc::new);
                let changed = usage.layout.as_ref().is_none_or(|(_, old)| *old != layout);
                if changed {
                    usage.allocator = None;
                }
                usage.layout = Some((version, layout.clone()));
                layout
            }
        }
    }

    /// Picks a free address of `pool` with `strategy` and reserves it. `None` when the pool is
    /// exhausted or has no valid layout yet (call [`layout`](Self::layout) first).
    pub fn allocate(
        &mut self,
        pool: &PoolKey,
        strategy: AllocationStrategy,
        random: u128,
        now: Instant,
    ) -> Option<IpAddr> {
        let usage = self.pools.get_mut(pool)?;
        usage.expire(now);
        let addr = usage.allocator()?.allocate(strategy, random)?;
        usage.reserved.insert(addr, now);
        Some(addr)
    }

    /// Reserves `addr` of `pool` (a pre-allocation) unless an object or a reservation holds it.
    pub fn reserve(&mut self, pool: &PoolKey, addr: IpAddr, now: Instant) -> bool {
        let usage = self.pools.entry(pool.clone()).or_default();
        usage.expire(now);
        if usage.held(addr) {
            return false;
        }
        if let Some(a) = usage.allocator() {
            a.take(addr);
        }
        usage.reserved.insert(addr, now);
        true
    }

    /// Drops the reservation of `addr` (its `IPAddress` could not be created).
    pub fn unreserve(&mut self, pool: &PoolKey, addr: IpAddr) {
        if let Some(usage) = self.pools.get_mut(pool) {
            usage.unreserve(addr);
        }
    }

    /// The `IPAddress` objects naming claim `claim` of `namespace`.
    pub fn claim_addresses(&self, namespace: &str, claim: &str) -> Vec<AddressEntry> {
        self.claims
            .get(&(namespace.to_owned(), claim.to_owned()))
            .into_iter()
            .flatten()
            .filter_map(|name| self.objects.get(&(namespace.to_owned(), name.clone())))
            .cloned()
            .collect()
    }

    /// The `IPAddress` object named `name` in `namespace`, when it is one of a MaasIPPool.
    pub fn entry(&self, namespace: &str, name: &str) -> Option<&AddressEntry> {
        self.objects.get(&(namespace.to_owned(), name.to_owned()))
    }

    /// Number of `IPAddress` objects of `pool`.
    pub fn objects(&self, pool: &PoolKey) -> usize {
        self.pools.get(pool).map_or(0, |u| u.objects)
    }

    /// In-use and free counts of `pool`, once its layout is known and valid.
    /// Addresses in use that the pool's current layout would not hand out (outside its ranges,
    /// excluded, a network/broadcast/gateway address), sorted; pre-allocated ones are where
    /// they belong. Empty while the layout is invalid.
    pub fn stranded(&self, pool: &PoolKey) -> Vec<IpAddr> {
        let Some(usage) = self.pools.get(pool) else {
            return Vec::new();
        };
        let Some((_, Ok(layout))) = &usage.layout else {
            return Vec::new();
        };
        let mut out: Vec<IpAddr> = usage
            .counts
            .keys()
            .copied()
            .filter(|a| {
                !layout.is_allocatable(*a) && !layout.pre_allocations().values().any(|p| p == a)
            })
            .collect();
        out.sort_unstable_by_key(|a| (a.is_ipv6(), super::layout::to_u128(*a)));
        out
    }

    pub fn counts(&mut self, pool: &PoolKey) -> Option<PoolCounts> {
        let usage = self.pools.get_mut(pool)?;
        let in_use = usage.counts.len() as u128;
        let free = usage.allocator()?.free_count();
        Some(PoolCounts { in_use, free })
    }
}

#[cfg(test)]
#[path = "index_tests.rs"]
mod tests;
