//! The machines MAAS is changing and the hosts waiting for them: filled by the host controller,
//! read by the batched observation ([`crate::host::watch`]). Plain state, no I/O.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use capmaas_api::MaasHost;
use kube::runtime::reflector::ObjectRef;

#[derive(Debug, Default)]
struct State {
    /// System id → the host waiting for it.
    watched: HashMap<String, ObjectRef<MaasHost>>,
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

    /// `host` waits for MAAS to change `system_id`.
    pub fn watch(&self, system_id: &str, host: ObjectRef<MaasHost>) {
        self.lock().watched.insert(system_id.to_owned(), host);
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
        state.watched.retain(|_, host| keep(host));
        let State { watched, unseen } = &mut *state;
        unseen.retain(|id| watched.contains_key(id));
    }

    /// The observed machines, ordered by system id (stable batches).
    pub(crate) fn snapshot(&self) -> Vec<(String, ObjectRef<MaasHost>)> {
        let mut all: Vec<_> = self
            .lock()
            .watched
            .iter()
            .map(|(id, host)| (id.clone(), host.clone()))
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
