//! From rendered network data and the machine's current MAAS interfaces to the MAAS calls that
//! configure the machine the way the data says, as MAAS itself would configure it: bonds of
//! NICs (found by MAC), VLAN interfaces, MTU, static and DHCP links on the MAAS subnet of the
//! right VLAN, and the default gateway.
//!
//! Pure and idempotent: the plan is computed from the current state and has only what is
//! left, so a crash midway just means the next plan is shorter. It comes in phases — removal
//! of conflicting bonds/VLAN interfaces and bond creation, then VLAN interfaces, then MTU and
//! links, then the default gateway — because each needs the ids the previous one creates;
//! the caller applies a plan, reads the machine again, and repeats until nothing is left.
//! Everything is validated before the first call, so bad data changes nothing in MAAS.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use maas_api_client::{BondMode, LinkMode};

pub use super::resolve::MaasNetwork;
use super::resolve::{
    Node, Wanted, default_routes, dns_notes, resolve, valid_ifname, wanted_links,
};
use super::{LinkKind, NetworkDataError, RenderedNetworkData};

/// One MAAS call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetAction {
    /// Delete a bond or VLAN interface that holds NICs the data uses otherwise.
    DeleteInterface {
        /// Interface id.
        interface: i64,
        /// Its name.
        name: String,
        /// The link that needs it gone.
        link: String,
    },
    /// Create a bond.
    CreateBond {
        /// Link id.
        link: String,
        /// Interface name.
        name: String,
        /// Member interface ids.
        parents: Vec<i64>,
        /// MAC of the bond (MAAS: the first member's when absent).
        mac_address: Option<String>,
        /// Mode.
        mode: BondMode,
        /// MTU.
        mtu: Option<u32>,
    },
    /// Create a VLAN interface.
    CreateVlan {
        /// Link id.
        link: String,
        /// Parent interface id.
        parent: i64,
        /// MAAS VLAN id.
        vlan: i64,
        /// MTU.
        mtu: Option<u32>,
    },
    /// Change MTU and/or bond mode.
    UpdateInterface {
        /// Link id.
        link: String,
        /// Interface id.
        interface: i64,
        /// New MTU.
        mtu: Option<u32>,
        /// New bond mode.
        bond_mode: Option<BondMode>,
    },
    /// Remove a link.
    Unlink {
        /// Interface id.
        interface: i64,
        /// Link id.
        link: i64,
    },
    /// Add a static link.
    LinkStatic {
        /// Network id.
        network: String,
        /// Interface id.
        interface: i64,
        /// Subnet id.
        subnet: i64,
        /// The address.
        ip: IpAddr,
    },
    /// Add a DHCP link.
    LinkDhcp {
        /// Network id.
        network: String,
        /// Interface id.
        interface: i64,
        /// Subnet id (the interface's VLAN's subnet of that family), when MAAS has one.
        subnet: Option<i64>,
    },
    /// Make a link's subnet gateway the machine's default.
    SetDefaultGateway {
        /// Network id.
        network: String,
        /// Interface id.
        interface: i64,
        /// Link id.
        link: i64,
    },
}

/// What to do now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkPlan {
    /// The calls of this phase, in order.
    pub actions: Vec<NetAction>,
    /// More is needed once these are done (ids they create): read the machine and plan again.
    pub more: bool,
    /// What MAAS cannot express for this machine (DNS servers, extra routes): for the log.
    pub notes: Vec<String>,
}

impl NetworkPlan {
    /// Nothing left to do.
    pub fn is_done(&self) -> bool {
        self.actions.is_empty() && !self.more
    }
}

