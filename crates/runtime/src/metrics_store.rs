//! Gauges computed at scrape time from the objects a reflector store holds (hosts by state,
//! machines by phase, pool usage): registered once per process, fed by each leadership term's
//! store through a [`TermSlot`], so a standby replica reports nothing.

use std::fmt;
use std::hash::Hash;
use std::sync::Arc;

use kube::runtime::reflector::{Lookup, Store};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

use crate::metrics::MetricsRegistry;
use crate::metrics::{Attached, TermSlot};

/// Encodes a controller's families from the objects of a store at one scrape.
pub type EncodeFromStore<K> = fn(&[Arc<K>], &mut DescriptorEncoder<'_>) -> fmt::Result;

/// The registered gauges over a store of `K`; each leadership term attaches its store with
/// [`Self::attach`].
pub struct StoreGauges<K>
where
    K: Lookup + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    store: TermSlot<Store<K>>,
}

impl<K> Clone for StoreGauges<K>
where
    K: Lookup + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
        }
    }
}

impl<K> fmt::Debug for StoreGauges<K>
where
    K: Lookup + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreGauges").finish_non_exhaustive()
    }
}

impl<K> StoreGauges<K>
where
    K: Lookup + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
{
    /// The gauges over `K` of `registry`, registered with `encode` on first use (once per
    /// process, not per term; one set per kind).
    pub fn get_or_register(registry: &MetricsRegistry, encode: EncodeFromStore<K>) -> Self {
        registry.get_or_register(|registry| {
            let store = TermSlot::default();
            registry.register_collector(Box::new(StoreCollector {
                store: store.clone(),
                encode,
            }));
            Self { store }
        })
    }

    /// Reports from `store` until the returned guard is dropped (at the end of the term).
    #[must_use = "the gauges report nothing once the guard is dropped"]
    pub fn attach(&self, store: Store<K>) -> Attached<Store<K>> {
        self.store.attach(store)
    }
}

struct StoreCollector<K>
where
    K: Lookup + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    store: TermSlot<Store<K>>,
    encode: EncodeFromStore<K>,
}

impl<K> fmt::Debug for StoreCollector<K>
where
    K: Lookup + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreCollector").finish_non_exhaustive()
    }
}

impl<K> Collector for StoreCollector<K>
where
    K: Lookup + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
{
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> fmt::Result {
        let objects = self.store.current().map(|s| s.state()).unwrap_or_default();
        (self.encode)(&objects, &mut encoder)
    }
}
