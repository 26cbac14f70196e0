//! `/ipranges/`: list, create, read, update, delete (`api/ipranges.py`, `forms/iprange.py`,
//! `models/iprange.py` in MAAS). Validation stops at the first failing check, as
//! `IPRange.clean` does, with MAAS's texts; an overlap with another range is a 400 on both
//! `start_ip` and `end_ip`.

use std::net::IpAddr;

use http::StatusCode;
use ipnet::IpNet;
use serde_json::Value;

use super::links::{fields, find_subnet};
use super::{Call, Reply};
use crate::error::ApiError;
use crate::model::{IpRange, RangeKind};
use crate::render;
use crate::routes::Kind;

pub(super) fn dispatch(kind: Kind, action: &str, call: &mut Call<'_>) -> Result<Reply, ApiError> {
    match (kind, action) {
        (Kind::IpRanges, "read") => {
            let world = &*call.world;
            Ok(Reply::ok(Value::Array(
                world
                    .ip_ranges
                    .iter()
                    .map(|r| render::ip_range(world, r))
                    .collect(),
            )))
        }
        (Kind::IpRanges, "create") => create(call),
        (Kind::IpRange, "read") => {
            let index = find(call)?;
            let world = &*call.world;
            Ok(Reply::ok(render::ip_range(world, &world.ip_ranges[index])))
        }
        (Kind::IpRange, "update") => update(call),
        (Kind::IpRange, "delete") => {
            let index = find(call)?;
            check_owner(call, index)?;
            call.world.ip_ranges.remove(index);
            call.world.dirty = true;
            Ok(Reply::Empty(StatusCode::NO_CONTENT))
        }
        _ => Err(ApiError::internal(format!(
            "unhandled iprange action {action}"
        ))),
    }
}

fn find(call: &Call<'_>) -> Result<usize, ApiError> {
    let wanted = call.arg(0).trim();
    call.world
        .ip_ranges
        .iter()
        .position(|r| r.id.to_string() == wanted)
        .ok_or_else(|| ApiError::no_match("IPRange"))
}

fn check_owner(call: &Call<'_>, index: usize) -> Result<(), ApiError> {
    if call.caller.is_admin || call.world.ip_ranges[index].user == call.caller.username {
        Ok(())
    } else {
        Err(ApiError::text(
            StatusCode::FORBIDDEN,
            "Unable to modify IP range. You don't own the IP range.",
        ))
    }
}

fn both(message: String) -> ApiError {
    fields(&[("start_ip", message.clone()), ("end_ip", message)])
}

fn parse_ip(call: &Call<'_>, key: &str, current: Option<IpAddr>) -> Result<IpAddr, ApiError> {
    match call.params.get_nonempty(key) {
        Some(text) => text
            .trim()
            .parse()
            .map_err(|_| ApiError::field(key, "Enter a valid IPv4 or IPv6 address.")),
        None => current.ok_or_else(|| ApiError::required(key)),
    }
}

fn comment(call: &Call<'_>, current: &str) -> Result<String, ApiError> {
    let text = call.params.get("comment").unwrap_or(current).to_owned();
    ApiError::check_max_length("comment", 255, &text)?;
    Ok(text)
}

