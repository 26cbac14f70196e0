//! Read your own writes: an object as this process's last reconcile of it left it, for the
//! next reconcile that starts before the watch delivered those writes.
//!
//! A reconcile often writes twice in a row (a finalizer, then the status; an annotation, then
//! the status). The first write's watch event, or any other wake-up, starts the next reconcile
//! while the cache still holds an older copy: what it decides and writes would be computed from
//! that copy (a conflict, a write repeated, an operation taken again). Instead the reconcile
//! starts from our newer copy, which usually needs no write at all.
//!
//! Only when the cache shows a version this process saw *before* its last write is our copy
//! known to be newer; any other version (another writer, or the cache caught up) wins, so a
//! write of someone else is never hidden. Writes that carry their resourceVersion still do:
//! nothing here can make a stale write succeed.
//!
//! [`OwnSpecWrites`] is the same idea for a part of an object that only this controller writes
//! (machine-controller and a MaasHost's spec): the cached object is used as it is once it shows
//! the part as our last write left it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use kube::{Resource, ResourceExt};

/// How long a remembered copy is kept when the cache never shows our write (the object was
/// deleted meanwhile): long past any watch delay.
const KEEP: Duration = Duration::from_secs(600);

#[derive(Debug)]
struct Remembered<K> {
    latest: K,
    /// Versions seen in the reconcile before `latest` was written: older than it.
    superseded: Vec<String>,
    at: Instant,
}

/// The last copy of each object a reconcile of this process wrote, by UID; clones share it.
#[derive(Debug, Clone)]
pub struct OwnWrites<K> {
    by_uid: Arc<Mutex<HashMap<String, Remembered<K>>>>,
}

impl<K> Default for OwnWrites<K> {
    fn default() -> Self {
        Self {
            by_uid: Arc::default(),
        }
    }
}

impl<K: Resource + Clone> OwnWrites<K> {
    /// Records how a reconcile left `latest`, having seen the versions `seen` (in order) before.
    pub fn remember(&self, latest: &K, seen: &[String]) {
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
    pub fn freshest(&self, cached: K) -> K {
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

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Remembered<K>>> {
        self.by_uid.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The part of each object (by namespace and name) that this process last wrote, for a part no
/// one else writes (machine-controller is the only writer of a MaasHost's spec; the gateway
/// writes its status and annotations).
///
/// A cached object that shows the remembered part is at least as new as our write, and the
/// watch brings every later change, so a reconcile may take it from the cache. One that
/// differs (our write not seen yet, or someone else's) sends the reconcile to the API server.
/// With nothing remembered (no write since this process started: its reflector listed
/// everything then) the cache is taken.
#[derive(Debug, Clone)]
pub struct OwnSpecWrites<S> {
    by_key: Arc<Mutex<WrittenParts<S>>>,
}

/// Written part and when, by (namespace, name).
type WrittenParts<S> = HashMap<(String, String), (S, Instant)>;

impl<S> Default for OwnSpecWrites<S> {
    fn default() -> Self {
        Self {
            by_key: Arc::default(),
        }
    }
}

impl<S: Clone + PartialEq> OwnSpecWrites<S> {
    /// Records `part` of `written` as our write left it.
    pub fn remember<K: Resource>(&self, written: &K, part: &S) {
        let (Some(namespace), Some(name)) = (written.namespace(), written.meta().name.clone())
        else {
            return;
        };
        let now = Instant::now();
        let mut map = self.lock();
        map.retain(|_, (_, at)| now.duration_since(*at) < KEEP);
        map.insert((namespace, name), (part.clone(), now));
    }

    /// Whether `cached`, whose part is `part`, may be used as it is: it shows our last write of
    /// the part, or we remember none. A cache that caught up ends the memory.
    pub fn cache_is_current<K: Resource>(&self, cached: &K, part: &S) -> bool {
        let (Some(namespace), Some(name)) = (cached.namespace(), cached.meta().name.clone()) else {
            return false;
        };
        let key = (namespace, name);
        let mut map = self.lock();
        match map.get(&key) {
            None => true,
            Some((written, _)) if written == part => {
                map.remove(&key);
                true
            }
            Some(_) => false,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, WrittenParts<S>> {
        self.by_key.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    fn at(rv: &str) -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some("cm".to_owned());
        cm.metadata.uid = Some("uid-1".to_owned());
        cm.metadata.resource_version = Some(rv.to_owned());
        cm
    }

    fn rv(cm: &ConfigMap) -> Option<String> {
        cm.resource_version()
    }

    #[test]
    fn a_copy_we_replaced_gives_way_to_ours() {
        let own = OwnWrites::default();
        own.remember(&at("3"), &["1".into(), "2".into(), "3".into()]);
        assert_eq!(rv(&own.freshest(at("2"))).as_deref(), Some("3"));
        assert_eq!(rv(&own.freshest(at("1"))).as_deref(), Some("3"));
    }

    #[test]
    fn any_other_version_wins_and_ends_the_memory() {
        let own = OwnWrites::default();
        own.remember(&at("3"), &["2".into()]);
        // Someone wrote after us (or the cache caught up): theirs.
        assert_eq!(rv(&own.freshest(at("4"))).as_deref(), Some("4"));
        assert_eq!(rv(&own.freshest(at("2"))).as_deref(), Some("2"));
    }

    #[test]
    fn a_reconcile_that_wrote_nothing_remembers_nothing() {
        let own = OwnWrites::default();
        own.remember(&at("5"), &["5".into()]);
        assert_eq!(rv(&own.freshest(at("4"))).as_deref(), Some("4"));
    }

    fn with_data(value: &str) -> ConfigMap {
        let mut cm = at("1");
        cm.metadata.namespace = Some("ns".to_owned());
        cm.data = Some([("k".to_owned(), value.to_owned())].into());
        cm
    }

    #[test]
    fn a_cached_object_is_current_once_it_shows_our_last_write_of_the_part() {
        let writes = OwnSpecWrites::default();
        let free = with_data("free");
        assert!(
            writes.cache_is_current(&free, &free.data),
            "nothing written: the cache"
        );
        let ours = with_data("claimed");
        writes.remember(&ours, &ours.data);
        assert!(
            !writes.cache_is_current(&free, &free.data),
            "our write not seen yet"
        );
        assert!(writes.cache_is_current(&ours, &ours.data));
        assert!(
            writes.cache_is_current(&free, &free.data),
            "caught up once: memory ended"
        );
        writes.remember(&free, &free.data);
        assert!(
            !writes.cache_is_current(&ours, &ours.data),
            "our next write not seen yet"
        );
    }
}
