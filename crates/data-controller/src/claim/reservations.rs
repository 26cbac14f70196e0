//! Indexes this process is taking, kept out of its own next picks (see [`Reservations`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The lowest index not in `used` (indexes start at 0).
pub fn lowest_free(used: &BTreeSet<i32>) -> i32 {
    let mut candidate = 0;
    for &i in used.range(0..) {
        if i != candidate {
            break;
        }
        candidate = candidate.saturating_add(1);
    }
    candidate
}

/// How long an index this process took stays out of its own picks; by then the watch has
/// brought the MaasData into the cache (or the create failed and the index is free again).
const RESERVATION_HOLD: Duration = Duration::from_secs(30);

/// Indexes this process has just taken or is taking, per (namespace, template). The cache
/// learns of a new MaasData only through the watch, so concurrent reconciles of one template
/// would all try the same lowest index and walk up one 409 at a time. A hint only: the API
/// server still decides who has an index.
#[derive(Debug, Default)]
pub struct Reservations(Mutex<BTreeMap<(String, String), BTreeMap<i32, Instant>>>);

impl Reservations {
    /// The lowest index neither in `used` nor reserved, now reserved (expired reservations of
    /// the template are dropped first).
    pub fn take(&self, ns: &str, template: &str, used: &BTreeSet<i32>, now: Instant) -> i32 {
        let mut all = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let held = all.entry((ns.to_owned(), template.to_owned())).or_default();
        held.retain(|_, since| now.saturating_duration_since(*since) < RESERVATION_HOLD);
        let mut taken = used.clone();
        taken.extend(held.keys().copied());
        let index = lowest_free(&taken);
        held.insert(index, now);
        index
    }

    /// Gives back an index whose create failed without taking it.
    pub fn give_back(&self, ns: &str, template: &str, index: i32) {
        let mut all = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(held) = all.get_mut(&(ns.to_owned(), template.to_owned())) {
            held.remove(&index);
        }
    }
}

#[cfg(test)]
#[path = "reservations_tests.rs"]
mod tests;
