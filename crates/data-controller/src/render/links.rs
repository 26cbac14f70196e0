//! networkData links: ethernets, bonds and VLANs, with their MAC addresses resolved.

use std::collections::BTreeMap;

use capmaas_api::data_checks::TemplateProblem;
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

/// Rendered links plus the MAC of each id, which VLANs and bonds inherit.
#[derive(Debug, Default)]
pub(super) struct Links {
    pub(super) rendered: Vec<LinkOut>,
    macs: BTreeMap<String, String>,
}

impl Links {
    // Ids, members and parents were checked beforehand (`capmaas_api::data_checks`): a
    // duplicate never reaches here, and a lookup fails only if the two drift apart.
    fn declare(&mut self, id: &str, mac: String) {
        self.macs.entry(id.to_owned()).or_insert(mac);
    }

    /// The MAC of link `id`, else an error at `field`.
    fn mac_of(&self, id: &str, expected: &'static str, field: &str) -> Result<&str, RenderError> {
        self.macs.get(id).map(String::as_str).ok_or_else(|| {
            RenderError::new(
                field,
                RenderProblem::Template(TemplateProblem::UnknownLink {
                    id: id.to_owned(),
                    expected,
                }),
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
    match (
        &source.string,
        &source.from_host_interface,
        source.from_boot_mac,
    ) {
        (Some(literal), None, false) => super::normalize_mac(literal).ok_or_else(|| {
            RenderError::new(
                format!("{field}.string"),
                RenderProblem::BadMac(literal.clone()),
            )
        }),
        (None, Some(interface), false) => {
            input.interface_mac(interface, &format!("{field}.fromHostInterface"))
        }
        (None, None, true) => input.boot_mac(&format!("{field}.fromBootMAC")),
        _ => Err(RenderError::new(field, RenderProblem::BadMacSource)),
    }
}

/// Renders ethernets, then bonds, then VLANs. Call only on links without
/// `capmaas_api::data_checks` issues: this resolves MACs, it does not check the structure.
pub(super) fn render_links(
    links: &NetworkLinks,
    input: &RenderInput<'_>,
) -> Result<Links, RenderError> {
    let mut out = Links::default();
    for (i, link) in links.ethernets.iter().flatten().enumerate() {
        let field = format!("spec.networkData.links.ethernets[{i}]");
        let mac = mac_from(&link.mac_address, input, &format!("{field}.macAddress"))?;
        out.declare(&link.id, mac.clone());
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
    for (i, bond) in links.bonds.iter().flatten().enumerate() {
        let field = format!("spec.networkData.links.bonds[{i}]");
        let first_mac = match bond.bond_links.first() {
            Some(member) => Some(
                out.mac_of(member, "ethernet link", &format!("{field}.bondLinks[0]"))?
                    .to_owned(),
            ),
            None => None,
        };
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
        out.declare(&bond.id, mac.clone());
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
    for (i, vlan) in links.vlans.iter().flatten().enumerate() {
        let field = format!("spec.networkData.links.vlans[{i}]");
        if !(0..=4094).contains(&vlan.vlan_id) {
            return Err(RenderError::new(
                format!("{field}.vlanID"),
                RenderProblem::BadVlanId(vlan.vlan_id),
            ));
        }
        let mac = match &vlan.mac_address {
            Some(source) => mac_from(source, input, &format!("{field}.macAddress"))?,
            None => out
                .mac_of(
                    &vlan.vlan_link,
                    "ethernet or bond link",
                    &format!("{field}.vlanLink"),
                )?
                .to_owned(),
        };
        out.declare(&vlan.id, mac.clone());
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
