//! LXD VMs (`MaasMachine.spec.lxd.enabled`), the pure part: the VM's hostname, the request a
//! machine writes into a VM host's `spec.vms`, the choice of the VM host, and the next step of
//! a machine whose VM is asked for. maas-client composes the VM (the MAAS key stays there) and
//! imports it as a MaasHost labelled with the VM host and the hostname, which the machine then
//! claims through the ordinary claim.
//!
//! VM host filters (all hard): a VM host (`status.vmHost`) the namespace may claim, not being
//! deleted, `Deployed`, not marked unhealthy, not missing; `spec.parent` (the host's system id),
//! `spec.resourcePool` (the VM host's pool), the failure domain (its zone), and free cores,
//! memory and storage for the VM, where free is MAAS's total less MAAS's used less what the VM
//! host's `spec.vms` entries not composed yet will take.
//!
//! Rank: fewest VMs of the machine's Cluster on it (a control plane spreads over VM hosts, as
//! CAPMAAS's SelectLXDHost does), then most free memory, then the name.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use capmaas_api::capi::Machine;
use capmaas_api::host::ProvisioningState;
use capmaas_api::lxd::{HostVmHost, VmConfig, VmRequest};
use capmaas_api::{MaasHost, MaasMachine, keys};
use kube::{Resource, ResourceExt};

use capmaas_api::host_request::consumer_ref;

pub use capmaas_api::conditions::VMS_COMPOSED;

/// Longest DNS label (MAAS hostname).
const MAX_HOSTNAME: usize = 63;

/// Whether the machine is an LXD VM (`spec.lxd.enabled`).
pub fn is_lxd(mm: &MaasMachine) -> bool {
    mm.spec.lxd.as_ref().is_some_and(|l| l.enabled)
}

/// Whether `host` is the MaasHost of a VM composed on a VM host: only the machine the VM was
/// composed for claims it, never the bare-metal choice.
pub fn is_composed_vm(host: &MaasHost) -> bool {
    host.labels().contains_key(keys::LABEL_COMPOSED_ON)
        || host.status.as_ref().and_then(|s| s.vm_host_id).is_some()
}

/// The VM's MAAS hostname as CAPMAAS names it, `vm-<Machine>-<first 5 characters of the
/// Machine's uid>`, made one DNS label of at most 63 characters: lower case, anything but
/// letters, digits and '-' becomes '-', the Machine's name is shortened to fit, and no '-' is
/// left at either end of it.
pub fn vm_hostname(machine_name: &str, machine_uid: &str) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                let c = c.to_ascii_lowercase();
                if c.is_ascii_lowercase() || c.is_ascii_digit() {
                    c
                } else {
                    '-'
                }
            })
            .collect()
    };
    let short: String = clean(machine_uid).chars().take(5).collect();
    let short = short.trim_matches('-');
    let suffix = if short.is_empty() {
        String::new()
    } else {
        format!("-{short}")
    };
    let room = MAX_HOSTNAME - "vm-".len() - suffix.len();
    let name: String = clean(machine_name).chars().take(room).collect();
    let name = name.trim_matches('-');
    let name = if name.is_empty() { "machine" } else { name };
    format!("vm-{name}{suffix}")
}

/// The hostname of the VM of `machine` (its CAPI Machine); `None` without a name or uid.
pub fn machine_vm_hostname(machine: &Machine) -> Option<String> {
    Some(vm_hostname(
        machine.metadata.name.as_deref()?,
        machine.metadata.uid.as_deref().unwrap_or_default(),
    ))
}

/// Whether `entry` is the request of `mm` on a host in `host_namespace`: its consumer is this
/// MaasMachine incarnation (same UID, namespace).
pub fn is_entry_of(entry: &VmRequest, mm: &MaasMachine, host_namespace: &str) -> bool {
    let c = &entry.consumer;
    c.kind == MaasMachine::kind(&())
        && Some(c.uid.as_str()) == mm.metadata.uid.as_deref()
        && Some(c.namespace_or(host_namespace)) == mm.metadata.namespace.as_deref()
}

/// The `spec.vms` entry of `mm` on `host`, if any.
pub fn entry_of<'h>(host: &'h MaasHost, mm: &MaasMachine) -> Option<&'h VmRequest> {
    let ns = host.metadata.namespace.as_deref().unwrap_or_default();
    host.spec
        .vms
        .iter()
        .flatten()
        .find(|e| is_entry_of(e, mm, ns))
}

