//! Interface links: `link_subnet`, `unlink_subnet`, `set_default_gateway`
//! (`forms/interface_link.py` and `Interface.link_subnet` in MAAS).

use std::net::IpAddr;

use http::StatusCode;
use serde_json::{Value, json};

use super::{Call, Reply, machine_ops};
use crate::error::{ApiError, ErrorBody};
use crate::model::{InterfaceKind, Link, LinkMode, RangeKind, Subnet};
use crate::netmodel::{self, family, subnet_label};
use crate::render;
use crate::status::NodeStatus;

/// `(machine index, interface index)` of `/nodes/{system_id}/interfaces/{id}/` (id or name).
pub(super) fn find_interface(call: &Call<'_>) -> Result<(usize, usize), ApiError> {
    let index = machine_ops::find(call)?;
    let wanted = call.arg(1);
    let m = &call.world.machines[index];
    let iface = m
        .interfaces
        .iter()
        .position(|i| i.id.to_string() == wanted || i.name == wanted)
        .ok_or_else(|| ApiError::no_match("Interface"))?;
    Ok((index, iface))
}

/// A subnet by id, CIDR or name (MAAS subnet specifiers).
pub(super) fn find_subnet(call: &Call<'_>, spec: &str) -> Option<usize> {
    let spec = spec
        .strip_prefix("cidr:")
        .or_else(|| spec.strip_prefix("name:"))
        .unwrap_or(spec);
    call.world
        .subnets
        .iter()
        .position(|s| s.id.to_string() == spec || s.cidr.to_string() == spec || s.name == spec)
}

/// Interfaces of a machine are edited by an admin or the owner, and only while the machine is
/// New, Ready, Allocated or Broken (`raise_error_for_invalid_state_on_allocated_operations`).
pub(super) fn check_interface_edit(
    call: &Call<'_>,
    index: usize,
    operation: &str,
) -> Result<(), ApiError> {
    let m = &call.world.machines[index];
    if !(call.caller.is_admin || m.owner.as_deref() == Some(call.caller.username.as_str())) {
        return Err(ApiError::forbidden_empty());
    }
    if !matches!(
        m.status,
        NodeStatus::New | NodeStatus::Ready | NodeStatus::Allocated | NodeStatus::Broken
    ) {
        return Err(ApiError::conflict(format!(
            "Cannot {operation} interface because the machine is not New, Ready, Allocated, or Broken."
        )));
    }
    Ok(())
}

/// Ends a change to the links of interface `iface`: a default gateway whose link went away
/// goes with it, as in MAAS, and the answer is the interface as it is now.
fn links_changed(call: &mut Call<'_>, index: usize, iface: usize) -> Reply {
    netmodel::drop_stale_gateways(&mut call.world.machines[index]);
    call.world.dirty = true;
    interface_reply(call, index, iface)
}

pub(super) fn interface_reply(call: &Call<'_>, index: usize, iface: usize) -> Reply {
    let world = &*call.world;
    let m = &world.machines[index];
    Reply::ok(render::interface(world, m, &m.interfaces[iface]))
}

/// A 400 whose JSON names several fields with their messages.
pub(super) fn fields(errors: &[(&str, String)]) -> ApiError {
    let mut map = serde_json::Map::new();
    for (field, message) in errors {
        map.insert((*field).to_owned(), json!([message]));
    }
    ApiError {
        status: StatusCode::BAD_REQUEST,
        body: ErrorBody::Json(Value::Object(map)),
        headers: Vec::new(),
    }
}

