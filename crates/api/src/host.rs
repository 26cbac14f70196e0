//! `MaasHost`: one MAAS machine mirrored into Kubernetes by maas-client.
//!
//! Field ownership (server-side apply managers): maas-client writes
//! `spec.systemID` and the whole status; machine-controller writes
//! `spec.consumerRef`, `spec.provisioning` and `spec.reservation`;
//! remediation-controller adds and removes reboot annotations
//! (`reboot.maas.cluster.x-k8s.io/<requester>`).

// `KubeSchema` copies each struct, `pub` included, into a function body to build
// its schema; rustc then reports the copy as an unreachable `pub` item.
#![allow(unreachable_pub)]

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{ConsumerReference, ReleasePolicy, SecretKeyReference};
use crate::kind::{provider_kind, provider_status};
use crate::lxd::{ComposedVm, HostVmHost, VmRequest};

provider_kind! {
    /// Desired state of a MaasHost.
    #[derive(KubeSchema)]
    #[kube(
        kind = "MaasHost",
        namespaced,
        status = "MaasHostStatus",
        doc = "MaasHost mirrors one MAAS machine of an imported resource pool. Machines claim a host through spec.consumerRef and ask for deployment through spec.provisioning; maas-client executes the request and reports MAAS state in status.",
        shortname = "mhost",
        printcolumn(
            name = "SystemID",
            type_ = "string",
            json_path = ".spec.systemID",
            description = "MAAS system id"
        ),
        printcolumn(
            name = "MAASStatus",
            type_ = "string",
            json_path = ".status.maasStatusName",
            description = "MAAS status name"
        ),
        printcolumn(
            name = "Power",
            type_ = "string",
            json_path = ".status.powerState",
            description = "Power state"
        ),
        printcolumn(
            name = "Consumer",
            type_ = "string",
            json_path = ".spec.consumerRef.name",
            description = "Object that claimed the host"
        ),
        printcolumn(
            name = "Zone",
            type_ = "string",
            json_path = ".status.zone",
            description = "MAAS zone"
        ),
        printcolumn(
            name = "Pool",
            type_ = "string",
            json_path = ".status.pool",
            description = "MAAS resource pool"
        ),
        printcolumn(
            name = "CPU",
            type_ = "integer",
            json_path = ".status.cpuCount",
            description = "CPU cores"
        ),
        printcolumn(
            name = "MemoryMiB",
            type_ = "integer",
            json_path = ".status.memoryMiB",
            description = "Memory (MiB)"
        ),
        printcolumn(
            name = "State",
            type_ = "string",
            json_path = ".status.provisioningState",
            description = "Provisioning state",
            priority = 1
        ),
        printcolumn(
            name = "Reason",
            type_ = "string",
            json_path = ".status.conditions[?(@.type==\"Provisioned\")].reason",
            description = "Why the host is in its state (Unclaimed: allocated to this installation, claimed by no consumer)"
        )
    )]
    pub struct MaasHostSpec {
        /// MAAS system id of the machine. Immutable. One MAAS machine backs at most one
        /// MaasHost in the whole cluster; a host made by hand (not imported by a MaasInventory)
        /// is managed only with the annotation `maas.cluster.x-k8s.io/hand-made: "true"`.
        #[serde(rename = "systemID")]
        #[schemars(length(min = 1, max = 64))]
        #[x_kube(validation = Rule::new("self == oldSelf").message("spec.systemID is immutable").reason(Reason::FieldValueForbidden))]
        pub system_id: String,
        /// The object that claimed this host (a MaasMachine). Set with a
        /// resourceVersion precondition so two machines never claim one host.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub consumer_ref: Option<ConsumerReference>,
        /// Deployment request; maas-client allocates and deploys the machine
        /// while it is set and releases the machine when it is removed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub provisioning: Option<HostProvisioning>,
        /// Node-reuse reservation for the next machine of one owner.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub reservation: Option<HostReservation>,
        /// On a VM host (`status.vmHost`): the VMs to compose on it, one per MaasMachine with
        /// `spec.lxd.enabled`, written by machine-controller. maas-client composes each once
        /// (keyed by hostname), records it in `status.composedVMs` and imports it as a MaasHost
        /// of its own, which that MaasMachine then claims.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(length(max = 256), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["hostname"]))]
        pub vms: Option<Vec<VmRequest>>,
    }
}

/// What to deploy on the host.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!(has(self.registerVMHost) && self.registerVMHost && has(self.deployInMemory) && self.deployInMemory)")
    .message("spec.provisioning.registerVMHost and spec.provisioning.deployInMemory cannot both be true: MAAS registers only a machine deployed to disk as a VM host")
    .field_path(".registerVMHost"))]
