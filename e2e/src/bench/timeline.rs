//! Where a machine spends its time: the moment each step of each machine was first seen by a
//! watch in the bench process ([`super::watch`]), joined with the simulator's status history
//! (allocate, deploy, Deployed), and the p50/p99 of each hop.
//!
//! Watch receipt times, not `creationTimestamp`s: those have one-second resolution, and a
//! field set by an update has no timestamp at all.

use std::collections::BTreeMap;
use std::time::Instant;

use maas_sim::{NodeStatus, StatusChange};
use serde_json::Value;

use super::stats::p50_p99;

/// The steps of one machine, in the order they normally happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Milestone {
    /// CAPI created the Machine (MachineSet).
    MachineCreated,
    /// CAPI created its MaasMachine (from the template).
    MaasMachineCreated,
    /// machine-controller claimed a MaasHost (`spec.consumerRef`).
    HostClaimed,
    /// machine-controller asked for the deployment (`spec.provisioning`).
    HostProvisioning,
    /// MAAS allocated the server (status Allocated).
    MaasAllocated,
    /// MAAS accepted the deploy call (status Deploying).
    MaasDeploying,
    /// MAAS finished the deployment (status Deployed).
    MaasDeployed,
    /// The gateway reported it (`status.provisioningState: Deployed`).
    HostDeployed,
    /// machine-controller set `spec.providerID` on the MaasMachine.
    ProviderId,
    /// machine-controller reported the MaasMachine provisioned (`status.ready` or
    /// `status.initialization.provisioned`).
    MaasMachineReady,
    /// The workload Node appeared.
    NodeCreated,
    /// CAPI reported the Machine Running with a nodeRef.
    MachineRunning,
}

impl Milestone {
    /// Every milestone, in order.
    pub const ALL: [Self; 12] = [
        Self::MachineCreated,
        Self::MaasMachineCreated,
        Self::HostClaimed,
        Self::HostProvisioning,
        Self::MaasAllocated,
        Self::MaasDeploying,
        Self::MaasDeployed,
        Self::HostDeployed,
        Self::ProviderId,
        Self::MaasMachineReady,
        Self::NodeCreated,
        Self::MachineRunning,
    ];

    /// How the table names it.
    pub fn label(self) -> &'static str {
        match self {
            Self::MachineCreated => "CAPI Machine created",
            Self::MaasMachineCreated => "MaasMachine created",
            Self::HostClaimed => "MaasHost claimed (spec.consumerRef)",
            Self::HostProvisioning => "MaasHost spec.provisioning set",
            Self::MaasAllocated => "MAAS allocated",
            Self::MaasDeploying => "MAAS deploy call (Deploying)",
            Self::MaasDeployed => "MAAS Deployed",
            Self::HostDeployed => "MaasHost status Deployed",
            Self::ProviderId => "MaasMachine spec.providerID",
            Self::MaasMachineReady => "MaasMachine provisioned (ready)",
            Self::NodeCreated => "Node created",
            Self::MachineRunning => "CAPI Machine Running",
        }
    }

    pub(super) fn index(self) -> usize {
        Self::ALL.iter().position(|m| *m == self).unwrap_or(0)
    }
}

/// The watched kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Machine,
    MaasMachine,
    Host,
    Node,
}

#[derive(Debug, Clone)]
struct MachineMarks {
    created: Instant,
    infra: Option<String>,
    provider_id: Option<String>,
    running: Option<Instant>,
    deleted: Option<Instant>,
}

#[derive(Debug, Clone)]
struct MaasMachineMarks {
    created: Instant,
    system_id: Option<String>,
    provider_id: Option<Instant>,
    ready: Option<Instant>,
}

#[derive(Debug, Clone, Default)]
struct HostMarks {
    system_id: Option<String>,
    consumer: Option<String>,
    claimed: Option<Instant>,
    provisioning: Option<Instant>,
    deployed: Option<Instant>,
}

#[derive(Debug, Clone)]
struct NodeMarks {
    created: Instant,
    provider_id: Option<String>,
}

