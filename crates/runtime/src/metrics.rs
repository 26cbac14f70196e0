//! Prometheus metrics: one shared registry per process and the per-controller reconcile metrics.
//!
//! Other crates add their own metrics to the same registry:
//!
//! ```
//! use prometheus_client::metrics::counter::Counter;
//! let registry = capmaas_runtime::MetricsRegistry::new();
//! let calls: Counter = registry.register(|r| {
//!     let c = Counter::default();
//!     r.register("maas_calls", "MAAS API calls", c.clone());
//!     c
//! });
//! calls.inc();
//! assert!(registry.encode().unwrap().contains("capmaas_maas_calls_total 1"));
//! ```

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Prefix of every metric name this project exports.
pub const METRIC_PREFIX: &str = "capmaas";

/// `Content-Type` of the OpenMetrics text exposition.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The process-wide metrics registry; cheap to clone, safe to share.
///
/// Registration takes a write lock, encoding a read lock; both are short.
#[derive(Clone)]
pub struct MetricsRegistry {
    inner: Arc<RwLock<Registry>>,
    /// Handles registered once per registry ([`MetricsRegistry::get_or_register`]), by type.
    shared: Arc<Mutex<HashMap<TypeId, Box<dyn Any + Send + Sync>>>>,
}

impl Default for MetricsRegistry {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for MetricsRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsRegistry").finish_non_exhaustive()
    }
}

impl MetricsRegistry {
    /// A registry whose metric names all start with `capmaas_`.
    pub fn new() -> Self {
        Self {
            inner: Arc::new(RwLock::new(Registry::with_prefix(METRIC_PREFIX))),
            shared: Arc::default(),
        }
    }

    /// Runs `f` with mutable access to the registry, e.g. to register a crate's own metrics.
    ///
    /// Do not register a `Counter` whose name ends in `_total`: prometheus-client adds the suffix
    /// and panics in debug builds otherwise.
    pub fn register<T>(&self, f: impl FnOnce(&mut Registry) -> T) -> T {
        let mut guard = self.inner.write().unwrap_or_else(PoisonError::into_inner);
        f(&mut guard)
    }

    /// The handle of type `T` this registry holds, registered with `f` on the first call.
    ///
    /// For metrics a leadership term feeds: a term runs many times in one process but a family
    /// can be registered only once (a second registration would print it twice), so each term
    /// asks for the same handle and attaches its caches to it (see [`TermSlot`]).
    pub fn get_or_register<T>(&self, f: impl FnOnce(&mut Registry) -> T) -> T
    where
        T: Clone + Send + Sync + 'static,
    {
        let mut shared = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(existing) = shared
            .get(&TypeId::of::<T>())
            .and_then(|any| any.downcast_ref::<T>())
        {
            return existing.clone();
        }
        let handle = self.register(f);
        shared.insert(TypeId::of::<T>(), Box::new(handle.clone()));
        handle
    }

    /// Encodes every metric in the OpenMetrics text format.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let guard = self.inner.read().unwrap_or_else(PoisonError::into_inner);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &guard)?;
        Ok(out)
    }
}

/// What a scrape-time [`Collector`](prometheus_client::collector::Collector) reads while a
/// leadership term runs, e.g. a reflector's store: set by the term, emptied when it ends.
///
/// Caches live as long as a term, metrics as long as the process; a collector holding a slot
/// reports nothing outside a term, so a standby replica adds no stale samples to a sum over
/// replicas.
#[derive(Debug)]
pub struct TermSlot<T> {
    inner: Arc<Mutex<SlotState<T>>>,
}

#[derive(Debug)]
struct SlotState<T> {
    /// Bumped by every attach, so the guard of an older term cannot empty a newer one's slot.
    generation: u64,
    value: Option<T>,
}

impl<T> Clone for TermSlot<T> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<T> Default for TermSlot<T> {
    fn default() -> Self {
        Self {
            inner: Arc::new(Mutex::new(SlotState {
                generation: 0,
                value: None,
            })),
        }
    }
}

impl<T: Clone> TermSlot<T> {
    /// Puts `value` in the slot until the returned guard is dropped (at the end of the term).
    #[must_use = "the slot is emptied when the guard is dropped"]
    pub fn attach(&self, value: T) -> Attached<T> {
        let mut state = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        state.generation = state.generation.wrapping_add(1);
        state.value = Some(value);
        Attached {
            slot: self.clone(),
            generation: state.generation,
        }
    }

