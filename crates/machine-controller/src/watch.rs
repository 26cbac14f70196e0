//! Which changes of other objects wake which MaasMachine: pure mappers over the cache, and the
//! predicates that keep changes nobody decides on from waking anything (CAPI rewrites a
//! Machine's and a Cluster's status many times per machine; with a Cluster waking every
//! MaasMachine of the cluster, that was quadratic in the number of machines).
//!
//! A MaasHost wakes its consumer; a free one wakes the machine whose `spec.systemID` names it,
//! and a free `Available` one the machines waiting for a host; a Machine wakes the MaasMachine its `spec.infrastructureRef` names; a Cluster wakes
//! every MaasMachine labelled with its name (pause, infrastructure ready).

use capmaas_api::capi::{Cluster, Machine};
use capmaas_api::conditions::{self as cond, reasons};
use capmaas_api::host::ProvisioningState;
use capmaas_api::{MaasHost, MaasInventory, MaasMachine, keys};
use capmaas_runtime::controller::predicate_hash;
use capmaas_runtime::trace_context::Relation;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};

/// Predicate of the MaasMachines: what a reconcile acts on (spec, annotations, labels,
/// finalizers, deletion). Its status is written by this controller only, by the reconcile that
/// goes on deciding after the write, so a status change wakes nobody.
pub fn maas_machine_change(mm: &MaasMachine) -> Option<u64> {
    Some(predicate_hash((
        mm.metadata.uid.as_deref(),
        mm.metadata.generation,
        mm.metadata.annotations.as_ref(),
        mm.metadata.labels.as_ref(),
        mm.metadata.finalizers.as_ref(),
        mm.metadata.deletion_timestamp.is_some(),
        mm.metadata.owner_references.as_ref().map(|o| {
            o.iter()
                .map(|r| (r.kind.as_str(), r.name.as_str(), r.uid.as_str()))
                .collect::<Vec<_>>()
        }),
    )))
}

/// Predicate of the Machines: what a MaasMachine decides on (spec, e.g. the bootstrap data
/// secret, whose changes bump the generation; whether the Node is known; deletion).
pub fn machine_change(machine: &Machine) -> Option<u64> {
    Some(predicate_hash((
        machine.metadata.uid.as_deref(),
        machine.metadata.generation,
        machine
            .status
            .as_ref()
            .is_some_and(|s| s.node_ref.is_some()),
        machine.metadata.deletion_timestamp.is_some(),
    )))
}

/// Predicate of the Clusters: pause and infrastructure readiness.
pub fn cluster_change(cluster: &Cluster) -> Option<u64> {
    Some(predicate_hash((
        cluster.metadata.uid.as_deref(),
        cluster.is_paused(),
        cluster.infrastructure_provisioned(),
    )))
}

