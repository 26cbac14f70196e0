//! The machine object (maas-api.md section 5).

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::{
    Domain, Interface, MachineStatus, NodeRef, PodRef, PowerState, ResourcePool, Zone, ip_list,
    null_default, optional_ip,
};

/// A MAAS machine. Only the fields a provider needs are typed; the heavy storage trees are
/// skipped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// The MAAS id, e.g. `d8n3re`.
    pub system_id: String,
    /// Short host name.
    #[serde(default, deserialize_with = "null_default")]
    pub hostname: String,
    /// Free-text description.
    #[serde(default, deserialize_with = "null_default")]
    pub description: String,
    /// `hostname.domain`.
    #[serde(default, deserialize_with = "null_default")]
    pub fqdn: String,
    /// DNS domain.
    #[serde(default)]
    pub domain: Option<Domain>,
    /// Owning user name, `None` when unowned.
    #[serde(default)]
    pub owner: Option<String>,
    /// Legacy name of the workload annotations (all MAAS versions).
    #[serde(default, deserialize_with = "null_default")]
    pub owner_data: BTreeMap<String, String>,
    /// Workload annotations (MAAS 3.2+); wiped on release.
    #[serde(default, deserialize_with = "null_default")]
    pub workload_annotations: BTreeMap<String, String>,
    /// Locked machines refuse edits.
    #[serde(default)]
    pub locked: bool,
    /// Status number.
    pub status: MachineStatus,
    /// Human status label, e.g. `Failed deployment`.
    #[serde(default, deserialize_with = "null_default")]
    pub status_name: String,
    /// Latest event, e.g. `Installing OS`.
    #[serde(default)]
    pub status_message: Option<String>,
    /// Current action, e.g. `release`.
    #[serde(default)]
    pub status_action: Option<String>,
    /// Failure text or `mark_broken` comment.
    #[serde(default, deserialize_with = "null_default")]
    pub error_description: String,
    /// Cached power state (prefer it over `query_power_state`).
    #[serde(default)]
    pub power_state: PowerState,
    /// `ipmi`, `redfish`, `virsh`, `manual`, ... (`""` when unset).
    #[serde(default, deserialize_with = "null_default")]
    pub power_type: String,
    /// Cores.
    #[serde(default)]
    pub cpu_count: u32,
    /// MHz.
    #[serde(default, deserialize_with = "null_default")]
    pub cpu_speed: u64,
    /// Memory in MiB.
    #[serde(default, deserialize_with = "null_default")]
    pub memory: u64,
    /// Storage in decimal MB.
    #[serde(default, deserialize_with = "null_default")]
    pub storage: f64,
    /// e.g. `amd64/generic`.
    #[serde(default, deserialize_with = "null_default")]
    pub architecture: String,
    /// Deployed OS (`""` unless deploying/deployed; `custom` for custom images).
    #[serde(default, deserialize_with = "null_default")]
    pub osystem: String,
    /// Deployed release or custom image name.
    #[serde(default, deserialize_with = "null_default")]
    pub distro_series: String,
    /// Kernel.
    #[serde(default)]
    pub hwe_kernel: Option<String>,
    /// Minimum kernel.
    #[serde(default)]
    pub min_hwe_kernel: Option<String>,
    /// Deployed to RAM.
    #[serde(default)]
    pub ephemeral_deploy: bool,
    /// Static addresses, else DHCP ones.
    #[serde(default, deserialize_with = "ip_list")]
    pub ip_addresses: Vec<IpAddr>,
    /// The PXE interface.
    #[serde(default)]
    pub boot_interface: Option<Interface>,
    /// All interfaces.
    #[serde(default, deserialize_with = "null_default")]
    pub interface_set: Vec<Interface>,
    /// Tags.
    #[serde(default, deserialize_with = "null_default")]
    pub tag_names: Vec<String>,
    /// Availability zone.
    #[serde(default)]
    pub zone: Option<Zone>,
    /// Resource pool.
    #[serde(default)]
    pub pool: Option<ResourcePool>,
    /// Allocation marker. MAAS 3.7 does not display it in the machine object (it is only a
    /// list filter), so this is usually `None`; filter with `agent_name` instead.
    #[serde(default)]
    pub agent_name: Option<String>,
    /// The links whose subnet gateways are the machine's default gateways.
    #[serde(default, deserialize_with = "null_default")]
    pub default_gateways: DefaultGateways,
    /// The VM host the machine was composed on (MAAS 3.x; absent in 4.0).
    #[serde(default)]
    pub pod: Option<PodRef>,
    /// The machine an LXD VM runs on.
    #[serde(default)]
    pub parent: Option<NodeRef>,
    /// API path, `/MAAS/api/2.0/machines/<system_id>/`.
    #[serde(default, deserialize_with = "null_default")]
    pub resource_uri: String,
}

impl Machine {
    /// The workload annotations, falling back to `owner_data` on MAAS versions without them.
    pub fn annotations(&self) -> &BTreeMap<String, String> {
        if self.workload_annotations.is_empty() {
            &self.owner_data
        } else {
            &self.workload_annotations
        }
    }

    /// Zone name, or `""`.
    pub fn zone_name(&self) -> &str {
        self.zone.as_ref().map_or("", |z| z.name.as_str())
    }

    /// Pool name, or `""`.
    pub fn pool_name(&self) -> &str {
        self.pool.as_ref().map_or("", |p| p.name.as_str())
    }

    /// Id of the VM host the machine was composed on (MAAS deletes such a machine when it is
    /// released).
    pub fn vm_host_id(&self) -> Option<i64> {
        self.pod.as_ref().map(|p| p.id)
    }
}

/// `default_gateways` of a machine: one per address family.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DefaultGateways {
    /// IPv4 default gateway.
    #[serde(default, deserialize_with = "null_default")]
    pub ipv4: DefaultGateway,
    /// IPv6 default gateway.
    #[serde(default, deserialize_with = "null_default")]
    pub ipv6: DefaultGateway,
}

/// One default gateway: the gateway address and the link it was chosen from (`None` when
/// MAAS picks one itself).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DefaultGateway {
    /// Gateway address.
    #[serde(default, deserialize_with = "optional_ip")]
    pub gateway_ip: Option<IpAddr>,
    /// Id of the link set with `set_default_gateway`.
    #[serde(default)]
    pub link_id: Option<i64>,
}

/// Answer of `GET /machines/{id}/?op=query_power_state`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PowerStateReport {
    /// The state the BMC reported.
    pub state: PowerState,
}
