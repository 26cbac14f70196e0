//! The shape of a node made from a MaasMachineTemplate, for the cluster autoscaler's scale from
//! zero (Cluster API's opt-in autoscaling-from-zero contract): `status.capacity` (a corev1
//! ResourceList: `cpu`, `memory`, `ephemeral-storage`) and `status.nodeInfo` (`architecture`,
//! `operatingSystem`). Pure: the hosts in, the status to write (or none) out.
//!
//! The shape is that of the **smallest MaasHost that fits the template** among those its machines
//! may claim ([`Claimable`]): fewest CPUs, then least memory, then name (the order in which
//! [`crate::choose::rank_hosts`] hands out hosts). Whether a host is free right now is ignored —
//! claimed, deploying, reserved for node reuse or rebooting, it may be free when the autoscaler
//! scales up — so the shape does not flap with every claim and release. Hosts that will not serve
//! without a person are left out: being deleted, missing from MAAS, marked unhealthy by
//! remediation, Broken in MAAS, or without CPU and memory reported yet. The template's own
//! constraints apply ([`crate::decide::spec_request`]: pool, its failure domain, `minCPU`,
//! `minMemory`, `minDiskSize`, tags, `hostSelector`).
//!
//! The smallest host, because a new machine is given the smallest free host that fits: the
//! autoscaler should not promise a pending Pod room that the node it adds may not have.

use std::collections::BTreeMap;

use capmaas_api::host::ProvisioningState;
use capmaas_api::machine::{
    MaasMachineTemplateStatus, TemplateNodeInfo, template_conditions as cond,
};
use capmaas_api::{MaasHost, MaasMachineTemplate, keys};
use capmaas_runtime::conditions::{ConditionStatus, NewCondition, set_condition};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use crate::choose::{Claimable, Exclusion, HostRequest, constraint_exclusion, describe};

/// `status.nodeInfo.operatingSystem`: MAAS deploys Linux images for Kubernetes nodes.
pub const OPERATING_SYSTEM: &str = "linux";

/// The outcome of [`smallest_fit`].
#[derive(Debug, Clone, PartialEq)]
pub enum Fit<'h> {
    /// The smallest host that fits.
    Host(&'h MaasHost),
    /// No host fits; the condition message says why.
    NoHost(String),
}

/// The smallest host of `hosts` that the template's machines (in the namespace `claimable`
/// describes) may claim and that meets `request`, free or not.
pub fn smallest_fit<'h>(
    request: &HostRequest,
    hosts: impl IntoIterator<Item = &'h MaasHost>,
    claimable: &Claimable,
) -> Fit<'h> {
    let mut excluded: BTreeMap<Exclusion, usize> = BTreeMap::new();
    let mut best: Option<&MaasHost> = None;
    for host in hosts.into_iter().filter(|h| claimable.admits_host(h)) {
        match lasting_exclusion(host).or_else(|| constraint_exclusion(request, host)) {
            Some(reason) => *excluded.entry(reason).or_insert(0) += 1,
            None if best.is_none_or(|b| size_key(host) < size_key(b)) => best = Some(host),
            None => {}
        }
    }
    match best {
        Some(host) => Fit::Host(host),
        None => Fit::NoHost(no_fit_message(request, &excluded)),
    }
}

/// What keeps `host` from ever serving a machine until a person acts or MAAS reports it again:
/// being deleted, a composed VM (composed for one LXD machine only), missing, marked unhealthy, Broken, or no CPU or memory reported.
fn lasting_exclusion(host: &MaasHost) -> Option<Exclusion> {
    let status = host.status.as_ref();
    let state = status.and_then(|s| s.provisioning_state);
    if host.metadata.deletion_timestamp.is_some() {
        Some(Exclusion::Deleting)
    } else if crate::vm::is_composed_vm(host) {
        Some(Exclusion::ComposedVm)
    } else if status.and_then(|s| s.missing) == Some(true)
        || state == Some(ProvisioningState::Missing)
    {
        Some(Exclusion::Missing)
    } else if host
        .annotations()
        .contains_key(keys::ANNOTATION_HOST_UNHEALTHY)
    {
        Some(Exclusion::Unhealthy)
    } else if state == Some(ProvisioningState::Broken)
        || status.and_then(|s| s.cpu_count).unwrap_or(0) <= 0
        || status.and_then(|s| s.memory_mib).unwrap_or(0) <= 0
    {
        Some(Exclusion::NotAvailable)
    } else {
        None
    }
}

/// Smallest first: CPUs, memory, then name and namespace so every replica agrees.
fn size_key(host: &MaasHost) -> (i32, i64, String, Option<&str>) {
    let status = host.status.as_ref();
    (
        status.and_then(|s| s.cpu_count).unwrap_or(0),
        status.and_then(|s| s.memory_mib).unwrap_or(0),
        host.name_any(),
        host.metadata.namespace.as_deref(),
    )
}

fn no_fit_message(request: &HostRequest, excluded: &BTreeMap<Exclusion, usize>) -> String {
    let considered: usize = excluded.values().sum();
    if considered == 0 {
        return "no MaasHost this namespace may claim (none in the namespace, and no \
                MaasInventory's spec.claimNamespaces admits it)"
            .to_owned();
    }
    let counts: Vec<String> = excluded
        .iter()
        .map(|(exclusion, count)| format!("{count} {}", describe(*exclusion, request)))
        .collect();
    format!(
        "no MaasHost fits the template among {considered}: {}",
        counts.join("; ")
    )
}