/// Edges of a host that outlive its claims: whether it is free (`status.provisioningState:
/// Available`) and each moment it became so; whether a deployment is requested
/// (`spec.provisioning`) and each moment the request was withdrawn.
#[derive(Debug, Clone, Default)]
struct HostEdges {
    free: bool,
    became_free: Vec<Instant>,
    requested: bool,
    withdrawn: Vec<Instant>,
}

/// What the watches saw, by object name.
#[derive(Debug, Default)]
pub(super) struct Recorder {
    machines: BTreeMap<String, MachineMarks>,
    maas_machines: BTreeMap<String, MaasMachineMarks>,
    hosts: BTreeMap<String, HostMarks>,
    host_edges: BTreeMap<String, HostEdges>,
    /// The first moment each Machine, resp. MaasMachine, was seen with a deletionTimestamp.
    machines_deleting: BTreeMap<String, Instant>,
    maas_machines_deleting: BTreeMap<String, Instant>,
    nodes: BTreeMap<String, NodeMarks>,
}

fn text(value: &Value) -> Option<String> {
    value
        .as_str()
        .filter(|s| !s.is_empty())
        .map(ToOwned::to_owned)
}

impl Recorder {
    /// Notes what object `name` of `kind` (its `spec` and `status` in `data`) shows at `now`.
    /// Each mark is the first moment its condition held.
    pub(super) fn observe(&mut self, kind: Kind, name: &str, data: &Value, now: Instant) {
        let spec = &data["spec"];
        let status = &data["status"];
        match kind {
            Kind::Machine => {
                let marks = self
                    .machines
                    .entry(name.to_owned())
                    .or_insert_with(|| MachineMarks {
                        created: now,
                        infra: None,
                        provider_id: None,
                        running: None,
                        deleted: None,
                    });
                marks.infra = text(&spec["infrastructureRef"]["name"]).or(marks.infra.take());
                marks.provider_id = text(&spec["providerID"]).or(marks.provider_id.take());
                if marks.running.is_none()
                    && status["phase"] == "Running"
                    && status["nodeRef"]["name"].is_string()
                {
                    marks.running = Some(now);
                }
            }
            Kind::MaasMachine => {
                let marks = self
                    .maas_machines
                    .entry(name.to_owned())
                    .or_insert_with(|| MaasMachineMarks {
                        created: now,
                        system_id: None,
                        provider_id: None,
                        ready: None,
                    });
                marks.system_id = text(&spec["systemID"]).or(marks.system_id.take());
                if marks.provider_id.is_none() && text(&spec["providerID"]).is_some() {
                    marks.provider_id = Some(now);
                }
                let ready =
                    status["ready"] == true || status["initialization"]["provisioned"] == true;
                if marks.ready.is_none() && ready {
                    marks.ready = Some(now);
                }
            }
            Kind::Host => {
                let edges = self.host_edges.entry(name.to_owned()).or_default();
                let available = status["provisioningState"] == "Available";
                if available && !edges.free {
                    edges.became_free.push(now);
                }
                edges.free = available;
                let requested = spec["provisioning"].is_object();
                if edges.requested && !requested {
                    edges.withdrawn.push(now);
                }
                edges.requested = requested;
                let marks = self.hosts.entry(name.to_owned()).or_default();
                marks.system_id = text(&spec["systemID"]).or(marks.system_id.take());
                let consumer = text(&spec["consumerRef"]["name"]);
                if consumer.is_some() && consumer != marks.consumer {
                    // A new claim: the marks of an earlier one belong to another machine.
                    *marks = HostMarks {
                        system_id: marks.system_id.take(),
                        consumer,
                        claimed: Some(now),
                        ..HostMarks::default()
                    };
                }
                if marks.consumer.is_some() {
                    if marks.provisioning.is_none() && spec["provisioning"].is_object() {
                        marks.provisioning = Some(now);
                    }
                    if marks.deployed.is_none() && status["provisioningState"] == "Deployed" {
                        marks.deployed = Some(now);
                    }
                }
            }
            Kind::Node => {
                let marks = self
                    .nodes
                    .entry(name.to_owned())
                    .or_insert_with(|| NodeMarks {
                        created: now,
                        provider_id: None,
                    });
                marks.provider_id = text(&spec["providerID"]).or(marks.provider_id.take());
            }
        }
    }

