//! The LXD fields CAPMAAS v0.9.0 added, kept with its JSON names and defaults so that its
//! manifests apply here unchanged: `MaasCluster.spec.lxdConfig` (the cluster's machines become
//! LXD VM hosts), `MaasMachine.spec.lxd` (the machine is a VM composed on a VM host) and what a
//! MaasHost reports of a VM host (`status.vmHost`).
//!
//! maas-client serves `lxdConfig` by deploying the machines with MAAS's `register_vmhost=true`:
//! MAAS installs LXD and registers each machine as a VM host, and the MAAS API key stays in
//! maas-client (CAPMAAS's initializer DaemonSet copies it into the workload cluster instead).

// `KubeSchema` copies each struct, `pub` included, into a function body to build
// its schema; rustc then reports the copy as an unreachable `pub` item.
#![allow(unreachable_pub)]

use std::collections::BTreeMap;

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::ConsumerReference;

/// `MaasCluster.spec.lxdConfig`: LXD VM hosts made of the cluster's machines (CAPMAAS field).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct LxdConfig {
    /// Whether the cluster's machines are deployed as LXD VM hosts.
    #[serde(default)]
    pub enabled: bool,
    /// MAAS resource pool of the VM hosts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    pub resource_pool: Option<String>,
    /// MAAS zone the VM hosts are registered in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    pub zone: Option<String>,
    /// LXD storage backend of the VM hosts (`zfs`, `dir`, ...).
    #[serde(default = "default_storage_backend")]
    #[schemars(length(max = 64))]
    pub storage_backend: String,
    /// Size of the LXD storage pool in GB, a whole number as a string, e.g. `"100"`.
    #[serde(default = "default_storage_size")]
    #[schemars(length(max = 12))]
    #[x_kube(validation = Rule::new("self.matches('^[1-9][0-9]*$')").message("spec.lxdConfig.storageSize must be a positive whole number of GB as a string, e.g. \"50\""))]
    pub storage_size: String,
    /// LXD NIC type of the VMs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nic_type: Option<LxdNicType>,
    /// Parent interface or bridge of the VMs' NIC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub nic_parent: Option<String>,
    /// Network bridge of the VMs (CAPMAAS's older field; `nicParent` is preferred).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub network_bridge: Option<String>,
    /// Leave the existing networks of a VM host as they are.
    #[serde(default = "yes")]
    pub skip_network_update: bool,
}

impl Default for LxdConfig {
    /// The object the API server stores for `lxdConfig: {}`.
    fn default() -> Self {
        Self {
            enabled: false,
            resource_pool: None,
            zone: None,
            storage_backend: default_storage_backend(),
            storage_size: default_storage_size(),
            nic_type: None,
            nic_parent: None,
            network_bridge: None,
            skip_network_update: true,
        }
    }
}

/// LXD NIC type of the VMs on a VM host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LxdNicType {
    /// A NIC on a bridge of the VM host.
    Bridge,
    /// A macvlan NIC on an interface of the VM host.
    Macvlan,
}

fn default_storage_backend() -> String {
    "zfs".to_owned()
}

fn default_storage_size() -> String {
    "50".to_owned()
}

fn yes() -> bool {
    true
}

/// `MaasMachine.spec.lxd`: the machine is an LXD VM composed on a VM host instead of a bare-metal
/// server (CAPMAAS field). Absent or disabled: bare metal.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineLxdConfig {
    /// Whether the machine is an LXD VM.
    #[serde(default)]
    pub enabled: bool,
    /// What the VM is made of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm_config: Option<VmConfig>,
}

/// The VM of an LXD machine.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct VmConfig {
    /// Size of the VM's disk in GB.
    #[serde(default = "default_disk_size")]
    #[schemars(range(min = 1))]
    pub disk_size: i32,
    /// LXD storage pool of the VM's disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    pub storage_pool: Option<String>,
    /// Network the VM is attached to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    pub network: Option<String>,
    /// MAAS link mode per VM interface: keys `eth0`, `eth1`, ..., values `auto`, `dhcp`, `static`
    /// or `link_up`. Unset for an interface: `auto` for `eth0`, `dhcp` for the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxProperties" = 32))]
    #[x_kube(validation = Rule::new("self.all(k, k.matches('^eth[0-9]+$'))").message("spec.lxd.vmConfig.interfaceLinkModes keys are VM interface names eth0, eth1, ... ethN"))]
    pub interface_link_modes: Option<BTreeMap<String, LinkMode>>,
    /// Whether the VM starts with its VM host.
    #[serde(default = "yes")]
    pub auto_start: bool,
}

