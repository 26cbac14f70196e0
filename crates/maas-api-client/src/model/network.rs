//! Interfaces, links, subnets and VLANs.

use std::net::IpAddr;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

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

serialize_as_str!(LinkMode);

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
    /// Names of the parent interfaces (bond members, the parent of a VLAN interface).
    #[serde(default, deserialize_with = "null_default")]
    pub parents: Vec<String>,
    /// Names of the child interfaces (the bond a NIC is in, VLAN interfaces on it).
    #[serde(default, deserialize_with = "null_default")]
    pub children: Vec<String>,
    /// Parameters MAAS keeps for the interface (`mtu`, `bond_mode`, ...).
    #[serde(default, deserialize_with = "interface_params")]
    pub params: InterfaceParams,
    /// MTU in effect (the interface's own, else its VLAN's).
    #[serde(default)]
    pub effective_mtu: Option<u32>,
    /// API path.
    #[serde(default, deserialize_with = "null_default")]
    pub resource_uri: String,
}

impl Interface {
    /// Addresses of this interface's links.
    pub fn ip_addresses(&self) -> impl Iterator<Item = IpAddr> + '_ {
        self.links.iter().filter_map(|link| link.ip_address)
    }

    /// The MTU set on the interface, else the one in effect.
    pub fn mtu(&self) -> Option<u32> {
        self.params.mtu.or(self.effective_mtu)
    }

    /// Whether MAAS reports the interface as `type`: `physical`, `bond`, `vlan`, `bridge`.
    pub fn is(&self, kind: &str) -> bool {
        self.kind.eq_ignore_ascii_case(kind)
    }
}

/// The interface `params` this client reads. MAAS sends an object, or `""` when the interface
/// has none; other keys (`bond_miimon`, `accept_ra`, ...) are ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct InterfaceParams {
    /// MTU set on the interface.
    pub mtu: Option<u32>,
    /// Bond mode of a bond (`active-backup`, `802.3ad`, ...).
    pub bond_mode: Option<String>,
}

/// Decodes `params`: `null` or a string (MAAS's `""`) is empty; an object must hold an integer
/// (or integer string) `mtu` and a string `bond_mode` when present; anything else is an error.
fn interface_params<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<InterfaceParams, D::Error> {
    use serde::de::Error;
    let value = Value::deserialize(deserializer)?;
    let object = match value {
        Value::Null | Value::String(_) => return Ok(InterfaceParams::default()),
        Value::Object(object) => object,
        other => {
            return Err(D::Error::custom(format!(
                "interface params: expected an object, got {other}"
            )));
        }
    };
    let mtu = match object.get("mtu") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => Some(
            n.as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| D::Error::custom(format!("interface params: bad mtu {n}")))?,
        ),
        Some(Value::String(s)) if s.trim().is_empty() => None,
        Some(Value::String(s)) => Some(
            s.trim()
                .parse()
                .map_err(|_| D::Error::custom(format!("interface params: bad mtu {s:?}")))?,
        ),
        Some(other) => {
            return Err(D::Error::custom(format!(
                "interface params: bad mtu {other}"
            )));
        }
    };
    let bond_mode = match object.get("bond_mode") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            return Err(D::Error::custom(format!(
                "interface params: bad bond_mode {other}"
            )));
        }
    };
    Ok(InterfaceParams { mtu, bond_mode })
}

/// What an IP range is for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum IpRangeType {
    /// Kept away from MAAS's automatic assignment (`reserved`).
    #[default]
    Reserved,
    /// Served by MAAS's DHCP (`dynamic`).
    Dynamic,
    /// Any other type string.
    Other(String),
}

impl IpRangeType {
    /// The wire string.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Reserved => "reserved",
            Self::Dynamic => "dynamic",
            Self::Other(s) => s,
        }
    }
}

serialize_as_str!(IpRangeType);

impl<'de> Deserialize<'de> for IpRangeType {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        Ok(match s.to_ascii_lowercase().as_str() {
            "reserved" => Self::Reserved,
            "dynamic" => Self::Dynamic,
            _ => Self::Other(s),
        })
    }
}