/// The `spec.vms` entry `mm` writes on a VM host in `host_namespace` for the VM of `machine`:
/// `spec.minCPU` cores (at least one), `spec.minMemory` MiB, the larger of
/// `spec.lxd.vmConfig.diskSize` and `spec.minDiskSize` GB (CAPMAAS), the storage pool of
/// `vmConfig`. `None` without the names and UIDs it needs.
pub fn vm_request(mm: &MaasMachine, machine: &Machine, host_namespace: &str) -> Option<VmRequest> {
    let config = vm_config(mm);
    Some(VmRequest {
        hostname: machine_vm_hostname(machine)?,
        cores: mm.spec.min_cpu.max(1),
        memory_mib: i64::from(mm.spec.min_memory.max(1)),
        disk_gb: disk_gb(&config, mm.spec.min_disk_size),
        storage_pool: config.storage_pool.filter(|p| !p.is_empty()),
        consumer: consumer_ref(mm, host_namespace)?,
    })
}

/// `spec.lxd.vmConfig`, or what the API server stores for `vmConfig: {}`.
fn vm_config(mm: &MaasMachine) -> VmConfig {
    mm.spec
        .lxd
        .as_ref()
        .and_then(|l| l.vm_config.clone())
        .unwrap_or_default()
}

fn disk_gb(config: &VmConfig, min_disk_size: Option<i32>) -> i32 {
    config.disk_size.max(min_disk_size.unwrap_or(0)).max(1)
}

/// What the machine asks of a VM host.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VmHostRequest {
    /// CPU cores of the VM.
    pub cores: i64,
    /// Memory of the VM in MiB.
    pub memory_mib: i64,
    /// Disk of the VM in GB.
    pub disk_gb: i64,
    /// `spec.parent`: system id of the VM host.
    pub parent: Option<String>,
    /// `spec.resourcePool`: the VM host's pool.
    pub resource_pool: Option<String>,
    /// The failure domain: the VM host's zone.
    pub failure_domain: Option<String>,
    /// UIDs of the MaasMachines of the machine's Cluster (the VMs to spread).
    pub cluster_members: BTreeSet<String>,
}

/// The VM host request of `mm`: `failure_domain` the effective one
/// ([`crate::decide::failure_domain`]), `cluster_members` the UIDs of the MaasMachines of its
/// Cluster.
pub fn vm_host_request(
    mm: &MaasMachine,
    failure_domain: Option<String>,
    cluster_members: BTreeSet<String>,
) -> VmHostRequest {
    let config = vm_config(mm);
    VmHostRequest {
        cores: i64::from(mm.spec.min_cpu.max(1)),
        memory_mib: i64::from(mm.spec.min_memory.max(1)),
        disk_gb: i64::from(disk_gb(&config, mm.spec.min_disk_size)),
        parent: mm.spec.parent.clone().filter(|p| !p.is_empty()),
        resource_pool: mm.spec.resource_pool.clone().filter(|p| !p.is_empty()),
        failure_domain,
        cluster_members,
    }
}

/// What a VM host has left: cores, memory (MiB), storage (GiB).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Free {
    /// CPU cores.
    pub cores: i64,
    /// Memory in MiB.
    pub memory_mib: i64,
    /// Storage in GiB.
    pub storage_gib: i64,
}

/// What `vm_host` (its `status.vmHost`) has left for another VM: MAAS's total less MAAS's used
/// (the VMs composed) less the `spec.vms` entries not composed yet (no system id recorded in
/// `status.composedVMs`), which MAAS does not count.
pub fn free(host: &MaasHost, vm_host: &HostVmHost) -> Free {
    let composed: BTreeSet<&str> = host
        .status
        .as_ref()
        .and_then(|s| s.composed_vms.as_ref())
        .into_iter()
        .flatten()
        .filter(|c| c.system_id.is_some())
        .map(|c| c.hostname.as_str())
        .collect();
    let mut free = Free {
        cores: vm_host.cores.total - vm_host.cores.used,
        memory_mib: vm_host.memory_mib.total - vm_host.memory_mib.used,
        storage_gib: vm_host.storage_gib.total - vm_host.storage_gib.used,
    };
    for pending in host
        .spec
        .vms
        .iter()
        .flatten()
        .filter(|e| !composed.contains(e.hostname.as_str()))
    {
        free.cores -= i64::from(pending.cores);
        free.memory_mib -= pending.memory_mib;
        free.storage_gib -= i64::from(pending.disk_gb);
    }
    free
}

