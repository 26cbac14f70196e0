//! A hook that sees every HTTP attempt, so the gateway can export request metrics.

use std::fmt;
use std::time::Duration;

/// One finished HTTP attempt (a retried call produces one event per attempt).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestEvent {
    /// The client operation, e.g. `machines.get` or `machines.allocate` (low cardinality).
    pub operation: &'static str,
    /// `ok` on success, else the [`crate::MaasError::category`] of the failure.
    pub outcome: &'static str,
    /// The HTTP status, when an answer arrived.
    pub status: Option<u16>,
    /// Wall time of the attempt, from sending to the end of the body.
    pub latency: Duration,
    /// 1 for the first attempt, 2 for the first retry, ...
    pub attempt: u32,
}

/// Receives [`RequestEvent`]s. Called inline on the request path: keep it cheap (increment a
/// counter, observe a histogram) and never block.
pub trait RequestObserver: Send + Sync + fmt::Debug {
    /// Records one attempt.
    fn observe(&self, event: &RequestEvent);
}

/// The default observer: records nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopObserver;

impl RequestObserver for NoopObserver {
    fn observe(&self, _event: &RequestEvent) {}
}
