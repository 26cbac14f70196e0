//! The status this controller owns, as pure functions: conditions from what was observed, and
//! the whole status built deterministically so an unchanged world causes no write.

use capmaas_api::MaasClusterStatus;
use capmaas_api::MaasDNSRecord;
use capmaas_api::cluster::{ClusterNetworkStatus, FailureDomain};
use capmaas_api::common::Initialization;
use capmaas_api::conditions::{self as cond, reasons};
use capmaas_runtime::conditions::{ConditionStatus, NewCondition, set_condition, summarize_ready};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::decide::{EndpointPlan, reason};
use crate::prober::ProbeState;

/// `LoadBalancerReady` from the record the gateway reports on.
pub fn load_balancer_condition(
    plan: &EndpointPlan,
    record: Option<&MaasDNSRecord>,
) -> NewCondition {
    let Some(dns) = &plan.dns else {
        return NewCondition::new(
            cond::LOAD_BALANCER_READY,
            ConditionStatus::True,
            reason::EXTERNAL_ENDPOINT,
        )
        .message(format!(
            "endpoint {} is managed outside this provider",
            plan.endpoint.host
        ));
    };
    let fqdn = dns.fqdn();
    let waiting = |message: String| {
        NewCondition::new(
            cond::LOAD_BALANCER_READY,
            ConditionStatus::False,
            reasons::WAIT_FOR_DNS_NAME,
        )
        .message(message)
    };
    let Some(record) = record else {
        return waiting(format!("creating MaasDNSRecord for {fqdn}"));
    };
    let status = record.status.clone().unwrap_or_default();
    let generation = record.metadata.generation;
    let synced = status.ready == Some(true) && status.observed_generation == generation;
    let failed = status
        .conditions
        .as_deref()
        .unwrap_or_default()
        .iter()
        .find(|c| {
            c.type_ == cond::DNS_RECORD_SYNCED
                && c.status == "False"
                && c.observed_generation == generation
        });
    if let Some(f) = failed.filter(|_| !synced) {
        return NewCondition::new(
            cond::LOAD_BALANCER_READY,
            ConditionStatus::False,
            reasons::LOAD_BALANCER_FAILED,
        )
        .message(format!("{fqdn}: {}", f.message));
    }
    let observed = status.observed_addresses.unwrap_or_default();
    if observed.is_empty() {
        let wanted = record.spec.addresses.as_deref().unwrap_or_default();
        return waiting(if synced || wanted.is_empty() {
            format!("{fqdn} has no control-plane address yet")
        } else {
            format!("waiting for MAAS to publish {fqdn}")
        });
    }
    let mut message = format!("{fqdn} resolves to {}", observed.join(", "));
    if !synced {
        // The name already answers; MAAS is catching up with a changed address set.
        message.push_str("; update pending");
    }
    NewCondition::new(
        cond::LOAD_BALANCER_READY,
        ConditionStatus::True,
        reason::LOAD_BALANCER_READY,
    )
    .message(message)
}

/// `status.network.dnsName` for the endpoint `plan` settled: our generated FQDN; for CAPMAAS's
/// name, the value CAPMAAS wrote, unchanged (the plan adopts the name only when it is there, and
/// rewriting it, even to the same name in another case or without its trailing dot, would
/// churn the status); nothing for an endpoint managed outside this provider.
pub fn dns_name(plan: &EndpointPlan, previous: Option<&MaasClusterStatus>) -> Option<String> {
    let dns = plan.dns.as_ref()?;
    let kept = previous
        .and_then(|s| s.network.as_ref())
        .and_then(|n| n.dns_name.clone())
        .filter(|_| plan.adopt);
    Some(kept.unwrap_or_else(|| dns.fqdn()))
}

