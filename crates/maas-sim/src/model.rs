//! The simulated MAAS objects. Serializable so the state file can hold them.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::time::Duration;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use crate::history::StatusHistory;
use crate::status::NodeStatus;

/// A machine's power state as MAAS reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PowerState {
    /// Powered on.
    On,
    /// Powered off.
    Off,
    /// The BMC has not been queried.
    Unknown,
    /// The BMC could not be reached.
    Error,
}

impl PowerState {
    /// The string MAAS uses (`on`, `off`, `unknown`, `error`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::On => "on",
            Self::Off => "off",
            Self::Unknown => "unknown",
            Self::Error => "error",
        }
    }

    /// Parses the MAAS string.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "on" => Some(Self::On),
            "off" => Some(Self::Off),
            "unknown" => Some(Self::Unknown),
            "error" => Some(Self::Error),
            _ => None,
        }
    }
}

/// A physical disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Disk {
    pub(crate) id: u64,
    pub(crate) name: String,
    /// Bytes.
    pub(crate) size: u64,
    pub(crate) model: String,
    pub(crate) serial: String,
}

/// How an interface is linked to a subnet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum LinkMode {
    /// Address assigned from the subnet at deploy time, released on release.
    Auto,
    /// DHCP.
    Dhcp,
    /// A fixed address kept across deployments.
    Static,
    /// Link up, no address.
    LinkUp,
}

impl LinkMode {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Dhcp => "dhcp",
            Self::Static => "static",
            Self::LinkUp => "link_up",
        }
    }

    pub(crate) fn parse(value: &str) -> Option<Self> {
        match value.to_ascii_lowercase().as_str() {
            "auto" => Some(Self::Auto),
            "dhcp" => Some(Self::Dhcp),
            "static" => Some(Self::Static),
            "link_up" => Some(Self::LinkUp),
            _ => None,
        }
    }
}

/// A link of an interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Link {
    pub(crate) id: u64,
    pub(crate) mode: LinkMode,
    pub(crate) subnet_id: Option<u64>,
    pub(crate) ip: Option<IpAddr>,
}

/// The type of a machine interface.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum InterfaceKind {
    /// A NIC.
    #[default]
    Physical,
    /// A bond of other interfaces (its parents).
    Bond,
    /// A tagged VLAN on one parent.
    Vlan,
}

impl InterfaceKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Physical => "physical",
            Self::Bond => "bond",
            Self::Vlan => "vlan",
        }
    }
}

/// A network interface: a NIC, a bond or a VLAN interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Interface {
    pub(crate) id: u64,
    pub(crate) name: String,
    pub(crate) mac_address: String,
    /// The subnet (and so the VLAN/fabric) a NIC is cabled to (unused for bonds and VLANs).
    pub(crate) subnet_id: u64,
    pub(crate) links: Vec<Link>,
    #[serde(default)]
    pub(crate) kind: InterfaceKind,
    /// Ids of the parent interfaces (bond members, the parent of a VLAN interface).
    #[serde(default)]
    pub(crate) parents: Vec<u64>,
    /// MAAS VLAN object of a bond or VLAN interface (a NIC's comes from its cabling).
    #[serde(default)]
    pub(crate) vlan_id: Option<u64>,
    /// MTU set on the interface.
    #[serde(default)]
    pub(crate) mtu: Option<u32>,
    /// Bond mode of a bond.
    #[serde(default)]
    pub(crate) bond_mode: Option<String>,
}

impl Interface {
    /// A NIC cabled to `subnet_id` with `links`.
    pub(crate) fn nic(
        id: u64,
        name: String,
        mac_address: String,
        subnet_id: u64,
        links: Vec<Link>,
    ) -> Self {
        Self {
            id,
            name,
            mac_address,
            subnet_id,
            links,
            kind: InterfaceKind::Physical,
            parents: Vec::new(),
            vlan_id: None,
            mtu: None,
            bond_mode: None,
        }
    }
}

/// A tagged VLAN (untagged VLANs are implied by the subnets of each fabric).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Vlan {
    pub(crate) id: u64,
    pub(crate) fabric_id: u64,
    pub(crate) vid: u32,
    pub(crate) name: String,
    pub(crate) mtu: u32,
}

/// What an IP range is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RangeKind {
    /// Kept out of MAAS's automatic assignment.
    Reserved,
    /// Served by MAAS's DHCP.
    Dynamic,
}

