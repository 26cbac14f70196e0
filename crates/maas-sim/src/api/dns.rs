//! `/dnsresources/`: list with filters, create (fqdn or name+domain), get, update, delete.

use std::net::IpAddr;

use serde_json::Value;

use super::{Call, Reply};
use crate::error::ApiError;
use crate::model::DnsResource;
use crate::render;
use crate::routes::Kind;

fn parse_ttl(call: &Call<'_>) -> Result<Option<u32>, ApiError> {
    call.params
        .get_nonempty("address_ttl")
        .map(|t| {
            t.trim().parse::<u32>().map_err(|_| {
                ApiError::field(
                    "address_ttl",
                    "Ensure this value is greater than or equal to 0.",
                )
            })
        })
        .transpose()
}

/// `(name, domain index)` from `fqdn` or `name` + `domain`.
fn name_and_domain(call: &Call<'_>) -> Result<(String, usize), ApiError> {
    let params = call.params;
    if let (Some(name), Some(domain)) = (params.get_nonempty("name"), params.get_nonempty("domain"))
    {
        let index = find_domain(call, domain).ok_or_else(|| ApiError::no_match("Domain"))?;
        return Ok((name.to_owned(), index));
    }
    let fqdn = params.required("fqdn")?;
    let fqdn = fqdn.trim_end_matches('.');
    let (name, domain) = fqdn
        .split_once('.')
        .ok_or_else(|| ApiError::no_match("Domain"))?;
    let index = find_domain(call, domain).ok_or_else(|| ApiError::no_match("Domain"))?;
    Ok((name.to_owned(), index))
}

pub(super) fn dispatch(kind: Kind, action: &str, call: &mut Call<'_>) -> Result<Reply, ApiError> {
    if kind == Kind::DnsResources {
        return match action {
            "create" => {
                call.require_admin()?;
                let (name, domain_index) = name_and_domain(call)?;
                let domain_id = call.world.domains[domain_index].id;
                if call
                    .world
                    .dns_resources
                    .iter()
                    .any(|r| r.name == name && r.domain_id == domain_id)
                {
                    return Err(ApiError::field(
                        "__all__",
                        "Labels must be unique within their zone.",
                    ));
                }
                let ttl = parse_ttl(call)?;
                let ips = parse_ip_list(call.params.get("ip_addresses").unwrap_or_default())?;
                let record = new_dns(call, name, domain_id, ttl, ips);
                let value = render::dns_resource(call.world, &record);
                call.world.dns_resources.push(record);
                call.world.dirty = true;
                Ok(Reply::ok(value))
            }
            _ => list(call),
        };
    }
    let id = call.arg(0).to_owned();
    let index = call
        .world
        .dns_resources
        .iter()
        .position(|r| r.id.to_string() == id)
        .ok_or_else(|| ApiError::no_match("DNSResource"))?;
    match action {
        "update" => {
            call.require_admin()?;
            if call.params.contains("fqdn") || call.params.contains("name") {
                let (name, domain_index) = name_and_domain(call)?;
                let domain_id = call.world.domains[domain_index].id;
                let record = &mut call.world.dns_resources[index];
                record.name = name;
                record.domain_id = domain_id;
            }
            if let Some(ttl) = parse_ttl(call)? {
                call.world.dns_resources[index].address_ttl = Some(ttl);
            }
            if let Some(text) = call.params.get("ip_addresses") {
                call.world.dns_resources[index].ip_addresses = parse_ip_list(text)?;
            }
            call.world.dirty = true;
        }
        "delete" => {
            call.require_admin()?;
            call.world.dns_resources.remove(index);
            call.world.dirty = true;
            return Ok(Reply::Empty(http::StatusCode::NO_CONTENT));
        }
        _ => {}
    }
    let world = &*call.world;
    Ok(Reply::ok(render::dns_resource(
        world,
        &world.dns_resources[index],
    )))
}

fn list(call: &Call<'_>) -> Result<Reply, ApiError> {
    let p = call.params;
    let (mut name, mut domain) = (
        p.get_nonempty("name").map(ToOwned::to_owned),
        p.get_nonempty("domain").map(ToOwned::to_owned),
    );
    if name.is_none()
        && domain.is_none()
        && let Some(fqdn) = p.get_nonempty("fqdn")
    {
        let fqdn = fqdn.trim_end_matches('.');
        match fqdn.split_once('.') {
            Some((n, d)) => {
                name = Some(n.to_owned());
                domain = Some(d.to_owned());
            }
            None => name = Some(fqdn.to_owned()),
        }
    }
    let domain_id = match &domain {
        Some(d) => Some(
            call.world.domains[find_domain(call, d).ok_or_else(|| ApiError::no_match("Domain"))?]
                .id,
        ),
        None => None,
    };
    if let Some(rrtype) = p.get_nonempty("rrtype")
        && !matches!(rrtype.to_ascii_uppercase().as_str(), "A" | "AAAA")
    {
        return Ok(Reply::ok(Value::Array(Vec::new())));
    }
    let world = &*call.world;
    let items = world
        .dns_resources
        .iter()
        .filter(|r| {
            name.as_ref().is_none_or(|n| *n == r.name) && domain_id.is_none_or(|d| d == r.domain_id)
        })
        .map(|r| render::dns_resource(world, r))
        .collect();
    Ok(Reply::ok(Value::Array(items)))
}

/// A domain by id, name or `name:<name>` specifier.
pub(super) fn find_domain(call: &Call<'_>, spec: &str) -> Option<usize> {
    let name = spec.strip_prefix("name:").unwrap_or(spec);
    call.world
        .domains
        .iter()
        .position(|d| d.id.to_string() == spec || d.name == name)
}

/// Space-separated (any whitespace, not commas) addresses of a DNS resource.
fn parse_ip_list(text: &str) -> Result<Vec<IpAddr>, ApiError> {
    text.split_whitespace()
        .map(|t| {
            t.parse::<IpAddr>().map_err(|_| {
                ApiError::field("ip_addresses", format!("'{t}' is not a valid IP address."))
            })
        })
        .collect()
}

fn new_dns(
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
