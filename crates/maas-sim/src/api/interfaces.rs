//! Bond and VLAN interfaces, interface update and delete (`api/interfaces.py`,
//! `forms/interface.py` in MAAS).

use super::links::{check_interface_edit, fields, find_interface, interface_reply};
use super::{Call, Reply, machine_ops};
use crate::error::ApiError;
use crate::model::{Interface, InterfaceKind};
use crate::netmodel;
use crate::status::NodeStatus;

/// MAAS's bond modes (`BOND_MODE_CHOICES`).
pub(crate) const BOND_MODES: [&str; 7] = [
    "balance-rr",
    "active-backup",
    "balance-xor",
    "broadcast",
    "802.3ad",
    "balance-tlb",
    "balance-alb",
];

/// Linux refuses MTUs below 552; MAAS's form does too.
fn parse_mtu(call: &Call<'_>) -> Result<Option<u32>, ApiError> {
    let Some(text) = call.params.get_nonempty("mtu") else {
        return Ok(None);
    };
    let mtu: i64 = text
        .trim()
        .parse()
        .map_err(|_| ApiError::field("mtu", "Enter a whole number."))?;
    if mtu < 552 {
        return Err(ApiError::field(
            "mtu",
            "Ensure this value is greater than or equal to 552.",
        ));
    }
    u32::try_from(mtu)
        .map(Some)
        .map_err(|_| ApiError::field("mtu", "Enter a whole number."))
}

fn parse_bond_mode(call: &Call<'_>) -> Result<Option<String>, ApiError> {
    match call.params.get_nonempty("bond_mode") {
        None => Ok(None),
        Some(mode) if BOND_MODES.contains(&mode) => Ok(Some(mode.to_owned())),
        Some(mode) => Err(ApiError::invalid_choice("bond_mode", mode)),
    }
}

fn valid_mac(mac: &str) -> bool {
    let parts: Vec<&str> = mac.split([':', '-']).collect();
    parts.len() == 6
        && parts
            .iter()
            .all(|p| p.len() == 2 && p.chars().all(|c| c.is_ascii_hexdigit()))
}

/// The machine for an interface creation: admin only (`NodePermission.admin`), editable state.
fn machine_for_create(call: &Call<'_>, operation: &str) -> Result<usize, ApiError> {
    let index = machine_ops::find(call)?;
    if !call.caller.is_admin {
        return Err(ApiError::forbidden_empty());
    }
    check_interface_edit(call, index, operation)?;
    Ok(index)
}

/// Interface ids named by `key` (ids or names), each a choice among the machine's interfaces.
fn parent_ids(call: &Call<'_>, index: usize, key: &str) -> Result<Vec<u64>, ApiError> {
    let m = &call.world.machines[index];
    let mut out = Vec::new();
    for wanted in call.params.all(key) {
        let wanted = wanted.trim();
        let iface = m
            .interfaces
            .iter()
            .find(|i| i.id.to_string() == wanted || i.name == wanted)
            .ok_or_else(|| ApiError::invalid_choice(key, wanted))?;
        if !out.contains(&iface.id) {
            out.push(iface.id);
        }
    }
    Ok(out)
}

fn name_taken(call: &Call<'_>, index: usize, name: &str) -> Option<ApiError> {
    let m = &call.world.machines[index];
    m.interfaces.iter().any(|i| i.name == name).then(|| {
        ApiError::field(
            "name",
            format!(
                "Node {} already has an interface named '{name}'.",
                m.hostname
            ),
        )
    })
}

