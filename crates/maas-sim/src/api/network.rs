//! Interfaces (`/nodes/{system_id}/interfaces/...`, `link_subnet`, `unlink_subnet`) and subnets.

use std::net::IpAddr;

use serde_json::{Value, json};

use super::{Call, Reply, machine_ops, visible};
use crate::error::ApiError;
use crate::model::{Link, LinkMode};
use crate::render;
use crate::routes::Kind;
use crate::status::NodeStatus;

pub(super) fn dispatch(kind: Kind, action: &str, call: &mut Call<'_>) -> Result<Reply, ApiError> {
    match (kind, action) {
        (Kind::Interfaces, "read") => {
            let index = machine_ops::find(call)?;
            let world = &*call.world;
            let m = &world.machines[index];
            Ok(Reply::ok(Value::Array(
                m.interfaces
                    .iter()
                    .map(|i| render::interface(world, m, i))
                    .collect(),
            )))
        }
        (Kind::Interface, "read") => {
            let (index, iface) = find_interface(call)?;
            let world = &*call.world;
            let m = &world.machines[index];
            Ok(Reply::ok(render::interface(world, m, &m.interfaces[iface])))
        }
        (Kind::Interface, "link_subnet") => link_subnet(call),
        (Kind::Interface, "unlink_subnet") => unlink_subnet(call),
        (Kind::Subnets, "read") => Ok(Reply::ok(Value::Array(
            call.world.subnets.iter().map(render::subnet).collect(),
        ))),
        (Kind::Subnet, "read") => {
            let id = find_subnet(call, call.arg(0)).ok_or_else(|| ApiError::no_match("Subnet"))?;
            Ok(Reply::ok(render::subnet(&call.world.subnets[id])))
        }
        (Kind::Subnet, "ip_addresses") => ip_addresses(call),
        _ => Err(ApiError::internal(format!(
            "unhandled network action {action}"
        ))),
    }
}

fn find_interface(call: &Call<'_>) -> Result<(usize, usize), ApiError> {
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
fn find_subnet(call: &Call<'_>, spec: &str) -> Option<usize> {
    let spec = spec
        .strip_prefix("cidr:")
        .or_else(|| spec.strip_prefix("name:"))
        .unwrap_or(spec);
    call.world
        .subnets
        .iter()
        .position(|s| s.id.to_string() == spec || s.cidr.to_string() == spec || s.name == spec)
}

fn check_interface_edit(call: &Call<'_>, index: usize, operation: &str) -> Result<(), ApiError> {
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

fn link_subnet(call: &mut Call<'_>) -> Result<Reply, ApiError> {
    let (index, iface) = find_interface(call)?;
    check_interface_edit(call, index, "link subnet")?;
    let mode_text = call
        .params
        .get_nonempty("mode")
        .ok_or_else(|| ApiError::field("mode", "This field is required."))?;
    let mode = LinkMode::parse(mode_text).ok_or_else(|| {
        ApiError::field(
            "mode",
            format!("Select a valid choice. {mode_text} is not one of the available choices."),
        )
    })?;
    let subnet_index = match call.params.get_nonempty("subnet") {
        Some(spec) => Some(find_subnet(call, spec).ok_or_else(|| {
            ApiError::field(
                "subnet",
                "Select a valid choice. That choice is not one of the available choices.",
            )
        })?),
        None if mode == LinkMode::LinkUp => None,
        None => return Err(ApiError::field("subnet", "This field is required.")),
    };
    let subnet = subnet_index.map(|i| call.world.subnets[i].clone());
    let ip = match (mode, &subnet) {
        (LinkMode::Static, Some(subnet)) => Some(match call.params.get_nonempty("ip_address") {
            Some(text) => {
                let ip: IpAddr = text.trim().parse().map_err(|_| {
                    ApiError::field("ip_address", "Enter a valid IPv4 or IPv6 address.")
                })?;
                if !subnet.cidr.contains(&ip) {
                    return Err(ApiError::field(
                        "ip_address",
                        format!("IP address is not in the given subnet '{}'.", subnet.cidr),
                    ));
                }
                let own_ips: Vec<IpAddr> = call.world.machines[index].ip_addresses();
                if call.world.used_ips(subnet.id).contains(&ip) && !own_ips.contains(&ip) {
                    return Err(ApiError::conflict(format!(
                        "The IP address {ip} is already in use."
                    )));
                }
                ip
            }
            None => call.world.free_ip(subnet.id).ok_or_else(|| {
                ApiError::text(
                    http::StatusCode::SERVICE_UNAVAILABLE,
                    format!("No more IPs available in subnet: {}.", subnet.cidr),
                )
            })?,
        }),
        _ => None,
    };
    let link_id = call.world.new_id();
    let interface = &mut call.world.machines[index].interfaces[iface];
    // MAAS replaces a link_up placeholder when a real link is added.
    interface.links.retain(|l| l.mode != LinkMode::LinkUp);
    if let Some(ip) = ip {
        for other in &mut interface.links {
            if other.ip == Some(ip) {
                other.ip = None;
            }
        }
    }
    interface.links.push(Link {
        id: link_id,
        mode,
        subnet_id: subnet.map(|s| s.id),
        ip,
    });
    call.world.dirty = true;
    let world = &*call.world;
    let m = &world.machines[index];
    Ok(Reply::ok(render::interface(world, m, &m.interfaces[iface])))
}

fn unlink_subnet(call: &mut Call<'_>) -> Result<Reply, ApiError> {
    let (index, iface) = find_interface(call)?;
    check_interface_edit(call, index, "unlink subnet")?;
    let id = call.params.get("id").unwrap_or_default().trim().to_owned();
    let interface = &mut call.world.machines[index].interfaces[iface];
    let Some(position) = interface.links.iter().position(|l| l.id.to_string() == id) else {
        return Err(ApiError::field(
            "id",
            format!("Select a valid choice. {id} is not one of the available choices."),
        ));
    };
    interface.links.remove(position);
    if interface.links.is_empty() {
        let placeholder = call.world.new_id();
        let subnet_id = call.world.machines[index].interfaces[iface].subnet_id;
        call.world.machines[index].interfaces[iface]
            .links
            .push(Link {
                id: placeholder,
                mode: LinkMode::LinkUp,
                subnet_id: Some(subnet_id),
                ip: None,
            });
    }
    call.world.dirty = true;
    let world = &*call.world;
    let m = &world.machines[index];
    Ok(Reply::ok(render::interface(world, m, &m.interfaces[iface])))
}

fn ip_addresses(call: &Call<'_>) -> Result<Reply, ApiError> {
    let subnet_index =
        find_subnet(call, call.arg(0)).ok_or_else(|| ApiError::no_match("Subnet"))?;
    let subnet_id = call.world.subnets[subnet_index].id;
    let mut out = Vec::new();
    for m in call
        .world
        .machines
        .iter()
        .filter(|m| visible(m, call.caller))
    {
        for i in &m.interfaces {
            for l in i.links.iter().filter(|l| l.subnet_id == Some(subnet_id)) {
                if let Some(ip) = l.ip {
                    out.push(json!({"ip": ip.to_string(), "alloc_type": i32::from(l.mode == LinkMode::Static),
                        "alloc_type_name": if l.mode == LinkMode::Static { "Sticky" } else { "Automatic" },
                        "user": m.owner, "node_summary": {"system_id": m.system_id, "hostname": m.hostname,
                        "node_type": 0, "via": i.name}}));
                }
            }
        }
    }
    Ok(Reply::ok(Value::Array(out)))
}