/// `APIServerAvailable` from the shared prober's state.
pub fn api_server_condition(probe: &ProbeState) -> NewCondition {
    match probe {
        ProbeState::Pending => NewCondition::new(
            cond::API_SERVER_AVAILABLE,
            ConditionStatus::Unknown,
            reason::PROBE_PENDING,
        )
        .message("the workload API server has not been probed yet"),
        ProbeState::Available { version } => NewCondition::new(
            cond::API_SERVER_AVAILABLE,
            ConditionStatus::True,
            reason::API_SERVER_AVAILABLE,
        )
        .message(format!("workload API server {version} answers")),
        ProbeState::Unavailable { reason, message } => {
            NewCondition::new(cond::API_SERVER_AVAILABLE, ConditionStatus::False, reason)
                .message(message.clone())
        }
    }
}

/// `Paused` (v1beta2 contract).
pub fn paused_condition(reason: Option<&str>) -> NewCondition {
    match reason {
        Some(why) => {
            NewCondition::new(cond::PAUSED, ConditionStatus::True, reasons::PAUSED).message(why)
        }
        None => NewCondition::new(cond::PAUSED, ConditionStatus::False, reasons::NOT_PAUSED),
    }
}

/// Everything a normal reconcile puts into status.
#[derive(Debug, Clone)]
pub struct StatusParts {
    /// The endpoint is settled (spec written, DNS record created when managed).
    pub provisioned: bool,
    /// API FQDN, when the DNS record is ours (see [`dns_name`]).
    pub dns_name: Option<String>,
    /// Failure domains from the spec.
    pub failure_domains: Option<Vec<FailureDomain>>,
    /// `LoadBalancerReady`.
    pub load_balancer: NewCondition,
    /// `APIServerAvailable`.
    pub api_server: NewCondition,
    /// `metadata.generation` the status was computed from.
    pub generation: Option<i64>,
}

/// The full status this controller owns after a normal reconcile. Deterministic: transition
/// times move only when a condition's status changes, so an unchanged world compares equal to
/// the previous status and causes no write.
pub fn build_status(
    previous: Option<&MaasClusterStatus>,
    parts: StatusParts,
    now: &Time,
) -> MaasClusterStatus {
    let mut conditions = previous
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let generation = parts.generation;
    set_condition(
        &mut conditions,
        paused_condition(None).observed_generation(generation),
        now,
    );
    set_condition(
        &mut conditions,
        parts.load_balancer.observed_generation(generation),
        now,
    );
    set_condition(
        &mut conditions,
        parts.api_server.observed_generation(generation),
        now,
    );
    let ready = summarize_ready(
        &conditions,
        &[cond::LOAD_BALANCER_READY, cond::API_SERVER_AVAILABLE],
        generation,
    );
    set_condition(&mut conditions, ready, now);
    // Provisioned is never taken back: CAPI would treat the cluster as new.
    let provisioned = parts.provisioned || was_provisioned(previous);
    MaasClusterStatus {
        ready: provisioned.then_some(true),
        initialization: provisioned.then_some(Initialization {
            provisioned: Some(true),
        }),
        network: parts.dns_name.map(|dns_name| ClusterNetworkStatus {
            dns_name: Some(dns_name),
        }),
        failure_domains: parts.failure_domains,
        conditions: Some(conditions),
    }
}

/// The reason of the `LoadBalancerReady` condition in `status`, if any.
pub fn load_balancer_reason(status: Option<&MaasClusterStatus>) -> Option<&str> {
    let conditions = status?.conditions.as_deref()?;
    capmaas_runtime::get_condition(conditions, cond::LOAD_BALANCER_READY).map(|c| c.reason.as_str())
}

/// Whether the previous status says provisioned.
pub fn was_provisioned(previous: Option<&MaasClusterStatus>) -> bool {
    previous
        .and_then(|s| s.initialization.as_ref())
        .and_then(|i| i.provisioned)
        == Some(true)
}

/// The previous status with one condition set (pause, deletion progress): nothing else changes
/// while the controller is told to keep its hands off.
pub fn status_with(
    previous: Option<&MaasClusterStatus>,
    condition: NewCondition,
    now: &Time,
) -> MaasClusterStatus {
    let mut status = previous.cloned().unwrap_or_default();
    let mut conditions = status.conditions.take().unwrap_or_default();
    set_condition(&mut conditions, condition, now);
    status.conditions = Some(conditions);
    status
}

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;
