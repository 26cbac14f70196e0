//! Network setup beyond the two default subnets: extra subnets (on tagged VLANs, which are
//! created when missing), IP ranges and machine NICs; from the YAML inventory (`subnets`,
//! machine `interfaces`) or from tests through [`SimHandle`]. Also read-only views of a
//! machine's interfaces and of the IP ranges for assertions.

use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use crate::handle::SimHandle;
use crate::model::{Interface, IpRange, Link, LinkMode, RangeKind, Subnet, Vlan};
use crate::netmodel::{self, vlan_name};
use crate::world::World;

/// A subnet to add (inventory `subnets:` entry).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubnetSpec {
    /// The network, e.g. `10.40.0.0/24`.
    pub cidr: String,
    /// Name (default: the CIDR).
    #[serde(default)]
    pub name: Option<String>,
    /// Gateway address.
    #[serde(default)]
    pub gateway_ip: Option<String>,
    /// DNS servers MAAS hands to machines on the subnet.
    #[serde(default)]
    pub dns_servers: Vec<String>,
    /// Fabric id (`fabric-N`; 0 and 1 carry the default subnets).
    #[serde(default)]
    pub fabric_id: u64,
    /// 802.1Q tag; a tagged VLAN with it is created on the fabric when missing. 0 = untagged.
    #[serde(default)]
    pub vid: u32,
    /// Dynamic (DHCP) ranges, `first-last`.
    #[serde(default)]
    pub dynamic_ranges: Vec<String>,
    /// Reserved ranges, `first-last`.
    #[serde(default)]
    pub reserved_ranges: Vec<String>,
}

/// A NIC of an inventory machine (`interfaces:` entry).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NicSpec {
    /// MAC address.
    pub mac_address: String,
    /// CIDR of the subnet it is cabled to (default: the first subnet, `10.20.0.0/16`).
    #[serde(default)]
    pub subnet: Option<String>,
}

/// A link of an interface, for assertions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LinkView {
    /// Link id.
    pub id: u64,
    /// `auto`, `dhcp`, `static`, `link_up`.
    pub mode: String,
    /// CIDR of the subnet.
    pub subnet: Option<String>,
    /// Address.
    pub ip: Option<IpAddr>,
}

/// An interface of a machine, for assertions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InterfaceView {
    /// Interface id.
    pub id: u64,
    /// Name (`eth0`, `bond0`, `bond0.100`).
    pub name: String,
    /// `physical`, `bond` or `vlan`.
    pub kind: String,
    /// MAC address.
    pub mac_address: String,
    /// Names of the parents.
    pub parents: Vec<String>,
    /// 802.1Q tag of its VLAN.
    pub vid: Option<u32>,
    /// MTU set on it.
    pub mtu: Option<u32>,
    /// Bond mode.
    pub bond_mode: Option<String>,
    /// Links.
    pub links: Vec<LinkView>,
}

/// The default gateways of a machine, for assertions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GatewayView {
    /// IPv4 gateway address and the link it comes from.
    pub ipv4: Option<(IpAddr, u64)>,
    /// IPv6 gateway address and the link it comes from.
    pub ipv6: Option<(IpAddr, u64)>,
}

/// An IP range, for assertions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IpRangeView {
    /// Range id.
    pub id: u64,
    /// `reserved` or `dynamic`.
    pub kind: String,
    /// First address.
    pub start_ip: IpAddr,
    /// Last address.
    pub end_ip: IpAddr,
    /// CIDR of the subnet.
    pub subnet: String,
    /// Comment.
    pub comment: String,
}

fn parse_range(text: &str) -> Result<(IpAddr, IpAddr), String> {
    let (a, b) = text
        .split_once('-')
        .ok_or_else(|| format!("range {text:?}: expected first-last"))?;
    let parse = |s: &str| {
        s.trim()
            .parse::<IpAddr>()
            .map_err(|_| format!("range {text:?}: {s:?} is not an IP address"))
    };
    Ok((parse(a)?, parse(b)?))
}