pub(super) fn create_bond(call: &mut Call<'_>) -> Result<Reply, ApiError> {
    let index = machine_for_create(call, "create bond")?;
    let name = call
        .params
        .get_nonempty("name")
        .map(|n| n.trim().to_owned())
        .ok_or_else(|| ApiError::required("name"))?;
    if !call.params.contains("parents") {
        return Err(ApiError::required("parents"));
    }
    let parents = parent_ids(call, index, "parents")?;
    if parents.is_empty() {
        return Err(ApiError::field(
            "parents",
            "A bond interface must have one or more parents.",
        ));
    }
    let mtu = parse_mtu(call)?;
    let bond_mode = parse_bond_mode(call)?;
    if let Some(err) = name_taken(call, index, &name) {
        return Err(err);
    }
    let m = &call.world.machines[index];
    let members: Vec<&Interface> = parents
        .iter()
        .filter_map(|p| m.interfaces.iter().find(|i| i.id == *p))
        .collect();
    let mut in_use: Vec<String> = members
        .iter()
        .filter(|p| netmodel::children(m, p.id).next().is_some())
        .map(|p| p.name.clone())
        .collect();
    if !in_use.is_empty() {
        in_use.sort();
        return Err(ApiError::field(
            "parents",
            format!("Interfaces already in-use: {}.", in_use.join(", ")),
        ));
    }
    let vlans: Vec<Option<u64>> = members
        .iter()
        .map(|p| call.world.interface_vlan(p).map(|v| v.id))
        .collect();
    if vlans.iter().any(|v| *v != vlans[0]) {
        return Err(ApiError::field(
            "parents",
            "All parents must belong to the same VLAN.",
        ));
    }
    let mac = match call.params.get_nonempty("mac_address") {
        Some(mac) if valid_mac(mac.trim()) => mac.trim().to_ascii_lowercase().replace('-', ":"),
        Some(mac) => {
            return Err(ApiError::field(
                "mac_address",
                format!("'{mac}' is not a valid MAC address."),
            ));
        }
        None => members[0].mac_address.clone(),
    };
    let id = call.world.new_id();
    let link_id = call.world.new_id();
    let m = &mut call.world.machines[index];
    // Enslaved interfaces lose their links (MAAS resets the parents' IP links).
    for iface in m.interfaces.iter_mut().filter(|i| parents.contains(&i.id)) {
        iface.links.clear();
    }
    m.interfaces.push(Interface {
        kind: InterfaceKind::Bond,
        parents,
        vlan_id: vlans[0],
        mtu,
        bond_mode: Some(bond_mode.unwrap_or_else(|| "active-backup".to_owned())),
        ..Interface::nic(id, name, mac, 0, vec![netmodel::link_up(link_id)])
    });
    netmodel::drop_stale_gateways(m);
    let iface = m.interfaces.len() - 1;
    call.world.dirty = true;
    Ok(interface_reply(call, index, iface))
}

pub(super) fn create_vlan(call: &mut Call<'_>) -> Result<Reply, ApiError> {
    let index = machine_for_create(call, "create VLAN")?;
    let vlan_text = call
        .params
        .get_nonempty("vlan")
        .ok_or_else(|| {
            ApiError::field(
                "vlan",
                "A VLAN interface must be connected to a tagged VLAN.",
            )
        })?
        .trim()
        .to_owned();
    let vlan = vlan_text
        .parse::<u64>()
        .ok()
        .and_then(|id| call.world.vlan_info(id))
        .ok_or_else(|| ApiError::invalid_model_choice("vlan"))?;
    let parents = parent_ids(call, index, "parent")?;
    let mtu = parse_mtu(call)?;
    let [parent] = parents.as_slice() else {
        return Err(ApiError::field(
            "parent",
            "A VLAN interface must have exactly one parent.",
        ));
    };
    let m = &call.world.machines[index];
    let Some(parent) = m.interfaces.iter().find(|i| i.id == *parent) else {
        return Err(ApiError::no_match("Interface"));
    };
    if parent.kind == InterfaceKind::Vlan {
        return Err(ApiError::field(
            "parent",
            "A VLAN interface can't have another VLAN interface as parent.",
        ));
    }
    if netmodel::children(m, parent.id).any(|c| c.kind == InterfaceKind::Bond) {
        return Err(ApiError::field(
            "parent",
            "A VLAN interface can't have a parent that is already in a bond.",
        ));
    }
    if vlan.vid == 0 {
        return Err(ApiError::field(
            "vlan",
            "A VLAN interface can only belong to a tagged VLAN.",
        ));
    }
    let parent_fabric = call.world.interface_vlan(parent).map(|v| v.fabric_id);
    if parent_fabric != Some(vlan.fabric_id) {
        return Err(fields(&[(
            "vlan",
            "A VLAN interface can only belong to a tagged VLAN on the same fabric as its parent interface.".to_owned(),
        )]));
    }
    let name = format!("{}.{}", parent.name, vlan.vid);
    if let Some(err) = name_taken(call, index, &name) {
        return Err(err);
    }
    let (parent_id, mac) = (parent.id, parent.mac_address.clone());
    let id = call.world.new_id();
    let link_id = call.world.new_id();
    let m = &mut call.world.machines[index];
    m.interfaces.push(Interface {
        kind: InterfaceKind::Vlan,
        parents: vec![parent_id],
        vlan_id: Some(vlan.id),
        mtu,
        ..Interface::nic(id, name, mac, 0, vec![netmodel::link_up(link_id)])
    });
    let iface = m.interfaces.len() - 1;
    call.world.dirty = true;
    Ok(interface_reply(call, index, iface))
}

