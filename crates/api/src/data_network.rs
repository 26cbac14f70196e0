//! `networkData` section of a MaasDataTemplate (OpenStack `network_data.json`
//! shape): links by MAC, static and DHCP networks, routes, DNS servers.

// `KubeSchema` copies each struct, `pub` included, into a function body to build
// its schema; rustc then reports the copy as an unreachable `pub` item.
#![allow(unreachable_pub)]

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::PoolReference;

/// Network configuration rendered for each machine.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct NetworkData {
    /// Layer-2 links: ethernets, bonds, VLANs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub links: Option<NetworkLinks>,
    /// Layer-3 networks on the links.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub networks: Option<Networks>,
    /// Global services (DNS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub services: Option<NetworkServices>,
}

/// Layer-2 links, list-maps keyed by `id`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct NetworkLinks {
    /// Physical (or virtual) ethernet links.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["id"]))]
    pub ethernets: Option<Vec<EthernetLink>>,
    /// Bonds of other links.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 8), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["id"]))]
    pub bonds: Option<Vec<BondLink>>,
    /// VLANs on other links.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["id"]))]
    pub vlans: Option<Vec<VlanLink>>,
}

/// Type of an ethernet link (OpenStack link types).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EthernetType {
    /// Physical NIC.
    #[default]
    Phy,
    /// Linux bridge.
    Bridge,
    /// Distributed virtual switch.
    Dvs,
    /// Hardware virtual ethernet bridge.
    #[serde(rename = "hw_veb")]
    HwVeb,
    /// Hyper-V.
    Hyperv,
    /// Open vSwitch.
    Ovs,
    /// TAP device.
    Tap,
    /// vhost-user.
    Vhostuser,
    /// Virtual interface.
    Vif,
}

/// Where a link's MAC address comes from: exactly one of the fields (`fromBootMAC` counts
/// when true).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("(has(self.string) ? 1 : 0) + (has(self.fromHostInterface) ? 1 : 0) + (has(self.fromBootMAC) && self.fromBootMAC ? 1 : 0) == 1")
    .message("spec.networkData.links macAddress must set exactly one of string, fromHostInterface or fromBootMAC"))]
pub struct MacAddressSource {
    /// Literal MAC address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 17), pattern(r"^([0-9A-Fa-f]{2}[:-]){5}[0-9A-Fa-f]{2}$"))]
    pub string: Option<String>,
    /// Name of a host interface (as MAAS reports it) whose MAC is used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub from_host_interface: Option<String>,
    /// Use the MAC of the interface the host PXE-boots from (MaasHost
    /// `status.bootInterface`, as MAAS reports it); CAPM3's `fromBootMAC`.
    #[serde(
        rename = "fromBootMAC",
        default,
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub from_boot_mac: bool,
}

/// An ethernet link.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EthernetLink {
    /// OpenStack link type written into the rendered data; `phy` (a physical NIC) by default.
    /// maas-client configures the link as the MAAS interface with its MAC, whatever the type.
    #[serde(rename = "type", default)]
    pub type_: EthernetType,
    /// Link id (interface name in the rendered data).
    #[schemars(length(min = 1, max = 64), pattern(r"^[a-zA-Z][a-zA-Z0-9._-]*$"))]
    pub id: String,
    /// Maximum transmission unit of the link in bytes, 1500 when unset. maas-client sets it on
    /// the MAAS interface before deployment when it differs.
    #[serde(default = "default_mtu")]
    #[schemars(range(min = 1280, max = 9000))]
    pub mtu: i32,
    /// MAC address source.
    pub mac_address: MacAddressSource,
}

fn default_mtu() -> i32 {
    1500
}

/// Bonding mode (Linux bonding driver names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum BondMode {
    /// Round robin.
    #[serde(rename = "balance-rr")]
    BalanceRr,
    /// One active link.
    #[serde(rename = "active-backup")]
    ActiveBackup,
    /// XOR hash.
    #[serde(rename = "balance-xor")]
    BalanceXor,
    /// Every packet on every link.
    #[serde(rename = "broadcast")]
    Broadcast,
    /// LACP.
    #[serde(rename = "802.3ad")]
    Lacp,
    /// Adaptive transmit load balancing.
    #[serde(rename = "balance-tlb")]
    BalanceTlb,
    /// Adaptive load balancing.
    #[serde(rename = "balance-alb")]
    BalanceAlb,
}

