//! Read your own writes: the MaasMachine as our last reconcile of it left it, for the next
//! reconcile that starts before the watch delivered those writes; and the MaasHost specs we
//! wrote, so that a cached host is used only once it shows them ([`HostWrites`]).
//!
//! A reconcile often writes twice in a row (the finalizer, then the status). The first write's
//! watch event wakes the next reconcile while the cache still holds that intermediate copy; its
//! status would be computed from the copy and sent under the copy's resourceVersion: a 409
//! (measured: about one wasted status write per machine at 200 machines), then a fresh read of
//! everything. Instead the reconcile starts from our newer copy, which usually needs no write
//! at all.
//!
//! Only when the cache shows a version this process saw *before* its last write is our copy
//! known to be newer; any other version (another writer, or the cache caught up) wins, so a
//! write of someone else is never hidden. Writes still carry their resourceVersion: nothing
//! here can make a stale write succeed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use capmaas_api::host::MaasHostSpec;
use capmaas_api::{MaasHost, MaasMachine};
use kube::ResourceExt;

/// How long a remembered copy is kept when the cache never shows our write (the machine was
/// deleted meanwhile): long past any watch delay.
const KEEP: Duration = Duration::from_secs(600);

#[derive(Debug)]
struct Remembered {
    latest: MaasMachine,
    /// Versions seen in the reconcile before `latest` was written: older than it.
    superseded: Vec<String>,
    at: Instant,
}

/// The last copy of each MaasMachine a reconcile of this process wrote, by UID; clones share it.
#[derive(Debug, Default, Clone)]
pub struct OwnWrites {
    by_uid: Arc<Mutex<HashMap<String, Remembered>>>,
}

impl OwnWrites {
    /// Records how a reconcile left `latest`, having seen the versions `seen` (in order) before.
    pub fn remember(&self, latest: &MaasMachine, seen: &[String]) {
        let (Some(uid), Some(rv)) = (latest.uid(), latest.resource_version()) else {
            return;
        };
        let superseded: Vec<String> = seen.iter().filter(|v| **v != rv).cloned().collect();
        let mut map = self.lock();
        if superseded.is_empty() {
            map.remove(&uid);
            return;
        }
        let now = Instant::now();
        map.retain(|_, r| now.duration_since(r.at) < KEEP);
        map.insert(
            uid,
            Remembered {
                latest: latest.clone(),
                superseded,
                at: now,
            },
        );
    }

    /// The copy to start a reconcile from: ours when `cached` is a version we know we
    /// replaced, else `cached`.
    pub fn freshest(&self, cached: MaasMachine) -> MaasMachine {
        let (Some(uid), Some(rv)) = (cached.uid(), cached.resource_version()) else {
            return cached;
        };
        let mut map = self.lock();
        match map.get(&uid) {
            Some(r) if r.superseded.contains(&rv) => r.latest.clone(),
            // The cache caught up, or someone else wrote: nothing of ours is newer.
            Some(_) => {
                map.remove(&uid);
                cached
            }
            None => cached,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Remembered>> {
        self.by_uid.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The spec this process last wrote on each MaasHost (by namespace and name), so that a
/// reconcile can take a host from the cache instead of reading it fresh.
///
/// machine-controller is the only writer of a host's spec (the gateway writes its status and
/// annotations): a cached host whose spec is the one we last wrote is at least as new as our
/// write, and the watch brings every later change. A cached spec that differs (our write not
/// seen yet, or someone else's) sends the reconcile to the API server as before. Without a
/// remembered write (none since this process started: its reflector listed everything then)
/// the cache is taken.
#[derive(Debug, Default, Clone)]
pub struct HostWrites {
    by_host: Arc<Mutex<HostSpecs>>,
}

/// Written spec and when, by (namespace, name).
type HostSpecs = HashMap<(String, String), (MaasHostSpec, Instant)>;

impl HostWrites {
    /// Records the spec of a host as our write left it.
    pub fn remember(&self, written: &MaasHost) {
        let (Some(namespace), Some(name)) = (written.namespace(), written.metadata.name.clone())
        else {
            return;
        };
        let now = Instant::now();
        let mut map = self.lock();
        map.retain(|_, (_, at)| now.duration_since(*at) < KEEP);
        map.insert((namespace, name), (written.spec.clone(), now));
    }

    /// Whether `cached` may be used as it is: it shows our last write of its spec, or we
    /// remember none. A cache that caught up ends the memory.
    pub fn cache_is_current(&self, cached: &MaasHost) -> bool {
        let (Some(namespace), Some(name)) = (cached.namespace(), cached.metadata.name.clone())
        else {
            return false;
        };
        let key = (namespace, name);
        let mut map = self.lock();
        match map.get(&key) {
            None => true,
            Some((spec, _)) if *spec == cached.spec => {
                map.remove(&key);
                true
            }
            Some(_) => false,
        }
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<(String, String), (MaasHostSpec, Instant)>> {
        self.by_host.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::maas_machine;

    fn at(rv: &str) -> MaasMachine {
        let mut mm = maas_machine("m");
        mm.metadata.resource_version = Some(rv.to_owned());
        mm
    }

    #[test]
    fn a_copy_we_replaced_gives_way_to_ours() {
        let own = OwnWrites::default();
        own.remember(&at("3"), &["1".into(), "2".into(), "3".into()]);
        assert_eq!(
            own.freshest(at("2")).resource_version().as_deref(),
            Some("3")
        );
        assert_eq!(
            own.freshest(at("1")).resource_version().as_deref(),
            Some("3")
        );
    }

    #[test]
    fn any_other_version_wins_and_ends_the_memory() {
        let own = OwnWrites::default();
        own.remember(&at("3"), &["2".into()]);
        // Someone wrote after us (or the cache caught up): theirs.
        assert_eq!(
            own.freshest(at("4")).resource_version().as_deref(),
            Some("4")
        );
        assert_eq!(
            own.freshest(at("2")).resource_version().as_deref(),
            Some("2")
        );
    }

    #[test]
    fn a_cached_host_is_current_once_it_shows_our_last_write() {
        use crate::test_support::{claimed, host};
        let writes = HostWrites::default();
        let free = host("h1", None);
        assert!(writes.cache_is_current(&free), "nothing written: the cache");
        let ours = claimed(free.clone(), &maas_machine("m"));
        writes.remember(&ours);
        assert!(!writes.cache_is_current(&free), "our claim not seen yet");
        assert!(writes.cache_is_current(&ours));
        assert!(
            writes.cache_is_current(&free),
            "caught up once: memory ended"
        );
        writes.remember(&free);
        assert!(!writes.cache_is_current(&ours), "our release not seen yet");
    }

    #[test]
    fn a_reconcile_that_wrote_nothing_remembers_nothing() {
        let own = OwnWrites::default();
        own.remember(&at("5"), &["5".into()]);
        assert_eq!(
            own.freshest(at("4")).resource_version().as_deref(),
            Some("4")
        );
    }
}
