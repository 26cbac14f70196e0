//! Zones, resource pools, tags, domains, DNS resources, boot resources, users, version.

use std::net::IpAddr;

use http::StatusCode;
use serde_json::{Value, json};

use super::{Call, Reply, visible};
use crate::error::ApiError;
use crate::model::{DnsResource, Domain, Pool, Tag, Zone};
use crate::render;
use crate::routes::Kind;

pub(super) fn version() -> Value {
    json!({"capabilities": ["networks-management", "static-ipaddresses", "ipv6-deployment-ubuntu",
        "devices-management", "storage-deployment-ubuntu", "network-deployment-ubuntu",
        "bridging-interface-ubuntu", "bridging-automatic-ubuntu", "authenticate-api"],
        "version": "3.7.3-maas-sim", "subversion": ""})
}

fn deleted() -> Reply {
    Reply::Empty(StatusCode::NO_CONTENT)
}

fn required<'a>(call: &'a Call<'_>, key: &str) -> Result<&'a str, ApiError> {
    call.params
        .get_nonempty(key)
        .ok_or_else(|| ApiError::field(key, "This field is required."))
}

pub(super) fn dispatch(kind: Kind, action: &str, call: &mut Call<'_>) -> Result<Reply, ApiError> {
    match kind {
        Kind::Zones | Kind::Zone => zones(kind, action, call),
        Kind::Pools | Kind::Pool => pools(kind, action, call),
        Kind::Tags | Kind::Tag => super::tags::dispatch(kind, action, call),
        Kind::Domains | Kind::Domain => domains(kind, action, call),
        Kind::DnsResources | Kind::DnsResource => super::dns::dispatch(kind, action, call),
        Kind::BootResources => boot_resources(action, call),
        Kind::BootResource => {
            let id = call.arg(0);
            let b = call
                .world
                .boot_resources
                .iter()
                .find(|b| b.id.to_string() == id);
            b.map(|b| Reply::ok(render::boot_resource(b, true)))
                .ok_or_else(|| ApiError::no_match("BootResource"))
        }
        Kind::Users => match action {
            "whoami" => Ok(Reply::ok(
                json!({"username": call.caller.username, "email": format!("{}@example.com", call.caller.username),
                "is_local": true, "is_superuser": call.caller.is_admin,
                "resource_uri": format!("{}users/{}/", render::API, call.caller.username)}),
            )),
            _ => Ok(Reply::ok(
                json!([{"username": call.caller.username, "email": format!("{}@example.com", call.caller.username),
                "is_local": true, "is_superuser": call.caller.is_admin,
                "resource_uri": format!("{}users/{}/", render::API, call.caller.username)}]),
            )),
        },
        _ => Err(ApiError::internal(format!("unhandled action {action}"))),
    }
}

fn zones(kind: Kind, action: &str, call: &mut Call<'_>) -> Result<Reply, ApiError> {
    if kind == Kind::Zones {
        if action == "create" {
            call.require_admin()?;
            let name = required(call, "name")?.to_owned();
            if call.world.zones.iter().any(|z| z.name == name) {
                return Err(ApiError::field(
                    "name",
                    "Zone with this Name already exists.",
                ));
            }
            let zone = Zone {
                id: call.world.new_id(),
                name,
                description: call
                    .params
                    .get("description")
                    .unwrap_or_default()
                    .to_owned(),
            };
            let value = render::zone(&zone);
            call.world.zones.push(zone);
            call.world.dirty = true;
            return Ok(Reply::ok(value));
        }
        let mut zones: Vec<&Zone> = call.world.zones.iter().collect();
        zones.sort_by(|a, b| a.name.cmp(&b.name));
        return Ok(Reply::ok(Value::Array(
            zones.into_iter().map(render::zone).collect(),
        )));
    }
    let name = call.arg(0).to_owned();
    let index = call
        .world
        .zones
        .iter()
        .position(|z| z.name == name)
        .ok_or_else(|| ApiError::no_match("Zone"))?;
    match action {
        "update" => {
            call.require_admin()?;
            if let Some(new_name) = call.params.get_nonempty("name") {
                let new_name = new_name.to_owned();
                for m in call.world.machines.iter_mut().filter(|m| m.zone == name) {
                    m.zone.clone_from(&new_name);
                }
                call.world.zones[index].name = new_name;
            }
            if let Some(d) = call.params.get("description") {
                d.clone_into(&mut call.world.zones[index].description);
            }
            call.world.dirty = true;
        }
        "delete" => {
            call.require_admin()?;
            if name == "default" {
                return Err(ApiError::bad_request(
                    "This zone is the default zone, it cannot be deleted.",
                ));
            }
            call.world.zones.remove(index);
            for m in call.world.machines.iter_mut().filter(|m| m.zone == name) {
                "default".clone_into(&mut m.zone);
            }
            call.world.dirty = true;
            return Ok(deleted());
        }
        _ => {}
    }
    Ok(Reply::ok(render::zone(&call.world.zones[index])))
}

