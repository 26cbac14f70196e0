//! `capmaas_machines{namespace,phase}`: the MaasMachines by provisioning phase, counted when
//! Prometheus scrapes from the controller's own MaasMachine reflector store.
//!
//! A collector rather than a gauge a task keeps up to date: the store already holds every
//! MaasMachine, so one pass per scrape is cheap, the count is as fresh as the cache, and nothing
//! has to be started and stopped with the term. Outside a leadership term there is no store and
//! no sample (the family stays declared), so a standby replica does not double a sum.
//!
//! MaasMachine has no phase field: [`phase`] reads it from what the controller writes, the
//! deletion timestamp and the `Paused`, `HostAssociated` and `MachineDeployed` conditions (their
//! reasons are set per step, `status::step_conditions`).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use capmaas_api::MaasMachine;
use capmaas_api::conditions::{self as cond, reasons};
use capmaas_runtime::MetricsRegistry;
use capmaas_runtime::metrics_store::StoreGauges;
use kube::ResourceExt;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;

use crate::watch::waiting_for_host;

/// Being deleted: the host is released, then the finalizer removed.
pub const PHASE_DELETING: &str = "Deleting";
/// The Cluster or the object is paused.
pub const PHASE_PAUSED: &str = "Paused";
/// Deployed, the provisioning signals set.
pub const PHASE_PROVISIONED: &str = "Provisioned";
/// No host fits (`NoHostAvailable`, `NoCapacityInFailureDomain`).
pub const PHASE_WAITING_FOR_HOST: &str = "WaitingForHost";
/// A host is claimed, its MaasDataClaim is not rendered yet.
pub const PHASE_WAITING_FOR_DATA: &str = "WaitingForData";
/// The deployment is asked of the gateway; MAAS has not started it yet.
pub const PHASE_DEPLOYMENT_REQUESTED: &str = "DeploymentRequested";
/// MAAS is deploying the host.
pub const PHASE_DEPLOYING: &str = "Deploying";
/// The host's state does not fit a deployment (releasing, unavailable in MAAS).
pub const PHASE_HOST_NOT_READY: &str = "HostNotReady";
/// The deployment failed, the host is broken or gone: a person should look.
pub const PHASE_FAILED: &str = "Failed";
/// Anything before a host is chosen: waiting for the Cluster's infrastructure, the bootstrap
/// data, the owner Machine, or not reconciled yet.
pub const PHASE_PENDING: &str = "Pending";

/// Every `phase` label value.
pub const PHASES: [&str; 10] = [
    PHASE_PENDING,
    PHASE_WAITING_FOR_HOST,
    PHASE_WAITING_FOR_DATA,
    PHASE_DEPLOYMENT_REQUESTED,
    PHASE_DEPLOYING,
    PHASE_HOST_NOT_READY,
    PHASE_PROVISIONED,
    PHASE_FAILED,
    PHASE_PAUSED,
    PHASE_DELETING,
];

fn condition<'a>(
    mm: &'a MaasMachine,
    type_: &str,
) -> Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    mm.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == type_))
}

/// The provisioning phase of `mm`, one of [`PHASES`].
pub fn phase(mm: &MaasMachine) -> &'static str {
    if mm.metadata.deletion_timestamp.is_some() {
        return PHASE_DELETING;
    }
    if condition(mm, cond::PAUSED).is_some_and(|c| c.status == "True") {
        return PHASE_PAUSED;
    }
    if waiting_for_host(mm) {
        return PHASE_WAITING_FOR_HOST;
    }
    let Some(deployed) = condition(mm, cond::MACHINE_DEPLOYED) else {
        return PHASE_PENDING;
    };
    if deployed.status == "True" {
        return PHASE_PROVISIONED;
    }
    match deployed.reason.as_str() {
        reasons::WAITING_FOR_DATA => PHASE_WAITING_FOR_DATA,
        reasons::MACHINE_DEPLOY_STARTED => PHASE_DEPLOYMENT_REQUESTED,
        reasons::MACHINE_DEPLOYING => PHASE_DEPLOYING,
        reasons::MACHINE_STATE_UNDEFINED => PHASE_HOST_NOT_READY,
        reasons::MACHINE_DEPLOY_FAILED | reasons::HOST_MISSING | reasons::MACHINE_NOT_FOUND => {
            PHASE_FAILED
        }
        // A release without a deletion timestamp is not written; anything else is a wait for
        // a prerequisite (infrastructure, bootstrap data).
        _ => PHASE_PENDING,
    }
}

/// MaasMachines per `(namespace, phase)`.
pub fn count_phases<'a>(
    machines: impl IntoIterator<Item = &'a MaasMachine>,
) -> BTreeMap<(String, &'static str), i64> {
    let mut counts = BTreeMap::new();
    for mm in machines {
        *counts
            .entry((mm.namespace().unwrap_or_default(), phase(mm)))
            .or_insert(0) += 1;
    }
    counts
}

