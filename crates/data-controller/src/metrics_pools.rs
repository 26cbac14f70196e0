//! `capmaas_ippool_addresses{namespace,pool}` (usable addresses) and
//! `capmaas_ippool_allocated_addresses{namespace,pool}`, read when Prometheus scrapes from the
//! counts the IPAM provider writes in each MaasIPPool's status (`addressesInUse`,
//! `addressesFree`), through its MaasIPPool reflector store.
//!
//! From the status rather than the live usage index: the status is what a person reads with
//! kubectl, so the dashboard and `kubectl get` never disagree, and it lags the index by one pool
//! reconcile only. A collector rather than gauges a task updates: one pass over the cached pools
//! per scrape, and nothing to start and stop with the term. Outside a leadership term (or with
//! the IPAM provider off) nothing is reported; the families stay declared. A pool whose status
//! has no counts yet (not reconciled, or its spec is invalid) has no sample.

use std::fmt;
use std::sync::Arc;

use capmaas_api::MaasIPPool;
use capmaas_runtime::MetricsRegistry;
use capmaas_runtime::metrics_store::StoreGauges;
use kube::ResourceExt;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;

/// The address counts of one pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolUsage {
    /// Namespace of the pool.
    pub namespace: String,
    /// Name of the pool.
    pub pool: String,
    /// Addresses the pool can give out: in use plus free.
    pub usable: i64,
    /// Addresses in use.
    pub allocated: i64,
}

/// The counts of `pool`'s status; `None` until the provider has written them.
pub fn pool_usage(pool: &MaasIPPool) -> Option<PoolUsage> {
    let status = pool.status.as_ref()?;
    let allocated = status.addresses_in_use?;
    let free = status.addresses_free?;
    Some(PoolUsage {
        namespace: pool.namespace().unwrap_or_default(),
        pool: pool.name_any(),
        // Both saturate at i64::MAX for huge IPv6 ranges; so does their sum.
        usable: allocated.saturating_add(free),
        allocated,
    })
}

#[derive(Debug, EncodeLabelSet, Clone, Hash, PartialEq, Eq)]
struct PoolLabels {
    namespace: String,
    pool: String,
}

/// The MaasIPPool gauges, computed from data-controller's store at each scrape.
#[derive(Debug)]
pub struct PoolMetrics;

impl PoolMetrics {
    /// The gauges of `registry`, registered on first use (once per process, not per term);
    /// each leadership term attaches its store with `attach`.
    pub fn get_or_register(registry: &MetricsRegistry) -> StoreGauges<MaasIPPool> {
        StoreGauges::get_or_register(registry, encode)
    }
}

/// Which count of a pool a family reports.
type PoolValue = fn(&PoolUsage) -> i64;

fn encode(pools: &[Arc<MaasIPPool>], encoder: &mut DescriptorEncoder<'_>) -> fmt::Result {
    let mut usage: Vec<PoolUsage> = pools.iter().filter_map(|p| pool_usage(p)).collect();
    // Stable output: the store's order is a hash map's.
    usage.sort_by(|a, b| (&a.namespace, &a.pool).cmp(&(&b.namespace, &b.pool)));
    let families: [(&str, &str, PoolValue); 2] = [
        (
            "ippool_addresses",
            "Addresses a MaasIPPool can give out (in use plus free), from its status",
            |u| u.usable,
        ),
        (
            "ippool_allocated_addresses",
            "Addresses of a MaasIPPool in use, from its status",
            |u| u.allocated,
        ),
    ];
    for (name, help, value) in families {
        let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
        for u in &usage {
            let labels = PoolLabels {
                namespace: u.namespace.clone(),
                pool: u.pool.clone(),
            };
            ConstGauge::new(value(u)).encode(family.encode_family(&labels)?)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::{reflector, watcher};
    use serde_json::json;

    fn pool(name: &str, in_use: Option<i64>, free: Option<i64>) -> MaasIPPool {
        serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasIPPool",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {
                "pools": [{"start": "10.0.0.10", "end": "10.0.0.14"}],
                "prefix": 24, "namePrefix": name,
            },
            "status": {"addressesInUse": in_use, "addressesFree": free},
        }))
        .unwrap()
    }

    #[test]
    fn usage_comes_from_the_status_counts() {
        let usage = pool_usage(&pool("p", Some(3), Some(2))).unwrap();
        assert_eq!((usage.usable, usage.allocated), (5, 3));
        assert_eq!((usage.namespace.as_str(), usage.pool.as_str()), ("ns", "p"));
        assert_eq!(pool_usage(&pool("new", None, None)), None);
        let huge = pool_usage(&pool("v6", Some(10), Some(i64::MAX))).unwrap();
        assert_eq!(huge.usable, i64::MAX);
    }

    #[test]
    fn scrapes_the_attached_store() {
        let registry = MetricsRegistry::new();
        let (store, mut writer) = reflector::store();
        for p in [pool("a", Some(4), Some(1)), pool("b", None, None)] {
            writer.apply_watcher_event(&watcher::Event::Apply(p));
        }
        let text = registry.encode().unwrap();
        assert!(
            !text.contains("ippool"),
            "not registered before a term: {text}"
        );
        let _attached = PoolMetrics::get_or_register(&registry).attach(store);
        let text = registry.encode().unwrap();
        assert!(
            text.contains("# TYPE capmaas_ippool_addresses gauge")
                && text.contains("# TYPE capmaas_ippool_allocated_addresses gauge"),
            "{text}"
        );
        assert!(
            text.contains(r#"capmaas_ippool_addresses{namespace="ns",pool="a"} 5"#),
            "{text}"
        );
        assert!(
            text.contains(r#"capmaas_ippool_allocated_addresses{namespace="ns",pool="a"} 4"#),
            "{text}"
        );
        assert!(!text.contains(r#"pool="b""#), "{text}");
    }
}
