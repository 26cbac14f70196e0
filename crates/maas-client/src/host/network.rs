//! Static addresses from rendered network data, applied to MAAS interface links before deploy.
//!
//! The rendered network data (data-controller, Metal3 model) has the OpenStack
//! `network_data.json` shape, as JSON or YAML: `links` (with `ethernet_mac_address`) and
//! `networks` (`type` `ipv4`/`ipv6` with `ip_address`, on a `link`). For each static network
//! the MAAS interface with that MAC gets a `static` link with that address on the MAAS subnet
//! containing it; other links of the interface on that subnet are removed first. The plan is
//! computed from the machine's current links, so applying it again after a crash does only
//! what is left.

use std::net::IpAddr;

use maas_api_client::{Interface, LinkMode, Subnet};
use serde::Deserialize;

/// The parts of rendered network data this module reads.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct RenderedNetworkData {
    /// Layer-2 links.
    #[serde(default)]
    pub links: Vec<RenderedLink>,
    /// Layer-3 networks.
    #[serde(default)]
    pub networks: Vec<RenderedNetwork>,
}

/// One link.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct RenderedLink {
    /// Link id, referenced by networks.
    pub id: String,
    /// `phy`, `bond`, `vlan`, ...
    #[serde(rename = "type", default)]
    pub kind: String,
    /// MAC of a physical link.
    #[serde(default)]
    pub ethernet_mac_address: Option<String>,
}

/// One network.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct RenderedNetwork {
    /// `ipv4`, `ipv6` (static) or `ipv4_dhcp`, `ipv6_dhcp`, ...
    #[serde(rename = "type")]
    pub kind: String,
    /// The link id it sits on.
    pub link: String,
    /// Static address.
    #[serde(default)]
    pub ip_address: Option<String>,
}

/// One MAAS interface operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkAction {
    /// Remove a link.
    Unlink {
        /// Interface id.
        interface: i64,
        /// Link id.
        link: i64,
    },
    /// Add a static link.
    LinkStatic {
        /// Interface id.
        interface: i64,
        /// Subnet id.
        subnet: i64,
        /// The address.
        ip: IpAddr,
    },
}

/// Why network data cannot be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetworkDataError {
    /// Not JSON/YAML of the expected shape.
    #[error("network data cannot be parsed: {0}")]
    Parse(String),
    /// A network names a link that does not exist or has no MAC (bonds/VLANs are not applied).
    #[error("network on link {0:?}: no physical link with a MAC address of that id")]
    UnknownLink(String),
    /// The machine has no interface with the MAC.
    #[error("the machine has no interface with MAC {0}")]
    UnknownMac(String),
    /// The address is not an IP.
    #[error("{0:?} is not an IP address")]
    BadAddress(String),
    /// No MAAS subnet contains the address.
    #[error("no MAAS subnet contains {0}")]
    NoSubnet(IpAddr),
}

/// Parses rendered network data (JSON or YAML).
pub fn parse(text: &str) -> Result<RenderedNetworkData, NetworkDataError> {
    serde_saphyr::from_str(text).map_err(|e| NetworkDataError::Parse(e.to_string()))
}

fn is_static(kind: &str) -> bool {
    matches!(kind, "ipv4" | "ipv6")
}

