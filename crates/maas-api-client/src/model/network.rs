//! Interfaces, links, subnets and VLANs.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::{ip_list, null_default, optional_ip};

/// A VLAN as embedded in interfaces and subnets.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Vlan {
    /// VLAN id (database id, not the tag).
    pub id: i64,
    /// 802.1Q tag (0 = untagged).
    pub vid: u32,
    /// Name.
    #[serde(deserialize_with = "null_default")]
    pub name: String,
    /// Fabric name.
    #[serde(deserialize_with = "null_default")]
    pub fabric: String,
    /// Fabric id.
    pub fabric_id: i64,
    /// MTU.
    pub mtu: u32,
    /// Whether MAAS serves DHCP on it.
    pub dhcp_on: bool,
    /// Space name, when set.
    pub space: Option<String>,
}

/// A subnet, as listed by `GET /subnets/` or embedded in a link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subnet {
    /// Subnet id.
    pub id: i64,
    /// Name (usually the CIDR).
    #[serde(default, deserialize_with = "null_default")]
    pub name: String,
    /// The network.
    pub cidr: ipnet::IpNet,
    /// VLAN, when embedded as an object.
    #[serde(default)]
    pub vlan: Option<Vlan>,
    /// Default gateway.
    #[serde(default, deserialize_with = "optional_ip")]
    pub gateway_ip: Option<IpAddr>,
    /// DNS servers.
    #[serde(default, deserialize_with = "ip_list")]
    pub dns_servers: Vec<IpAddr>,
    /// Space name.
    #[serde(default)]
    pub space: Option<String>,
    /// Whether MAAS manages addresses on it.
    #[serde(default)]
    pub managed: Option<bool>,
    /// API path.
    #[serde(default, deserialize_with = "null_default")]
    pub resource_uri: String,
}

/// How an interface link gets its address.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum LinkMode {
    /// MAAS picks a static address at deploy time.
    #[default]
    Auto,
    /// DHCP.
    Dhcp,
    /// A fixed address.
    Static,
    /// Link up, no address.
    LinkUp,
    /// Any other mode string.
    Other(String),
}

impl LinkMode {
    /// The wire string (`static`, `dhcp`, `auto`, `link_up`).
    pub fn as_str(&self) -> &str {
        match self {
            Self::Auto => "auto",
            Self::Dhcp => "dhcp",
            Self::Static => "static",
            Self::LinkUp => "link_up",
            Self::Other(s) => s,
        }
    }
}

impl Serialize for LinkMode {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for LinkMode {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = Option::<String>::deserialize(deserializer)?.unwrap_or_default();
        Ok(match s.to_ascii_lowercase().as_str() {
            "auto" => Self::Auto,
            "dhcp" => Self::Dhcp,
            "static" => Self::Static,
            "link_up" => Self::LinkUp,
            _ => Self::Other(s),
        })
    }
}

/// One address link of an interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    /// Link id (used by `unlink_subnet`).
    pub id: i64,
    /// Address mode.
    #[serde(default)]
    pub mode: LinkMode,
    /// The subnet, when linked to one.
    #[serde(default)]
    pub subnet: Option<Subnet>,
    /// The address, when assigned.
    #[serde(default, deserialize_with = "optional_ip")]
    pub ip_address: Option<IpAddr>,
}

/// A machine network interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interface {
    /// Interface id.
    pub id: i64,
    /// Name, e.g. `eno1`.
    #[serde(default, deserialize_with = "null_default")]
    pub name: String,
    /// `physical`, `bond`, `bridge`, `vlan` or `unknown`.
    #[serde(rename = "type", default, deserialize_with = "null_default")]
    pub kind: String,
    /// MAC address (lower-case colon form in MAAS).
    #[serde(default, deserialize_with = "null_default")]
    pub mac_address: String,
    /// Whether enabled.
    #[serde(default)]
    pub enabled: Option<bool>,
    /// VLAN.
    #[serde(default)]
    pub vlan: Option<Vlan>,
    /// Address links.
    #[serde(default, deserialize_with = "null_default")]
    pub links: Vec<Link>,
    /// Interface tags.
    #[serde(default, deserialize_with = "null_default")]
    pub tags: Vec<String>,
    /// API path.
    #[serde(default, deserialize_with = "null_default")]
    pub resource_uri: String,
}

impl Interface {
    /// Addresses of this interface's links.
    pub fn ip_addresses(&self) -> impl Iterator<Item = IpAddr> + '_ {
        self.links.iter().filter_map(|link| link.ip_address)
    }
}
