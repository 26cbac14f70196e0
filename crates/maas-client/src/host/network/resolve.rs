//! Resolution of rendered network data against MAAS for [`super::plan`]: links to
//! MAAS interfaces (NICs by MAC, existing bonds by members, VLAN interfaces by parent and
//! tag), networks to the MAAS subnets and VLANs they must be on, default routes to subnet
//! gateways, and what MAAS cannot express (notes). Pure.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use maas_api_client::{BondMode, DefaultGateways, Interface, Subnet, Vlan};

use super::{LinkKind, NetworkDataError, NetworkKind, RenderedLink, RenderedNetworkData};

/// The MAAS state a plan is computed from.
#[derive(Debug, Clone, Copy)]
pub struct MaasNetwork<'a> {
    /// The machine's interfaces (`interface_set`).
    pub interfaces: &'a [Interface],
    /// Every MAAS subnet.
    pub subnets: &'a [Subnet],
    /// The VLANs of the fabrics the machine's NICs are on.
    pub vlans: &'a [Vlan],
    /// The machine's default gateways.
    pub gateways: &'a DefaultGateways,
}

/// A link of the data resolved against MAAS.
pub(super) struct Node<'a> {
    pub(super) link: &'a RenderedLink,
    pub(super) kind: LinkKind,
    /// The MAAS interface, when it exists already.
    pub(super) iface: Option<&'a Interface>,
    /// The MAAS VLAN the interface is (or will be) on.
    pub(super) vlan: Option<&'a Vlan>,
    /// For a NIC: the bond link it is a member of.
    pub(super) bond: Option<&'a str>,
    /// For a bond: its member NICs.
    pub(super) members: Vec<&'a Interface>,
}

/// A wanted link of an interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Wanted {
    Static {
        network: String,
        subnet: i64,
        ip: IpAddr,
    },
    Dhcp {
        network: String,
        subnet: Option<i64>,
    },
}

fn is_nic(i: &Interface) -> bool {
    i.kind.is_empty() || i.is("physical")
}

fn bad_link(link: &str, reason: impl Into<String>) -> NetworkDataError {
    NetworkDataError::BadLink {
        link: link.to_owned(),
        reason: reason.into(),
    }
}

fn bad_network(network: &str, reason: impl Into<String>) -> NetworkDataError {
    NetworkDataError::BadNetwork {
        network: network.to_owned(),
        reason: reason.into(),
    }
}