    /// Notes that object `name` of `kind` carries a deletionTimestamp at `now`; the first
    /// moment counts.
    pub(super) fn deleting(&mut self, kind: Kind, name: &str, now: Instant) {
        let seen = match kind {
            Kind::Machine => &mut self.machines_deleting,
            Kind::MaasMachine => &mut self.maas_machines_deleting,
            Kind::Host | Kind::Node => return,
        };
        seen.entry(name.to_owned()).or_insert(now);
    }

    /// Notes that object `name` of `kind` was seen gone at `now`.
    pub(super) fn forget(&mut self, kind: Kind, name: &str, now: Instant) {
        match kind {
            Kind::Machine => {
                if let Some(marks) = self.machines.get_mut(name) {
                    marks.deleted.get_or_insert(now);
                }
            }
            // A server deployed again gets a Node of the same name: its creation is a new one.
            Kind::Node => {
                self.nodes.remove(name);
            }
            Kind::MaasMachine | Kind::Host => {}
        }
    }

    /// Machines Running with a nodeRef now.
    pub(super) fn running(&self) -> usize {
        self.machines
            .values()
            .filter(|m| m.running.is_some() && m.deleted.is_none())
            .count()
    }

    /// When the last Machine became Running.
    pub(super) fn last_running(&self) -> Option<Instant> {
        self.machines.values().filter_map(|m| m.running).max()
    }
}

/// The simulator's side: status changes and hostname per system id.
#[derive(Debug, Clone, Default)]
pub(super) struct SimView {
    pub(super) changes: BTreeMap<String, Vec<StatusChange>>,
    pub(super) hostnames: BTreeMap<String, String>,
}

impl SimView {
    /// The first change of `system_id` to `status` at or after `since`.
    fn first(&self, system_id: &str, status: NodeStatus, since: Instant) -> Option<Instant> {
        first_change(&self.changes, system_id, status, since)
    }
}

/// The first change of `system_id` to `status` at or after `since` in `history`.
pub(super) fn first_change(
    history: &BTreeMap<String, Vec<StatusChange>>,
    system_id: &str,
    status: NodeStatus,
    since: Instant,
) -> Option<Instant> {
    history
        .get(system_id)?
        .iter()
        .find(|c| c.status == status && c.at >= since)
        .map(|c| c.at)
}

/// The marks of one Machine, by [`Milestone::index`].
pub(super) type Marks = [Option<Instant>; Milestone::ALL.len()];

/// Joins the watches and the simulator per CAPI Machine: Machine → MaasMachine
/// (`spec.infrastructureRef`) → MaasHost (its `consumerRef` names the MaasMachine) → system id
/// → MAAS history and hostname → Node (by providerID, else by hostname).
pub(super) fn join(recorder: &Recorder, sim: &SimView, since: Instant) -> Vec<Marks> {
    let mut out = Vec::new();
    for machine in recorder.machines.values() {
        let mut marks: Marks = [None; Milestone::ALL.len()];
        let mut set = |m: Milestone, at: Option<Instant>| marks[m.index()] = at;
        set(Milestone::MachineCreated, Some(machine.created));
        set(Milestone::MachineRunning, machine.running);
        let infra = machine.infra.as_deref().unwrap_or_default();
        let maas_machine = recorder.maas_machines.get(infra);
        if let Some(mm) = maas_machine {
            set(Milestone::MaasMachineCreated, Some(mm.created));
            set(Milestone::ProviderId, mm.provider_id);
            set(Milestone::MaasMachineReady, mm.ready);
        }
        let host = recorder
            .hosts
            .values()
            .find(|h| h.consumer.as_deref() == Some(infra));
        if let Some(host) = host {
            set(Milestone::HostClaimed, host.claimed);
            set(Milestone::HostProvisioning, host.provisioning);
            set(Milestone::HostDeployed, host.deployed);
        }
        let system_id = host
            .and_then(|h| h.system_id.clone())
            .or_else(|| maas_machine.and_then(|mm| mm.system_id.clone()))
            .or_else(|| machine.provider_id.as_deref().and_then(system_id_of));
        if let Some(system_id) = &system_id {
            set(
                Milestone::MaasAllocated,
                sim.first(system_id, NodeStatus::Allocated, since),
            );
            set(
                Milestone::MaasDeploying,
                sim.first(system_id, NodeStatus::Deploying, since),
            );
            set(
                Milestone::MaasDeployed,
                sim.first(system_id, NodeStatus::Deployed, since),
            );
        }
        let by_provider = machine.provider_id.as_ref().and_then(|p| {
            recorder
                .nodes
                .values()
                .find(|n| n.provider_id.as_ref() == Some(p))
        });
        let by_hostname = system_id
            .as_ref()
            .and_then(|s| sim.hostnames.get(s))
            .and_then(|h| recorder.nodes.get(h));
        set(
            Milestone::NodeCreated,
            by_provider.or(by_hostname).map(|n| n.created),
        );
        out.push(marks);
    }
    out
}

