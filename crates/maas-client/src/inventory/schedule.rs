//! When each inventory was last synced, kept in the gateway's memory to schedule the next sync.
//!
//! Why memory and not the status: an idle sync writes nothing ([`super::status`]), so
//! `status.lastSyncTime` no longer says when the last sync ran; the process that ran it does.
//! The record lives as long as the leadership term (like the machine cache): after a restart
//! or a new term it is empty, and the first sync of every inventory happens at once, which it
//! must anyway since the machine cache is empty too.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// One successful sync: when its list was sent, and the object and spec generation it synced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastSync {
    /// When the sync's MAAS list was sent.
    pub at: Instant,
    /// `metadata.uid` of the inventory it synced (one deleted and made again under the same
    /// name is another inventory, synced at once).
    pub uid: Option<String>,
    /// `metadata.generation` of the inventory it synced.
    pub generation: Option<i64>,
}

/// The last successful sync of every inventory (`namespace/name`) in this term; cheap to
/// clone.
#[derive(Debug, Clone, Default)]
pub struct SyncTimes {
    state: Arc<Mutex<HashMap<String, LastSync>>>,
}

impl SyncTimes {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, LastSync>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a successful sync of inventory `key`.
    pub fn record(&self, key: &str, sync: LastSync) {
        self.lock().insert(key.to_owned(), sync);
    }

    /// The last successful sync of inventory `key` in this term.
    pub fn last(&self, key: &str) -> Option<LastSync> {
        self.lock().get(key).cloned()
    }

    /// Forgets inventory `key` (deleted).
    pub fn forget(&self, key: &str) {
        self.lock().remove(key);
    }
}

/// How long until the next sync of the inventory `uid` at `generation` is due, or `None` if
/// it is due now: never synced in this term, another object or spec (generation) than the
/// last sync's, or the interval has passed.
pub fn next_sync_in(
    last: Option<&LastSync>,
    uid: Option<&str>,
    generation: Option<i64>,
    interval: Duration,
    now: Instant,
) -> Option<Duration> {
    let last = last?;
    if last.uid.as_deref() != uid || last.generation != generation {
        return None;
    }
    let elapsed = now.saturating_duration_since(last.at);
    interval.checked_sub(elapsed).filter(|d| !d.is_zero())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sync_is_due_when_never_done_after_the_interval_or_a_spec_change() {
        let t0 = Instant::now();
        let last = LastSync {
            at: t0,
            uid: Some("u1".into()),
            generation: Some(2),
        };
        let last = Some(&last);
        let interval = Duration::from_secs(30);
        let later = |s: u64| t0 + Duration::from_secs(s);
        let uid = Some("u1");
        assert_eq!(
            next_sync_in(last, uid, Some(2), interval, later(10)),
            Some(Duration::from_secs(20))
        );
        assert_eq!(next_sync_in(last, uid, Some(2), interval, later(30)), None);
        assert_eq!(next_sync_in(last, uid, Some(2), interval, later(45)), None);
        assert_eq!(
            next_sync_in(last, uid, Some(3), interval, later(10)),
            None,
            "spec changed"
        );
        assert_eq!(
            next_sync_in(last, Some("u2"), Some(2), interval, later(10)),
            None,
            "deleted and made again under the same name"
        );
        assert_eq!(
            next_sync_in(None, uid, Some(2), interval, later(10)),
            None,
            "not synced in this term (restart)"
        );
    }

    #[test]
    fn syncs_are_recorded_per_inventory_and_forgotten() {
        let times = SyncTimes::default();
        let sync = LastSync {
            at: Instant::now(),
            uid: None,
            generation: Some(1),
        };
        times.record("ns/a", sync.clone());
        assert_eq!(times.last("ns/a"), Some(sync));
        assert_eq!(times.last("ns/b"), None);
        times.clone().forget("ns/a");
        assert_eq!(times.last("ns/a"), None);
    }
}