/// Why a MaasHost is not a VM host for the VM, in the order the filters run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum VmHostExclusion {
    /// The host object is being deleted.
    Deleting,
    /// Not `Deployed`.
    NotDeployed,
    /// Remediation gave up on it.
    Unhealthy,
    /// Gone from MAAS.
    Missing,
    /// Not the VM host `spec.parent` names.
    Parent,
    /// Other resource pool.
    ResourcePool,
    /// Other zone.
    FailureDomain,
    /// Too few free cores.
    Cores,
    /// Too little free memory.
    Memory,
    /// Too little free storage.
    Storage,
}

/// The first filter VM host `host` fails for `request`, or `None` for a candidate. A host
/// without `status.vmHost` is no VM host at all (the caller leaves it out).
pub fn exclusion(request: &VmHostRequest, host: &MaasHost) -> Option<VmHostExclusion> {
    use VmHostExclusion as X;
    let status = host.status.as_ref()?;
    let vm_host = status.vm_host.as_ref()?;
    if host.metadata.deletion_timestamp.is_some() {
        return Some(X::Deleting);
    }
    if status.missing == Some(true) || status.provisioning_state == Some(ProvisioningState::Missing)
    {
        return Some(X::Missing);
    }
    if status.provisioning_state != Some(ProvisioningState::Deployed) {
        return Some(X::NotDeployed);
    }
    if host
        .annotations()
        .contains_key(keys::ANNOTATION_HOST_UNHEALTHY)
    {
        return Some(X::Unhealthy);
    }
    if let Some(parent) = &request.parent
        && host.spec.system_id != *parent
    {
        return Some(X::Parent);
    }
    if let Some(pool) = &request.resource_pool
        && vm_host.pool.as_ref() != Some(pool)
    {
        return Some(X::ResourcePool);
    }
    if let Some(zone) = &request.failure_domain
        && vm_host.zone.as_ref() != Some(zone)
    {
        return Some(X::FailureDomain);
    }
    let free = free(host, vm_host);
    if free.cores < request.cores {
        return Some(X::Cores);
    }
    if free.memory_mib < request.memory_mib {
        return Some(X::Memory);
    }
    if free.storage_gib < request.disk_gb {
        return Some(X::Storage);
    }
    None
}

/// The outcome of [`rank_vm_hosts`].
#[derive(Debug, Clone, PartialEq)]
pub struct VmHostRanking<'h> {
    /// Candidates, best first.
    pub candidates: Vec<&'h MaasHost>,
    /// How many VM hosts each filter removed.
    pub excluded: BTreeMap<VmHostExclusion, usize>,
}

/// How many VMs of the request's Cluster `host`'s `spec.vms` holds.
pub fn cluster_vms(request: &VmHostRequest, host: &MaasHost) -> usize {
    host.spec
        .vms
        .iter()
        .flatten()
        .filter(|e| request.cluster_members.contains(&e.consumer.uid))
        .count()
}

/// Filters and ranks the VM hosts among `hosts` (those with `status.vmHost`) for `request`.
pub fn rank_vm_hosts<'h>(
    request: &VmHostRequest,
    hosts: impl IntoIterator<Item = &'h MaasHost>,
) -> VmHostRanking<'h> {
    let mut excluded = BTreeMap::new();
    let mut candidates = Vec::new();
    for host in hosts {
        if host
            .status
            .as_ref()
            .and_then(|s| s.vm_host.as_ref())
            .is_none()
        {
            continue;
        }
        match exclusion(request, host) {
            Some(reason) => *excluded.entry(reason).or_insert(0) += 1,
            None => candidates.push(host),
        }
    }
    candidates.sort_by_cached_key(|h| {
        let free_memory = h
            .status
            .as_ref()
            .and_then(|s| s.vm_host.as_ref())
            .map_or(0, |v| free(h, v).memory_mib);
        (
            cluster_vms(request, h),
            std::cmp::Reverse(free_memory),
            h.namespace().unwrap_or_default(),
            h.name_any(),
        )
    });
    VmHostRanking {
        candidates,
        excluded,
    }
}

