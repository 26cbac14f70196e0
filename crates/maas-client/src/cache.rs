//! The latest MAAS view of every imported machine, shared by the inventory sync (which fills
//! it with one list call per inventory), the observation of machines in flight (one list for
//! all of them) and the host controller (which reads it instead of asking MAAS, and adds the
//! answers of its own calls).
//!
//! An answer only replaces an entry if its request was sent after the entry's: a slow list
//! that started before a deploy must not roll the cache back to `Ready`.
//!
//! Each entry remembers the inventory whose latest list showed it. A machine that list did not
//! show is [`Lookup::Unlisted`], which says nothing about whether it still exists: it may have
//! been re-tagged, moved to another pool or zone, or the answer may have been wrong. Only a
//! direct read of the system id can tell (a 404 is gone).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use maas_api_client::Machine;

#[derive(Debug)]
struct Entry {
    machine: Arc<Machine>,
    sent_at: Instant,
    inventory: Option<String>,
    /// A call on this machine failed without a clear answer (MAAS may have acted on it): the
    /// view is not to be acted upon until a newer answer replaces it.
    stale: bool,
}

#[derive(Debug, Default)]
struct State {
    machines: HashMap<String, Entry>,
    synced_inventories: HashSet<String>,
}

/// What the cache knows about one machine.
#[derive(Debug, Clone, PartialEq)]
pub enum Lookup {
    /// The latest MAAS view, from the inventory's list or a later answer.
    Present(Arc<Machine>),
    /// The inventory was synced and its latest list did not show the machine: read it directly
    /// before believing anything (it is gone only if MAAS answers 404 for its system id).
    Unlisted,
    /// The inventory has not been synced since start: nothing is known yet.
    Unknown,
}

/// Shared machine cache; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct MachineCache {
    state: Arc<Mutex<State>>,
    /// The VM hosts of the latest listing, beside the machines ([`crate::vm_hosts`]).
    pub vm_hosts: crate::vm_hosts::VmHostCache,
}