/// A host maps to its consumer; a free, available host wakes the machines waiting for one in
/// the namespaces that may claim it (its own, and those its inventory admits). A VM host wakes
/// the machines its `spec.vms` entries name, and a VM host or a composed VM the LXD machines
/// without a host in those namespaces (capacity freed, a VM composed: [`waiting_for_vm`]).
pub fn map_host(
    machines: &Store<MaasMachine>,
    inventories: &Store<MaasInventory>,
    host: &MaasHost,
) -> Vec<ObjectRef<MaasMachine>> {
    let Some(namespace) = host.namespace() else {
        return Vec::new();
    };
    let mut wake: Vec<ObjectRef<MaasMachine>> = host
        .spec
        .vms
        .iter()
        .flatten()
        .filter(|e| e.consumer.kind == MaasMachine::kind(&()))
        .map(|e| ObjectRef::new(&e.consumer.name).within(e.consumer.namespace_or(&namespace)))
        .collect();
    let vm_related = crate::vm::is_composed_vm(host)
        || host.status.as_ref().is_some_and(|s| s.vm_host.is_some());
    if let Some(consumer) = &host.spec.consumer_ref
        && !vm_related
    {
        if consumer.kind == MaasMachine::kind(&()) {
            wake.push(ObjectRef::new(&consumer.name).within(consumer.namespace_or(&namespace)));
        }
        return wake;
    }
    let inventory = host
        .labels()
        .get(keys::LABEL_HOST_INVENTORY)
        .and_then(|name| inventories.get(&ObjectRef::new(name).within(&namespace)));
    // Compiled once per host event, not once per waiting machine.
    let admission = inventory.as_ref().map(|inv| inv.admission());
    let may_claim = |m: &MaasMachine| {
        let machine_ns = m.metadata.namespace.as_deref().unwrap_or_default();
        machine_ns == namespace || admission.as_ref().is_some_and(|a| a.admits(machine_ns))
    };
    let available = host.status.as_ref().and_then(|s| s.provisioning_state)
        == Some(ProvisioningState::Available);
    let free = host.spec.consumer_ref.is_none();
    if let Some(consumer) = &host.spec.consumer_ref
        && consumer.kind == MaasMachine::kind(&())
    {
        wake.push(ObjectRef::new(&consumer.name).within(consumer.namespace_or(&namespace)));
    }
    // A free host also wakes the machine whose `spec.systemID` names it (moved here by
    // clusterctl, its host imported again), whatever the host's state.
    wake.extend(
        machines
            .state_filter(|m| {
                may_claim(m)
                    && ((free
                        && (m.spec.system_id.as_deref() == Some(host.spec.system_id.as_str())
                            || (available && waiting_for_host(m))))
                        || (vm_related && waiting_for_vm(m)))
            })
            .iter()
            .map(|m| ObjectRef::from_obj(m.as_ref())),
    );
    wake
}

/// Whether `mm` is an LXD machine (not being deleted) that holds no host yet: its VM may have
/// been composed, or a VM host may have room for it now.
pub fn waiting_for_vm(mm: &MaasMachine) -> bool {
    crate::vm::is_lxd(mm)
        && mm.metadata.deletion_timestamp.is_none()
        && mm
            .status
            .as_ref()
            .and_then(|s| s.host_ref.as_ref())
            .is_none()
}

/// Whether `mm` (not being deleted) reports that no host fits it: its `HostAssociated`
/// condition is False with `NoHostAvailable` or `NoCapacityInFailureDomain`.
pub fn waiting_for_host(mm: &MaasMachine) -> bool {
    mm.metadata.deletion_timestamp.is_none()
        && mm
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == cond::HOST_ASSOCIATED))
            .is_some_and(|c| {
                c.status == "False"
                    && (c.reason == reasons::NO_HOST_AVAILABLE
                        || c.reason == reasons::NO_CAPACITY_IN_FAILURE_DOMAIN)
            })
}

/// A Machine wakes the MaasMachine its `spec.infrastructureRef` names.
pub fn map_machine(machine: &Machine) -> Option<ObjectRef<MaasMachine>> {
    let reference = &machine.spec.infrastructure_ref;
    if reference.kind != MaasMachine::kind(&()) || reference.api_group != MaasMachine::group(&()) {
        return None;
    }
    Some(ObjectRef::new(&reference.name).within(&machine.namespace()?))
}

/// A Cluster wakes every MaasMachine of its namespace labelled with its name.
pub fn map_cluster(
    machines: &Store<MaasMachine>,
    cluster: &Cluster,
) -> Vec<ObjectRef<MaasMachine>> {
    let namespace = cluster.namespace();
    let name = cluster.name_any();
    machines
        .state_filter(|m| {
            m.namespace() == namespace && m.labels().get(keys::LABEL_CLUSTER_NAME) == Some(&name)
        })
        .iter()
        .map(|m| ObjectRef::from_obj(m.as_ref()))
        .collect()
}

/// Whether a reconcile of `mm` is part of the trace its annotation names (the one the finalizer
/// patch recorded at its first reconcile): while it is being provisioned. Once ready, or being
/// deleted, its reconciles start traces of their own, linked to that one.
pub fn trace_relation(mm: &MaasMachine) -> Relation {
    let provisioning = mm.meta().deletion_timestamp.is_none()
        && mm.status.as_ref().and_then(|s| s.ready) != Some(true);
    if provisioning {
        Relation::Child
    } else {
        Relation::Link
    }
}

#[cfg(test)]
#[path = "watch_tests.rs"]
mod tests;