/// The address a static link asks for, checked as MAAS's form and model do: inside the
/// subnet (400), not inside a dynamic range (400), not held by any interface (404
/// `IP address is already in use.`, `StaticIPAddressUnavailable`). Addresses inside a
/// *reserved* range are accepted: MAAS keeps reserved ranges out of its own automatic
/// assignment only (`Interface._link_subnet_static` checks dynamic ranges, not reserved ones).
fn static_address(call: &Call<'_>, subnet: &Subnet) -> Result<IpAddr, ApiError> {
    let Some(text) = call.params.get_nonempty("ip_address") else {
        return call.world.free_ip(subnet.id).ok_or_else(|| {
            ApiError::text(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("No more IPs available in subnet: {}.", subnet.cidr),
            )
        });
    };
    let ip: IpAddr = text
        .trim()
        .parse()
        .map_err(|_| ApiError::field("ip_address", "Enter a valid IPv4 or IPv6 address."))?;
    if !subnet.cidr.contains(&ip) {
        return Err(ApiError::field(
            "ip_address",
            format!(
                "IP address is not in the given subnet '{}'.",
                subnet_label(subnet)
            ),
        ));
    }
    if let Some(range) = call
        .world
        .ip_ranges
        .iter()
        .find(|r| r.subnet_id == subnet.id && r.kind == RangeKind::Dynamic && r.contains(ip))
    {
        return Err(ApiError::field(
            "ip_address",
            format!(
                "IP address is inside a dynamic range {} to {}.",
                range.start_ip, range.end_ip
            ),
        ));
    }
    if call.world.ip_holder(ip).is_some() {
        return Err(ApiError::text(
            StatusCode::NOT_FOUND,
            "IP address is already in use.",
        ));
    }
    Ok(ip)
}

pub(super) fn link_subnet(call: &mut Call<'_>) -> Result<Reply, ApiError> {
    let (index, iface) = find_interface(call)?;
    check_interface_edit(call, index, "link subnet")?;
    let force = call.params.bool("force")?;
    let m = &call.world.machines[index];
    let interface = &m.interfaces[iface];
    if let Some(bond) = netmodel::children(m, interface.id).find(|c| c.kind == InterfaceKind::Bond)
    {
        return Err(ApiError::field(
            "bond",
            format!(
                "Cannot link interface({}) when interface is in a bond({}).",
                interface.name, bond.name
            ),
        ));
    }
    let mode = call.params.required_choice("mode", LinkMode::parse)?;
    // Without `force`, only the subnets of the interface's VLAN are choices.
    let vlan = call.world.interface_vlan(interface).map(|v| v.id);
    let subnet = match call.params.get_nonempty("subnet") {
        Some(spec) => {
            let i =
                find_subnet(call, spec).ok_or_else(|| ApiError::invalid_model_choice("subnet"))?;
            let subnet = call.world.subnets[i].clone();
            if !force && vlan.is_some_and(|v| v != subnet.vlan_id) {
                return Err(ApiError::invalid_model_choice("subnet"));
            }
            Some(subnet)
        }
        None if matches!(mode, LinkMode::Dhcp | LinkMode::LinkUp) => None,
        None => return Err(ApiError::required("subnet")),
    };
    if mode == LinkMode::Dhcp
        && let Some(dhcp) = interface.links.iter().find(|l| l.mode == LinkMode::Dhcp)
    {
        let message = match call.world.link_subnet(dhcp) {
            Some(s) => format!(
                "Interface is already set to DHCP from '{}'.",
                subnet_label(s)
            ),
            None => "Interface is already set to DHCP.".to_owned(),
        };
        return Err(ApiError::field("mode", message));
    }
    let ip = match (mode, &subnet) {
        (LinkMode::Static, Some(subnet)) => Some(static_address(call, subnet)?),
        _ => None,
    };
    let link_id = call.world.new_id();
    let new_family = subnet.as_ref().map(family);
    let interface = &mut call.world.machines[index].interfaces[iface];
    // A real link replaces the link_up placeholder; a static or auto link replaces the DHCP
    // link of its family (`remove_link_dhcp`, `remove_link_up`).
    let subnet_families: Vec<(u64, u8)> = call
        .world
        .subnets
        .iter()
        .map(|s| (s.id, family(s)))
        .collect();
    let family_of = |l: &Link| {
        l.subnet_id.and_then(|id| {
            subnet_families
                .iter()
                .find(|(s, _)| *s == id)
                .map(|(_, f)| *f)
        })
    };
    interface.links.retain(|l| {
        l.mode != LinkMode::LinkUp
            && !(matches!(mode, LinkMode::Static | LinkMode::Auto)
                && l.mode == LinkMode::Dhcp
                && (family_of(l).is_none() || family_of(l) == new_family))
    });
    if interface.vlan_id.is_none()
        && interface.kind != InterfaceKind::Physical
        && let Some(s) = &subnet
    {
        interface.vlan_id = Some(s.vlan_id);
    }
    interface.links.push(Link {
        id: link_id,
        mode,
        subnet_id: subnet.as_ref().map(|s| s.id),
        ip,
    });
    if call.params.bool("default_gateway")? {
        let m = &mut call.world.machines[index];
        match new_family {
            Some(4) => m.gateway_link_ipv4 = Some(link_id),
            Some(_) => m.gateway_link_ipv6 = Some(link_id),
            None => {}
        }
    }
    Ok(links_changed(call, index, iface))
}

