//! The process-wide MAAS rate limit as a fair queue: calls for one machine wait in the order
//! they asked, listings that serve many machines wait only for the next token.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};

/// How a call waits for the rate limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lane {
    /// In its turn, behind the calls that asked before it.
    InTurn,
    /// A listing that serves many machines: only the next token, ahead of the queue.
    Listing,
    /// For people, not for the machines (workload annotations): a token only while no call for
    /// a machine waits in the queue, so it delays none by more than one token's time.
    Background,
}

/// The rate limiter and the turn of calls for one machine; cheap to clone (clones share both).
#[derive(Clone)]
pub(super) struct RateQueue {
    limiter: Arc<DefaultDirectRateLimiter>,
    /// The turn of calls for one machine at the rate limiter (tokio's mutex is fair: first come,
    /// first served).
    queue: Arc<tokio::sync::Mutex<()>>,
    /// Calls waiting in that queue now.
    queued: Arc<AtomicUsize>,
    per_second: NonZeroU32,
}

impl RateQueue {
    /// A limit of `per_second` requests (bursts of the same size).
    pub(super) fn new(per_second: NonZeroU32) -> Self {
        Self {
            limiter: Arc::new(RateLimiter::direct(Quota::per_second(per_second))),
            queue: Arc::new(tokio::sync::Mutex::new(())),
            queued: Arc::new(AtomicUsize::new(0)),
            per_second,
        }
    }

    /// How long a call for one machine asked now would wait for its turn: the calls queued
    /// ahead of it (listings, which go ahead, not counted).
    pub(super) fn backlog(&self) -> Duration {
        let queued = u32::try_from(self.queued.load(Ordering::Relaxed)).unwrap_or(u32::MAX);
        Duration::from_secs_f64(f64::from(queued) / f64::from(self.per_second.get()))
    }

    /// Waits for a token (a [`Lane::InTurn`] call in its turn); how long it waited.
    pub(super) async fn wait(&self, lane: Lane) -> Duration {
        let started = Instant::now();
        match lane {
            Lane::InTurn => {
                let in_queue = InQueue::enter(&self.queued);
                let _turn = self.queue.lock().await;
                self.limiter.until_ready().await;
                drop(in_queue);
            }
            Lane::Listing => self.limiter.until_ready().await,
            Lane::Background => {
                let token = Duration::from_secs(1) / self.per_second.get();
                while self.queued.load(Ordering::Relaxed) > 0 || self.limiter.check().is_err() {
                    tokio::time::sleep(token).await;
                }
            }
        }
        started.elapsed()
    }
}

/// Counts a call in [`RateQueue::queued`] while it waits for its turn, also when the wait is
/// abandoned (the reconcile is cancelled).
struct InQueue<'a>(&'a AtomicUsize);

impl<'a> InQueue<'a> {
    fn enter(queued: &'a AtomicUsize) -> Self {
        queued.fetch_add(1, Ordering::Relaxed);
        Self(queued)
    }
}

impl Drop for InQueue<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}