impl World {
    /// Adds a subnet (and its tagged VLAN when missing); its id.
    pub(crate) fn add_subnet(&mut self, spec: &SubnetSpec) -> Result<u64, String> {
        let cidr: IpNet = spec
            .cidr
            .trim()
            .parse()
            .map_err(|_| format!("subnet {:?}: not a CIDR", spec.cidr))?;
        let cidr = cidr.trunc();
        if self
            .subnets
            .iter()
            .any(|s| s.cidr.contains(&cidr.network()) || cidr.contains(&s.cidr.network()))
        {
            return Err(format!(
                "Subnet {cidr} would overlap with existing subnets."
            ));
        }
        let parse_ip = |s: &str| {
            s.trim()
                .parse::<IpAddr>()
                .map_err(|_| format!("subnet {cidr}: {s:?} is not an IP address"))
        };
        let gateway_ip = spec.gateway_ip.as_deref().map(parse_ip).transpose()?;
        let dns_servers = spec
            .dns_servers
            .iter()
            .map(|s| parse_ip(s))
            .collect::<Result<Vec<_>, _>>()?;
        let vlan_id = if spec.vid == 0 {
            5000 + spec.fabric_id
        } else if let Some(v) = self
            .vlans
            .iter()
            .find(|v| v.fabric_id == spec.fabric_id && v.vid == spec.vid)
        {
            v.id
        } else {
            self.add_vlan(spec.fabric_id, spec.vid)?
        };
        let id = self.subnets.iter().map(|s| s.id).max().unwrap_or(0) + 1;
        self.subnets.push(Subnet {
            id,
            name: spec.name.clone().unwrap_or_else(|| cidr.to_string()),
            cidr,
            gateway_ip,
            dns_servers,
            vlan_id,
            fabric: format!("fabric-{}", spec.fabric_id),
            fabric_id: spec.fabric_id,
            space: "undefined".to_owned(),
            vid: spec.vid,
        });
        for (texts, kind) in [
            (&spec.dynamic_ranges, RangeKind::Dynamic),
            (&spec.reserved_ranges, RangeKind::Reserved),
        ] {
            for text in texts {
                let (start, end) = parse_range(text)?;
                self.add_ip_range(kind, start, end, "")?;
            }
        }
        self.dirty = true;
        Ok(id)
    }

    /// Adds a tagged VLAN to a fabric; its id.
    pub(crate) fn add_vlan(&mut self, fabric_id: u64, vid: u32) -> Result<u64, String> {
        if !(1..=4094).contains(&vid) {
            return Err(format!("VLAN tag {vid} is not within 1-4094"));
        }
        if let Some(v) = self
            .vlans
            .iter()
            .find(|v| v.fabric_id == fabric_id && v.vid == vid)
        {
            return Ok(v.id);
        }
        let id = self.next_vlan_id();
        self.vlans.push(Vlan {
            id,
            fabric_id,
            vid,
            name: vlan_name(vid),
            mtu: 1500,
        });
        self.dirty = true;
        Ok(id)
    }

    /// Adds an IP range on the subnet containing `start` (no overlap check); its id.
    pub(crate) fn add_ip_range(
        &mut self,
        kind: RangeKind,
        start: IpAddr,
        end: IpAddr,
        comment: &str,
    ) -> Result<u64, String> {
        let subnet = self
            .subnets
            .iter()
            .filter(|s| s.cidr.contains(&start) && s.cidr.contains(&end))
            .max_by_key(|s| s.cidr.prefix_len())
            .ok_or_else(|| format!("no subnet contains {start}-{end}"))?;
        let id = self.ip_ranges.iter().map(|r| r.id).max().unwrap_or(0) + 1;
        self.ip_ranges.push(IpRange {
            id,
            kind,
            start_ip: start,
            end_ip: end,
            subnet_id: subnet.id,
            comment: comment.to_owned(),
            user: "admin".to_owned(),
        });
        self.dirty = true;
        Ok(id)
    }

    /// Replaces a machine's interfaces with NICs (`eth0`, `eth1`, ...), each with a link_up
    /// link on its subnet, except the first which gets an `auto` link as MAAS's commissioning
    /// leaves the boot NIC.
    pub(crate) fn set_nics(&mut self, index: usize, nics: &[NicSpec]) -> Result<(), String> {
        let mut interfaces = Vec::new();
        for (n, nic) in nics.iter().enumerate() {
            let subnet_id = match &nic.subnet {
                None => self.subnets.first().map_or(1, |s| s.id),
                Some(cidr) => {
                    self.subnets
                        .iter()
                        .find(|s| s.cidr.to_string() == cidr.trim() || s.name == cidr.trim())
                        .ok_or_else(|| format!("NIC {}: unknown subnet {cidr}", nic.mac_address))?
                        .id
                }
            };
            let (iface_id, link_id) = (self.new_id(), self.new_id());
            let mode = if n == 0 {
                LinkMode::Auto
            } else {
                LinkMode::LinkUp
            };
            interfaces.push(Interface::nic(
                iface_id,
                format!("eth{n}"),
                nic.mac_address.trim().to_ascii_lowercase(),
                subnet_id,
                vec![Link {
                    id: link_id,
                    mode,
                    subnet_id: Some(subnet_id),
                    ip: None,
                }],
            ));
        }
        let machine = &mut self.machines[index];
        machine.interfaces = interfaces;
        machine.gateway_link_ipv4 = None;
        machine.gateway_link_ipv6 = None;
        self.dirty = true;
        Ok(())
    }

