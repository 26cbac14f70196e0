//! What every reconcile shares: clients, the MaasHost cache, the event recorder, backoffs,
//! the workload client cache and the in-process claim tracker.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use capmaas_api::MaasHost;
use capmaas_runtime::{BackoffConfig, ControllerMetrics, ObjectBackoff, Settings};
use kube::Client;
use kube::runtime::events::Recorder;
use kube::runtime::reflector::Store;

use crate::workload::WorkloadClients;

/// Name of the binary (metrics label, field manager, event reporter).
pub const BINARY: &str = "machine-controller";
/// Default `--concurrency` / `--machine-concurrency` (CAPMAAS uses 2).
pub const DEFAULT_CONCURRENCY: u16 = 10;

/// Controller settings.
#[derive(Debug, Clone)]
pub struct Options {
    /// Namespace to watch; `None` = all.
    pub namespace: Option<String>,
    /// MaasMachines reconciled in parallel.
    pub concurrency: u16,
    /// Periodic requeue of settled machines.
    pub sync_period: Duration,
    /// Server-side-apply field manager.
    pub field_manager: String,
    /// Reconcile metrics, when a registry is in use.
    pub metrics: Option<ControllerMetrics>,
}

impl Options {
    /// Options for tests and embedding: all namespaces, default concurrency, 10 min sync.
    pub fn new() -> Self {
        Self {
            namespace: None,
            concurrency: DEFAULT_CONCURRENCY,
            sync_period: Duration::from_secs(600),
            field_manager: capmaas_runtime::field_manager(BINARY),
            metrics: None,
        }
    }

    /// Options from the runtime's resolved settings.
    pub fn from_settings(settings: &Settings, metrics: Option<ControllerMetrics>) -> Self {
        Self {
            namespace: settings.namespace.clone(),
            concurrency: settings.concurrency,
            sync_period: settings.sync_period,
            field_manager: settings.field_manager.clone(),
            metrics,
        }
    }
}

impl Default for Options {
    fn default() -> Self {
        Self::new()
    }
}

/// Shared state of one controller run.
#[derive(Clone)]
pub struct Ctx {
    /// Client for calls (with read timeouts).
    pub client: Client,
    /// Settings.
    pub options: Options,
    /// Cache of every watched MaasHost.
    pub hosts: Store<MaasHost>,
    /// Event recorder (built once: its cache turns repeats into series).
    pub recorder: Recorder,
    /// Per-object backoff after errors.
    pub errors: ObjectBackoff,
    /// Per-object backoff while waiting for something we cannot watch (a free host, a Node).
    pub waits: ObjectBackoff,
    /// Workload cluster clients.
    pub workload: WorkloadClients,
    /// Hosts being claimed in this process.
    pub claims: ClaimTracker,
    /// MaasMachine UIDs whose workload Node this process has linked.
    pub linked: Arc<Mutex<HashSet<String>>>,
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("options", &self.options)
            .field("workload", &self.workload)
            .finish_non_exhaustive()
    }
}

/// Backoff while no host is free or the Node has not registered: starts short (a host may be
/// released any second, and host events wake waiting machines anyway), caps at two minutes.
pub fn wait_backoff() -> BackoffConfig {
    BackoffConfig {
        min_delay: Duration::from_secs(2),
        max_delay: Duration::from_secs(120),
        ..BackoffConfig::default()
    }
}

impl Ctx {
    /// Whether this process already linked the Node of the machine with `uid`.
    pub fn is_linked(&self, uid: &str) -> bool {
        self.linked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(uid)
    }

    /// Forgets a deleted machine.
    pub fn forget_linked(&self, uid: &str) {
        self.linked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(uid);
    }

    /// Remembers that the Node of the machine with `uid` is linked.
    pub fn mark_linked(&self, uid: &str) {
        self.linked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(uid.to_owned());
    }
}

/// How long an in-process claim marker keeps other reconciles away from a host: long enough
/// for the host watch to show the claim, short enough that a crashed attempt frees it soon.
pub const CLAIM_MARK_TTL: Duration = Duration::from_secs(30);

/// Hosts that reconciles of this process are claiming or just claimed.
///
/// Not a lock for correctness (the resourceVersion precondition is): it keeps concurrent
/// reconciles, which all rank the same hosts first, from colliding on the same host and
/// paying a conflict and a retry each.
#[derive(Debug, Clone, Default)]
pub struct ClaimTracker {
    marks: Arc<Mutex<ClaimMarks>>,
}

/// `(namespace, host)` → `(machine UID, marked at)`.
type ClaimMarks = HashMap<(String, String), (String, Instant)>;

impl ClaimTracker {
    fn lock(&self) -> std::sync::MutexGuard<'_, ClaimMarks> {
        self.marks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Marks `namespace/host` as being claimed by `uid`; `false` if another machine holds a
    /// fresh mark.
    pub fn try_mark(&self, namespace: &str, host: &str, uid: &str) -> bool {
        let mut marks = self.lock();
        let now = Instant::now();
        marks.retain(|_, (_, at)| now.duration_since(*at) < CLAIM_MARK_TTL);
        let key = (namespace.to_owned(), host.to_owned());
        match marks.get(&key) {
            Some((holder, _)) if holder != uid => false,
            _ => {
                marks.insert(key, (uid.to_owned(), now));
                true
            }
        }
    }

    /// Drops the mark of `uid` on `namespace/host` (the claim failed or was released).
    pub fn unmark(&self, namespace: &str, host: &str, uid: &str) {
        let mut marks = self.lock();
        let key = (namespace.to_owned(), host.to_owned());
        if marks.get(&key).is_some_and(|(holder, _)| holder == uid) {
            marks.remove(&key);
        }
    }

    /// Hosts of `namespace` marked by machines other than `uid`.
    pub fn marked_by_others(&self, namespace: &str, uid: &str) -> BTreeSet<String> {
        let now = Instant::now();
        self.lock()
            .iter()
            .filter(|((ns, _), (holder, at))| {
                ns == namespace && holder != uid && now.duration_since(*at) < CLAIM_MARK_TTL
            })
            .map(|((_, host), _)| host.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_exclude_other_machines_only() {
        let t = ClaimTracker::default();
        assert!(t.try_mark("ns", "h1", "a"));
        assert!(t.try_mark("ns", "h1", "a"), "the holder may retry");
        assert!(!t.try_mark("ns", "h1", "b"));
        assert!(t.try_mark("other", "h1", "b"), "namespaces are separate");
        assert_eq!(
            t.marked_by_others("ns", "b"),
            BTreeSet::from(["h1".to_owned()])
        );
        assert!(t.marked_by_others("ns", "a").is_empty());
        t.unmark("ns", "h1", "b");
        assert!(!t.try_mark("ns", "h1", "b"), "only the holder unmarks");
        t.unmark("ns", "h1", "a");
        assert!(t.try_mark("ns", "h1", "b"));
    }

    #[test]
    fn options_defaults() {
        let o = Options::default();
        assert_eq!(o.concurrency, 10);
        assert_eq!(o.field_manager, "capmaas-machine-controller");
        assert!(o.namespace.is_none());
    }
}
