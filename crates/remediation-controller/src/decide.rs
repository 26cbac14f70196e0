//! What to do next for one MaasRemediation, as a pure function of what was observed and the
//! time. The reconcile (`act.rs`) observes, asks [`decide`], performs the one step, updates its
//! observation from the API's answer and asks again, until a step waits.
//!
//! Every decision rests on what the objects record, never on memory, so a controller killed
//! between any two steps carries on where it stopped. The one ordering that matters: the
//! phase `Waiting` is written *before* our reboot request leaves the host, and `Running` never
//! follows `Waiting` without a new attempt, so a kill between the two cannot cause a second
//! power cycle.

use capmaas_api::capi::Cluster;
use capmaas_api::conditions::reasons;
use capmaas_api::host::PowerState;
use capmaas_api::keys::{ANNOTATION_HOST_UNHEALTHY, ANNOTATION_PAUSED, FINALIZER_MAAS_REMEDIATION};
use capmaas_api::remediation::RemediationPhase;
use capmaas_api::{MaasHost, MaasRemediation};
use capmaas_runtime::controller::finalizer;
use jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;

use crate::args::FenceMode;
use crate::keys::{ANNOTATION_SKIP_REMEDIATION, REBOOT_STATE};
use crate::node::{Backup, needs_fence, ready_since, restore_patch};
use crate::state::{NodeView, State, phase, remediated, settled};

/// Reasons this controller uses besides the shared ones in `capmaas_api::conditions::reasons`.
pub mod reason {
    /// The Machine of the remediation's name does not exist.
    pub const MACHINE_MISSING: &str = "MachineMissing";
    /// The Machine's MaasMachine does not exist (or the Machine names none).
    pub const MAAS_MACHINE_MISSING: &str = "MaasMachineMissing";
    /// The Machine is annotated `cluster.x-k8s.io/skip-remediation`.
    pub const SKIPPED: &str = "RemediationSkipped";
    /// The workload cluster's API does not answer, and the step needs its Node.
    pub const WORKLOAD_UNREACHABLE: &str = "WorkloadUnreachable";
}

/// The next step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Put our finalizer on before anything is touched.
    AddFinalizer,
    /// Paused by the Cluster or an annotation: only the `Paused` condition changes.
    Paused(String),
    /// An operator excluded the Machine from remediation: only the condition changes.
    Skipped,
    /// The Machine, MaasMachine or host is not there: phase `Failed`, look again later.
    Missing {
        /// Condition reason.
        reason: &'static str,
        /// What is missing.
        message: String,
    },
    /// The workload cluster did not answer and the next step needs its Node: retry later, for
    /// at most the strategy's `timeoutSeconds` ([`workload_patience_spent`]); then the step
    /// goes on without the Node.
    WorkloadUnreachable,
    /// Record the Node's labels and annotations on the remediation before touching it.
    BackupNode,
    /// Start attempt `attempt`: phase `Running`, `retryCount`, `lastRemediated` = now.
    BeginAttempt {
        /// 1 for the first.
        attempt: i32,
    },
    /// `Failed` while something was missing; it is back: `Running` again, counters kept.
    Resume,
    /// Fence the Node (taint it or delete it).
    Fence(FenceMode),
    /// Put our reboot request on the host; the gateway powers the server off.
    RequestReboot,
    /// The request is on the host; the server is not reported off yet.
    WaitForPowerOff,
    /// The server is off: record phase `Waiting` (before the request goes).
    MarkWaiting,
    /// Take our reboot request off this host: the gateway powers the server on again.
    ReleaseHost(String),
    /// Waiting for the server to be on and the Node Ready.
    WaitForNode,
    /// Put the Node's backed-up labels and annotations back, take our fence away.
    RestoreNode,
    /// The Node is back: `Ready=True`, reason `Remediated`.
    MarkRemediated,
    /// Giving up: mark the host `maas.cluster.x-k8s.io/unhealthy`.
    MarkHostUnhealthy,
    /// Giving up: set the Machine's `OwnerRemediated=False` so its owner replaces it.
    SetOwnerRemediated,
    /// Giving up: phase `Deleting machine`.
    GiveUp,
    /// Deleting, and the MaasHost cache (where other hosts holding our request are found) is
    /// not filled yet: look again in a moment.
    WaitForHostCache,
    /// Deleting, the host released and the Node restored: drop the finalizer.
    RemoveFinalizer,
    /// Nothing to do until something changes (the why is for the log).
    Done(&'static str),
}