/// A usable Linux interface name (at most 15 bytes, no `/`, whitespace or `:`).
pub(super) fn valid_ifname(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 15
        && name != "."
        && name != ".."
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// The VLAN of an existing interface, as listed for its fabric (falls back to the embedded one).
fn iface_vlan<'a>(maas: &MaasNetwork<'a>, i: &'a Interface) -> Option<&'a Vlan> {
    let embedded = i.vlan.as_ref()?;
    Some(
        maas.vlans
            .iter()
            .find(|v| v.id == embedded.id)
            .unwrap_or(embedded),
    )
}

fn family(ip: IpAddr) -> u8 {
    if ip.is_ipv4() { 4 } else { 6 }
}

/// The most specific MAAS subnet containing `ip`.
fn subnet_of(subnets: &[Subnet], ip: IpAddr) -> Option<&Subnet> {
    subnets
        .iter()
        .filter(|s| s.cidr.contains(&ip))
        .max_by_key(|s| s.cidr.prefix_len())
}

fn vlan_text(v: &Vlan) -> String {
    format!("VLAN {} of {}", v.vid, v.fabric)
}

/// Resolves every link the data configures (NICs, bonds, VLANs) against MAAS.
pub(super) fn resolve<'a>(
    data: &'a RenderedNetworkData,
    maas: &MaasNetwork<'a>,
) -> Result<BTreeMap<&'a str, Node<'a>>, NetworkDataError> {
    let by_id: BTreeMap<&str, &RenderedLink> =
        data.links.iter().map(|l| (l.id.as_str(), l)).collect();
    let lookup = |what: String, id: &str| {
        by_id
            .get(id)
            .copied()
            .ok_or_else(|| NetworkDataError::UnknownLink {
                what,
                link: id.to_owned(),
            })
    };
    for network in &data.networks {
        if network.network_kind() != NetworkKind::Other {
            let link = lookup(format!("network {}", network.label()), &network.link)?;
            if link.link_kind().is_none() {
                return Err(bad_link(
                    &link.id,
                    format!(
                        "type {:?} without ethernet_mac_address cannot be applied (phy, bond, vlan)",
                        link.kind
                    ),
                ));
            }
        }
    }
    let mut nodes: BTreeMap<&str, Node<'a>> = BTreeMap::new();
    for link in data
        .links
        .iter()
        .filter(|l| l.link_kind() == Some(LinkKind::Phy))
    {
        let mac = link.ethernet_mac_address.as_deref().unwrap_or_default();
        let nic = maas
            .interfaces
            .iter()
            .find(|i| is_nic(i) && i.mac_address.eq_ignore_ascii_case(mac.trim()))
            .ok_or_else(|| NetworkDataError::UnknownMac {
                link: link.id.clone(),
                mac: mac.to_owned(),
            })?;
        let node = Node {
            link,
            kind: LinkKind::Phy,
            iface: Some(nic),
            vlan: iface_vlan(maas, nic),
            bond: None,
            members: Vec::new(),
        };
        nodes.insert(&link.id, node);
    }
    for link in data
        .links
        .iter()
        .filter(|l| l.link_kind() == Some(LinkKind::Bond))
    {
        if link.bond_links.is_empty() {
            return Err(bad_link(&link.id, "a bond needs bond_links"));
        }
        if let Some(mode) = &link.bond_mode {
            mode.parse::<BondMode>()
                .map_err(|e| bad_link(&link.id, e.to_string()))?;
        }
        let mut members = Vec::new();
        for member in &link.bond_links {
            lookup(format!("link {}", link.id), member)?;
            let node = nodes.get_mut(member.as_str()).ok_or_else(|| {
                bad_link(&link.id, format!("bond member {member} is not a phy link"))
            })?;
            if let Some(other) = node.bond.replace(&link.id) {
                return Err(bad_link(
                    member,
                    format!("member of two bonds, {other} and {}", link.id),
                ));
            }
            members.extend(node.iface);
        }
        let vlans: BTreeSet<Option<i64>> = members
            .iter()
            .map(|m| m.vlan.as_ref().map(|v| v.id))
            .collect();
        if vlans.len() > 1 {
            return Err(bad_link(
                &link.id,
                "the bond members are on different MAAS VLANs; MAAS bonds NICs of one VLAN",
            ));
        }
        let mut names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
        names.sort_unstable();
        let existing = maas.interfaces.iter().find(|i| {
            let mut parents: Vec<&str> = i.parents.iter().map(String::as_str).collect();
            parents.sort_unstable();
            i.is("bond") && parents == names
        });
        let vlan = existing
            .and_then(|b| iface_vlan(maas, b))
            .or_else(|| iface_vlan(maas, members[0]));
        nodes.insert(
            &link.id,
            Node {
                link,
                kind: LinkKind::Bond,
                iface: existing,
                vlan,
                bond: None,
                members,
            },
        );
    }
    for link in data
        .links
        .iter()
        .filter(|l| l.link_kind() == Some(LinkKind::Vlan))
    {
        let parent_id = link
            .vlan_link
            .as_deref()
            .ok_or_else(|| bad_link(&link.id, "a VLAN link needs vlan_link"))?;
        lookup(format!("link {}", link.id), parent_id)?;
        let vid = link
            .vlan_id
            .filter(|v| (1..=4094).contains(v))
            .ok_or_else(|| bad_link(&link.id, "a VLAN link needs a vlan_id from 1 to 4094"))?;
        let parent = nodes
            .get(parent_id)
            .filter(|p| p.kind != LinkKind::Vlan)
            .ok_or_else(|| {
                bad_link(
                    &link.id,
                    format!("vlan_link {parent_id} must be a phy or bond link"),
                )
            })?;
        let fabric = parent.vlan.map(|v| v.fabric_id).ok_or_else(|| {
            bad_link(
                &link.id,
                format!("parent {parent_id} is not connected to a MAAS fabric"),
            )
        })?;
        let vlan = maas
            .vlans
            .iter()
            .find(|v| v.fabric_id == fabric && v.vid == vid)
            .ok_or_else(|| {
                bad_link(
                    &link.id,
                    format!("MAAS fabric {fabric} has no VLAN {vid}; create it in MAAS first"),
                )
            })?;
        let existing = parent.iface.and_then(|p| {
            maas.interfaces.iter().find(|i| {
                i.is("vlan")
                    && i.parents == [p.name.clone()]
                    && i.vlan.as_ref().map(|v| v.vid) == Some(vlan.vid)
            })
        });
        nodes.insert(
            &link.id,
            Node {
                link,
                kind: LinkKind::Vlan,
                iface: existing,
                vlan: Some(vlan),
                bond: None,
                members: Vec::new(),
            },
        );
    }
    Ok(nodes)
}

