//! Gauges of the MaasHosts the gateway sees: `capmaas_hosts{namespace,state}` and
//! `capmaas_host_state_oldest_seconds{state}`, computed when Prometheus scrapes, from the host
//! controller's reflector store ([`crate::context::Gateway::hosts`]).
//!
//! A collector rather than gauges updated by a task: the store already holds every host, so a
//! scrape counts them in one pass (thousands of hosts take well under a millisecond), the numbers
//! are never older than the cache, and no task has to be started, timed and stopped with the
//! term. Outside a leadership term the store does not exist and nothing is reported (the
//! families stay declared), so a standby replica adds nothing to a sum over replicas.
//!
//! The status does not record when a host entered its state. The age is taken from the host's
//! `Provisioned` condition, whose `lastTransitionTime` moves when its status moves: to Unknown
//! when a deployment is requested or a release starts, to True when deployed, to False when it
//! fails. For a host in `Allocating`, `Allocated` or `Deploying` it is the time since the
//! deployment was asked for; in `Releasing`, since the release began.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use capmaas_api::MaasHost;
use capmaas_api::conditions as cond;
use capmaas_api::host::ProvisioningState;
use capmaas_runtime::MetricsRegistry;

use crate::host::status::REASON_UNCLAIMED;
use capmaas_runtime::metrics_store::StoreGauges;
use kube::ResourceExt;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;

/// `state` label of a host whose status has no provisioning state yet.
pub const STATE_UNKNOWN: &str = "Unknown";

/// States a host passes through on its way somewhere else: the ones
/// `capmaas_host_state_oldest_seconds` reports (a host may stay in the others for good).
pub const TRANSITIONAL_STATES: [ProvisioningState; 4] = [
    ProvisioningState::Allocating,
    ProvisioningState::Allocated,
    ProvisioningState::Deploying,
    ProvisioningState::Releasing,
];

/// The `state` label value: the status's `provisioningState` as the API spells it.
pub fn state_label(state: Option<ProvisioningState>) -> &'static str {
    state.map_or(STATE_UNKNOWN, ProvisioningState::as_str)
}

/// What one scrape reports.
#[derive(Debug, Default, PartialEq)]
pub struct HostSummary {
    /// Hosts per `(namespace, state)`.
    pub counts: BTreeMap<(String, &'static str), i64>,
    /// Per transitional state with at least one host that has a `Provisioned` condition: the
    /// largest age of that condition, in seconds.
    pub oldest_seconds: BTreeMap<&'static str, f64>,
    /// Per namespace, hosts reporting `Unclaimed`: a server allocated to this installation and
    /// deployed or held, that no consumer here claims (kept unless `--release-unclaimed-after`).
    pub unclaimed: BTreeMap<String, i64>,
}

/// Counts `hosts` by namespace and state, and the oldest of each transitional state at `now`.
pub fn summarize<'a>(
    hosts: impl IntoIterator<Item = &'a MaasHost>,
    now: jiff::Timestamp,
) -> HostSummary {
    let mut summary = HostSummary::default();
    for host in hosts {
        let status = host.status.as_ref();
        let state = status.and_then(|s| s.provisioning_state);
        let label = state_label(state);
        *summary
            .counts
            .entry((host.namespace().unwrap_or_default(), label))
            .or_insert(0) += 1;
        let provisioned = status
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == cond::PROVISIONED));
        if provisioned.is_some_and(|c| c.reason == REASON_UNCLAIMED) {
            *summary
                .unclaimed
                .entry(host.namespace().unwrap_or_default())
                .or_insert(0) += 1;
        }
        if !state.is_some_and(|s| TRANSITIONAL_STATES.contains(&s)) {
            continue;
        }
        let since = provisioned.map(|c| c.last_transition_time.0);
        if let Some(since) = since {
            // A clock behind the API server's gives a negative age: report 0, not a negative wait.
            let age = now.duration_since(since).as_secs_f64().max(0.0);
            let oldest = summary.oldest_seconds.entry(label).or_insert(age);
            *oldest = oldest.max(age);
        }
    }
    summary
}

#[derive(Debug, EncodeLabelSet, Clone, Hash, PartialEq, Eq)]
struct CountLabels {
    namespace: String,
    state: &'static str,
}

#[derive(Debug, EncodeLabelSet, Clone, Hash, PartialEq, Eq)]
struct NamespaceLabels {
    namespace: String,
}

#[derive(Debug, EncodeLabelSet, Clone, Hash, PartialEq, Eq)]
struct StateLabels {
    state: &'static str,
}

/// The MaasHost gauges, computed from the gateway's store at each scrape.
#[derive(Debug)]
pub struct HostMetrics;

impl HostMetrics {
    /// The gauges of `registry`, registered on first use (once per process, not per term);
    /// each leadership term attaches its store with `attach`.
    pub fn get_or_register(registry: &MetricsRegistry) -> StoreGauges<MaasHost> {
        StoreGauges::get_or_register(registry, encode)
    }
}