impl RangeKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Reserved => "reserved",
            Self::Dynamic => "dynamic",
        }
    }

    pub(crate) fn parse(value: &str) -> Option<Self> {
        match value {
            "reserved" => Some(Self::Reserved),
            "dynamic" => Some(Self::Dynamic),
            _ => None,
        }
    }
}

/// An IP range of a subnet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct IpRange {
    pub(crate) id: u64,
    pub(crate) kind: RangeKind,
    pub(crate) start_ip: IpAddr,
    pub(crate) end_ip: IpAddr,
    pub(crate) subnet_id: u64,
    pub(crate) comment: String,
    /// Username of the creator.
    pub(crate) user: String,
}

impl IpRange {
    pub(crate) fn contains(&self, ip: IpAddr) -> bool {
        ip_in(self.start_ip, self.end_ip, ip)
    }

    pub(crate) fn overlaps(&self, start: IpAddr, end: IpAddr) -> bool {
        ip_in(start, end, self.start_ip)
            || ip_in(start, end, self.end_ip)
            || ip_in(self.start_ip, self.end_ip, start)
    }
}

/// Whether `ip` is within `start..=end` (same family only).
pub(crate) fn ip_in(start: IpAddr, end: IpAddr, ip: IpAddr) -> bool {
    match (start, end, ip) {
        (IpAddr::V4(a), IpAddr::V4(b), IpAddr::V4(x)) => a <= x && x <= b,
        (IpAddr::V6(a), IpAddr::V6(b), IpAddr::V6(x)) => a <= x && x <= b,
        _ => false,
    }
}

/// What a time-driven transition will do when due.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum PendingKind {
    Deploy,
    Release,
    Erase,
    Commission,
}

/// How a pending transition ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Outcome {
    Success,
    Fail,
    /// Deployment fails because the BMC stops answering.
    PowerFail,
}

/// A transition in progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Pending {
    pub(crate) kind: PendingKind,
    /// Simulator clock (milliseconds) when it started and when it is due.
    pub(crate) started_ms: u64,
    pub(crate) due_ms: u64,
    pub(crate) outcome: Outcome,
}

/// A power change the BMC has not carried out yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PendingPower {
    pub(crate) target: PowerState,
    pub(crate) due_ms: u64,
}

impl Pending {
    /// A step that starts at `now_ms` (simulator clock) and is due `takes` later.
    pub(crate) fn starting(
        kind: PendingKind,
        now_ms: u64,
        takes: Duration,
        outcome: Outcome,
    ) -> Self {
        Self {
            kind,
            started_ms: now_ms,
            due_ms: now_ms + duration_ms(takes),
            outcome,
        }
    }
}

impl PendingPower {
    /// A change to `target` that the BMC carries out `takes` after `now_ms`.
    pub(crate) fn starting(target: PowerState, now_ms: u64, takes: Duration) -> Self {
        Self {
            target,
            due_ms: now_ms + duration_ms(takes),
        }
    }
}

/// `d` in whole milliseconds, saturating: the simulator clock counts milliseconds in a `u64`.
fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// How an accepted release request ended (see [`ReleaseRecord`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReleaseResult {
    /// Still releasing or erasing.
    InProgress,
    /// The machine reached Ready (after the erase, when the request asked for one).
    Released,
    /// Releasing failed (13), Failed disk erasing (15), or the erase was aborted.
    Failed,
}

/// One release request MAAS accepted for a machine, with the erase flags it carried, so
/// tests can tell whether a machine ever reached Ready without the erase they expected.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReleaseRecord {
    /// `erase` parameter.
    pub erase: bool,
    /// `quick_erase` parameter.
    pub quick_erase: bool,
    /// `secure_erase` parameter.
    pub secure_erase: bool,
    /// `force` parameter.
    pub force: bool,
    /// `comment` parameter.
    pub comment: String,
    /// How it ended.
    pub result: ReleaseResult,
}

impl ReleaseRecord {
    /// Whether this release erases the disks before the machine becomes Ready.
    pub fn erases(&self) -> bool {
        self.erase || self.quick_erase || self.secure_erase
    }
}