/// `status.capacity` of a node on `host`: `cpu` (cores), `memory` (from MiB) and, when MAAS
/// reports storage, `ephemeral-storage` (from GiB; the total of the host's disks).
pub fn capacity(host: &MaasHost) -> BTreeMap<String, Quantity> {
    let status = host.status.as_ref();
    let mut capacity = BTreeMap::new();
    if let Some(cpu) = status.and_then(|s| s.cpu_count) {
        capacity.insert("cpu".to_owned(), Quantity(cpu.to_string()));
    }
    if let Some(mib) = status.and_then(|s| s.memory_mib) {
        capacity.insert("memory".to_owned(), binary_quantity(mib, MI));
    }
    if let Some(gib) = status.and_then(|s| s.storage_gib).filter(|g| *g > 0) {
        capacity.insert("ephemeral-storage".to_owned(), binary_quantity(gib, GI));
    }
    capacity
}

/// `status.nodeInfo` of a node on `host`.
pub fn node_info(host: &MaasHost) -> TemplateNodeInfo {
    TemplateNodeInfo {
        architecture: host
            .status
            .as_ref()
            .and_then(|s| s.architecture.as_deref())
            .and_then(kubernetes_arch)
            .map(str::to_owned),
        operating_system: Some(OPERATING_SYSTEM.to_owned()),
    }
}

/// The Kubernetes (Go) name of a MAAS architecture (`amd64/generic`, `arm64/xgene-uboot`,
/// `ppc64el/generic`): the part before the `/`, in Go's spelling; `None` when unknown.
pub fn kubernetes_arch(maas: &str) -> Option<&'static str> {
    let base = maas.split('/').next().unwrap_or_default().trim();
    Some(match base.to_ascii_lowercase().as_str() {
        "amd64" | "x86_64" => "amd64",
        "arm64" | "aarch64" => "arm64",
        "armhf" | "arm" => "arm",
        "i386" | "386" => "386",
        "ppc64el" | "ppc64le" => "ppc64le",
        "s390x" => "s390x",
        "riscv64" => "riscv64",
        _ => return None,
    })
}

const SUFFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
const MI: usize = 2;
const GI: usize = 3;

/// `value` × 1024^`suffix` as a quantity in its canonical form (the largest binary suffix that
/// keeps it whole, as Kubernetes writes it): 16384 MiB is `16Gi`, 1536 MiB is `1536Mi`.
pub fn binary_quantity(mut value: i64, mut suffix: usize) -> Quantity {
    while value != 0 && value % 1024 == 0 && suffix + 1 < SUFFIXES.len() {
        value /= 1024;
        suffix += 1;
    }
    Quantity(format!(
        "{value}{}",
        SUFFIXES[suffix.min(SUFFIXES.len() - 1)]
    ))
}

/// The status this controller writes for `template` after `fit`: `capacity` and `nodeInfo` from
/// the host, or neither, and the `CapacityKnown` condition. Only the fields this controller owns
/// (its condition alone: the apply leaves other writers' conditions alone).
pub fn owned_status(
    template: &MaasMachineTemplate,
    fit: &Fit<'_>,
    now: &Time,
) -> MaasMachineTemplateStatus {
    let generation = template.metadata.generation;
    let (capacity, node_info, condition) = match fit {
        Fit::Host(host) => {
            let capacity = capacity(host);
            let message = format!(
                "from MaasHost {}/{} ({})",
                host.namespace().unwrap_or_default(),
                host.name_any(),
                summary(&capacity)
            );
            let condition = NewCondition::new(
                cond::CAPACITY_KNOWN,
                ConditionStatus::True,
                cond::SMALLEST_FITTING_HOST,
            )
            .message(message);
            (Some(capacity), Some(node_info(host)), condition)
        }
        Fit::NoHost(message) => {
            let condition = NewCondition::new(
                cond::CAPACITY_KNOWN,
                ConditionStatus::False,
                cond::NO_HOST_FITS,
            )
            .message(message.clone());
            (None, None, condition)
        }
    };
    // The condition as it is now (its transition time kept when the status stays).
    let mut conditions: Vec<_> = template
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default()
        .iter()
        .filter(|c| c.type_ == cond::CAPACITY_KNOWN)
        .cloned()
        .collect();
    set_condition(
        &mut conditions,
        condition.observed_generation(generation),
        now,
    );
    MaasMachineTemplateStatus {
        capacity,
        node_info,
        conditions: Some(conditions),
    }
}

/// The status to write for `template` after `fit`, or `None` when its status already says it
/// all (no write, no watch event, no wake-up of anyone).
pub fn status_change(
    template: &MaasMachineTemplate,
    fit: &Fit<'_>,
    now: &Time,
) -> Option<MaasMachineTemplateStatus> {
    let next = owned_status(template, fit, now);
    let current = template.status.as_ref();
    let current_condition = current
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default()
        .iter()
        .find(|c| c.type_ == cond::CAPACITY_KNOWN);
    let unchanged = current.and_then(|s| s.capacity.as_ref()) == next.capacity.as_ref()
        && current.and_then(|s| s.node_info.as_ref()) == next.node_info.as_ref()
        && current_condition == next.conditions.as_deref().and_then(<[_]>::first);
    (!unchanged).then_some(next)
}

/// `cpu=8, memory=16Gi, ephemeral-storage=500Gi`.
pub fn summary(capacity: &BTreeMap<String, Quantity>) -> String {
    ["cpu", "memory", "ephemeral-storage"]
        .iter()
        .filter_map(|k| capacity.get(*k).map(|q| format!("{k}={}", q.0)))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
#[path = "capacity_tests.rs"]
mod tests;