/// A bond of links.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BondLink {
    /// Link id of the bond, referenced by VLANs and networks. maas-client names the MAAS bond
    /// interface after it when that is a valid, unused interface name, else `bondN`.
    #[schemars(length(min = 1, max = 64), pattern(r"^[a-zA-Z][a-zA-Z0-9._-]*$"))]
    pub id: String,
    /// Maximum transmission unit of the bond in bytes, 1500 when unset. maas-client sets it on
    /// the MAAS bond interface.
    #[serde(default = "default_mtu")]
    #[schemars(range(min = 1280, max = 9000))]
    pub mtu: i32,
    /// Linux bonding mode of the bond, e.g. `active-backup` or `802.3ad` (LACP). maas-client
    /// sets it on the MAAS bond interface.
    pub bond_mode: BondMode,
    /// Ids of the bonded links.
    #[schemars(length(min = 1, max = 8), inner(length(min = 1, max = 64)))]
    pub bond_links: Vec<String>,
    /// MAC address source; the first member's MAC when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac_address: Option<MacAddressSource>,
}

/// A VLAN on another link.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VlanLink {
    /// Link id of the VLAN, referenced by networks; unique among all links of the template.
    #[schemars(length(min = 1, max = 64), pattern(r"^[a-zA-Z][a-zA-Z0-9._-]*$"))]
    pub id: String,
    /// Maximum transmission unit of the VLAN link in bytes, 1500 when unset. maas-client sets it
    /// on the MAAS VLAN interface.
    #[serde(default = "default_mtu")]
    #[schemars(range(min = 1280, max = 9000))]
    pub mtu: i32,
    /// 802.1Q tag of the VLAN. maas-client puts the interface on the MAAS VLAN with this tag in
    /// the parent's fabric, which must exist in MAAS, and needs a tag from 1 to 4094.
    #[serde(rename = "vlanID")]
    #[schemars(range(min = 0, max = 4094))]
    pub vlan_id: i32,
    /// Id of the parent link.
    #[schemars(length(min = 1, max = 64))]
    pub vlan_link: String,
    /// MAC address source; the parent's MAC when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac_address: Option<MacAddressSource>,
}

/// Layer-3 networks, list-maps keyed by `id`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Networks {
    /// Static IPv4 networks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["id"]))]
    pub ipv4: Option<Vec<StaticNetwork>>,
    /// Static IPv6 networks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["id"]))]
    pub ipv6: Option<Vec<StaticNetwork>>,
    /// IPv4 networks configured by DHCP.
    #[serde(default, rename = "ipv4DHCP", skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["id"]))]
    pub ipv4_dhcp: Option<Vec<DhcpNetwork>>,
    /// IPv6 networks configured by DHCP.
    #[serde(default, rename = "ipv6DHCP", skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["id"]))]
    pub ipv6_dhcp: Option<Vec<DhcpNetwork>>,
}

/// A network with an address allocated from a pool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StaticNetwork {
    /// Id of the network in the rendered data, unique among all networks of the template.
    /// Errors about the network name it.
    #[schemars(length(min = 1, max = 64))]
    pub id: String,
    /// Id of the link carrying the network.
    #[schemars(length(min = 1, max = 64))]
    pub link: String,
    /// Pool the address (and prefix, gateway) is allocated from.
    pub ip_address_from_pool: PoolReference,
    /// Routes through this network, rendered with it. MAAS applies only a default route
    /// (`0.0.0.0/0` or `::/0`), whose gateway must be the MAAS subnet's; maas-client reports
    /// other routes in a `NetworkDataNotApplied` Warning Event on the MaasHost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16))]
    pub routes: Option<Vec<Route>>,
}

/// A network configured by DHCP.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DhcpNetwork {
    /// Id of the network in the rendered data, unique among all networks of the template.
    /// Errors about the network name it.
    #[schemars(length(min = 1, max = 64))]
    pub id: String,
    /// Id of the link carrying the network.
    #[schemars(length(min = 1, max = 64))]
    pub link: String,
    /// Routes through this network, rendered with it. maas-client does not apply them in MAAS
    /// (DHCP provides the routes) and reports them in a `NetworkDataNotApplied` Warning Event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16))]
    pub routes: Option<Vec<Route>>,
}

/// A route: destination CIDR via a literal gateway or a pool's gateway.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.gateway) != has(self.gatewayFromPool)")
    .message("spec.networkData.networks routes must set exactly one of gateway or gatewayFromPool"))]
pub struct Route {
    /// Destination, e.g. `0.0.0.0/0`.
    #[schemars(length(min = 1, max = 64))]
    #[x_kube(validation = Rule::new("isCIDR(self)").message("spec.networkData.networks routes network must be a CIDR"))]
    pub network: String,
    /// Literal gateway address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    #[x_kube(validation = Rule::new("isIP(self)").message("spec.networkData.networks routes gateway must be an IP address"))]
    pub gateway: Option<String>,
    /// Pool whose gateway is used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway_from_pool: Option<PoolReference>,
}

/// Global network services.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkServices {
    /// DNS server addresses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 8), inner(length(max = 64)))]
    #[x_kube(validation = Rule::new("self.all(a, isIP(a))").message("spec.networkData.services.dns must contain only IP addresses"))]
    pub dns: Option<Vec<String>>,
    /// Pool whose DNS servers are added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns_from_pool: Option<PoolReference>,
}