pub struct HostProvisioning {
    /// Image: `osystem/series` (e.g. `ubuntu/jammy`) or a custom image name.
    #[schemars(length(min = 1, max = 256))]
    pub image: String,
    /// Secret key holding the user data (cloud-init) passed to MAAS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data_secret_ref: Option<SecretKeyReference>,
    /// Secret key holding rendered network data applied to MAAS interfaces before deploy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_data_secret_ref: Option<SecretKeyReference>,
    /// Secret key holding rendered metadata (YAML mapping); maas-client adds it to the user
    /// data as a cloud-config part writing `/etc/capmaas/meta-data.yaml`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta_data_secret_ref: Option<SecretKeyReference>,
    /// Hostname to give the machine in MAAS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub hostname: Option<String>,
    /// Deploy to memory instead of disk (MAAS `ephemeral_deploy`).
    #[serde(default)]
    pub deploy_in_memory: bool,
    /// Hardware-enablement kernel, e.g. `hwe-22.04`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub hwe_kernel: Option<String>,
    /// Erase mode and force flag used when the machine is released.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_policy: Option<ReleasePolicy>,
    /// The consumer recorded this host's system id before asking for it (a MaasMachine that
    /// CAPMAAS provisioned, or one moved here): an allocation MAAS shows for this
    /// installation's MAAS user without our identity is this host's, adopted as it is, with no
    /// allocate or deploy. Set by machine-controller; without it such an allocation is left
    /// alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adopt_allocation: Option<bool>,
    /// A deployed machine MAAS shows powered off is powered on again (the default, as CAPMAAS
    /// does); `false` leaves it off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_powered_on: Option<bool>,
    /// Deploy with MAAS's `register_vmhost=true`: MAAS installs LXD on the machine and registers
    /// it as a VM host (`status.vmHost`). Needs a MAAS admin API key; not with `deployInMemory`.
    #[serde(
        default,
        rename = "registerVMHost",
        skip_serializing_if = "Option::is_none"
    )]
    pub register_vm_host: Option<bool>,
}

/// A node-reuse reservation: the host waits for the next machine of `owner`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostReservation {
    /// MachineDeployment or control plane the host is kept for.
    pub owner: ReservationOwner,
    /// When the reservation lapses and the host is free for anyone.
    pub expires_at: Time,
}

/// Owner of a node-reuse reservation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReservationOwner {
    /// API version of the owner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 317))]
    pub api_version: Option<String>,
    /// Kind of the owner, e.g. `MachineDeployment` or `KubeadmControlPlane`.
    #[schemars(length(min = 1, max = 63))]
    pub kind: String,
    /// Name of the owner.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// UID of the owner: a re-created owner with the same name does not inherit the host.
    #[schemars(length(min = 1, max = 64))]
    pub uid: String,
}

/// Power state as MAAS reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PowerState {
    /// Powered on.
    On,
    /// Powered off.
    Off,
    /// The BMC query failed; never acted upon (a power-on would cycle a healthy server).
    Error,
    /// MAAS does not know.
    Unknown,
}

/// Where the host is in its life cycle, derived from the MAAS status and the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ProvisioningState {
    /// MAAS status not usable (New, Commissioning, Testing, Rescue mode, ...).
    Unavailable,
    /// Ready in MAAS and free to claim.
    Available,
    /// maas-client is allocating the machine.
    Allocating,
    /// Allocated to this installation, not deployed yet.
    Allocated,
    /// MAAS is deploying the image.
    Deploying,
    /// Deployed and running.
    Deployed,
    /// Being released (and possibly erased).
    Releasing,
    /// The last deployment or release failed.
    Failed,
    /// MAAS reports the machine broken.
    Broken,
    /// The machine disappeared from MAAS.
    Missing,
}

impl ProvisioningState {
    /// The name as the API spells it (`Deploying`, `Deployed`, …): for messages and metric
    /// labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unavailable => "Unavailable",
            Self::Available => "Available",
            Self::Allocating => "Allocating",
            Self::Allocated => "Allocated",
            Self::Deploying => "Deploying",
            Self::Deployed => "Deployed",
            Self::Releasing => "Releasing",
            Self::Failed => "Failed",
            Self::Broken => "Broken",
            Self::Missing => "Missing",
        }
    }
}

/// One network interface of the host.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HostInterface {
    /// Interface name in MAAS, e.g. `eno1`.
    #[schemars(length(min = 1, max = 64))]
    pub name: String,
    /// MAC address of the interface as MAAS reports it, e.g. `52:54:00:aa:bb:01`.
    /// MaasDataTemplates read it through `fromHostInterfaces`, `fromHostInterface` and (for the
    /// boot interface) `fromBootMAC`.
    #[schemars(length(max = 64))]
    pub mac: String,
}

/// What maas-client recorded when it allocated the machine.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostAllocation {
    /// The identity given to MAAS as the allocation's `agent_name`:
    /// `<installation>;<namespace>/<host>;<release policy>` (the installation id alone for an
    /// allocation made by an earlier version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_name: Option<String>,
    /// UID of the consumer the machine was allocated for.
    #[serde(
        default,
        rename = "consumerUID",
        skip_serializing_if = "Option::is_none"
    )]
    pub consumer_uid: Option<String>,
    /// When the allocation happened (was taken over).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocated_at: Option<Time>,
    /// The allocation was made without our identity (by CAPMAAS, which gives MAAS no
    /// `agent_name`) and taken over for the consumer that recorded its system id: MAAS's
    /// `agent_name` is not `agentName`; the machine's workload annotations carry our identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taken_over: Option<bool>,
}