    /// The value of the running term, if any.
    pub fn current(&self) -> Option<T> {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .value
            .clone()
    }
}

/// Empties its [`TermSlot`] when dropped, unless a later term attached since.
#[derive(Debug)]
pub struct Attached<T> {
    slot: TermSlot<T>,
    generation: u64,
}

impl<T> Drop for Attached<T> {
    fn drop(&mut self) {
        let mut state = self
            .slot
            .inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if state.generation == self.generation {
            state.value = None;
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabels {
    controller: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    controller: String,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CategoryLabels {
    controller: String,
    category: &'static str,
}

type HistogramFamily = Family<ControllerLabels, Histogram, fn() -> Histogram>;

fn duration_histogram() -> Histogram {
    // 5 ms .. ~82 s: reconciles range from a cache hit to a slow MAAS call with retries.
    Histogram::new(exponential_buckets(0.005, 2.0, 15))
}

/// Reconcile metrics families, registered once per registry and shared by every controller of
/// the process; [`ReconcileMetrics::controller`] gives a handle labelled for one controller.
#[derive(Clone, Debug)]
pub struct ReconcileMetrics {
    reconcile: Family<ResultLabels, Counter>,
    errors: Family<CategoryLabels, Counter>,
    duration: HistogramFamily,
    leader: Family<ControllerLabels, Gauge>,
}

impl ReconcileMetrics {
    /// Registers `reconcile`, `reconcile_errors`, `reconcile_duration_seconds` and `leader`.
    /// Call once per registry (the runtime does it).
    pub fn register(registry: &mut Registry) -> Self {
        let this = Self {
            reconcile: Family::default(),
            errors: Family::default(),
            duration: Family::new_with_constructor(duration_histogram),
            leader: Family::default(),
        };
        registry.register(
            "reconcile",
            "Reconciliations by controller and result",
            this.reconcile.clone(),
        );
        registry.register(
            "reconcile_errors",
            "Failed reconciliations by controller and error category",
            this.errors.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Duration of reconciliations",
            this.duration.clone(),
        );
        registry.register(
            "leader",
            "1 while this replica holds the controller's leader lease",
            this.leader.clone(),
        );
        this
    }

    /// A handle whose metrics carry `controller="<name>"`.
    pub fn controller(&self, name: &str) -> ControllerMetrics {
        ControllerMetrics {
            families: self.clone(),
            controller: name.to_owned(),
        }
    }
}

/// Reconcile metrics for one controller; cheap to clone into a controller `Context`.
#[derive(Clone, Debug)]
pub struct ControllerMetrics {
    families: ReconcileMetrics,
    controller: String,
}

/// `result` label value of a successful reconcile.
pub const RESULT_SUCCESS: &str = "success";
/// `result` label value of a failed reconcile.
pub const RESULT_ERROR: &str = "error";

impl ControllerMetrics {
    /// The controller label value.
    pub fn name(&self) -> &str {
        &self.controller
    }

    /// Starts timing a reconcile; the duration is recorded when the guard is dropped.
    #[must_use = "the duration is recorded when the timer is dropped"]
    pub fn start_reconcile(&self) -> ReconcileTimer {
        ReconcileTimer {
            histogram: self.families.duration.get_or_create(&self.labels()).clone(),
            start: Instant::now(),
        }
    }

    /// Counts a successful reconcile.
    pub fn reconcile_succeeded(&self) {
        self.families
            .reconcile
            .get_or_create(&ResultLabels {
                controller: self.controller.clone(),
                result: RESULT_SUCCESS,
            })
            .inc();
    }

    /// Counts a failed reconcile under its error category (see [`crate::ErrorCategory`]).
    pub fn reconcile_failed(&self, category: &'static str) {
        self.families
            .reconcile
            .get_or_create(&ResultLabels {
                controller: self.controller.clone(),
                result: RESULT_ERROR,
            })
            .inc();
        self.families
            .errors
            .get_or_create(&CategoryLabels {
                controller: self.controller.clone(),
                category,
            })
            .inc();
    }

    /// Sets the `leader` gauge.
    pub fn set_leader(&self, leader: bool) {
        self.families
            .leader
            .get_or_create(&self.labels())
            .set(i64::from(leader));
    }

    fn labels(&self) -> ControllerLabels {
        ControllerLabels {
            controller: self.controller.clone(),
        }
    }
}

/// Records the elapsed time into `reconcile_duration_seconds` when dropped, so every exit path
/// of a reconcile (including `?` and panics unwinding) is measured.
#[derive(Debug)]
pub struct ReconcileTimer {
    histogram: Histogram,
    start: Instant,
}

impl Drop for ReconcileTimer {
    fn drop(&mut self) {
        self.histogram.observe(self.start.elapsed().as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (MetricsRegistry, ControllerMetrics) {
        let registry = MetricsRegistry::new();
        let families = registry.register(ReconcileMetrics::register);
        (registry, families.controller("machine"))
    }

    #[test]
    fn encodes_reconcile_counters() {
        let (registry, m) = setup();
        m.reconcile_succeeded();
        m.reconcile_succeeded();
        m.reconcile_failed("maas_unavailable");
        let text = registry.encode().unwrap();
        assert!(text.contains("# TYPE capmaas_reconcile counter"), "{text}");
        assert!(
            text.contains(r#"capmaas_reconcile_total{controller="machine",result="success"} 2"#),
            "{text}"
        );
        assert!(
            text.contains(r#"capmaas_reconcile_total{controller="machine",result="error"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(
                r#"capmaas_reconcile_errors_total{controller="machine",category="maas_unavailable"} 1"#
            ),
            "{text}"
        );
        assert!(text.trim_end().ends_with("# EOF"), "{text}");
    }

    #[test]
    fn timer_records_on_drop() {
        let (registry, m) = setup();
        {
            let _t = m.start_reconcile();
        }
        let text = registry.encode().unwrap();
        assert!(
            text.contains(r#"capmaas_reconcile_duration_seconds_count{controller="machine"} 1"#),
            "{text}"
        );
        assert!(text.contains(r#"le="0.005""#), "{text}");
    }

    #[test]
    fn leader_gauge_follows_state() {
        let (registry, m) = setup();
        m.set_leader(true);
        assert!(
            registry
                .encode()
                .unwrap()
                .contains(r#"capmaas_leader{controller="machine"} 1"#)
        );
        m.set_leader(false);
        assert!(
            registry
                .encode()
                .unwrap()
                .contains(r#"capmaas_leader{controller="machine"} 0"#)
        );
    }

    #[test]
    fn controllers_share_families() {
        let registry = MetricsRegistry::new();
        let families = registry.register(ReconcileMetrics::register);
        families.controller("a").reconcile_succeeded();
        families.controller("b").reconcile_succeeded();
        let text = registry.encode().unwrap();
        assert_eq!(text.matches("# TYPE capmaas_reconcile counter").count(), 1);
        assert!(text.contains(r#"controller="a""#) && text.contains(r#"controller="b""#));
    }

    #[test]
    fn get_or_register_registers_once() {
        #[derive(Clone)]
        struct Handle(Gauge);
        let registry = MetricsRegistry::new();
        let register = |r: &mut Registry| {
            let g = Gauge::default();
            r.register("once", "Registered once", g.clone());
            Handle(g)
        };
        let first = registry.get_or_register(register);
        let second = registry.get_or_register(register);
        second.0.set(3);
        assert_eq!(first.0.get(), 3, "the same handle both times");
        let text = registry.encode().unwrap();
        assert_eq!(
            text.matches("# TYPE capmaas_once gauge").count(),
            1,
            "{text}"
        );
        // Another registry has its own.
        let other = MetricsRegistry::new();
        assert_eq!(other.get_or_register(register).0.get(), 0);
    }

    #[test]
    fn term_slot_is_emptied_by_its_own_term_only() {
        let slot = TermSlot::default();
        assert_eq!(slot.current(), None);
        let first = slot.attach(1);
        assert_eq!(slot.current(), Some(1));
        drop(first);
        assert_eq!(slot.current(), None);
        let old = slot.attach(2);
        let new = slot.attach(3);
        drop(old);
        assert_eq!(
            slot.current(),
            Some(3),
            "an older term's guard leaves the newer value"
        );
        drop(new);
        assert_eq!(slot.current(), None);
    }

    #[test]
    fn other_crates_can_register() {
        let registry = MetricsRegistry::new();
        let g: Gauge = registry.register(|r| {
            let g = Gauge::default();
            r.register("maas_hosts", "Hosts known", g.clone());
            g
        });
        g.set(7);
        assert!(registry.encode().unwrap().contains("capmaas_maas_hosts 7"));
    }
}