    fn interface_views(&self, index: usize) -> Vec<InterfaceView> {
        let m = &self.machines[index];
        m.interfaces
            .iter()
            .map(|i| InterfaceView {
                id: i.id,
                name: i.name.clone(),
                kind: i.kind.as_str().to_owned(),
                mac_address: i.mac_address.clone(),
                parents: netmodel::parent_names(m, i),
                vid: self.interface_vlan(i).map(|v| v.vid),
                mtu: i.mtu,
                bond_mode: i.bond_mode.clone(),
                links: i
                    .links
                    .iter()
                    .map(|l| LinkView {
                        id: l.id,
                        mode: l.mode.as_str().to_owned(),
                        subnet: self.link_subnet(l).map(|s| s.cidr.to_string()),
                        ip: l.ip,
                    })
                    .collect(),
            })
            .collect()
    }

    fn gateway(&self, index: usize, link: Option<u64>) -> Option<(IpAddr, u64)> {
        let link = link?;
        let l = self.machines[index]
            .interfaces
            .iter()
            .flat_map(|i| &i.links)
            .find(|l| l.id == link)?;
        Some((self.link_subnet(l)?.gateway_ip?, link))
    }
}

impl SimHandle {
    fn with_world_mut<T>(&self, f: impl FnOnce(&mut World) -> T) -> T {
        let mut world = self.shared.lock();
        world.advance();
        f(&mut world)
    }

    /// Adds a subnet (creating its tagged VLAN when `vid` is not 0); its id. Refused when it
    /// overlaps another subnet or a value does not parse.
    pub fn add_subnet(&self, spec: &SubnetSpec) -> Result<u64, String> {
        self.with_world_mut(|w| w.add_subnet(spec))
    }

    /// Adds a tagged VLAN to a fabric (or finds it); its MAAS id.
    pub fn add_vlan(&self, fabric_id: u64, vid: u32) -> Result<u64, String> {
        self.with_world_mut(|w| w.add_vlan(fabric_id, vid))
    }

    /// Adds an IP range made by hand (user `admin`); its id.
    pub fn add_ip_range(
        &self,
        reserved: bool,
        start: IpAddr,
        end: IpAddr,
        comment: &str,
    ) -> Result<u64, String> {
        let kind = if reserved {
            RangeKind::Reserved
        } else {
            RangeKind::Dynamic
        };
        self.with_world_mut(|w| w.add_ip_range(kind, start, end, comment))
    }

    /// Replaces a machine's interfaces with these NICs.
    pub fn set_nics(&self, system_id: &str, nics: &[NicSpec]) -> Result<(), String> {
        self.with_world_mut(|w| {
            let index = w
                .machine_index(system_id)
                .ok_or_else(|| format!("no machine with system id {system_id}"))?;
            w.set_nics(index, nics)
        })
    }

    /// The interfaces of a machine with their links.
    pub fn interfaces(&self, system_id: &str) -> Option<Vec<InterfaceView>> {
        self.with_world_mut(|w| w.machine_index(system_id).map(|i| w.interface_views(i)))
    }

    /// The default gateways set with `set_default_gateway` (or `link_subnet default_gateway`).
    pub fn default_gateways(&self, system_id: &str) -> Option<GatewayView> {
        self.with_world_mut(|w| {
            let index = w.machine_index(system_id)?;
            let m = &w.machines[index];
            let (v4, v6) = (m.gateway_link_ipv4, m.gateway_link_ipv6);
            Some(GatewayView {
                ipv4: w.gateway(index, v4),
                ipv6: w.gateway(index, v6),
            })
        })
    }

    /// Every IP range.
    pub fn ip_ranges(&self) -> Vec<IpRangeView> {
        self.with_world_mut(|w| {
            w.ip_ranges
                .iter()
                .map(|r| IpRangeView {
                    id: r.id,
                    kind: r.kind.as_str().to_owned(),
                    start_ip: r.start_ip,
                    end_ip: r.end_ip,
                    subnet: w
                        .subnet(r.subnet_id)
                        .map(|s| s.cidr.to_string())
                        .unwrap_or_default(),
                    comment: r.comment.clone(),
                })
                .collect()
        })
    }
}