/// The system id in a providerID (`maas:///<zone>/<system_id>`): its last path segment.
pub(super) fn system_id_of(provider_id: &str) -> Option<String> {
    provider_id
        .rsplit('/')
        .next()
        .filter(|s| !s.is_empty())
        .map(ToOwned::to_owned)
}

/// `later − earlier` in seconds, negative when `later` came first.
pub(super) fn seconds(later: Instant, earlier: Instant) -> f64 {
    if later >= earlier {
        (later - earlier).as_secs_f64()
    } else {
        -(earlier - later).as_secs_f64()
    }
}

/// One milestone's statistics over the machines that reached it.
#[derive(Debug, Clone, PartialEq)]
pub struct MilestoneRow {
    /// The milestone.
    pub milestone: Milestone,
    /// Machines for which it was seen.
    pub seen: usize,
    /// p50 and p99 of the time since the cluster was declared, seconds: when in the run the
    /// machines got there (CAPI creates the Machines over a while, not all at once).
    pub since_declared: Option<(f64, f64)>,
    /// p50 and p99 of the time since the Machine was created, seconds.
    pub since_created: Option<(f64, f64)>,
    /// p50 and p99 of the time since the machine's previous milestone (the latest earlier one
    /// seen for that machine), seconds; negative when this one came first.
    pub hop: Option<(f64, f64)>,
}

/// Where the machines of one run spent their time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TimelineSummary {
    /// Machines (CAPI Machines seen).
    pub machines: usize,
    /// One row per milestone seen for at least one machine.
    pub rows: Vec<MilestoneRow>,
    /// MAAS Deployed → CAPI Machine Running, seconds, one sample per machine with both.
    pub deployed_to_running: Vec<f64>,
}

/// The statistics of the joined marks of a run declared at `declared`.
pub(super) fn summarize(all: &[Marks], declared: Instant) -> TimelineSummary {
    let created = Milestone::MachineCreated.index();
    let mut rows = Vec::new();
    for milestone in Milestone::ALL {
        let i = milestone.index();
        let mut since = Vec::new();
        let mut hops = Vec::new();
        let mut run = Vec::new();
        for marks in all {
            let Some(at) = marks[i] else { continue };
            run.push(seconds(at, declared));
            if let Some(start) = marks[created] {
                since.push(seconds(at, start));
            }
            if let Some(previous) = marks[..i].iter().rev().flatten().next() {
                hops.push(seconds(at, *previous));
            }
        }
        if since.is_empty() && hops.is_empty() && i != created {
            continue;
        }
        rows.push(MilestoneRow {
            milestone,
            seen: all.iter().filter(|m| m[i].is_some()).count(),
            since_declared: p50_p99(&run),
            since_created: p50_p99(&since),
            hop: p50_p99(&hops),
        });
    }
    let deployed_to_running = all
        .iter()
        .filter_map(|m| {
            Some(seconds(
                m[Milestone::MachineRunning.index()]?,
                m[Milestone::MaasDeployed.index()]?,
            ))
        })
        .collect();
    TimelineSummary {
        machines: all.len(),
        rows,
        deployed_to_running,
    }
}

#[path = "timeline_queries.rs"]
mod queries;

#[cfg(test)]
#[path = "timeline_tests.rs"]
mod tests;