/// The next phase of calls that make the machine's MAAS interfaces match `data`.
pub fn plan_network(
    data: &RenderedNetworkData,
    maas: &MaasNetwork<'_>,
) -> Result<NetworkPlan, NetworkDataError> {
    let nodes = resolve(data, maas)?;
    let mut remarks = Vec::new();
    let wanted = wanted_links(data, maas, &nodes, &mut remarks)?;
    let routes = default_routes(data, &wanted, maas, &mut remarks)?;
    dns_notes(data, maas, &wanted, &mut remarks);
    let mut plan = NetworkPlan {
        notes: remarks,
        ..NetworkPlan::default()
    };
    structure(maas, &nodes, &mut plan);
    if !plan.actions.is_empty() {
        plan.more = true;
        return Ok(plan);
    }
    for node in nodes
        .values()
        .filter(|n| n.kind == LinkKind::Vlan && n.iface.is_none())
    {
        let parent = node
            .link
            .vlan_link
            .as_deref()
            .and_then(|p| nodes.get(p))
            .and_then(|p| p.iface);
        match (parent, node.vlan) {
            (Some(parent), Some(vlan)) => plan.actions.push(NetAction::CreateVlan {
                link: node.link.id.clone(),
                parent: parent.id,
                vlan: vlan.id,
                mtu: node.link.mtu,
            }),
            _ => plan.more = true,
        }
    }
    if !plan.actions.is_empty() {
        plan.more = true;
        return Ok(plan);
    }
    addresses(maas, &nodes, &wanted, &mut plan);
    for (network, link, subnet, ip) in routes {
        let Some(iface) = nodes.get(link.as_str()).and_then(|n| n.iface) else {
            plan.more = true;
            continue;
        };
        let Some(found) = iface.links.iter().find(|l| {
            l.mode == LinkMode::Static
                && l.ip_address == Some(ip)
                && l.subnet.as_ref().map(|s| s.id) == Some(subnet)
        }) else {
            plan.more = true;
            continue;
        };
        let current = if ip.is_ipv4() {
            &maas.gateways.ipv4
        } else {
            &maas.gateways.ipv6
        };
        if current.link_id != Some(found.id) {
            plan.actions.push(NetAction::SetDefaultGateway {
                network,
                interface: iface.id,
                link: found.id,
            });
        }
    }
    Ok(plan)
}

/// Removal of bonds/VLAN interfaces on NICs that the data bonds or uses otherwise, and the
/// missing bonds.
fn structure(maas: &MaasNetwork<'_>, nodes: &BTreeMap<&str, Node<'_>>, plan: &mut NetworkPlan) {
    let keep: BTreeSet<i64> = nodes
        .values()
        .filter_map(|n| n.iface.map(|i| i.id))
        .collect();
    let mut doomed: BTreeSet<i64> = BTreeSet::new();
    for node in nodes.values().filter(|n| n.kind == LinkKind::Phy) {
        let Some(nic) = node.iface else { continue };
        for child in &nic.children {
            let Some(c) = maas.interfaces.iter().find(|i| &i.name == child) else {
                continue;
            };
            let wanted_here = keep.contains(&c.id);
            if !wanted_here && doomed.insert(c.id) {
                plan.actions.push(NetAction::DeleteInterface {
                    interface: c.id,
                    name: c.name.clone(),
                    link: node.link.id.clone(),
                });
            }
        }
    }
    let taken: BTreeSet<&str> = maas
        .interfaces
        .iter()
        .filter(|i| !doomed.contains(&i.id))
        .map(|i| i.name.as_str())
        .collect();
    let mut fresh: Vec<String> = Vec::new();
    for node in nodes
        .values()
        .filter(|n| n.kind == LinkKind::Bond && n.iface.is_none())
    {
        let link = node.link;
        let name = if valid_ifname(&link.id)
            && !taken.contains(link.id.as_str())
            && !fresh.contains(&link.id)
        {
            link.id.clone()
        } else {
            (0..1000u32)
                .map(|n| format!("bond{n}"))
                .find(|n| !taken.contains(n.as_str()) && !fresh.contains(n))
                .unwrap_or_default()
        };
        fresh.push(name.clone());
        plan.actions.push(NetAction::CreateBond {
            link: link.id.clone(),
            name,
            parents: node.members.iter().map(|m| m.id).collect(),
            mac_address: link
                .ethernet_mac_address
                .as_ref()
                .map(|m| m.trim().to_ascii_lowercase()),
            mode: link
                .bond_mode
                .as_deref()
                .and_then(|m| m.parse().ok())
                .unwrap_or_default(),
            mtu: link.mtu,
        });
    }
}