fn pools(kind: Kind, action: &str, call: &mut Call<'_>) -> Result<Reply, ApiError> {
    if kind == Kind::Pools {
        if action == "create" {
            call.require_admin()?;
            let name = required(call, "name")?.to_owned();
            if call.world.pools.iter().any(|p| p.name == name) {
                return Err(ApiError::field(
                    "name",
                    "Resource pool with this Name already exists.",
                ));
            }
            let pool = Pool {
                id: call.world.new_id(),
                name,
                description: call
                    .params
                    .get("description")
                    .unwrap_or_default()
                    .to_owned(),
            };
            let value = render::pool(&pool);
            call.world.pools.push(pool);
            call.world.dirty = true;
            return Ok(Reply::ok(value));
        }
        let mut pools: Vec<&Pool> = call.world.pools.iter().collect();
        pools.sort_by(|a, b| a.name.cmp(&b.name));
        return Ok(Reply::ok(Value::Array(
            pools.into_iter().map(render::pool).collect(),
        )));
    }
    let key = call.arg(0).to_owned();
    let index = call
        .world
        .pools
        .iter()
        .position(|p| p.id.to_string() == key || p.name == key)
        .ok_or_else(|| ApiError::no_match("ResourcePool"))?;
    match action {
        "update" => {
            call.require_admin()?;
            let old = call.world.pools[index].name.clone();
            if let Some(new_name) = call.params.get_nonempty("name") {
                let new_name = new_name.to_owned();
                for m in call.world.machines.iter_mut().filter(|m| m.pool == old) {
                    m.pool.clone_from(&new_name);
                }
                call.world.pools[index].name = new_name;
            }
            if let Some(d) = call.params.get("description") {
                d.clone_into(&mut call.world.pools[index].description);
            }
            call.world.dirty = true;
        }
        "delete" => {
            call.require_admin()?;
            let name = call.world.pools[index].name.clone();
            if call.world.pools[index].id == 0 {
                return Err(ApiError::bad_request(
                    "This is the default pool, it cannot be deleted.",
                ));
            }
            if call.world.machines.iter().any(|m| m.pool == name) {
                return Err(ApiError::bad_request(
                    "Pool has machines in it, it cannot be deleted.",
                ));
            }
            call.world.pools.remove(index);
            call.world.dirty = true;
            return Ok(deleted());
        }
        _ => {}
    }
    Ok(Reply::ok(render::pool(&call.world.pools[index])))
}

