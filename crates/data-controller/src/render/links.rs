//! networkData links: ethernets, bonds and VLANs, with their MAC addresses resolved.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;

use capmaas_api::data_network::{BondMode, EthernetType, MacAddressSource, NetworkLinks};
use serde::Serialize;

use super::RenderInput;
use super::error::{RenderError, RenderProblem};

/// One rendered link; field order is the JSON key order.
#[derive(Debug, Serialize)]
pub(super) struct LinkOut {
    id: String,
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    ethernet_mac_address: Option<String>,
    mtu: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    bond_mode: Option<BondMode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bond_links: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    vlan_id: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    vlan_link: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    vlan_mac_address: Option<String>,
}

/// OpenStack link type of an ethernet link.
pub(super) fn ethernet_type(kind: EthernetType) -> &'static str {
    match kind {
        EthernetType::Phy => "phy",
        EthernetType::Bridge => "bridge",
        EthernetType::Dvs => "dvs",
        EthernetType::HwVeb => "hw_veb",
        EthernetType::Hyperv => "hyperv",
        EthernetType::Ovs => "ovs",
        EthernetType::Tap => "tap",
        EthernetType::Vhostuser => "vhostuser",
        EthernetType::Vif => "vif",
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LinkKind {
    Ethernet,
    Bond,
    Vlan,
}

/// A declared link: where it was declared and its MAC.
#[derive(Debug)]
struct Declared {
    kind: LinkKind,
    field: String,
    mac: String,
}

/// Rendered links plus the id index the networks resolve against.
#[derive(Debug, Default)]
pub(super) struct Links {
    pub(super) rendered: Vec<LinkOut>,
    by_id: BTreeMap<String, Declared>,
    /// Bond member id -> bond id.
    enslaved: BTreeMap<String, String>,
}

impl Links {
    fn declare(
        &mut self,
        id: &str,
        kind: LinkKind,
        field: String,
        mac: String,
    ) -> Result<(), RenderError> {
        match self.by_id.entry(id.to_owned()) {
            Entry::Occupied(first) => Err(RenderError::new(
                format!("{field}.id"),
                RenderProblem::DuplicateId {
                    id: id.to_owned(),
                    first: first.get().field.clone(),
                },
            )),
            Entry::Vacant(slot) => {
                slot.insert(Declared { kind, field, mac });
                Ok(())
            }
        }
    }

    /// An error at `field` if link `id` is a bond member: VLANs and addresses go on the bond.
    pub(super) fn check_not_enslaved(&self, id: &str, field: &str) -> Result<(), RenderError> {
        match self.enslaved.get(id) {
            Some(bond) => Err(RenderError::new(
                field,
                RenderProblem::BondMember {
                    id: id.to_owned(),
                    bond: bond.clone(),
                },
            )),
            None => Ok(()),
        }
    }

    /// The MAC of link `id` if it is one of `kinds`, else an error at `field`.
    pub(super) fn mac_of(
        &self,
        id: &str,
        kinds: &[LinkKind],
        expected: &'static str,
        field: &str,
    ) -> Result<&str, RenderError> {
        self.by_id
            .get(id)
            .filter(|d| kinds.contains(&d.kind))
            .map(|d| d.mac.as_str())
            .ok_or_else(|| {
                RenderError::new(
                    field,
                    RenderProblem::UnknownLink {
                        id: id.to_owned(),
                        expected,
                    },
                )
            })
    }
}

/// The MAC a source names, at `field` (the `macAddress` path).
fn mac_from(
    source: &MacAddressSource,
    input: &RenderInput<'_>,
    field: &str,
) -> Result<String, RenderError> {
    match (&source.string, &source.from_host_interface) {
        (Some(literal), None) => super::normalize_mac(literal).ok_or_else(|| {
            RenderError::new(
                format!("{field}.string"),
                RenderProblem::BadMac(literal.clone()),
            )
        }),
        (None, Some(interface)) => {
            input.interface_mac(interface, &format!("{field}.fromHostInterface"))
        }
        _ => Err(RenderError::new(field, RenderProblem::BadMacSource)),
    }
}

/// Renders ethernets, then bonds, then VLANs, checking ids, members and parents.
pub(super) fn render_links(
    links: &NetworkLinks,
    input: &RenderInput<'_>,
) -> Result<Links, RenderError> {
    let mut out = Links::default();
    for (i, link) in links.ethernets.iter().flatten().enumerate() {
        let field = format!("spec.networkData.links.ethernets[{i}]");
        let mac = mac_from(&link.mac_address, input, &format!("{field}.macAddress"))?;
        out.declare(&link.id, LinkKind::Ethernet, field, mac.clone())?;
        out.rendered.push(LinkOut {
            id: link.id.clone(),
            kind: ethernet_type(link.type_),
            ethernet_mac_address: Some(mac),
            mtu: link.mtu,
            bond_mode: None,
            bond_links: None,
            vlan_id: None,
            vlan_link: None,
            vlan_mac_address: None,
        });
    }
    // Ethernet id -> the bond member field that took it, and the bond's id.
    let mut members: BTreeMap<&str, (String, &str)> = BTreeMap::new();
    for (i, bond) in links.bonds.iter().flatten().enumerate() {
        let field = format!("spec.networkData.links.bonds[{i}]");
        let mut first_mac = None;
        for (j, member) in bond.bond_links.iter().enumerate() {
            let member_field = format!("{field}.bondLinks[{j}]");
            let mac = out.mac_of(
                member,
                &[LinkKind::Ethernet],
                "ethernet link",
                &member_field,
            )?;
            first_mac.get_or_insert_with(|| mac.to_owned());
            match members.entry(member.as_str()) {
                Entry::Occupied(first) => {
                    return Err(RenderError::new(
                        member_field,
                        RenderProblem::DuplicateMember {
                            id: member.clone(),
                            first: first.get().0.clone(),
                        },
                    ));
                }
                Entry::Vacant(slot) => {
                    slot.insert((member_field, bond.id.as_str()));
                }
            }
        }
        let mac = match (&bond.mac_address, first_mac) {
            (Some(source), _) => mac_from(source, input, &format!("{field}.macAddress"))?,
            (None, Some(mac)) => mac,
            (None, None) => {
                return Err(RenderError::new(
                    format!("{field}.bondLinks"),
                    RenderProblem::EmptyBond,
                ));
            }
        };
        out.declare(&bond.id, LinkKind::Bond, field, mac.clone())?;
        out.rendered.push(LinkOut {
            id: bond.id.clone(),
            kind: "bond",
            ethernet_mac_address: Some(mac),
            mtu: bond.mtu,
            bond_mode: Some(bond.bond_mode),
            bond_links: Some(bond.bond_links.clone()),
            vlan_id: None,
            vlan_link: None,
            vlan_mac_address: None,
        });
    }
    out.enslaved = members
        .into_iter()
        .map(|(member, (_, bond))| (member.to_owned(), bond.to_owned()))
        .collect();
    // (parent, VLAN id) -> the VLAN field that defined it.
    let mut vlans: BTreeMap<(&str, i32), String> = BTreeMap::new();
    for (i, vlan) in links.vlans.iter().flatten().enumerate() {
        let field = format!("spec.networkData.links.vlans[{i}]");
        if !(0..=4094).contains(&vlan.vlan_id) {
            return Err(RenderError::new(
                format!("{field}.vlanID"),
                RenderProblem::BadVlanId(vlan.vlan_id),
            ));
        }
        let parent_field = format!("{field}.vlanLink");
        let parent_mac = out
            .mac_of(
                &vlan.vlan_link,
                &[LinkKind::Ethernet, LinkKind::Bond],
                "ethernet or bond link",
                &parent_field,
            )?
            .to_owned();
        out.check_not_enslaved(&vlan.vlan_link, &parent_field)?;
        match vlans.entry((vlan.vlan_link.as_str(), vlan.vlan_id)) {
            Entry::Occupied(first) => {
                return Err(RenderError::new(
                    format!("{field}.vlanID"),
                    RenderProblem::DuplicateVlan {
                        vlan_id: vlan.vlan_id,
                        parent: vlan.vlan_link.clone(),
                        first: first.get().clone(),
                    },
                ));
            }
            Entry::Vacant(slot) => {
                slot.insert(field.clone());
            }
        }
        let mac = match &vlan.mac_address {
            Some(source) => mac_from(source, input, &format!("{field}.macAddress"))?,
            None => parent_mac,
        };
        out.declare(&vlan.id, LinkKind::Vlan, field, mac.clone())?;
        out.rendered.push(LinkOut {
            id: vlan.id.clone(),
            kind: "vlan",
            ethernet_mac_address: None,
            mtu: vlan.mtu,
            bond_mode: None,
            bond_links: None,
            vlan_id: Some(vlan.vlan_id),
            vlan_link: Some(vlan.vlan_link.clone()),
            vlan_mac_address: Some(mac),
        });
    }
    Ok(out)
}

#[cfg(test)]
#[path = "links_tests.rs"]
mod tests;