fn encode(hosts: &[Arc<MaasHost>], encoder: &mut DescriptorEncoder<'_>) -> fmt::Result {
    let summary = summarize(hosts.iter().map(AsRef::as_ref), jiff::Timestamp::now());
    {
        let mut family = encoder.encode_descriptor(
            "hosts",
            "MaasHosts by namespace and provisioning state, as the gateway's cache holds them",
            None,
            MetricType::Gauge,
        )?;
        for ((namespace, state), count) in summary.counts {
            let labels = CountLabels { namespace, state };
            ConstGauge::new(count).encode(family.encode_family(&labels)?)?;
        }
    }
    {
        let mut family = encoder.encode_descriptor(
            "host_unclaimed_allocations",
            "MaasHosts per namespace whose MAAS machine is allocated to this installation but \
             claimed by no consumer here (Provisioned reason Unclaimed)",
            None,
            MetricType::Gauge,
        )?;
        for (namespace, count) in summary.unclaimed {
            let labels = NamespaceLabels { namespace };
            ConstGauge::new(count).encode(family.encode_family(&labels)?)?;
        }
    }
    let mut family = encoder.encode_descriptor(
        "host_state_oldest_seconds",
        "Per transitional provisioning state, the longest time a host in it has had its \
         Provisioned condition unchanged",
        None,
        MetricType::Gauge,
    )?;
    for (state, seconds) in summary.oldest_seconds {
        ConstGauge::new(seconds).encode(family.encode_family(&StateLabels { state })?)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::{reflector, watcher};
    use serde_json::json;

    fn host(
        ns: &str,
        name: &str,
        state: Option<&str>,
        provisioned_since: Option<&str>,
    ) -> MaasHost {
        let mut status = json!({});
        if let Some(state) = state {
            status["provisioningState"] = json!(state);
        }
        if let Some(since) = provisioned_since {
            status["conditions"] = json!([{
                "type": "Provisioned", "status": "Unknown", "reason": "MachineDeploying",
                "message": "", "lastTransitionTime": since
            }]);
        }
        serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasHost",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"systemID": format!("sys-{name}")},
            "status": status,
        }))
        .unwrap()
    }

    fn now() -> jiff::Timestamp {
        "2026-01-01T12:00:00Z".parse().unwrap()
    }

    #[test]
    fn counts_by_namespace_and_state_and_ages_transitional_states() {
        let hosts = [
            host("a", "h1", Some("Deploying"), Some("2026-01-01T11:00:00Z")),
            host("a", "h2", Some("Deploying"), Some("2026-01-01T11:50:00Z")),
            host("b", "h3", Some("Deploying"), None),
            host("a", "h4", Some("Deployed"), Some("2026-01-01T08:00:00Z")),
            host("a", "h5", None, None),
            // A clock skewed behind the API server's: no negative age.
            host("a", "h6", Some("Releasing"), Some("2026-01-01T12:00:05Z")),
        ];
        let summary = summarize(&hosts, now());
        let count = |ns: &str, state: &'static str| summary.counts.get(&(ns.to_owned(), state));
        assert_eq!(count("a", "Deploying"), Some(&2));
        assert_eq!(count("b", "Deploying"), Some(&1));
        assert_eq!(count("a", "Deployed"), Some(&1));
        assert_eq!(count("a", STATE_UNKNOWN), Some(&1));
        assert_eq!(summary.oldest_seconds.get("Deploying"), Some(&3600.0));
        assert_eq!(summary.oldest_seconds.get("Releasing"), Some(&0.0));
        assert_eq!(
            summary.oldest_seconds.get("Deployed"),
            None,
            "a settled state has no oldest"
        );
        assert!(summary.unclaimed.is_empty());
    }

    #[test]
    fn counts_unclaimed_allocations_per_namespace() {
        let mut unclaimed = host("a", "u1", Some("Deployed"), Some("2026-01-01T11:00:00Z"));
        if let Some(c) = unclaimed
            .status
            .as_mut()
            .and_then(|s| s.conditions.as_mut())
            .and_then(|c| c.first_mut())
        {
            c.reason = REASON_UNCLAIMED.to_owned();
        }
        let hosts = [
            unclaimed,
            host("a", "h1", Some("Deployed"), Some("2026-01-01T11:00:00Z")),
        ];
        let summary = summarize(&hosts, now());
        assert_eq!(summary.unclaimed.get("a"), Some(&1));
        assert_eq!(summary.unclaimed.len(), 1);
    }

    #[test]
    fn scrapes_the_attached_store_only_while_attached() {
        let registry = MetricsRegistry::new();
        let metrics = HostMetrics::get_or_register(&registry);
        // The next term gets the same collector, not a second one.
        let again = HostMetrics::get_or_register(&registry);
        let (store, mut writer) = reflector::store();
        writer.apply_watcher_event(&watcher::Event::Apply(host(
            "ns",
            "h1",
            Some("Deploying"),
            Some("2020-01-01T00:00:00Z"),
        )));
        let text = registry.encode().unwrap();
        assert_eq!(
            text.matches("# TYPE capmaas_hosts gauge").count(),
            1,
            "{text}"
        );
        assert!(
            text.contains("# TYPE capmaas_host_state_oldest_seconds gauge"),
            "{text}"
        );
        assert!(
            !text.contains("capmaas_hosts{"),
            "no term, no samples: {text}"
        );

        let attached = again.attach(store);
        let text = registry.encode().unwrap();
        assert!(
            text.contains(r#"capmaas_hosts{namespace="ns",state="Deploying"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"capmaas_host_state_oldest_seconds{state="Deploying"} "#),
            "{text}"
        );
        drop(attached);
        assert!(!registry.encode().unwrap().contains("capmaas_hosts{"));
        drop(metrics);
    }
}