/// Why no VM host takes the VM, naming the filters that removed VM hosts.
pub fn no_vm_host_explanation(request: &VmHostRequest, ranking: &VmHostRanking<'_>) -> String {
    use VmHostExclusion as X;
    let considered: usize = ranking.excluded.values().sum::<usize>() + ranking.candidates.len();
    if considered == 0 {
        return "no VM host this namespace may claim: no MaasHost shows status.vmHost (the \
                servers of a MaasCluster with spec.lxdConfig.enabled become VM hosts once \
                deployed)"
            .to_owned();
    }
    let mut message = format!("no VM host fits the VM among {considered}:");
    for (exclusion, count) in &ranking.excluded {
        let what = match exclusion {
            X::Deleting => "being deleted".to_owned(),
            X::NotDeployed => "not Deployed".to_owned(),
            X::Unhealthy => "marked unhealthy".to_owned(),
            X::Missing => "missing from MAAS".to_owned(),
            X::Parent => format!(
                "not spec.parent {}",
                request.parent.as_deref().unwrap_or_default()
            ),
            X::ResourcePool => format!(
                "not in pool {}",
                request.resource_pool.as_deref().unwrap_or_default()
            ),
            X::FailureDomain => format!(
                "not in zone {}",
                request.failure_domain.as_deref().unwrap_or_default()
            ),
            X::Cores => format!("lack {} free cores", request.cores),
            X::Memory => format!("lack {} MiB of free memory", request.memory_mib),
            X::Storage => format!("lack {} GB of free storage", request.disk_gb),
        };
        let _ = write!(message, " {count} {what};");
    }
    if message.ends_with(';') {
        message.pop();
    }
    message
}

/// Whether `vm` is the VM composed for `hostname` on VM host `vm_host` (its labels, same
/// namespace).
pub fn is_vm_of(vm: &MaasHost, vm_host: &MaasHost, hostname: &str) -> bool {
    let labels = vm.labels();
    vm.metadata.namespace == vm_host.metadata.namespace
        && labels.get(keys::LABEL_COMPOSED_ON) == Some(&vm_host.name_any())
        && labels.get(keys::LABEL_VM_HOSTNAME).map(String::as_str) == Some(hostname)
}

/// Whether the composed VM `vm` may be claimed now: nobody holds it, it is not being deleted
/// nor missing, and MAAS reports it ready (`Available`, once commissioned).
pub fn vm_claimable(vm: &MaasHost) -> bool {
    let status = vm.status.as_ref();
    vm.metadata.deletion_timestamp.is_none()
        && vm.spec.consumer_ref.is_none()
        && status.and_then(|s| s.missing) != Some(true)
        && status.and_then(|s| s.provisioning_state) == Some(ProvisioningState::Available)
}

/// Whether a claim of `h` for the VM `hostname` on VM host `composed_on` may be written: `h` is
/// that VM and claimable ([`vm_claimable`]).
pub fn vm_claim_fits(h: &MaasHost, composed_on: &str, hostname: &str) -> bool {
    let labels = h.labels();
    labels.get(keys::LABEL_COMPOSED_ON).map(String::as_str) == Some(composed_on)
        && labels.get(keys::LABEL_VM_HOSTNAME).map(String::as_str) == Some(hostname)
        && vm_claimable(h)
}

/// The message of a machine waiting for its VM on `vm_host`: names the VM host, and adds
/// maas-client's refusal (`VMsComposed=False`) when its message names `hostname`.
pub fn waiting_message(vm_host: &MaasHost, hostname: &str, vm: Option<&MaasHost>) -> String {
    let mut message = match vm {
        None => format!(
            "waiting for VM {hostname} to be composed on VM host {}",
            vm_host.name_any()
        ),
        Some(vm) => {
            let state = vm
                .status
                .as_ref()
                .and_then(|s| s.provisioning_state)
                .map_or("unreported", ProvisioningState::as_str);
            let holder = vm
                .spec
                .consumer_ref
                .as_ref()
                .map(|c| format!(", claimed by {}", c.name))
                .unwrap_or_default();
            format!(
                "VM {hostname} composed on VM host {} is host {} ({state}{holder})",
                vm_host.name_any(),
                vm.name_any()
            )
        }
    };
    let refusal = vm_host
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .find(|c| c.type_ == VMS_COMPOSED && c.status == "False" && c.message.contains(hostname));
    if let Some(c) = refusal {
        let _ = write!(message, ": {} ({})", c.message, c.reason);
    }
    message
}

#[cfg(test)]
#[path = "vm_tests.rs"]
mod tests;