/// The operations that make the machine's links match the static networks.
pub fn plan_links(
    data: &RenderedNetworkData,
    interfaces: &[Interface],
    subnets: &[Subnet],
) -> Result<Vec<LinkAction>, NetworkDataError> {
    let mut actions = Vec::new();
    for network in data.networks.iter().filter(|n| is_static(&n.kind)) {
        let Some(raw_ip) = network.ip_address.as_deref() else {
            continue;
        };
        // Metal3 may render `addr/prefix`; the address part is what MAAS needs.
        let ip_text = raw_ip.split('/').next().unwrap_or(raw_ip).trim();
        let ip: IpAddr = ip_text
            .parse()
            .map_err(|_| NetworkDataError::BadAddress(raw_ip.to_owned()))?;
        let mac = data
            .links
            .iter()
            .find(|l| l.id == network.link)
            .and_then(|l| l.ethernet_mac_address.as_deref())
            .ok_or_else(|| NetworkDataError::UnknownLink(network.link.clone()))?;
        let interface = interfaces
            .iter()
            .find(|i| i.mac_address.eq_ignore_ascii_case(mac))
            .ok_or_else(|| NetworkDataError::UnknownMac(mac.to_owned()))?;
        let subnet = subnets
            .iter()
            .find(|s| s.cidr.contains(&ip))
            .ok_or(NetworkDataError::NoSubnet(ip))?;
        let on_subnet =
            |l: &&maas_api_client::Link| l.subnet.as_ref().is_some_and(|s| s.id == subnet.id);
        let done = interface
            .links
            .iter()
            .filter(on_subnet)
            .any(|l| l.mode == LinkMode::Static && l.ip_address == Some(ip));
        if done {
            continue;
        }
        for link in interface.links.iter().filter(on_subnet) {
            actions.push(LinkAction::Unlink {
                interface: interface.id,
                link: link.id,
            });
        }
        actions.push(LinkAction::LinkStatic {
            interface: interface.id,
            subnet: subnet.id,
            ip,
        });
    }
    Ok(actions)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interfaces() -> Vec<Interface> {
        serde_json::from_value(serde_json::json!([
            {"id": 10, "name": "eth0", "mac_address": "52:54:00:aa:bb:01", "links": [
                {"id": 100, "mode": "auto", "subnet": {"id": 1, "cidr": "10.20.0.0/16"}}
            ]},
            {"id": 11, "name": "eth1", "mac_address": "52:54:00:aa:bb:02", "links": [
                {"id": 101, "mode": "static", "ip_address": "10.30.0.9", "subnet": {"id": 2, "cidr": "10.30.0.0/16"}}
            ]}
        ]))
        .unwrap()
    }

    fn subnets() -> Vec<Subnet> {
        serde_json::from_value(serde_json::json!([
            {"id": 1, "cidr": "10.20.0.0/16"},
            {"id": 2, "cidr": "10.30.0.0/16"}
        ]))
        .unwrap()
    }

    const DATA: &str = r#"
links:
  - {id: enp1, type: phy, ethernet_mac_address: "52:54:00:AA:BB:01"}
  - {id: enp2, type: phy, ethernet_mac_address: "52:54:00:aa:bb:02"}
networks:
  - {id: n1, type: ipv4, link: enp1, ip_address: 10.20.5.50, netmask: 255.255.0.0}
  - {id: n2, type: ipv4, link: enp2, ip_address: 10.30.0.9/16}
  - {id: n3, type: ipv4_dhcp, link: enp2}
"#;

    #[test]
    fn static_networks_become_static_links_once() {
        let data = parse(DATA).unwrap();
        let actions = plan_links(&data, &interfaces(), &subnets()).unwrap();
        assert_eq!(
            actions,
            vec![
                LinkAction::Unlink {
                    interface: 10,
                    link: 100
                },
                LinkAction::LinkStatic {
                    interface: 10,
                    subnet: 1,
                    ip: "10.20.5.50".parse().unwrap()
                },
            ],
            "eth1 already holds its address"
        );
    }

    #[test]
    fn bad_data_is_an_error_not_a_panic() {
        assert!(matches!(parse("links: 5"), Err(NetworkDataError::Parse(_))));
        let unknown = parse("networks: [{type: ipv4, link: x, ip_address: 10.20.0.5}]").unwrap();
        assert_eq!(
            plan_links(&unknown, &interfaces(), &subnets()),
            Err(NetworkDataError::UnknownLink("x".into()))
        );
        let outside = parse("links: [{id: a, ethernet_mac_address: '52:54:00:aa:bb:01'}]\nnetworks: [{type: ipv4, link: a, ip_address: 192.168.1.1}]").unwrap();
        assert!(matches!(
            plan_links(&outside, &interfaces(), &subnets()),
            Err(NetworkDataError::NoSubnet(_))
        ));
        let bad = parse("links: [{id: a, ethernet_mac_address: '52:54:00:aa:bb:01'}]\nnetworks: [{type: ipv4, link: a, ip_address: nope}]").unwrap();
        assert!(matches!(
            plan_links(&bad, &interfaces(), &subnets()),
            Err(NetworkDataError::BadAddress(_))
        ));
        let mac = parse("links: [{id: a, ethernet_mac_address: 'ff:ff:ff:ff:ff:ff'}]\nnetworks: [{type: ipv4, link: a, ip_address: 10.20.0.5}]").unwrap();
        assert!(matches!(
            plan_links(&mac, &interfaces(), &subnets()),
            Err(NetworkDataError::UnknownMac(_))
        ));
    }
}
