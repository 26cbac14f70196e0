//! The machines MAAS is changing and the hosts waiting for them: filled by the host controller,
//! read by the batched observation ([`crate::host::watch`]). Plain state, no I/O.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use capmaas_api::MaasHost;
use kube::runtime::reflector::ObjectRef;

/// A machine is observed at least once per this share of the time it has been in flight.
const AGE_SHARE: f64 = 8.0;

/// At most this many observation intervals pass between two observations of a machine.
pub const MAX_STRETCH: u64 = 8;

#[derive(Debug)]
struct Watched {
    host: ObjectRef<MaasHost>,
    since: Instant,
}

#[derive(Debug, Default)]
struct State {
    /// System id → the host waiting for it, and since when.
    watched: HashMap<String, Watched>,
    /// Watched machines the latest list did not show.
    unseen: HashSet<String>,
}

/// The machines in flight and the hosts waiting for them; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct InFlight {
    state: Arc<Mutex<State>>,
}

impl InFlight {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `host` waits for MAAS to change `system_id`. A machine already observed keeps the
    /// moment it went in flight (hosts register again at every reconcile while they wait).
    pub fn watch(&self, system_id: &str, host: ObjectRef<MaasHost>) {
        self.watch_since(system_id, host, Instant::now());
    }

    fn watch_since(&self, system_id: &str, host: ObjectRef<MaasHost>, now: Instant) {
        self.lock()
            .watched
            .entry(system_id.to_owned())
            .and_modify(|w| w.host.clone_from(&host))
            .or_insert(Watched { host, since: now });
    }

    /// Nothing is in flight for `system_id` any more.
    pub fn forget(&self, system_id: &str) {
        let mut state = self.lock();
        state.watched.remove(system_id);
        state.unseen.remove(system_id);
    }

    /// Whether `system_id` is observed.
    pub fn is_watched(&self, system_id: &str) -> bool {
        self.lock().watched.contains_key(system_id)
    }

    /// Whether the latest list did not show `system_id` (then it must be read directly);
    /// clears the flag.
    pub fn take_unseen(&self, system_id: &str) -> bool {
        self.lock().unseen.remove(system_id)
    }

    /// Number of machines observed.
    pub fn len(&self) -> usize {
        self.lock().watched.len()
    }

    /// Whether nothing is observed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops the entries whose host `keep` rejects (deleted hosts).
    pub(crate) fn retain(&self, keep: impl Fn(&ObjectRef<MaasHost>) -> bool) {
        let mut state = self.lock();
        state.watched.retain(|_, w| keep(&w.host));
        let State { watched, unseen } = &mut *state;
        unseen.retain(|id| watched.contains_key(id));
    }

    /// The machines to observe at observation `tick` (counted from 0, one per `interval`),
    /// ordered by system id (stable batches): those whose [`stretch`] divides `tick`. Stretches are powers of
    /// two, so every machine due at a tick shares one list call with all machines of smaller
    /// stretch, and a tick with only old machines in flight due at none costs no call at all.
    pub(crate) fn due(
        &self,
        tick: u64,
        interval: Duration,
        now: Instant,
    ) -> Vec<(String, ObjectRef<MaasHost>)> {
        let mut all: Vec<_> = self
            .lock()
            .watched
            .iter()
            .filter(|(_, w)| {
                tick.is_multiple_of(stretch(now.saturating_duration_since(w.since), interval))
            })
            .map(|(id, w)| (id.clone(), w.host.clone()))
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    /// Flags `system_id` as not shown by the latest list, if it is still observed.
    pub(crate) fn mark_unseen(&self, system_id: &str) {
        let mut state = self.lock();
        if state.watched.contains_key(system_id) {
            state.unseen.insert(system_id.to_owned());
        }
    }
}

/// Observation intervals between two observations of a machine in flight for `age`: 1 while
/// it is young, then the largest power of two that keeps the wait under an eighth of its age,
/// at most [`MAX_STRETCH`].
///
/// MAAS changes a machine at the start of an operation (a release, a power change) within
/// seconds, but a deployment takes minutes; a list of 200 machines costs a region worker
/// seconds (20 ms per machine listed, docs/maas-sim.md), and listing them every interval for
/// ten minutes keeps workers busy for nothing. A machine is seen Deployed at most an eighth of
/// its deployment time late, and never later than [`MAX_STRETCH`] intervals.
pub fn stretch(age: Duration, interval: Duration) -> u64 {
    let interval = interval.as_secs_f64();
    if interval <= 0.0 {
        return 1;
    }
    let intervals = age.as_secs_f64() / (interval * AGE_SHARE);
    let mut stretch: u32 = 1;
    while u64::from(stretch) < MAX_STRETCH && f64::from(stretch * 2) <= intervals {
        stretch *= 2;
    }
    u64::from(stretch)
}

/// The watched system ids a list did not show, given the ids it showed.
pub fn not_shown<'a, S: std::hash::BuildHasher>(
    asked: impl IntoIterator<Item = &'a str>,
    shown: &HashSet<&str, S>,
) -> Vec<&'a str> {
    asked.into_iter().filter(|id| !shown.contains(id)).collect()
}

#[cfg(test)]
#[path = "in_flight_tests.rs"]
mod tests;
