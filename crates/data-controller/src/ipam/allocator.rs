//! The allocator index of one pool: its free addresses as an ordered set of disjoint
//! intervals, so that finding, taking and returning an address costs `O(S · log F)` (S the
//! pool's segments, at most a few hundred; F the free intervals) instead of a walk over every
//! address from the start of the range (Metal3 IPAM's `O(pool size)` per claim).
//!
//! Pure and synchronous: the controller keeps one per pool, built from the pool's
//! [`PoolLayout`] and the addresses its `IPAddress` objects hold, and updates it from the watch.
//! It decides nothing about uniqueness: the API server does (the `IPAddress` name is the lock);
//! the index only makes the first guess right almost every time.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use capmaas_api::ipam::AllocationStrategy;

use super::layout::{Family, PoolLayout, from_u128, to_u128};

/// Free addresses of one pool.
#[derive(Clone, Debug)]
pub struct Allocator {
    layout: Arc<PoolLayout>,
    /// Free intervals `start → end` (inclusive), disjoint and never adjacent to each other
    /// unless a segment boundary separates them.
    free: BTreeMap<u128, u128>,
    free_count: u128,
}

impl Allocator {
    /// Every allocatable address of `layout` free.
    pub fn new(layout: Arc<PoolLayout>) -> Self {
        Self::with_used(layout, std::iter::empty())
    }

    /// The addresses of `layout` except `used` (addresses outside the layout are ignored).
    /// `O(S + U log U)`.
    pub fn with_used(layout: Arc<PoolLayout>, used: impl IntoIterator<Item = IpAddr>) -> Self {
        let family = layout.family();
        let mut used: Vec<u128> = used
            .into_iter()
            .filter(|ip| Family::of(*ip) == family)
            .map(to_u128)
            .collect();
        used.sort_unstable();
        used.dedup();
        let mut free = BTreeMap::new();
        let mut free_count = 0u128;
        for seg in layout.segments() {
            let mut cursor = Some(seg.start);
            let from = used.partition_point(|&u| u < seg.start);
            for &u in used[from..].iter().take_while(|&&u| u <= seg.end) {
                let Some(c) = cursor else { break };
                if u > c {
                    free.insert(c, u - 1);
                    free_count = free_count.saturating_add(u - c);
                }
                cursor = u.checked_add(1).filter(|&n| n <= seg.end);
            }
            if let Some(c) = cursor {
                free.insert(c, seg.end);
                free_count = free_count.saturating_add((seg.end - c).saturating_add(1));
            }
        }
        Self {
            layout,
            free,
            free_count,
        }
    }

    /// The layout this index serves.
    pub fn layout(&self) -> &Arc<PoolLayout> {
        &self.layout
    }

    /// Number of free addresses (saturating at `u128::MAX`).
    pub fn free_count(&self) -> u128 {
        self.free_count
    }

    /// Number of free intervals (a measure of fragmentation).
    pub fn intervals(&self) -> usize {
        self.free.len()
    }

    /// Whether `addr` is allocatable and free.
    pub fn is_free(&self, addr: IpAddr) -> bool {
        Family::of(addr) == self.layout.family() && self.containing(to_u128(addr)).is_some()
    }

    /// The free interval holding `v`.
    fn containing(&self, v: u128) -> Option<(u128, u128)> {
        self.free
            .range(..=v)
            .next_back()
            .filter(|(_, e)| **e >= v)
            .map(|(s, e)| (*s, *e))
    }

    /// The lowest free address in `lo..=hi`.
    fn first_free_in(&self, lo: u128, hi: u128) -> Option<u128> {
        if self.containing(lo).is_some() {
            return Some(lo);
        }
        self.free.range(lo..=hi).next().map(|(s, _)| *s)
    }

    /// The address `strategy` picks next, without taking it. `random` is only used by
    /// [`AllocationStrategy::Random`]: any uniformly drawn number (the caller's RNG keeps this
    /// function pure).
    ///
    /// Sequential: the lowest free address of the first range (in spec order) that has one.
    /// Random: the first free address at or after a uniformly drawn allocatable position,
    /// wrapping around the pool.
    pub fn next(&self, strategy: AllocationStrategy, random: u128) -> Option<IpAddr> {
        if self.free_count == 0 {
            return None;
        }
        let family = self.layout.family();
        let segments = self.layout.segments();
        let found = match strategy {
            AllocationStrategy::Sequential => segments
                .iter()
                .find_map(|s| self.first_free_in(s.start, s.end)),
            AllocationStrategy::Random => {
                let (k, start) = self.position(random % self.layout.positions().max(1));
                let seg = segments[k];
                self.first_free_in(start, seg.end)
                    .or_else(|| {
                        segments[k + 1..]
                            .iter()
                            .chain(&segments[..k])
                            .find_map(|s| self.first_free_in(s.start, s.end))
                    })
                    .or_else(|| self.first_free_in(seg.start, start))
            }
        };
        found.map(|v| from_u128(family, v))
    }

    /// Segment index and address of allocatable position `pos` (in allocation order).
    fn position(&self, mut pos: u128) -> (usize, u128) {
        for (k, s) in self.layout.segments().iter().enumerate() {
            if pos < s.len() {
                return (k, s.start + pos);
            }
            pos -= s.len();
        }
        (0, self.layout.segments().first().map_or(0, |s| s.start))
    }

    /// Picks the next address as [`next`](Self::next) does and takes it.
    pub fn allocate(&mut self, strategy: AllocationStrategy, random: u128) -> Option<IpAddr> {
        let ip = self.next(strategy, random)?;
        self.take(ip);
        Some(ip)
    }

    /// Marks `addr` used; returns whether it was free (addresses outside the layout never are).
    pub fn take(&mut self, addr: IpAddr) -> bool {
        if Family::of(addr) != self.layout.family() {
            return false;
        }
        let v = to_u128(addr);
        let Some((s, e)) = self.containing(v) else {
            return false;
        };
        self.free.remove(&s);
        if s < v {
            self.free.insert(s, v - 1);
        }
        if v < e {
            self.free.insert(v + 1, e);
        }
        self.free_count = self.free_count.saturating_sub(1);
        true
    }

    /// Marks `addr` free again; returns whether it was used and allocatable.
    pub fn put(&mut self, addr: IpAddr) -> bool {
        if !self.layout.is_allocatable(addr) {
            return false;
        }
        let v = to_u128(addr);
        if self.containing(v).is_some() {
            return false;
        }
        let mut start = v;
        let mut end = v;
        // Numerically adjacent free addresses are both allocatable, so the union is too.
        if let Some(prev) = v.checked_sub(1)
            && let Some((s, _)) = self.containing(prev)
        {
            self.free.remove(&s);
            start = s;
        }
        if let Some(next) = v.checked_add(1)
            && let Some(e) = self.free.remove(&next)
        {
            end = e;
        }
        self.free.insert(start, end);
        self.free_count = self.free_count.saturating_add(1);
        true
    }
}

#[cfg(test)]
#[path = "allocator_tests.rs"]
mod tests;