impl MachineCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records the answer of a request sent at `sent_at`. Returns whether the entry changed.
    pub fn observe(&self, machine: Machine, sent_at: Instant) -> bool {
        let mut state = self.lock();
        let inventory = state
            .machines
            .get(&machine.system_id)
            .and_then(|e| e.inventory.clone());
        insert(&mut state, machine, sent_at, inventory)
    }

    /// Replaces the machines of inventory `key` (`namespace/name`) with the answer of a list
    /// sent at `sent_at`; returns the system ids whose view changed, vanished ones included.
    pub fn sync_inventory(
        &self,
        key: &str,
        machines: Vec<Machine>,
        sent_at: Instant,
    ) -> Vec<String> {
        let mut state = self.lock();
        let listed: HashSet<String> = machines.iter().map(|m| m.system_id.clone()).collect();
        let mut changed = Vec::new();
        let vanished: Vec<String> = state
            .machines
            .iter()
            .filter(|(id, e)| {
                e.inventory.as_deref() == Some(key) && !listed.contains(*id) && e.sent_at <= sent_at
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in vanished {
            state.machines.remove(&id);
            changed.push(id);
        }
        for machine in machines {
            let id = machine.system_id.clone();
            if insert(&mut state, machine, sent_at, Some(key.to_owned())) {
                changed.push(id);
            }
        }
        state.synced_inventories.insert(key.to_owned());
        changed
    }

    /// Forgets an inventory (deleted).
    pub fn forget_inventory(&self, key: &str) {
        let mut state = self.lock();
        state.synced_inventories.remove(key);
        state
            .machines
            .retain(|_, e| e.inventory.as_deref() != Some(key));
    }

    /// The view of `system_id`, judged against inventory `key`: present only while the
    /// inventory's latest list showed it (or, before its first list, from any answer).
    pub fn lookup(&self, key: &str, system_id: &str) -> Lookup {
        let state = self.lock();
        let synced = state.synced_inventories.contains(key);
        match state.machines.get(system_id) {
            Some(e) if !synced || e.inventory.as_deref() == Some(key) => {
                Lookup::Present(e.machine.clone())
            }
            _ if synced => Lookup::Unlisted,
            _ => Lookup::Unknown,
        }
    }

    /// The latest view of `system_id`, whoever listed or read it.
    pub fn get(&self, system_id: &str) -> Option<Arc<Machine>> {
        self.lock()
            .machines
            .get(system_id)
            .map(|e| e.machine.clone())
    }

    /// Forgets `system_id`: MAAS answered 404 for it. Until a list shows it again, hosts read
    /// it directly.
    pub fn forget_machine(&self, system_id: &str) {
        self.lock().machines.remove(system_id);
    }

    /// Marks the view of `system_id` as not to be acted upon: a call on it failed without a
    /// clear answer, and MAAS may have carried it out. The next answer clears the mark.
    pub fn mark_stale(&self, system_id: &str) {
        if let Some(e) = self.lock().machines.get_mut(system_id) {
            e.stale = true;
        }
    }

    /// Whether the view of `system_id` is marked stale ([`Self::mark_stale`]).
    pub fn is_stale(&self, system_id: &str) -> bool {
        self.lock().machines.get(system_id).is_some_and(|e| e.stale)
    }

    /// How long ago the request behind `system_id`'s entry was sent.
    pub fn age(&self, system_id: &str) -> Option<std::time::Duration> {
        self.lock()
            .machines
            .get(system_id)
            .map(|e| e.sent_at.elapsed())
    }

    /// Whether inventory `key` has been synced since start.
    pub fn is_synced(&self, key: &str) -> bool {
        self.lock().synced_inventories.contains(key)
    }

    /// System ids of the cached machines composed on VM host `vm_host_id` (MAAS's `pod`).
    pub fn composed_on(&self, vm_host_id: i64) -> Vec<String> {
        self.lock()
            .machines
            .values()
            .filter(|e| e.machine.vm_host_id() == Some(vm_host_id))
            .map(|e| e.machine.system_id.clone())
            .collect()
    }

    /// Number of cached machines.
    pub fn len(&self) -> usize {
        self.lock().machines.len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn insert(
    state: &mut State,
    machine: Machine,
    sent_at: Instant,
    inventory: Option<String>,
) -> bool {
    match state.machines.get_mut(&machine.system_id) {
        Some(e) if e.sent_at > sent_at => {
            // An older list still shows which inventory lists the machine.
            if inventory.is_some() {
                e.inventory = inventory;
            }
            false
        }
        Some(e) => {
            e.sent_at = sent_at;
            e.stale = false;
            if inventory.is_some() {
                e.inventory = inventory;
            }
            if *e.machine == machine {
                false
            } else {
                e.machine = Arc::new(machine);
                true
            }
        }
        None => {
            state.machines.insert(
                machine.system_id.clone(),
                Entry {
                    machine: Arc::new(machine),
                    sent_at,
                    inventory,
                    stale: false,
                },
            );
            true
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::time::Duration;

    pub(crate) fn machine(id: &str, status: i64) -> Machine {
        serde_json::from_value(serde_json::json!({
            "system_id": id,
            "hostname": format!("h-{id}"),
            "status": status,
            "status_name": "x",
            "power_state": "off",
            "architecture": "amd64/generic",
        }))
        .unwrap()
    }

    #[test]
    fn older_answers_never_replace_newer_ones() {
        let cache = MachineCache::new();
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_millis(10);
        assert_eq!(cache.lookup("ns/inv", "a"), Lookup::Unknown);
        assert!(cache.observe(machine("a", 9), t1));
        let changed = cache.sync_inventory("ns/inv", vec![machine("a", 4), machine("b", 4)], t0);
        assert_eq!(changed, vec!["b".to_owned()]);
        let Lookup::Present(a) = cache.lookup("ns/inv", "a") else {
            panic!()
        };
        assert_eq!(
            a.status.number(),
            9,
            "the deploy answer is newer than the list"
        );
        assert_eq!(cache.lookup("ns/inv", "zz"), Lookup::Unlisted);
    }

    #[test]
    fn a_stale_view_stays_stale_until_a_newer_answer() {
        let cache = MachineCache::new();
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_millis(10);
        cache.observe(machine("a", 10), t1);
        assert!(!cache.is_stale("a"));
        cache.mark_stale("a");
        assert!(cache.is_stale("a"));
        // A list sent before the failed call proves nothing about it.
        cache.sync_inventory("k", vec![machine("a", 10)], t0);
        assert!(cache.is_stale("a"));
        cache.observe(machine("a", 9), t1 + Duration::from_millis(10));
        assert!(!cache.is_stale("a"));
        assert_eq!(cache.get("a").map(|m| m.status.number()), Some(9));
        cache.mark_stale("unknown");
        assert!(!cache.is_stale("unknown"));
    }

    #[test]
    fn sync_reports_changes_and_vanished_machines() {
        let cache = MachineCache::new();
        let t0 = Instant::now();
        cache.sync_inventory("k", vec![machine("a", 4), machine("b", 4)], t0);
        let changed = cache.sync_inventory("k", vec![machine("a", 4)], t0 + Duration::from_secs(1));
        assert_eq!(changed, vec!["b".to_owned()]);
        assert_eq!(cache.lookup("k", "b"), Lookup::Unlisted);
        // A direct read of the unlisted machine does not make it listed again.
        cache.observe(machine("b", 6), t0 + Duration::from_millis(1500));
        assert_eq!(cache.lookup("k", "b"), Lookup::Unlisted);
        // Listed again: present.
        let changed = cache.sync_inventory(
            "k",
            vec![machine("a", 4), machine("b", 6)],
            t0 + Duration::from_millis(1600),
        );
        assert!(changed.is_empty(), "{changed:?}");
        assert!(matches!(cache.lookup("k", "b"), Lookup::Present(_)));
        cache.sync_inventory("k", vec![machine("a", 4)], t0 + Duration::from_millis(1700));
        let changed = cache.sync_inventory("k", vec![machine("a", 6)], t0 + Duration::from_secs(2));
        assert_eq!(changed, vec!["a".to_owned()]);
        cache.forget_inventory("k");
        assert_eq!(cache.lookup("k", "a"), Lookup::Unknown);
        assert!(cache.is_empty());
    }
}
