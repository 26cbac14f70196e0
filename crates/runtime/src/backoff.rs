//! Per-object exponential backoff for `error_policy`.
//!
//! kube's `Controller` has no per-object backoff (kube#1916): a fixed requeue makes every failing
//! object retry in lock-step, a thundering herd when MAAS is down. [`ObjectBackoff`] keeps one
//! backoff sequence per object: the delay grows on each failure and resets after a success.
//!
//! The curve comes from `backon`'s `ExponentialBuilder` (already in the tree through kube-runtime):
//! `min, min·f, min·f², …` capped at `max`, each with up to +100% random jitter, so a delay lies in
//! `[base, 2·base)` and never exceeds `2·max`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use kube::core::DynamicObject;
use kube::runtime::controller::Action;
use kube::runtime::reflector::{Lookup, ObjectRef};

use crate::error::{ErrorCategory, Requeue};

/// Backoff settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BackoffConfig {
    /// First delay (before jitter).
    pub min_delay: Duration,
    /// Largest delay before jitter.
    pub max_delay: Duration,
    /// Growth factor per consecutive failure.
    pub factor: f32,
    /// Add up to 100% random jitter, so objects that failed together retry apart.
    pub jitter: bool,
    /// Requeue delay for [`Requeue::InvalidSpec`] errors.
    pub invalid_spec_delay: Duration,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        Self {
            min_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(300),
            factor: 2.0,
            jitter: true,
            invalid_spec_delay: Duration::from_secs(30 * 60),
        }
    }
}

impl BackoffConfig {
    fn builder(&self) -> ExponentialBuilder {
        let b = ExponentialBuilder::new()
            .with_min_delay(self.min_delay)
            .with_max_delay(self.max_delay)
            .with_factor(self.factor)
            .without_max_times();
        if self.jitter { b.with_jitter() } else { b }
    }
}

#[derive(Debug)]
struct Entry {
    failures: u32,
    delays: ExponentialBackoff,
}

/// Per-object failure counters and delays; cheap to clone into a controller `Context`.
#[derive(Debug, Clone, Default)]
pub struct ObjectBackoff {
    config: BackoffConfig,
    entries: Arc<Mutex<HashMap<ObjectRef<DynamicObject>, Entry>>>,
}

impl ObjectBackoff {
    /// A backoff map with the given settings.
    pub fn new(config: BackoffConfig) -> Self {
        Self {
            config,
            entries: Arc::default(),
        }
    }

    /// Records a failure of `obj` and returns how long to wait before retrying it.
    pub fn next_delay<K>(&self, obj: &ObjectRef<K>) -> Duration
    where
        K: Lookup,
        K::DynamicType: Clone,
    {
        let key = obj.clone().erase();
        let mut entries = self.lock();
        let entry = entries.entry(key).or_insert_with(|| Entry {
            failures: 0,
            delays: self.config.builder().build(),
        });
        entry.failures = entry.failures.saturating_add(1);
        // `without_max_times` makes the sequence endless; max_delay is the fallback regardless.
        entry.delays.next().unwrap_or(self.config.max_delay)
    }

    /// Consecutive failures recorded for `obj` since its last success.
    pub fn failures<K>(&self, obj: &ObjectRef<K>) -> u32
    where
        K: Lookup,
        K::DynamicType: Clone,
    {
        self.lock()
            .get(&obj.clone().erase())
            .map_or(0, |e| e.failures)
    }

    /// Forgets `obj`'s failures; call after a successful reconcile (and on delete).
    pub fn reset<K>(&self, obj: &ObjectRef<K>)
    where
        K: Lookup,
        K::DynamicType: Clone,
    {
        self.lock().remove(&obj.clone().erase());
    }