#[derive(Debug, EncodeLabelSet, Clone, Hash, PartialEq, Eq)]
struct PhaseLabels {
    namespace: String,
    phase: &'static str,
}

/// The MaasMachine gauge, computed from machine-controller's store at each scrape.
#[derive(Debug)]
pub struct MachineMetrics;

impl MachineMetrics {
    /// The gauges of `registry`, registered on first use (once per process, not per term);
    /// each leadership term attaches its store with `attach`.
    pub fn get_or_register(registry: &MetricsRegistry) -> StoreGauges<MaasMachine> {
        StoreGauges::get_or_register(registry, encode)
    }
}

fn encode(machines: &[Arc<MaasMachine>], encoder: &mut DescriptorEncoder<'_>) -> fmt::Result {
    let counts = count_phases(machines.iter().map(AsRef::as_ref));
    let mut family = encoder.encode_descriptor(
        "machines",
        "MaasMachines by namespace and provisioning phase, as machine-controller's cache \
         holds them",
        None,
        MetricType::Gauge,
    )?;
    for ((namespace, phase), count) in counts {
        let labels = PhaseLabels { namespace, phase };
        ConstGauge::new(count).encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{deleting, maas_machine};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    use kube::runtime::{reflector, watcher};

    fn with(mut mm: MaasMachine, type_: &str, status: &str, reason: &str) -> MaasMachine {
        let conditions = mm
            .status
            .get_or_insert_with(Default::default)
            .conditions
            .get_or_insert_with(Vec::new);
        conditions.push(Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: Time(jiff::Timestamp::UNIX_EPOCH),
        });
        mm
    }

    fn deployed(name: &str, status: &str, reason: &str) -> MaasMachine {
        with(maas_machine(name), cond::MACHINE_DEPLOYED, status, reason)
    }

    #[test]
    fn phases_follow_the_conditions_the_steps_write() {
        let cases = [
            (maas_machine("new"), PHASE_PENDING),
            (
                deployed(
                    "infra",
                    "False",
                    reasons::WAITING_FOR_CLUSTER_INFRASTRUCTURE,
                ),
                PHASE_PENDING,
            ),
            (
                with(
                    maas_machine("nohost"),
                    cond::HOST_ASSOCIATED,
                    "False",
                    reasons::NO_HOST_AVAILABLE,
                ),
                PHASE_WAITING_FOR_HOST,
            ),
            (
                deployed("data", "False", reasons::WAITING_FOR_DATA),
                PHASE_WAITING_FOR_DATA,
            ),
            (
                deployed("asked", "False", reasons::MACHINE_DEPLOY_STARTED),
                PHASE_DEPLOYMENT_REQUESTED,
            ),
            (
                deployed("deploying", "False", reasons::MACHINE_DEPLOYING),
                PHASE_DEPLOYING,
            ),
            (
                deployed("undefined", "False", reasons::MACHINE_STATE_UNDEFINED),
                PHASE_HOST_NOT_READY,
            ),
            (
                deployed("failed", "False", reasons::MACHINE_DEPLOY_FAILED),
                PHASE_FAILED,
            ),
            (
                deployed("gone", "False", reasons::HOST_MISSING),
                PHASE_FAILED,
            ),
            (
                deployed("done", "True", reasons::MACHINE_DEPLOYED),
                PHASE_PROVISIONED,
            ),
            (
                with(
                    maas_machine("paused"),
                    cond::PAUSED,
                    "True",
                    reasons::PAUSED,
                ),
                PHASE_PAUSED,
            ),
            (
                deleting(deployed("bye", "True", reasons::MACHINE_DEPLOYED)),
                PHASE_DELETING,
            ),
        ];
        for (mm, expected) in &cases {
            assert_eq!(phase(mm), *expected, "{}", mm.name_any());
            assert!(PHASES.contains(expected));
        }
        let counts = count_phases(cases.iter().map(|(mm, _)| mm));
        assert_eq!(counts.get(&("ns".to_owned(), PHASE_PENDING)), Some(&2));
        assert_eq!(counts.get(&("ns".to_owned(), PHASE_FAILED)), Some(&2));
    }

    #[test]
    fn scrapes_the_attached_store() {
        let registry = MetricsRegistry::new();
        let metrics = MachineMetrics::get_or_register(&registry);
        let (store, mut writer) = reflector::store();
        writer.apply_watcher_event(&watcher::Event::Apply(deployed(
            "m",
            "False",
            reasons::MACHINE_DEPLOYING,
        )));
        let text = registry.encode().unwrap();
        assert!(text.contains("# TYPE capmaas_machines gauge"), "{text}");
        assert!(!text.contains("capmaas_machines{"), "{text}");
        let _attached = MachineMetrics::get_or_register(&registry).attach(store);
        let text = registry.encode().unwrap();
        assert_eq!(text.matches("# TYPE capmaas_machines gauge").count(), 1);
        assert!(
            text.contains(r#"capmaas_machines{namespace="ns",phase="Deploying"} 1"#),
            "{text}"
        );
        drop(metrics);
    }
}
