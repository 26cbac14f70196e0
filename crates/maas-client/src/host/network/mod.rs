//! Rendered network data: the OpenStack `network_data.json` shape (data-controller, Metal3
//! model), as JSON or YAML, and the errors of applying it to MAAS.
//!
//! - `links`: `type` `phy` (`ethernet_mac_address`), `bond` (`bond_links`, `bond_mode`), `vlan`
//!   (`vlan_link`, `vlan_id`); `mtu` on any. A link of another type with a MAC is treated as a
//!   NIC (what the gateway accepted before bonds and VLANs were applied).
//! - `networks`: `type` `ipv4`/`ipv6` (static: `ip_address`, `netmask`, `routes`) or
//!   `ipv4_dhcp`/`ipv6_dhcp` (also `ipv6_slaac`, `ipv6_dhcpv6-stateful`,
//!   `ipv6_dhcpv6-stateless`), on a `link`.
//! - `services`: `{type: dns, address}`.
//!
//! Unknown fields are ignored; numbers may be written as strings. How the data becomes MAAS
//! interface configuration is [`plan`].

mod apply;
pub(in crate::host) use apply::Applying;
pub mod plan;
mod resolve;

use std::collections::BTreeSet;
use std::net::IpAddr;

use serde::{Deserialize, Deserializer};

/// Rendered network data.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct RenderedNetworkData {
    /// Layer-2 links.
    #[serde(default)]
    pub links: Vec<RenderedLink>,
    /// Layer-3 networks.
    #[serde(default)]
    pub networks: Vec<RenderedNetwork>,
    /// Services (DNS servers).
    #[serde(default)]
    pub services: Vec<RenderedService>,
}

impl RenderedNetworkData {
    /// Every static address the data asks for: what applying it may link on the machine.
    pub fn static_addresses(&self) -> BTreeSet<IpAddr> {
        self.networks
            .iter()
            .filter_map(RenderedNetwork::static_address)
            .collect()
    }
}

/// One link.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct RenderedLink {
    /// Link id, referenced by networks, bonds and VLANs.
    pub id: String,
    /// `phy`, `bond`, `vlan`, ...
    #[serde(rename = "type", default)]
    pub kind: String,
    /// MAC of a NIC (of a bond: the MAC the bond should use).
    #[serde(default)]
    pub ethernet_mac_address: Option<String>,
    /// MTU.
    #[serde(default, deserialize_with = "flex_u32")]
    pub mtu: Option<u32>,
    /// Member link ids of a bond.
    #[serde(default)]
    pub bond_links: Vec<String>,
    /// Bond mode (`active-backup`, `802.3ad`, ...).
    #[serde(default)]
    pub bond_mode: Option<String>,
    /// 802.1Q tag of a VLAN link.
    #[serde(default, deserialize_with = "flex_u32")]
    pub vlan_id: Option<u32>,
    /// Parent link id of a VLAN link.
    #[serde(default)]
    pub vlan_link: Option<String>,
    /// MAC of a VLAN link (MAAS gives a VLAN interface its parent's MAC; not applied).
    #[serde(default)]
    pub vlan_mac_address: Option<String>,
}

/// What a link is, from its `type` and fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkKind {
    /// A NIC, found by MAC.
    Phy,
    /// A bond of NICs.
    Bond,
    /// A tagged VLAN on a NIC or a bond.
    Vlan,
}

impl RenderedLink {
    /// The kind, or `None` for a type the gateway cannot apply (no MAC, not bond or vlan).
    pub fn link_kind(&self) -> Option<LinkKind> {
        match self.kind.to_ascii_lowercase().as_str() {
            "bond" => Some(LinkKind::Bond),
            "vlan" => Some(LinkKind::Vlan),
            _ if self.ethernet_mac_address.is_some() => Some(LinkKind::Phy),
            _ => None,
        }
    }
}

/// One network.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct RenderedNetwork {
    /// Network id (named in errors).
    #[serde(default)]
    pub id: String,
    /// `ipv4`, `ipv6` (static) or `ipv4_dhcp`, `ipv6_dhcp`, ...
    #[serde(rename = "type")]
    pub kind: String,
    /// The link id it sits on.
    pub link: String,
    /// Static address (`addr` or `addr/prefix`).
    #[serde(default)]
    pub ip_address: Option<String>,
    /// Netmask (MAAS takes the prefix from its subnet).
    #[serde(default)]
    pub netmask: Option<String>,
    /// Routes.
    #[serde(default)]
    pub routes: Vec<RenderedRoute>,
}

/// How a network gets its address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkKind {
    /// A fixed address.
    Static,
    /// DHCP (or SLAAC) of the family (4 or 6).
    Dhcp(u8),
    /// Another type: ignored.
    Other,
}

impl RenderedNetwork {
    /// The kind of the network from its `type`.
    pub fn network_kind(&self) -> NetworkKind {
        match self.kind.to_ascii_lowercase().as_str() {
            "ipv4" | "ipv6" => NetworkKind::Static,
            "ipv4_dhcp" => NetworkKind::Dhcp(4),
            "ipv6_dhcp" | "ipv6_slaac" | "ipv6_dhcpv6-stateful" | "ipv6_dhcpv6-stateless" => {
                NetworkKind::Dhcp(6)
            }
            _ => NetworkKind::Other,
        }
    }