/// The wanted links per link id, checked against MAAS's subnets and VLANs.
pub(super) fn wanted_links(
    data: &RenderedNetworkData,
    maas: &MaasNetwork<'_>,
    nodes: &BTreeMap<&str, Node<'_>>,
    remarks: &mut Vec<String>,
) -> Result<BTreeMap<String, Vec<Wanted>>, NetworkDataError> {
    let mut wanted: BTreeMap<String, Vec<Wanted>> = BTreeMap::new();
    for network in &data.networks {
        let label = network.label();
        let kind = network.network_kind();
        let Some(node) = nodes.get(network.link.as_str()) else {
            continue;
        };
        if kind == NetworkKind::Other {
            continue;
        }
        if let Some(bond) = node.bond {
            return Err(bad_network(
                &label,
                format!(
                    "link {} is a member of bond {bond}; put the network on the bond",
                    network.link
                ),
            ));
        }
        let entry = wanted.entry(network.link.clone()).or_default();
        match kind {
            NetworkKind::Static => {
                let Some(raw) = network.ip_address.as_deref() else {
                    continue;
                };
                // Metal3 may render `addr/prefix`; MAAS takes the prefix from its subnet.
                let text = raw.split('/').next().unwrap_or(raw).trim();
                let ip: IpAddr = text
                    .parse()
                    .map_err(|_| bad_network(&label, format!("{raw:?} is not an IP address")))?;
                let subnet = subnet_of(maas.subnets, ip)
                    .ok_or_else(|| bad_network(&label, format!("no MAAS subnet contains {ip}")))?;
                if let (Some(want), Some(have)) = (node.vlan, subnet.vlan.as_ref())
                    && want.id != have.id
                {
                    return Err(bad_network(
                        &label,
                        format!(
                            "{ip} is in MAAS subnet {} on {}, but link {} is on {}",
                            subnet.cidr,
                            vlan_text(have),
                            network.link,
                            vlan_text(want)
                        ),
                    ));
                }
                entry.push(Wanted::Static {
                    network: label,
                    subnet: subnet.id,
                    ip,
                });
            }
            NetworkKind::Dhcp(fam) => {
                if entry.iter().any(|w| matches!(w, Wanted::Dhcp { .. })) {
                    remarks.push(format!("network {label}: MAAS keeps one DHCP link per interface; link {} has one already", network.link));
                    continue;
                }
                let subnet = node.vlan.and_then(|v| {
                    maas.subnets
                        .iter()
                        .filter(|s| {
                            s.vlan.as_ref().map(|sv| sv.id) == Some(v.id)
                                && family(s.cidr.addr()) == fam
                        })
                        .map(|s| s.id)
                        .min()
                });
                entry.push(Wanted::Dhcp {
                    network: label,
                    subnet,
                });
            }
            NetworkKind::Other => {}
        }
    }
    Ok(wanted)
}

