//! Liveness and readiness state behind `/healthz` and `/readyz`.
//!
//! Readiness is a flag the binary sets (e.g. once its caches have synced). Liveness fails when a
//! registered [`Watchdog`] has not ticked within its allowed silence: a watch stream that died
//! quietly then restarts the pod instead of leaving a controller with a stale cache.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// Shared health state; cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Health {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    ready: AtomicBool,
    next_id: AtomicU64,
    watchdogs: Mutex<BTreeMap<u64, WatchdogState>>,
}

#[derive(Debug, Clone)]
struct WatchdogState {
    name: String,
    max_silence: Duration,
    last_tick: Instant,
}

impl Health {
    /// New state: alive, not ready.
    pub fn new() -> Self {
        Self::default()
    }

    /// Marks the process ready to do its work (`/readyz` answers 200).
    pub fn mark_ready(&self) {
        self.inner.ready.store(true, Ordering::Release);
    }

    /// Marks the process not ready (`/readyz` answers 503).
    pub fn mark_not_ready(&self) {
        self.inner.ready.store(false, Ordering::Release);
    }

    /// Whether `/readyz` answers 200.
    pub fn is_ready(&self) -> bool {
        self.inner.ready.load(Ordering::Acquire)
    }

    /// Registers a watchdog that must [`tick`](Watchdog::tick) at least every `max_silence`.
    /// It starts ticked now and is unregistered when dropped.
    pub fn watchdog(&self, name: impl Into<String>, max_silence: Duration) -> Watchdog {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        self.lock_watchdogs().insert(
            id,
            WatchdogState {
                name: name.into(),
                max_silence,
                last_tick: Instant::now(),
            },
        );
        Watchdog {
            health: self.clone(),
            id,
        }
    }

    /// Names of watchdogs that are silent for too long; empty means alive.
    pub fn stale_watchdogs(&self) -> Vec<String> {
        let now = Instant::now();
        let guard = self.lock_watchdogs();
        stale(now, guard.values())
    }

    /// Whether `/healthz` answers 200.
    pub fn is_live(&self) -> bool {
        self.stale_watchdogs().is_empty()
    }

    fn lock_watchdogs(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, WatchdogState>> {
        // The map stays consistent even if a holder panicked: every update is a single insert.
        self.inner
            .watchdogs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

fn stale<'a>(now: Instant, watchdogs: impl Iterator<Item = &'a WatchdogState>) -> Vec<String> {
    let mut names: Vec<String> = watchdogs
        .filter(|w| now.saturating_duration_since(w.last_tick) > w.max_silence)
        .map(|w| w.name.clone())
        .collect();
    names.sort();
    names
}

/// A liveness watchdog; tick it on every sign of progress (a watch event, a reconcile).
#[derive(Debug)]
pub struct Watchdog {
    health: Health,
    id: u64,
}

impl Watchdog {
    /// Records progress now.
    pub fn tick(&self) {
        if let Some(w) = self.health.lock_watchdogs().get_mut(&self.id) {
            w.last_tick = Instant::now();
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.health.lock_watchdogs().remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_flag() {
        let h = Health::new();
        assert!(!h.is_ready());
        h.clone().mark_ready();
        assert!(h.is_ready());
        h.mark_not_ready();
        assert!(!h.is_ready());
    }

    #[tokio::test(start_paused = true)]
    async fn watchdog_goes_stale_and_recovers() {
        let h = Health::new();
        assert!(h.is_live());
        let w = h.watchdog("machines-watch", Duration::from_secs(10));
        tokio::time::advance(Duration::from_secs(9)).await;
        assert!(h.is_live());
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(h.stale_watchdogs(), vec!["machines-watch".to_owned()]);
        w.tick();
        assert!(h.is_live());
        tokio::time::advance(Duration::from_secs(11)).await;
        assert!(!h.is_live());
        drop(w);
        assert!(h.is_live(), "a dropped watchdog no longer counts");
    }

    #[tokio::test(start_paused = true)]
    async fn only_silent_watchdogs_are_reported_sorted() {
        let h = Health::new();
        let _b = h.watchdog("b", Duration::from_secs(1));
        let _a = h.watchdog("a", Duration::from_secs(1));
        let _c = h.watchdog("c", Duration::from_secs(100));
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!(h.stale_watchdogs(), vec!["a".to_owned(), "b".to_owned()]);
    }
}
