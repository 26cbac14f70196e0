//! Network lookups on the world: VLANs (tagged ones stored, untagged ones implied by the
//! subnets of each fabric), the VLAN of an interface, who holds an address, interface
//! relations.

use std::net::IpAddr;

use crate::model::{Interface, InterfaceKind, Link, LinkMode, Machine, Subnet};
use crate::world::World;

/// A VLAN as MAAS shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct VlanInfo {
    pub(crate) id: u64,
    pub(crate) vid: u32,
    pub(crate) fabric_id: u64,
    pub(crate) name: String,
    pub(crate) mtu: u32,
}

impl VlanInfo {
    pub(crate) fn fabric(&self) -> String {
        format!("fabric-{}", self.fabric_id)
    }
}

/// The VLAN of a subnet.
pub(crate) fn subnet_vlan(s: &Subnet) -> VlanInfo {
    VlanInfo {
        id: s.vlan_id,
        vid: s.vid,
        fabric_id: s.fabric_id,
        name: vlan_name(s.vid),
        mtu: 1500,
    }
}

pub(crate) fn vlan_name(vid: u32) -> String {
    if vid == 0 {
        "untagged".to_owned()
    } else {
        format!("vlan{vid}")
    }
}

/// MAAS's `str(subnet)`: `name:cidr(vid=N)`, quoted in its error texts.
pub(crate) fn subnet_label(s: &Subnet) -> String {
    format!("{}:{}(vid={})", s.name, s.cidr, s.vid)
}

/// The address family of a subnet (4 or 6).
pub(crate) fn family(s: &Subnet) -> u8 {
    if s.cidr.addr().is_ipv4() { 4 } else { 6 }
}

impl World {
    /// A VLAN by MAAS id: a tagged one, or the untagged VLAN of a fabric with subnets.
    pub(crate) fn vlan_info(&self, id: u64) -> Option<VlanInfo> {
        if let Some(v) = self.vlans.iter().find(|v| v.id == id) {
            return Some(VlanInfo {
                id: v.id,
                vid: v.vid,
                fabric_id: v.fabric_id,
                name: v.name.clone(),
                mtu: v.mtu,
            });
        }
        self.subnets
            .iter()
            .find(|s| s.vlan_id == id)
            .map(subnet_vlan)
    }

    /// Every VLAN of a fabric, ordered by tag; empty when the fabric is unknown.
    pub(crate) fn fabric_vlans(&self, fabric_id: u64) -> Vec<VlanInfo> {
        let mut out: Vec<VlanInfo> = Vec::new();
        let ids = self
            .subnets
            .iter()
            .filter(|s| s.fabric_id == fabric_id)
            .map(|s| s.vlan_id)
            .chain(
                self.vlans
                    .iter()
                    .filter(|v| v.fabric_id == fabric_id)
                    .map(|v| v.id),
            );
        for id in ids {
            if !out.iter().any(|v| v.id == id)
                && let Some(info) = self.vlan_info(id)
            {
                out.push(info);
            }
        }
        out.sort_by_key(|v| (v.vid, v.id));
        out
    }

    /// The VLAN an interface is on: a NIC's cabling, a bond's or VLAN interface's own.
    pub(crate) fn interface_vlan(&self, i: &Interface) -> Option<VlanInfo> {
        match i.kind {
            InterfaceKind::Physical => self
                .subnets
                .iter()
                .find(|s| s.id == i.subnet_id)
                .map(subnet_vlan),
            InterfaceKind::Bond | InterfaceKind::Vlan => {
                i.vlan_id.and_then(|id| self.vlan_info(id))
            }
        }
    }

    /// The next free VLAN id (kept apart from the untagged `5000 + fabric` ids).
    pub(crate) fn next_vlan_id(&self) -> u64 {
        self.vlans
            .iter()
            .map(|v| v.id)
            .chain(self.subnets.iter().map(|s| s.vlan_id))
            .max()
            .unwrap_or(5000)
            .max(5100)
            + 1
    }

    /// The machine and interface whose link holds `ip` (MAAS's StaticIPAddress rows).
    pub(crate) fn ip_holder(&self, ip: IpAddr) -> Option<(&Machine, &Interface)> {
        self.machines.iter().find_map(|m| {
            m.interfaces
                .iter()
                .find(|i| i.links.iter().any(|l| l.ip == Some(ip)))
                .map(|i| (m, i))
        })
    }

    pub(crate) fn subnet(&self, id: u64) -> Option<&Subnet> {
        self.subnets.iter().find(|s| s.id == id)
    }

    /// The subnet of a link, when it has one.
    pub(crate) fn link_subnet(&self, link: &Link) -> Option<&Subnet> {
        link.subnet_id.and_then(|id| self.subnet(id))
    }
}

/// Names of `i`'s parents.
pub(crate) fn parent_names(m: &Machine, i: &Interface) -> Vec<String> {
    let mut names: Vec<String> = i
        .parents
        .iter()
        .filter_map(|p| m.interfaces.iter().find(|x| x.id == *p))
        .map(|x| x.name.clone())
        .collect();
    names.sort();
    names
}

/// The interfaces of `m` that have `id` as a parent.
pub(crate) fn children(m: &Machine, id: u64) -> impl Iterator<Item = &Interface> {
    m.interfaces.iter().filter(move |x| x.parents.contains(&id))
}

/// Forgets the machine's default gateways that pointed at a link that no longer exists.
pub(crate) fn drop_stale_gateways(m: &mut Machine) {
    let exists = |id: Option<u64>| {
        id.filter(|id| {
            m.interfaces
                .iter()
                .any(|i| i.links.iter().any(|l| l.id == *id))
        })
    };
    m.gateway_link_ipv4 = exists(m.gateway_link_ipv4);
    m.gateway_link_ipv6 = exists(m.gateway_link_ipv6);
}

/// A `link_up` link without subnet, as MAAS gives an interface that has no other link.
pub(crate) fn link_up(id: u64) -> Link {
    Link {
        id,
        mode: LinkMode::LinkUp,
        subnet_id: None,
        ip: None,
    }
}