/// A machine.
/// Zone, pool and architecture of a new machine ([`Machine::new`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Placement {
    pub(crate) zone: String,
    pub(crate) pool: String,
    pub(crate) architecture: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Machine {
    pub(crate) id: u64,
    pub(crate) system_id: String,
    pub(crate) hostname: String,
    pub(crate) description: String,
    pub(crate) domain_id: u64,
    pub(crate) zone: String,
    pub(crate) pool: String,
    pub(crate) architecture: String,
    pub(crate) cpu_count: u32,
    pub(crate) cpu_speed: u32,
    /// MiB.
    pub(crate) memory: u64,
    pub(crate) disks: Vec<Disk>,
    pub(crate) interfaces: Vec<Interface>,
    pub(crate) tags: BTreeSet<String>,
    pub(crate) power_type: String,
    pub(crate) power_state: PowerState,
    pub(crate) status: NodeStatus,
    /// Status before Broken, so `mark_fixed` can return a deployed machine to Deployed.
    pub(crate) status_before_broken: Option<NodeStatus>,
    pub(crate) status_message: Option<String>,
    pub(crate) status_action: String,
    pub(crate) error_description: String,
    pub(crate) owner: Option<String>,
    pub(crate) agent_name: String,
    pub(crate) owner_data: BTreeMap<String, String>,
    pub(crate) osystem: String,
    pub(crate) distro_series: String,
    pub(crate) hwe_kernel: Option<String>,
    pub(crate) min_hwe_kernel: String,
    /// Decoded cloud-init user data of the current deployment.
    pub(crate) user_data: Option<Vec<u8>>,
    pub(crate) ephemeral_deploy: bool,
    pub(crate) enable_hw_sync: bool,
    pub(crate) locked: bool,
    pub(crate) netboot: bool,
    pub(crate) swap_size: Option<u64>,
    pub(crate) hardware_uuid: String,
    /// Comment of the last operation (MAAS keeps it in the event log).
    pub(crate) last_comment: String,
    pub(crate) pending: Option<Pending>,
    pub(crate) pending_power: Option<PendingPower>,
    /// Count of power cycles/ons, for tests that check "never power-cycle a healthy node".
    pub(crate) power_on_count: u64,
    /// Every accepted release request, oldest first (simulator bookkeeping, not MAAS data).
    #[serde(default)]
    pub(crate) releases: Vec<ReleaseRecord>,
    /// When MAAS moved the machine to which status (simulator bookkeeping, not MAAS data;
    /// in memory only).
    #[serde(skip)]
    pub(crate) history: StatusHistory,
    /// Link whose subnet gateway is the IPv4 default (`set_default_gateway`).
    #[serde(default)]
    pub(crate) gateway_link_ipv4: Option<u64>,
    /// Link whose subnet gateway is the IPv6 default.
    #[serde(default)]
    pub(crate) gateway_link_ipv6: Option<u64>,
    /// The VM host this machine was composed on (`pod` in MAAS); such a machine is deleted
    /// when a release finishes.
    #[serde(default)]
    pub(crate) vm_host_id: Option<u64>,
    /// The VM host type (`lxd` or `virsh`) to register this machine as when its deployment
    /// finishes (`register_vmhost` / `install_kvm` on deploy).
    #[serde(default)]
    pub(crate) register_vmhost: Option<String>,
    /// A released composed machine: removed from MAAS at the next sweep.
    #[serde(default)]
    pub(crate) decomposed: bool,
}

impl Machine {
    /// A machine with this identity and placement and every other field as a Ready machine
    /// nobody touched has it (no disks, no interfaces, powered off, no history). The
    /// inventory's generated machines and composed VMs start from it and set what differs.
    pub(crate) fn new(
        id: u64,
        system_id: String,
        hostname: String,
        domain_id: u64,
        placement: Placement,
    ) -> Self {
        Self {
            id,
            system_id,
            hostname,
            description: String::new(),
            domain_id,
            zone: placement.zone,
            pool: placement.pool,
            architecture: placement.architecture,
            cpu_count: 1,
            cpu_speed: 2000,
            memory: 2048,
            disks: Vec::new(),
            interfaces: Vec::new(),
            tags: BTreeSet::new(),
            power_type: "ipmi".to_owned(),
            power_state: PowerState::Off,
            status: NodeStatus::Ready,
            status_before_broken: None,
            status_message: Some("Ready".to_owned()),
            status_action: String::new(),
            error_description: String::new(),
            owner: None,
            agent_name: String::new(),
            owner_data: BTreeMap::new(),
            osystem: String::new(),
            distro_series: String::new(),
            hwe_kernel: None,
            min_hwe_kernel: String::new(),
            user_data: None,
            ephemeral_deploy: false,
            enable_hw_sync: false,
            locked: false,
            netboot: true,
            swap_size: None,
            hardware_uuid: String::new(),
            last_comment: String::new(),
            pending: None,
            pending_power: None,
            power_on_count: 0,
            releases: Vec::new(),
            history: StatusHistory::default(),
            gateway_link_ipv4: None,
            gateway_link_ipv6: None,
            vm_host_id: None,
            register_vmhost: None,
            decomposed: false,
        }
    }