fn domains(kind: Kind, action: &str, call: &mut Call<'_>) -> Result<Reply, ApiError> {
    if kind == Kind::Domains {
        if action == "create" {
            call.require_admin()?;
            let name = required(call, "name")?.to_owned();
            if call.world.domains.iter().any(|d| d.name == name) {
                return Err(ApiError::field(
                    "name",
                    "Domain with this Name already exists.",
                ));
            }
            let ttl = call
                .params
                .get_nonempty("ttl")
                .map(str::parse::<u32>)
                .transpose()
                .map_err(|_| ApiError::field("ttl", "Enter a whole number."))?;
            let authoritative = call
                .params
                .get("authoritative")
                .is_none_or(|v| crate::params::parse_bool(v).unwrap_or(true));
            let domain = Domain {
                id: call.world.new_id(),
                name,
                ttl,
                authoritative,
            };
            let value = render::domain(call.world, &domain);
            call.world.domains.push(domain);
            call.world.dirty = true;
            return Ok(Reply::ok(value));
        }
        let world = &*call.world;
        return Ok(Reply::ok(Value::Array(
            world
                .domains
                .iter()
                .map(|d| render::domain(world, d))
                .collect(),
        )));
    }
    let index = find_domain(call, call.arg(0)).ok_or_else(|| ApiError::no_match("Domain"))?;
    match action {
        "update" => {
            call.require_admin()?;
            if let Some(n) = call.params.get_nonempty("name") {
                n.clone_into(&mut call.world.domains[index].name);
            }
            if let Some(t) = call.params.get_nonempty("ttl") {
                call.world.domains[index].ttl = Some(
                    t.parse()
                        .map_err(|_| ApiError::field("ttl", "Enter a whole number."))?,
                );
            }
            call.world.dirty = true;
        }
        "delete" => {
            call.require_admin()?;
            let id = call.world.domains[index].id;
            if id == call.world.default_domain_id() {
                return Err(ApiError::bad_request(
                    "This domain is the default domain, it cannot be deleted.",
                ));
            }
            if call.world.dns_resources.iter().any(|r| r.domain_id == id)
                || call.world.machines.iter().any(|m| m.domain_id == id)
            {
                return Err(ApiError::bad_request(
                    "Cannot delete a domain that has records.",
                ));
            }
            call.world.domains.remove(index);
            call.world.dirty = true;
            return Ok(deleted());
        }
        _ => {}
    }
    let world = &*call.world;
    Ok(Reply::ok(render::domain(world, &world.domains[index])))
}

/// A domain by id, name or `name:<name>` specifier.
pub(super) fn find_domain(call: &Call<'_>, spec: &str) -> Option<usize> {
    let name = spec.strip_prefix("name:").unwrap_or(spec);
    call.world
        .domains
        .iter()
        .position(|d| d.id.to_string() == spec || d.name == name)
}

fn boot_resources(action: &str, call: &Call<'_>) -> Result<Reply, ApiError> {
    if action == "is_importing" {
        return Ok(Reply::ok(Value::Bool(false)));
    }
    let wanted = call.params.get_nonempty("type").unwrap_or("all");
    let filter: Option<&str> = match wanted {
        "all" => None,
        "synced" => Some("Synced"),
        "uploaded" => Some("Uploaded"),
        other => {
            return Err(ApiError::bad_request(format!(
                "'{other}' is not a valid boot resource type. Available types: ['synced', 'uploaded']"
            )));
        }
    };
    let mut items: Vec<_> = call
        .world
        .boot_resources
        .iter()
        .filter(|b| filter.is_none_or(|t| b.rtype == t))
        .collect();
    items.sort_by(|a, b| {
        (&a.rtype, &a.name, &a.architecture).cmp(&(&b.rtype, &b.name, &b.architecture))
    });
    Ok(Reply::ok(Value::Array(
        items
            .into_iter()
            .map(|b| render::boot_resource(b, false))
            .collect(),
    )))
}

/// Space-separated (any whitespace, not commas) addresses of a DNS resource.
pub(super) fn parse_ip_list(text: &str) -> Result<Vec<IpAddr>, ApiError> {
    text.split_whitespace()
        .map(|t| {
            t.parse::<IpAddr>().map_err(|_| {
                ApiError::field("ip_addresses", format!("'{t}' is not a valid IP address."))
            })
        })
        .collect()
}

pub(super) fn new_dns(
    call: &mut Call<'_>,
    name: String,
    domain_id: u64,
    ttl: Option<u32>,
    ips: Vec<IpAddr>,
) -> DnsResource {
    DnsResource {
        id: call.world.new_id(),
        name,
        domain_id,
        address_ttl: ttl,
        ip_addresses: ips,
        owner: call.caller.username.clone(),
    }
}

pub(super) fn new_tag(name: String, call: &Call<'_>) -> Tag {
    let get = |k: &str| call.params.get(k).unwrap_or_default().to_owned();
    Tag {
        name,
        definition: get("definition"),
        comment: get("comment"),
        kernel_opts: get("kernel_opts"),
    }
}

pub(super) fn tagged_machines(call: &Call<'_>, tag: &str) -> Value {
    let world = &*call.world;
    Value::Array(
        world
            .machines
            .iter()
            .filter(|m| m.tags.contains(tag) && visible(m, call.caller))
            .map(|m| render::machine(world, m))
            .collect(),
    )
}