provider_status! {
    /// Observed state of a MaasHost, written by maas-client.
    pub struct MaasHostStatus {
        /// Hostname of the machine in MAAS. maas-client sets `spec.provisioning.hostname` in MAAS
        /// before deploying and gives the original name back after the release.
        pub hostname: Option<String>,
        /// Fully qualified domain name of the machine in MAAS (its hostname in its MAAS domain).
        /// machine-controller reports it as the Machine's `InternalDNS` address.
        pub fqdn: Option<String>,
        /// MAAS numeric status.
        pub maas_status: Option<i32>,
        /// MAAS status name, e.g. `Ready`, `Deployed`, `Failed deployment`.
        pub maas_status_name: Option<String>,
        /// MAAS status message of the last event. A change of it alone (progress while MAAS works
        /// on the machine) is reported at most once a minute.
        pub status_message: Option<String>,
        /// Power state.
        pub power_state: Option<PowerState>,
        /// Number of CPU cores.
        pub cpu_count: Option<i32>,
        /// Memory in MiB.
        #[serde(rename = "memoryMiB")]
        pub memory_mib: Option<i64>,
        /// Total storage in GiB.
        #[serde(rename = "storageGiB")]
        pub storage_gib: Option<i64>,
        /// Architecture, e.g. `amd64/generic`.
        pub architecture: Option<String>,
        /// MAAS zone of the machine. machine-controller matches it against the failure domain of a
        /// Machine.
        pub zone: Option<String>,
        /// MAAS resource pool.
        pub pool: Option<String>,
        /// Tags of the machine in MAAS, sorted. machine-controller only picks a host that carries
        /// every tag the MaasMachine asks for.
        #[schemars(length(max = 256))]
        pub tags: Option<Vec<String>>,
        /// Network interfaces of the machine as MAAS reports them (name and MAC), sorted by name.
        /// MaasDataTemplates look MAC addresses up here by interface name.
        #[schemars(length(max = 64), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
        pub interfaces: Option<Vec<HostInterface>>,
        /// The interface the machine PXE-boots from, as MAAS reports it (`boot_interface`);
        /// absent when MAAS names none. MaasDataTemplates read its MAC through `fromBootMAC`.
        pub boot_interface: Option<HostInterface>,
        /// IP addresses MAAS reports for the deployed machine.
        #[schemars(length(max = 64))]
        pub addresses: Option<Vec<String>>,
        /// Life-cycle state derived from MAAS status and the request.
        pub provisioning_state: Option<ProvisioningState>,
        /// What maas-client recorded when it allocated the machine to this installation (agent name,
        /// consumer UID, time). Kept while the installation holds the machine; maas-client reads it
        /// to tell an allocation for the current consumer from an earlier one.
        pub allocation: Option<HostAllocation>,
        /// Image MAAS deployed.
        pub deployed_image: Option<String>,
        /// Last time maas-client refreshed this status.
        pub last_updated: Option<Time>,
        /// The machine is gone from MAAS (kept while consumed, never silently deleted).
        pub missing: Option<bool>,
        /// Generation of the spec last acted upon.
        pub observed_generation: Option<i64>,
        /// The MAAS VM host (LXD) this machine is, written by maas-client once MAAS registered
        /// it (`spec.provisioning.registerVMHost`): its id, name, resources and composed VMs.
        pub vm_host: Option<HostVmHost>,
        /// On a machine that is itself a VM composed on a VM host: the MAAS id of that VM host,
        /// written by maas-client.
        pub vm_host_id: Option<i64>,
        /// On a VM host: the VMs maas-client composed for `spec.vms`, by hostname and system id,
        /// each kept until MAAS no longer has it.
        #[serde(rename = "composedVMs")]
        #[schemars(length(max = 256))]
        pub composed_vms: Option<Vec<ComposedVm>>,
    }
    /// Conditions written by maas-client: `HostPresent` (the MAAS machine exists and this host
    /// manages it), `Provisioned` (progress of the deployment request) and `Ready`, which
    /// summarizes `HostPresent` and, while a deployment is requested, `Provisioned`.
    conditions
}

#[cfg(test)]
mod tests {
    use super::ProvisioningState as S;

    #[test]
    fn provisioning_state_names_are_the_serialized_ones() {
        for state in [
            S::Unavailable,
            S::Available,
            S::Allocating,
            S::Allocated,
            S::Deploying,
            S::Deployed,
            S::Releasing,
            S::Failed,
            S::Broken,
            S::Missing,
        ] {
            assert_eq!(
                serde_json::to_value(state).ok(),
                Some(serde_json::Value::from(state.as_str()))
            );
        }
    }
}