/// The next step for `s` at `now`.
pub fn decide(s: &State, now: Timestamp) -> Step {
    let r = &s.remediation;
    if r.metadata.deletion_timestamp.is_some() {
        return decide_delete(s, now);
    }
    if !finalizer::has(r, FINALIZER_MAAS_REMEDIATION) {
        return Step::AddFinalizer;
    }
    if let Some(why) = pause_reason(s) {
        return Step::Paused(why);
    }
    if skip_requested(s) {
        // An operator took the Machine out of remediation: never leave its server held off.
        if let Some(host) = s.host.iter().filter(|h| s.holds(h)).chain(&s.held).next() {
            return Step::ReleaseHost(host.name_any());
        }
        return Step::Skipped;
    }
    if let Some(host) = s.held.first() {
        return Step::ReleaseHost(host.name_any());
    }
    if settled(r) {
        if let Some(host) = s.host.as_ref().filter(|h| s.holds(h)) {
            return Step::ReleaseHost(host.name_any());
        }
        return Step::Done(if remediated(r) {
            "remediated; the MachineHealthCheck deletes this object"
        } else {
            "gave up; the Machine's owner replaces it"
        });
    }
    let Some(host) = s.host.as_ref() else {
        let (reason, message) = missing(s);
        return Step::Missing { reason, message };
    };
    match phase(r) {
        None => start(s, now),
        Some(RemediationPhase::Failed) if attempt(r).is_none() => start(s, now),
        Some(RemediationPhase::Failed) => Step::Resume,
        Some(RemediationPhase::Running) => running(s, host, now),
        Some(RemediationPhase::Waiting) => waiting(s, host, now),
        Some(RemediationPhase::DeletingMachine) => Step::Done("gave up"),
    }
}

/// Deleting: never leave a server held off because the object went away, then give the Node
/// back what it had, then let go.
fn decide_delete(s: &State, now: Timestamp) -> Step {
    let r = &s.remediation;
    if !finalizer::has(r, FINALIZER_MAAS_REMEDIATION) {
        return Step::Done("being deleted; our finalizer is gone");
    }
    let held = s.host.iter().filter(|h| s.holds(h)).chain(&s.held).next();
    if let Some(host) = held {
        return Step::ReleaseHost(host.name_any());
    }
    if !s.hosts_synced {
        return Step::WaitForHostCache;
    }
    // A remediated Node was restored already; a Machine being replaced takes its Node along.
    let machine_stays = s
        .machine
        .as_ref()
        .is_some_and(|m| m.metadata.deletion_timestamp.is_none());
    if machine_stays && !settled(r) {
        // The Node is given back what it had, unless its cluster stays unreachable for a whole
        // timeout: a deletion must end.
        let deleted = r.metadata.deletion_timestamp.as_ref().map_or(now, |t| t.0);
        match &s.node {
            NodeView::Unreachable { gone: false } if !timed_out(r, deleted, now) => {
                return Step::WorkloadUnreachable;
            }
            NodeView::Present(node)
                if restore_patch(node, backup(r).as_ref(), s.uid()).is_some() =>
            {
                return Step::RestoreNode;
            }
            _ => {}
        }
    }
    Step::RemoveFinalizer
}

/// No attempt yet: back the Node up, then begin attempt 1.
fn start(s: &State, now: Timestamp) -> Step {
    match &s.node {
        NodeView::Unreachable { .. } if !workload_patience_spent(&s.remediation, now) => {
            Step::WorkloadUnreachable
        }
        NodeView::Present(_) if backup(&s.remediation).is_none() => Step::BackupNode,
        _ => Step::BeginAttempt { attempt: 1 },
    }
}

fn running(s: &State, host: &MaasHost, now: Timestamp) -> Step {
    let r = &s.remediation;
    let Some(since) = last_remediated(r) else {
        return Step::BeginAttempt {
            attempt: attempt(r).unwrap_or(1).max(1),
        };
    };
    if timed_out(r, since, now) {
        return on_timeout(s, host);
    }
    // The Node is backed up before the server goes down (its labels are read from the
    // workload API, which may go down with it).
    if !s.holds(host) {
        match &s.node {
            NodeView::Unreachable { .. } if !workload_patience_spent(r, now) => {
                return Step::WorkloadUnreachable;
            }
            NodeView::Present(_) if backup(r).is_none() => return Step::BackupNode,
            _ => {}
        }
        return Step::RequestReboot;
    }
    if !powered_off(host) {
        return Step::WaitForPowerOff;
    }
    // Fenced only once MAAS reports the server off, as Kubernetes' non-graceful node shutdown
    // requires: a server still running (partitioned, not dead) would otherwise have its pods
    // force-deleted and its volumes detached while it still writes to them. A workload API
    // that went down with the server cannot be fenced through, and need not be: nothing can
    // move the Node's pods while it is unreachable, and the reboot goes on.
    match &s.node {
        // Rebooted without a backup (the workload was unreachable): taken before the fence.
        NodeView::Present(_) if backup(r).is_none() => Step::BackupNode,
        NodeView::Present(node) if needs_fence(node, s.fence, since) => Step::Fence(s.fence),
        _ => Step::MarkWaiting,
    }
}

fn waiting(s: &State, host: &MaasHost, now: Timestamp) -> Step {
    let r = &s.remediation;
    if s.holds(host) {
        return Step::ReleaseHost(host.name_any());
    }
    let since = last_remediated(r).unwrap_or(now);
    let back = s
        .node()
        .filter(|n| ready_since(n, since) && powered_on(host));
    if let Some(node) = back {
        if restore_patch(node, backup(r).as_ref(), s.uid()).is_some() {
            return Step::RestoreNode;
        }
        return Step::MarkRemediated;
    }
    if timed_out(r, since, now) {
        return on_timeout(s, host);
    }
    Step::WaitForNode
}