/// An IP range (`GET /ipranges/`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IpRange {
    /// Range id.
    pub id: i64,
    /// `reserved` or `dynamic`.
    #[serde(rename = "type")]
    pub kind: IpRangeType,
    /// First address (inclusive).
    pub start_ip: IpAddr,
    /// Last address (inclusive).
    pub end_ip: IpAddr,
    /// Free-text comment.
    #[serde(default, deserialize_with = "null_default")]
    pub comment: String,
    /// The subnet the range is in.
    #[serde(default)]
    pub subnet: Option<Subnet>,
    /// API path.
    #[serde(default, deserialize_with = "null_default")]
    pub resource_uri: String,
}

impl IpRange {
    /// Whether `ip` is inside the range.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.start_ip, self.end_ip, ip) {
            (IpAddr::V4(a), IpAddr::V4(b), IpAddr::V4(x)) => a <= x && x <= b,
            (IpAddr::V6(a), IpAddr::V6(b), IpAddr::V6(x)) => a <= x && x <= b,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    #[test]
    fn decodes_bonds_params_ranges_and_gateways() {
        let bond: Interface = serde_json::from_value(json!({
            "id": 30, "name": "bond0", "type": "bond", "mac_address": "52:54:00:aa:bb:01",
            "parents": ["eth0", "eth1"], "children": ["bond0.100"], "effective_mtu": 9000,
            "params": {"mtu": 9000, "bond_mode": "802.3ad", "bond_miimon": 100}
        }))
        .unwrap();
        assert_eq!(bond.parents, ["eth0", "eth1"]);
        assert_eq!(bond.params.bond_mode.as_deref(), Some("802.3ad"));
        assert_eq!(bond.mtu(), Some(9000));
        assert!(bond.is("bond"));
        for empty in [json!(""), json!(null)] {
            let nic: Interface =
                serde_json::from_value(json!({"id": 1, "params": empty, "effective_mtu": 1500}))
                    .unwrap();
            assert_eq!(nic.params, InterfaceParams::default());
            assert_eq!(nic.mtu(), Some(1500));
        }
        let text_mtu: Interface =
            serde_json::from_value(json!({"id": 1, "params": {"mtu": "1400"}})).unwrap();
        assert_eq!(text_mtu.mtu(), Some(1400));
        for bad in [
            json!(5),
            json!({"mtu": -1}),
            json!({"mtu": "x"}),
            json!({"bond_mode": 3}),
        ] {
            assert!(serde_json::from_value::<Interface>(json!({"id": 1, "params": bad})).is_err());
        }
        let range: IpRange = serde_json::from_value(json!({
            "id": 4, "type": "reserved", "start_ip": "10.0.0.10", "end_ip": "10.0.0.20",
            "comment": null, "subnet": {"id": 1, "cidr": "10.0.0.0/24"}
        }))
        .unwrap();
        assert_eq!(range.kind, IpRangeType::Reserved);
        assert!(range.contains("10.0.0.15".parse().unwrap()));
        assert!(!range.contains("10.0.0.21".parse().unwrap()));
        assert!(!range.contains("::1".parse().unwrap()));
        assert!(
            serde_json::from_value::<IpRange>(
                json!({"id": 4, "type": "reserved", "start_ip": "x", "end_ip": "10.0.0.1"})
            )
            .is_err()
        );
        let mut machine: Value =
            serde_json::from_str(include_str!("fixtures/machine.json")).unwrap();
        machine["default_gateways"] = json!({"ipv4": {"gateway_ip": "10.0.0.1", "link_id": 7}, "ipv6": {"gateway_ip": null, "link_id": null}});
        let m: super::super::Machine = serde_json::from_value(machine.clone()).unwrap();
        assert_eq!(m.default_gateways.ipv4.link_id, Some(7));
        assert_eq!(
            m.default_gateways.ipv6,
            super::super::DefaultGateway::default()
        );
        machine["default_gateways"] = json!({"ipv4": {"link_id": "x"}});
        assert!(serde_json::from_value::<super::super::Machine>(machine).is_err());
    }
}
