//! Interfaces (`/nodes/{system_id}/interfaces/...`), subnets and the VLANs of a fabric. The
//! interface operations are in `links` (links, default gateway) and `interfaces` (bonds,
//! VLAN interfaces, update, delete).

use serde_json::{Value, json};

use super::links::{find_interface, find_subnet};
use super::{Call, Reply, interfaces, links, machine_ops, visible};
use crate::error::ApiError;
use crate::model::LinkMode;
use crate::render;
use crate::routes::Kind;

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
        (Kind::Interfaces, "create_bond") => interfaces::create_bond(call),
        (Kind::Interfaces, "create_vlan") => interfaces::create_vlan(call),
        (Kind::Interface, "update") => interfaces::update(call),
        (Kind::Interface, "delete") => interfaces::delete(call),
        (Kind::Interface, "link_subnet") => links::link_subnet(call),
        (Kind::Interface, "unlink_subnet") => links::unlink_subnet(call),
        (Kind::Interface, "set_default_gateway") => links::set_default_gateway(call),
        (Kind::Vlans, "read") => {
            let fabric = call.arg(0).trim().parse::<u64>().ok();
            let vlans = fabric
                .map(|f| call.world.fabric_vlans(f))
                .unwrap_or_default();
            if vlans.is_empty() {
                return Err(ApiError::no_match("Fabric"));
            }
            Ok(Reply::ok(Value::Array(
                vlans.iter().map(render::vlan).collect(),
            )))
        }
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