pub(super) fn unlink_subnet(call: &mut Call<'_>) -> Result<Reply, ApiError> {
    let (index, iface) = find_interface(call)?;
    check_interface_edit(call, index, "unlink subnet")?;
    let id = call.params.get("id").unwrap_or_default().trim().to_owned();
    let interface = &mut call.world.machines[index].interfaces[iface];
    let Some(position) = interface.links.iter().position(|l| l.id.to_string() == id) else {
        return Err(ApiError::invalid_choice("id", id));
    };
    interface.links.remove(position);
    if interface.links.is_empty() {
        let placeholder = call.world.new_id();
        let interface = &mut call.world.machines[index].interfaces[iface];
        let subnet_id = (interface.kind == InterfaceKind::Physical).then_some(interface.subnet_id);
        interface.links.push(Link {
            subnet_id,
            ..netmodel::link_up(placeholder)
        });
    }
    Ok(links_changed(call, index, iface))
}

/// `set_default_gateway` (`InterfaceSetDefaultGatwayForm`): the links with a subnet that has
/// a gateway are the choices; without `link_id` the interface must have at most one gateway
/// per family.
pub(super) fn set_default_gateway(call: &mut Call<'_>) -> Result<Reply, ApiError> {
    let (index, iface) = find_interface(call)?;
    check_interface_edit(call, index, "set default gateway")?;
    let world = &*call.world;
    let usable: Vec<(u64, u8, IpAddr)> = world.machines[index].interfaces[iface]
        .links
        .iter()
        .filter(|l| matches!(l.mode, LinkMode::Auto | LinkMode::Static | LinkMode::Dhcp))
        .filter_map(|l| {
            let s = world.link_subnet(l)?;
            Some((l.id, family(s), s.gateway_ip?))
        })
        .collect();
    if usable.is_empty() {
        return Err(ApiError::field(
            "__all__",
            "This interface has no usable gateways.",
        ));
    }
    let chosen = chosen_gateways(call, &usable)?;
    let m = &mut call.world.machines[index];
    for (link, fam) in chosen {
        if fam == 4 {
            m.gateway_link_ipv4 = Some(link);
        } else {
            m.gateway_link_ipv6 = Some(link);
        }
    }
    call.world.dirty = true;
    Ok(interface_reply(call, index, iface))
}

/// The links `set_default_gateway` picks among `usable` (`(link, family, gateway)`).
fn chosen_gateways(
    call: &Call<'_>,
    usable: &[(u64, u8, IpAddr)],
) -> Result<Vec<(u64, u8)>, ApiError> {
    if let Some(text) = call.params.get_nonempty("link_id") {
        let link = usable
            .iter()
            .find(|(id, _, _)| id.to_string() == text.trim())
            .ok_or_else(|| ApiError::invalid_choice("link_id", text))?;
        return Ok(vec![(link.0, link.1)]);
    }
    let mut too_many = Vec::new();
    for fam in [4u8, 6] {
        let mut gateways: Vec<IpAddr> = usable
            .iter()
            .filter(|(_, f, _)| *f == fam)
            .map(|(_, _, g)| *g)
            .collect();
        gateways.sort();
        gateways.dedup();
        if gateways.len() > 1 {
            too_many.push(format!("IPv{fam}"));
        }
    }
    if !too_many.is_empty() {
        let plural = if too_many.len() > 1 { "s" } else { "" };
        return Err(ApiError::field(
            "link_id",
            format!(
                "This field is required; Interface has more than one usable {} gateway{plural}.",
                too_many.join(" and ")
            ),
        ));
    }
    Ok([4u8, 6]
        .iter()
        .filter_map(|fam| usable.iter().find(|(_, f, _)| f == fam))
        .map(|(id, f, _)| (*id, *f))
        .collect())
}