impl Default for VmConfig {
    /// The object the API server stores for `vmConfig: {}`.
    fn default() -> Self {
        Self {
            disk_size: default_disk_size(),
            storage_pool: None,
            network: None,
            interface_link_modes: None,
            auto_start: true,
        }
    }
}

fn default_disk_size() -> i32 {
    60
}

/// How MAAS configures the addresses of a VM interface (its link mode).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum LinkMode {
    /// An address MAAS picks from the subnet.
    Auto,
    /// DHCP.
    Dhcp,
    /// A static address.
    Static,
    /// Link up, no address.
    LinkUp,
}

/// `MaasHost.status.vmHost`: the MAAS VM host (LXD) this machine is, written by maas-client.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostVmHost {
    /// MAAS id of the VM host.
    pub id: i64,
    /// Name of the VM host in MAAS.
    pub name: String,
    /// MAAS zone of the VM host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// MAAS resource pool of the VM host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// CPU cores, total and used by composed VMs.
    pub cores: VmHostResource,
    /// Memory in MiB, total and used by composed VMs.
    #[serde(rename = "memoryMiB")]
    pub memory_mib: VmHostResource,
    /// Storage in GiB, total and used by composed VMs.
    #[serde(rename = "storageGiB")]
    pub storage_gib: VmHostResource,
    /// MAAS system ids of the machines (VMs) composed on the VM host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub machines: Option<Vec<String>>,
}

/// `MaasHost.spec.vms[]`: a VM that machine-controller asks maas-client to compose on this VM
/// host for one MaasMachine (`spec.lxd.enabled`). The hostname is the key: maas-client looks
/// it up in MAAS before composing, so the VM is composed once even when an answer is lost.
/// An entry never changes once written; removing it tells maas-client the VM is no longer
/// wanted (a VM never allocated is then deleted in MAAS).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("self == oldSelf").message("spec.vms[] entries are immutable: remove the entry and add another").reason(Reason::FieldValueForbidden))]
pub struct VmRequest {
    /// MAAS hostname of the VM: `vm-<Machine>-<first five characters of the Machine's uid>`,
    /// as CAPMAAS names it.
    #[schemars(length(min = 1, max = 63))]
    #[x_kube(validation = Rule::new("self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')").message("spec.vms[].hostname must be a DNS label (lower case letters, digits and '-')"))]
    pub hostname: String,
    /// CPU cores of the VM.
    #[schemars(range(min = 1, max = 1024))]
    pub cores: i32,
    /// Memory of the VM in MiB.
    #[serde(rename = "memoryMiB")]
    #[schemars(range(min = 1))]
    pub memory_mib: i64,
    /// Size of the VM's root disk in GB (MAAS's `storage`).
    #[serde(rename = "diskGB")]
    #[schemars(range(min = 1, max = 65536))]
    pub disk_gb: i32,
    /// LXD storage pool of the root disk; the VM host's default when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub storage_pool: Option<String>,
    /// The MaasMachine the VM is for.
    pub consumer: ConsumerReference,
}

/// `MaasHost.status.composedVMs[]`: a VM maas-client composes (or found composed) for an entry
/// of `spec.vms`, kept until the VM is gone from MAAS.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ComposedVm {
    /// MAAS hostname of the VM (the `spec.vms[]` key).
    pub hostname: String,
    /// MAAS system id of the VM; its MaasHost is named by it. Unset while the composition is in
    /// flight: the entry is written before MAAS is asked, so a VM whose `spec.vms` entry is
    /// removed before its answer is recorded is still found (by hostname) and deleted.
    #[serde(default, rename = "systemID", skip_serializing_if = "Option::is_none")]
    pub system_id: Option<String>,
}

/// One resource of a VM host as MAAS reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct VmHostResource {
    /// What the VM host has.
    pub total: i64,
    /// What its composed VMs take.
    pub used: i64,
}

#[cfg(test)]
#[path = "lxd_tests.rs"]
mod tests;