    /// The address of a static network (a `/prefix` dropped, as MAAS is given it); `None`
    /// for other networks and for an address that does not parse (which the plan refuses).
    pub fn static_address(&self) -> Option<IpAddr> {
        if self.network_kind() != NetworkKind::Static {
            return None;
        }
        let raw = self.ip_address.as_deref()?;
        raw.split('/').next().unwrap_or(raw).trim().parse().ok()
    }

    /// A name for messages: the id, else `on link <link>`.
    pub fn label(&self) -> String {
        if self.id.is_empty() {
            format!("on link {}", self.link)
        } else {
            self.id.clone()
        }
    }
}

/// One route of a network.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct RenderedRoute {
    /// Destination network (`0.0.0.0`, `::`, or with a prefix `0.0.0.0/0`).
    #[serde(default)]
    pub network: String,
    /// Destination netmask (`0.0.0.0`, `::`, or a prefix length).
    #[serde(default)]
    pub netmask: String,
    /// Next hop.
    #[serde(default)]
    pub gateway: String,
}

impl RenderedRoute {
    /// Whether this is a default route (`0.0.0.0/0` or `::/0`).
    pub fn is_default(&self) -> bool {
        let (address, prefix) = match self.network.split_once('/') {
            Some((a, p)) => (a.trim(), Some(p.trim())),
            None => (self.network.trim(), None),
        };
        let unspecified = address
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.is_unspecified());
        let mask = prefix.unwrap_or(self.netmask.trim());
        let zero_mask = mask.is_empty()
            || mask == "0"
            || mask.parse::<IpAddr>().is_ok_and(|ip| ip.is_unspecified());
        unspecified && zero_mask
    }
}

/// One service.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct RenderedService {
    /// `dns`.
    #[serde(rename = "type", default)]
    pub kind: String,
    /// The server address.
    #[serde(default)]
    pub address: String,
}

/// A number written as a number or a string; `null` or `""` is none.
fn flex_u32<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u32>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Flex {
        Number(u32),
        Text(String),
    }
    match Option::<Flex>::deserialize(deserializer)? {
        None => Ok(None),
        Some(Flex::Number(n)) => Ok(Some(n)),
        Some(Flex::Text(s)) if s.trim().is_empty() => Ok(None),
        Some(Flex::Text(s)) => s
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| serde::de::Error::custom(format!("{s:?} is not a number"))),
    }
}

/// Parses rendered network data (JSON or YAML).
pub fn parse(text: &str) -> Result<RenderedNetworkData, NetworkDataError> {
    serde_saphyr::from_str(text).map_err(|e| NetworkDataError::Parse(e.to_string()))
}

/// Why network data cannot be applied; every message names the link or network.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetworkDataError {
    /// Not JSON/YAML of the expected shape.
    #[error("network data cannot be parsed: {0}")]
    Parse(String),
    /// A network or link names a link id that does not exist.
    #[error("{what}: no link with id {link:?} in the network data")]
    UnknownLink {
        /// `network <id>` or `link <id>`.
        what: String,
        /// The missing link id.
        link: String,
    },
    /// A link the gateway cannot apply (its type, a missing field, a bad value).
    #[error("link {link}: {reason}")]
    BadLink {
        /// Link id.
        link: String,
        /// Why.
        reason: String,
    },
    /// The machine has no interface with the MAC.
    #[error("link {link}: the machine has no interface with MAC {mac}")]
    UnknownMac {
        /// Link id.
        link: String,
        /// The MAC.
        mac: String,
    },
    /// A network the gateway cannot apply (bad address, no MAAS subnet, wrong VLAN, gateway).
    #[error("network {network}: {reason}")]
    BadNetwork {
        /// Network id.
        network: String,
        /// Why.
        reason: String,
    },
    /// MAAS refused an operation for this link or network (address taken, out of range...).
    #[error("{what}: MAAS refused {operation}: {message}")]
    Refused {
        /// `network <id>` or `link <id>`.
        what: String,
        /// The operation.
        operation: String,
        /// MAAS's message.
        message: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_addresses_are_the_static_networks_addresses() {
        let data = parse(
            "networks:\n\
             - {id: a, type: ipv4, link: l1, ip_address: 10.0.0.10/24}\n\
             - {id: b, type: IPV6, link: l1, ip_address: ' fd00::10 '}\n\
             - {id: c, type: ipv4_dhcp, link: l2, ip_address: 10.0.0.11}\n\
             - {id: d, type: ipv4, link: l3}\n\
             - {id: e, type: ipv4, link: l3, ip_address: nonsense}\n",
        )
        .unwrap();
        let want: BTreeSet<IpAddr> = ["10.0.0.10", "fd00::10"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        assert_eq!(data.static_addresses(), want);
        assert!(RenderedNetworkData::default().static_addresses().is_empty());
    }
}