    /// Number of objects currently backing off.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no object is backing off.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The requeue action for a failed reconcile of `obj`, by the error's [`Requeue`] class.
    pub fn error_action<K, E>(&self, obj: &ObjectRef<K>, error: &E) -> Action
    where
        K: Lookup,
        K::DynamicType: Clone,
        E: ErrorCategory + ?Sized,
    {
        match error.requeue() {
            Requeue::Transient => Action::requeue(self.next_delay(obj)),
            Requeue::InvalidSpec => {
                // A broken spec is not a flapping dependency: wait long, without growth.
                self.reset(obj);
                Action::requeue(self.config.invalid_spec_delay)
            }
            Requeue::Never => {
                self.reset(obj);
                Action::await_change()
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectRef<DynamicObject>, Entry>> {
        // Entries are replaced whole; a panic mid-update cannot leave one half-written.
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn no_jitter() -> BackoffConfig {
        BackoffConfig {
            min_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(10),
            factor: 2.0,
            jitter: false,
            invalid_spec_delay: Duration::from_secs(600),
        }
    }

    fn obj(name: &str) -> ObjectRef<ConfigMap> {
        ObjectRef::new(name).within("ns")
    }

    #[test]
    fn curve_doubles_and_caps() {
        let b = ObjectBackoff::new(no_jitter());
        let a = obj("a");
        let delays: Vec<u64> = (0..7).map(|_| b.next_delay(&a).as_secs()).collect();
        assert_eq!(delays, vec![1, 2, 4, 8, 10, 10, 10]);
        assert_eq!(b.failures(&a), 7);
    }

    #[test]
    fn objects_are_independent_and_reset() {
        let b = ObjectBackoff::new(no_jitter());
        let (x, y) = (obj("x"), obj("y"));
        b.next_delay(&x);
        b.next_delay(&x);
        assert_eq!(b.next_delay(&y), Duration::from_secs(1));
        assert_eq!(b.next_delay(&x), Duration::from_secs(4));
        assert_eq!(b.len(), 2);
        b.reset(&x);
        assert_eq!(b.failures(&x), 0);
        assert_eq!(b.next_delay(&x), Duration::from_secs(1));
        b.reset(&x);
        b.reset(&y);
        assert!(b.is_empty());
    }

    #[test]
    fn same_name_other_namespace_is_other_object() {
        let b = ObjectBackoff::new(no_jitter());
        b.next_delay(&obj("a"));
        let other: ObjectRef<ConfigMap> = ObjectRef::new("a").within("other");
        assert_eq!(b.failures(&other), 0);
    }

    #[test]
    fn jitter_stays_within_one_base() {
        let b = ObjectBackoff::new(BackoffConfig {
            jitter: true,
            ..no_jitter()
        });
        let a = obj("a");
        for base in [1.0, 2.0, 4.0, 8.0, 10.0, 10.0] {
            let d = b.next_delay(&a).as_secs_f64();
            assert!(
                d >= base && d < 2.0 * base,
                "{d} not in [{base}, {})",
                2.0 * base
            );
        }
    }

    #[derive(Debug)]
    struct TestError(Requeue);
    impl ErrorCategory for TestError {
        fn category(&self) -> &'static str {
            "test"
        }
        fn requeue(&self) -> Requeue {
            self.0
        }
    }

    #[test]
    fn action_by_error_class() {
        let b = ObjectBackoff::new(no_jitter());
        let a = obj("a");
        assert_eq!(
            b.error_action(&a, &TestError(Requeue::Transient)),
            Action::requeue(Duration::from_secs(1))
        );
        assert_eq!(
            b.error_action(&a, &TestError(Requeue::Transient)),
            Action::requeue(Duration::from_secs(2))
        );
        assert_eq!(
            b.error_action(&a, &TestError(Requeue::InvalidSpec)),
            Action::requeue(Duration::from_secs(600))
        );
        assert_eq!(b.failures(&a), 0);
        assert_eq!(
            b.error_action(&a, &TestError(Requeue::Never)),
            Action::await_change()
        );
    }
}