/// The attempt took longer than `timeoutSeconds`: the next one, or give up.
fn on_timeout(s: &State, host: &MaasHost) -> Step {
    let r = &s.remediation;
    let done = attempt(r).unwrap_or(1);
    if done < r.spec.strategy.retry_limit {
        return Step::BeginAttempt { attempt: done + 1 };
    }
    if s.holds(host) {
        return Step::ReleaseHost(host.name_any());
    }
    if !host.annotations().contains_key(ANNOTATION_HOST_UNHEALTHY) {
        return Step::MarkHostUnhealthy;
    }
    if s.machine.is_some() && !s.owner_remediated {
        return Step::SetOwnerRemediated;
    }
    Step::GiveUp
}

/// Whether the workload cluster has been waited for long enough: the strategy's
/// `timeoutSeconds` since the remediation was created. From then on the reboot goes on without
/// the Node backup (nothing is fenced through an API that does not answer, so nothing needs
/// restoring), since a cluster whose only control plane hung answers only after that reboot.
pub fn workload_patience_spent(r: &MaasRemediation, now: Timestamp) -> bool {
    let created = r.metadata.creation_timestamp.as_ref().map_or(now, |t| t.0);
    timed_out(r, created, now)
}

/// Whether the attempt that started at `since` has run out of time at `now`.
pub fn timed_out(r: &MaasRemediation, since: Timestamp, now: Timestamp) -> bool {
    let limit = SignedDuration::from_secs(i64::from(r.spec.strategy.timeout_seconds));
    now.duration_since(since) >= limit
}

/// The gateway took our request and reports the server off.
pub fn powered_off(host: &MaasHost) -> bool {
    power(host) == Some(PowerState::Off)
        && capmaas_api::reboot::is_powered_off(
            host.annotations().get(REBOOT_STATE).map(String::as_str),
        )
}

/// The gateway reports the server on.
pub fn powered_on(host: &MaasHost) -> bool {
    power(host) == Some(PowerState::On)
}

fn power(host: &MaasHost) -> Option<PowerState> {
    host.status.as_ref().and_then(|s| s.power_state)
}

/// The attempt in progress (`status.retryCount`).
pub fn attempt(r: &MaasRemediation) -> Option<i32> {
    r.status.as_ref().and_then(|s| s.retry_count)
}

/// Start of the attempt in progress (`status.lastRemediated`).
pub fn last_remediated(r: &MaasRemediation) -> Option<Timestamp> {
    r.status
        .as_ref()
        .and_then(|s| s.last_remediated.as_ref())
        .map(|t| t.0)
}

/// The Node backup recorded on the remediation.
pub fn backup(r: &MaasRemediation) -> Option<Backup> {
    Backup::from_annotations(r.annotations())
}

/// Why reconciliation is paused, or `None`.
pub fn pause_reason(s: &State) -> Option<String> {
    if s.cluster.as_ref().is_some_and(Cluster::is_paused) {
        Some("Cluster spec.paused is true".to_owned())
    } else if s.remediation.annotations().contains_key(ANNOTATION_PAUSED) {
        Some(format!("annotation {ANNOTATION_PAUSED} is set"))
    } else if s
        .machine
        .as_ref()
        .is_some_and(|m| m.annotations().contains_key(ANNOTATION_PAUSED))
    {
        Some(format!("the Machine has annotation {ANNOTATION_PAUSED}"))
    } else {
        None
    }
}

/// Whether an operator excluded the Machine from remediation.
pub fn skip_requested(s: &State) -> bool {
    s.machine
        .as_ref()
        .is_some_and(|m| m.annotations().contains_key(ANNOTATION_SKIP_REMEDIATION))
}

/// What is missing on the way from the Machine to its host.
fn missing(s: &State) -> (&'static str, String) {
    let name = s.remediation.name_any();
    let Some(machine) = &s.machine else {
        return (reason::MACHINE_MISSING, format!("Machine {name} not found"));
    };
    let mm = &machine.spec.infrastructure_ref.name;
    if mm.is_empty() {
        return (
            reason::MAAS_MACHINE_MISSING,
            format!("Machine {name} has no spec.infrastructureRef"),
        );
    }
    let Some(maas_machine) = &s.maas_machine else {
        return (
            reason::MAAS_MACHINE_MISSING,
            format!("MaasMachine {mm} not found"),
        );
    };
    match maas_machine
        .status
        .as_ref()
        .and_then(|st| st.host_ref.as_ref())
        .filter(|h| !h.name.is_empty())
    {
        Some(host) => (
            reasons::HOST_MISSING,
            format!(
                "MaasHost {} not found, or not claimed by MaasMachine {mm} (its status.hostRef is \
                 only the machine's intent; no other machine's server is rebooted)",
                host.name
            ),
        ),
        None => (
            reasons::HOST_MISSING,
            format!("MaasMachine {mm} has no host (status.hostRef)"),
        ),
    }
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "decide_walk_tests.rs"]
mod walk_tests;