/// MTU and bond mode of existing interfaces, then unlinks and links.
fn addresses(
    maas: &MaasNetwork<'_>,
    nodes: &BTreeMap<&str, Node<'_>>,
    wanted: &BTreeMap<String, Vec<Wanted>>,
    plan: &mut NetworkPlan,
) {
    let mut unlinks = Vec::new();
    let mut links = Vec::new();
    let configured: BTreeSet<i64> = nodes
        .values()
        .filter_map(|n| n.iface.map(|i| i.id))
        .collect();
    for node in nodes.values() {
        let Some(iface) = node.iface else {
            plan.more = true;
            continue;
        };
        let mtu = node.link.mtu.filter(|m| iface.mtu() != Some(*m));
        let mode: Option<BondMode> = (node.kind == LinkKind::Bond)
            .then(|| {
                node.link
                    .bond_mode
                    .as_deref()
                    .and_then(|m| m.parse::<BondMode>().ok())
                    .unwrap_or_default()
            })
            .filter(|m: &BondMode| iface.params.bond_mode.as_deref() != Some(m.as_str()));
        if mtu.is_some() || mode.is_some() {
            plan.actions.push(NetAction::UpdateInterface {
                link: node.link.id.clone(),
                interface: iface.id,
                mtu,
                bond_mode: mode,
            });
        }
        if node.bond.is_some() {
            // A bond member: MAAS removed its links when the bond was made.
            continue;
        }
        let want = wanted
            .get(&node.link.id)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let mut matched = vec![false; want.len()];
        for l in &iface.links {
            let subnet = l.subnet.as_ref().map(|s| s.id);
            let hit = want.iter().enumerate().position(|(k, w)| {
                !matched[k]
                    && match w {
                        Wanted::Static { subnet: s, ip, .. } => {
                            l.mode == LinkMode::Static
                                && subnet == Some(*s)
                                && l.ip_address == Some(*ip)
                        }
                        Wanted::Dhcp { subnet: s, .. } => {
                            l.mode == LinkMode::Dhcp && (s.is_none() || subnet == *s)
                        }
                    }
            });
            match hit {
                Some(k) => matched[k] = true,
                None if l.mode == LinkMode::LinkUp => {}
                None => unlinks.push(NetAction::Unlink {
                    interface: iface.id,
                    link: l.id,
                }),
            }
        }
        for (w, done) in want.iter().zip(matched) {
            if done {
                continue;
            }
            links.push(match w {
                Wanted::Static {
                    network,
                    subnet,
                    ip,
                } => {
                    // The address may sit on an interface the data does not mention: move it.
                    for other in maas
                        .interfaces
                        .iter()
                        .filter(|i| !configured.contains(&i.id))
                    {
                        for l in other.links.iter().filter(|l| l.ip_address == Some(*ip)) {
                            unlinks.push(NetAction::Unlink {
                                interface: other.id,
                                link: l.id,
                            });
                        }
                    }
                    NetAction::LinkStatic {
                        network: network.clone(),
                        interface: iface.id,
                        subnet: *subnet,
                        ip: *ip,
                    }
                }
                Wanted::Dhcp { network, subnet } => NetAction::LinkDhcp {
                    network: network.clone(),
                    interface: iface.id,
                    subnet: *subnet,
                },
            });
        }
    }
    // Static links first: a DHCP link added before would be replaced by MAAS.
    links.sort_by_key(|a| matches!(a, NetAction::LinkDhcp { .. }));
    plan.actions.extend(unlinks);
    plan.actions.extend(links);
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