/// `IPRange.clean`: family, order, inside the subnet, not the network or broadcast address,
/// no overlap with another range of the subnet (a dynamic range also not over an address in
/// use).
fn validate(call: &Call<'_>, candidate: &IpRange) -> Result<(), ApiError> {
    let (start, end) = (candidate.start_ip, candidate.end_ip);
    if start.is_ipv4() != end.is_ipv4() {
        return Err(both(
            "Start IP address and end IP address must be in the same address family.".to_owned(),
        ));
    }
    if end < start {
        return Err(ApiError::field(
            "end_ip",
            "End IP address must not be less than Start IP address.",
        ));
    }
    let Some(subnet) = call.world.subnet(candidate.subnet_id) else {
        return Err(ApiError::required("subnet"));
    };
    let cidr: IpNet = subnet.cidr;
    if !cidr.contains(&start) && !cidr.contains(&end) {
        return Err(both(format!("IP addresses must be within subnet: {cidr}.")));
    }
    if !cidr.contains(&start) {
        return Err(ApiError::field(
            "start_ip",
            format!("Start IP address must be within subnet: {cidr}."),
        ));
    }
    if !cidr.contains(&end) {
        return Err(ApiError::field(
            "end_ip",
            format!("End IP address must be within subnet: {cidr}."),
        ));
    }
    if cidr.network() == start {
        return Err(ApiError::field(
            "start_ip",
            "Reserved network address cannot be included in IP range.",
        ));
    }
    if cidr.addr().is_ipv4() && cidr.broadcast() == end {
        return Err(ApiError::field(
            "end_ip",
            "Broadcast address cannot be included in IP range.",
        ));
    }
    let overlaps = call.world.ip_ranges.iter().any(|r| {
        r.id != candidate.id && r.subnet_id == candidate.subnet_id && r.overlaps(start, end)
    });
    let over_used = candidate.kind == RangeKind::Dynamic
        && call
            .world
            .used_ips(candidate.subnet_id)
            .iter()
            .any(|ip| crate::model::ip_in(start, end, *ip));
    if overlaps || over_used {
        let what = match candidate.kind {
            RangeKind::Reserved => "range",
            RangeKind::Dynamic => "IP address or range",
        };
        return Err(both(format!(
            "Requested {} range conflicts with an existing {what}.",
            candidate.kind.as_str()
        )));
    }
    Ok(())
}

fn create(call: &mut Call<'_>) -> Result<Reply, ApiError> {
    let kind = call.params.required_choice("type", RangeKind::parse)?;
    if kind == RangeKind::Dynamic && !call.caller.is_admin {
        return Err(ApiError::text(
            StatusCode::FORBIDDEN,
            "Unable to create dynamic IP range. You don't have sufficient privileges.",
        ));
    }
    let start_ip = parse_ip(call, "start_ip", None)?;
    let end_ip = parse_ip(call, "end_ip", None)?;
    let subnet_id = match call.params.get_nonempty("subnet") {
        Some(spec) => {
            let i = find_subnet(call, spec.trim())
                .ok_or_else(|| ApiError::invalid_model_choice("subnet"))?;
            call.world.subnets[i].id
        }
        // MAAS picks the best (most specific) subnet for start_ip.
        None => call
            .world
            .subnets
            .iter()
            .filter(|s| s.cidr.contains(&start_ip))
            .max_by_key(|s| s.cidr.prefix_len())
            .map(|s| s.id)
            .ok_or_else(|| ApiError::required("subnet"))?,
    };
    let candidate = IpRange {
        id: 0,
        kind,
        start_ip,
        end_ip,
        subnet_id,
        comment: comment(call, "")?,
        user: call.caller.username.clone(),
    };
    validate(call, &candidate)?;
    let range = IpRange {
        id: call.world.ip_ranges.iter().map(|r| r.id).max().unwrap_or(0) + 1,
        ..candidate
    };
    let value = render::ip_range(call.world, &range);
    call.world.ip_ranges.push(range);
    call.world.dirty = true;
    Ok(Reply::ok(value))
}

fn update(call: &mut Call<'_>) -> Result<Reply, ApiError> {
    let index = find(call)?;
    check_owner(call, index)?;
    let current = call.world.ip_ranges[index].clone();
    let updated = IpRange {
        start_ip: parse_ip(call, "start_ip", Some(current.start_ip))?,
        end_ip: parse_ip(call, "end_ip", Some(current.end_ip))?,
        comment: comment(call, &current.comment)?,
        ..current.clone()
    };
    validate(call, &updated)?;
    if updated != current {
        call.world.ip_ranges[index] = updated;
        call.world.dirty = true;
    }
    let world = &*call.world;
    Ok(Reply::ok(render::ip_range(world, &world.ip_ranges[index])))
}