/// `(network, family, route gateway)` of every default route of a static network; checked
/// against the gateway of the network's MAAS subnet (MAAS has one gateway per subnet).
pub(super) fn default_routes(
    data: &RenderedNetworkData,
    wanted: &BTreeMap<String, Vec<Wanted>>,
    maas: &MaasNetwork<'_>,
    remarks: &mut Vec<String>,
) -> Result<Vec<(String, String, i64, IpAddr)>, NetworkDataError> {
    let mut out: Vec<(String, String, i64, IpAddr)> = Vec::new();
    for network in &data.networks {
        let label = network.label();
        let mut statics = wanted
            .get(&network.link)
            .into_iter()
            .flatten()
            .filter_map(|w| match w {
                Wanted::Static {
                    network,
                    subnet,
                    ip,
                } if *network == label => Some((*subnet, *ip)),
                _ => None,
            });
        let Some((subnet_id, ip)) = statics.next_back() else {
            if !network.routes.is_empty() && network.network_kind() != NetworkKind::Static {
                remarks.push(format!(
                    "network {label}: routes of a DHCP network come from DHCP; not applied"
                ));
            }
            continue;
        };
        for route in &network.routes {
            if !route.is_default() {
                remarks.push(format!(
                    "network {label}: route to {}/{} via {} not applied: MAAS has no per-machine routes (MAAS static routes are per subnet)",
                    route.network, route.netmask, route.gateway
                ));
                continue;
            }
            if out
                .iter()
                .any(|(_, _, _, other)| family(*other) == family(ip))
            {
                remarks.push(format!(
                    "network {label}: a second default route of the family; the first one is used"
                ));
                continue;
            }
            let subnet = maas.subnets.iter().find(|s| s.id == subnet_id);
            let gateway = subnet.and_then(|s| s.gateway_ip);
            let cidr = subnet.map(|s| s.cidr.to_string()).unwrap_or_default();
            let Some(gateway) = gateway else {
                return Err(bad_network(
                    &label,
                    format!(
                        "default route via {}, but MAAS subnet {cidr} has no gateway; set it in MAAS",
                        route.gateway
                    ),
                ));
            };
            let via: Option<IpAddr> = route.gateway.trim().parse().ok();
            if via != Some(gateway) {
                return Err(bad_network(
                    &label,
                    format!(
                        "default route via {}, but the gateway of MAAS subnet {cidr} is {gateway}; MAAS sets one gateway per subnet",
                        route.gateway
                    ),
                ));
            }
            out.push((label.clone(), network.link.clone(), subnet_id, ip));
        }
    }
    Ok(out)
}

/// DNS servers of the data that MAAS will not hand out (not among the subnets' `dns_servers`).
pub(super) fn dns_notes(
    data: &RenderedNetworkData,
    maas: &MaasNetwork<'_>,
    wanted: &BTreeMap<String, Vec<Wanted>>,
    remarks: &mut Vec<String>,
) {
    let used: BTreeSet<i64> = wanted
        .values()
        .flatten()
        .filter_map(|w| match w {
            Wanted::Static { subnet, .. } => Some(*subnet),
            Wanted::Dhcp { subnet, .. } => *subnet,
        })
        .collect();
    let served: BTreeSet<IpAddr> = maas
        .subnets
        .iter()
        .filter(|s| used.contains(&s.id))
        .flat_map(|s| s.dns_servers.iter().copied())
        .collect();
    for service in data
        .services
        .iter()
        .filter(|s| s.kind.eq_ignore_ascii_case("dns"))
    {
        let known = service
            .address
            .trim()
            .parse::<IpAddr>()
            .is_ok_and(|a| served.contains(&a));
        if !known {
            remarks.push(format!(
                "DNS server {} is not among the dns_servers of the machine's MAAS subnets; MAAS configures those (and its own DNS), not per-machine servers",
                service.address
            ));
        }
    }
}