/// `PUT` an interface: `mtu`, and `bond_mode` of a bond. On a Deployed machine MAAS only lets
/// name and MAC change, so these are ignored there.
pub(super) fn update(call: &mut Call<'_>) -> Result<Reply, ApiError> {
    let (index, iface) = find_interface(call)?;
    if call.world.machines[index].status != NodeStatus::Deployed {
        check_interface_edit(call, index, "update interface")?;
    } else if !call.caller.is_admin {
        return Err(ApiError::forbidden_empty());
    }
    let mtu = parse_mtu(call)?;
    let bond_mode = parse_bond_mode(call)?;
    if call.world.machines[index].status == NodeStatus::Deployed {
        return Ok(interface_reply(call, index, iface));
    }
    let interface = &mut call.world.machines[index].interfaces[iface];
    let before = interface.clone();
    if mtu.is_some() {
        interface.mtu = mtu;
    }
    if interface.kind == InterfaceKind::Bond && bond_mode.is_some() {
        interface.bond_mode = bond_mode;
    }
    if *interface != before {
        call.world.dirty = true;
    }
    Ok(interface_reply(call, index, iface))
}

/// `DELETE` an interface: its VLAN (and deeper) children go with it, as MAAS's
/// `delete_children_interface_handler` does; former bond members without links get link_up.
pub(super) fn delete(call: &mut Call<'_>) -> Result<Reply, ApiError> {
    let (index, iface) = find_interface(call)?;
    check_interface_edit(call, index, "delete interface")?;
    let m = &call.world.machines[index];
    let mut doomed = vec![m.interfaces[iface].id];
    let mut at = 0;
    while at < doomed.len() {
        let id = doomed[at];
        doomed.extend(netmodel::children(m, id).map(|c| c.id));
        at += 1;
    }
    let freed: Vec<u64> = m
        .interfaces
        .iter()
        .filter(|i| doomed.contains(&i.id))
        .flat_map(|i| i.parents.clone())
        .filter(|p| !doomed.contains(p))
        .collect();
    let mut placeholders = Vec::new();
    for _ in &freed {
        placeholders.push(call.world.new_id());
    }
    let m = &mut call.world.machines[index];
    m.interfaces.retain(|i| !doomed.contains(&i.id));
    for (parent, link_id) in freed.iter().zip(placeholders) {
        if let Some(p) = m.interfaces.iter_mut().find(|i| i.id == *parent)
            && p.links.is_empty()
        {
            let subnet_id = (p.kind == InterfaceKind::Physical).then_some(p.subnet_id);
            p.links.push(crate::model::Link {
                subnet_id,
                ..netmodel::link_up(link_id)
            });
        }
    }
    netmodel::drop_stale_gateways(m);
    call.world.dirty = true;
    Ok(Reply::Empty(http::StatusCode::NO_CONTENT))
}