    /// Storage in decimal MB, as MAAS reports it.
    pub(crate) fn storage_mb(&self) -> f64 {
        #[allow(clippy::cast_precision_loss)]
        let bytes = self.disks.iter().map(|d| d.size).sum::<u64>() as f64;
        bytes / 1e6
    }

    /// MAAS's allocation cost: cheapest first.
    pub(crate) fn cost(&self) -> f64 {
        #[allow(clippy::cast_precision_loss)]
        let memory = self.memory as f64;
        f64::from(self.cpu_count) + memory / 1024.0
    }

    /// All addresses currently configured on the machine's links.
    pub(crate) fn ip_addresses(&self) -> Vec<IpAddr> {
        self.interfaces
            .iter()
            .flat_map(|i| i.links.iter().filter_map(|l| l.ip))
            .collect()
    }
}

/// A subnet, on the untagged VLAN of its fabric or on a tagged one ([`Vlan`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Subnet {
    pub(crate) id: u64,
    pub(crate) name: String,
    pub(crate) cidr: IpNet,
    pub(crate) gateway_ip: Option<IpAddr>,
    pub(crate) dns_servers: Vec<IpAddr>,
    pub(crate) vlan_id: u64,
    pub(crate) fabric: String,
    pub(crate) fabric_id: u64,
    pub(crate) space: String,
    /// 802.1Q tag of the subnet's VLAN (0 = untagged).
    #[serde(default)]
    pub(crate) vid: u32,
}

/// An availability zone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Zone {
    pub(crate) id: u64,
    pub(crate) name: String,
    pub(crate) description: String,
}

/// A resource pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Pool {
    pub(crate) id: u64,
    pub(crate) name: String,
    pub(crate) description: String,
}

/// A tag.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Tag {
    pub(crate) name: String,
    pub(crate) definition: String,
    pub(crate) comment: String,
    pub(crate) kernel_opts: String,
}

/// A DNS domain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Domain {
    pub(crate) id: u64,
    pub(crate) name: String,
    pub(crate) ttl: Option<u32>,
    pub(crate) authoritative: bool,
}

/// A DNS resource (name → addresses).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct DnsResource {
    pub(crate) id: u64,
    pub(crate) name: String,
    pub(crate) domain_id: u64,
    pub(crate) address_ttl: Option<u32>,
    pub(crate) ip_addresses: Vec<IpAddr>,
    /// Owner of the record (the user that created it).
    pub(crate) owner: String,
}

/// A boot resource (image).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct BootResource {
    pub(crate) id: u64,
    /// `Synced` or `Uploaded`.
    pub(crate) rtype: String,
    pub(crate) name: String,
    pub(crate) architecture: String,
    pub(crate) subarches: String,
    pub(crate) title: String,
    pub(crate) base_image: String,
}

impl BootResource {
    /// `(osystem, series)` a deploy with this image shows on the machine.
    pub(crate) fn os_and_series(&self) -> (String, String) {
        match self.name.split_once('/') {
            Some((os, series)) => (os.to_owned(), series.to_owned()),
            None => ("custom".to_owned(), self.name.clone()),
        }
    }
}

/// A VM host (MAAS 3.x "pod"): an LXD or virsh host machines are composed on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct VmHost {
    pub(crate) id: u64,
    pub(crate) name: String,
    /// `lxd` or `virsh`.
    pub(crate) kind: String,
    pub(crate) power_address: String,
    pub(crate) zone: String,
    pub(crate) pool: String,
    /// The MAAS machine it runs on (deployed with `register_vmhost`), if any.
    pub(crate) host_system_id: Option<String>,
    pub(crate) cores: u32,
    /// MiB.
    pub(crate) memory: u64,
    /// Bytes of the (single, `default`) storage pool.
    pub(crate) local_storage: u64,
    pub(crate) cpu_over_commit_ratio: f64,
    pub(crate) memory_over_commit_ratio: f64,
    pub(crate) tags: BTreeSet<String>,
    pub(crate) architecture: String,
    /// Name of its storage pool.
    pub(crate) storage_pool: String,
}
