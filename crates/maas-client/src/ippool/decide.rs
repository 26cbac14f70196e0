//! The pure decisions of the MaasIPPool reconciler: the ranges a pool wants, which MAAS ranges
//! are ours, the plan, the finalizer step.

use std::net::IpAddr;

use capmaas_api::ipam::{IpPoolRange, MaasIPPoolSpec};
use capmaas_api::ipam_net::{Family, from_u128, to_u128};
use ipnet::IpNet;
use maas_api_client::{IpRange, IpRangeType};

use crate::error::Result;
use crate::ownership::Deletion;

/// MAAS keeps at most 255 characters of a range comment.
const MAX_COMMENT: usize = 255;

/// The comment that marks a MAAS range as this pool's.
pub fn comment(namespace: &str, name: &str) -> String {
    format!("capmaas MaasIPPool {namespace}/{name}")
        .chars()
        .take(MAX_COMMENT)
        .collect()
}

/// The addresses of a pool subnet MAAS accepts in a range: without the network address and,
/// for IPv4, the broadcast address (a /31 or /32 keeps all its addresses).
fn usable(net: IpNet) -> (IpAddr, IpAddr) {
    let (first, last) = (to_u128(net.network()), to_u128(net.broadcast()));
    let v6 = net.addr().is_ipv6();
    let tiny = if v6 {
        net.prefix_len() >= 127
    } else {
        net.prefix_len() >= 31
    };
    if tiny {
        return (net.network(), net.broadcast());
    }
    let last = if v6 { last } else { last - 1 };
    let family = Family::of(net.addr());
    (from_u128(family, first + 1), from_u128(family, last))
}

fn one_range(r: &IpPoolRange, index: usize) -> Result<(IpAddr, IpAddr), String> {
    let parse = |field: &str, s: &str| {
        s.trim()
            .parse::<IpAddr>()
            .map_err(|_| format!("spec.pools[{index}].{field}: {s:?} is not an IP address"))
    };
    match (&r.start, &r.end, &r.subnet) {
        (Some(start), Some(end), _) => {
            let (start, end) = (parse("start", start)?, parse("end", end)?);
            if start.is_ipv4() != end.is_ipv4() || to_u128(end) < to_u128(start) {
                return Err(format!("spec.pools[{index}]: {start}-{end} is not a range"));
            }
            Ok((start, end))
        }
        (_, _, Some(subnet)) => {
            let net: IpNet = subnet
                .trim()
                .parse()
                .map_err(|_| format!("spec.pools[{index}].subnet: {subnet:?} is not a CIDR"))?;
            Ok(usable(net.trunc()))
        }
        _ => Err(format!("spec.pools[{index}]: neither start-end nor subnet")),
    }
}

/// The ranges a pool wants reserved: one per pool entry (`start`-`end`, or the usable part of
/// `subnet`), overlapping or adjacent ones merged (MAAS refuses overlapping ranges), sorted.
pub fn wanted_ranges(spec: &MaasIPPoolSpec) -> Result<Vec<(IpAddr, IpAddr)>, String> {
    let mut ranges = spec
        .pools
        .iter()
        .enumerate()
        .map(|(i, r)| one_range(r, i))
        .collect::<Result<Vec<_>, _>>()?;
    ranges.sort_by_key(|(start, end)| (start.is_ipv6(), to_u128(*start), to_u128(*end)));
    let mut merged: Vec<(IpAddr, IpAddr)> = Vec::new();
    for (start, end) in ranges {
        match merged.last_mut() {
            Some(last)
                if last.1.is_ipv6() == start.is_ipv6()
                    && to_u128(start) <= to_u128(last.1).saturating_add(1) =>
            {
                if to_u128(end) > to_u128(last.1) {
                    last.1 = end;
                }
            }
            _ => merged.push((start, end)),
        }
    }
    Ok(merged)
}

/// A change of the pool's MAAS ranges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RangeAction {
    /// Reserve a new range.
    Create {
        /// First address.
        start: IpAddr,
        /// Last address.
        end: IpAddr,
    },
    /// Move one of ours.
    Update {
        /// MAAS id.
        id: i64,
        /// First address.
        start: IpAddr,
        /// Last address.
        end: IpAddr,
    },
    /// Delete one of ours.
    Delete {
        /// MAAS id.
        id: i64,
    },
}

/// The MAAS ranges that are this pool's: reserved, with exactly its comment.
pub fn ours<'a>(ranges: &'a [IpRange], comment: &str) -> Vec<&'a IpRange> {
    ranges
        .iter()
        .filter(|r| r.kind == IpRangeType::Reserved && r.comment == comment)
        .collect()
}

/// What makes `ours` (on subnet `subnet_id`) equal `wanted`: exact ranges kept, the others
/// of the subnet moved, the rest deleted or created. Deletions first, so moved and new ranges
/// do not overlap the old ones.
pub fn plan_ranges(
    wanted: &[(IpAddr, IpAddr)],
    ours: &[&IpRange],
    subnet_id: i64,
) -> Vec<RangeAction> {
    let on_subnet = |r: &IpRange| r.subnet.as_ref().is_none_or(|s| s.id == subnet_id);
    let mut left: Vec<(IpAddr, IpAddr)> = Vec::new();
    let mut kept: Vec<i64> = Vec::new();
    for &(start, end) in wanted {
        let exact = ours.iter().find(|r| {
            r.start_ip == start && r.end_ip == end && on_subnet(r) && !kept.contains(&r.id)
        });
        match exact {
            Some(r) => kept.push(r.id),
            None => left.push((start, end)),
        }
    }
    let movable: Vec<i64> = ours
        .iter()
        .filter(|r| !kept.contains(&r.id) && on_subnet(r))
        .map(|r| r.id)
        .collect();
    let mut movable = movable.into_iter();
    let mut updates = Vec::new();
    let mut creates = Vec::new();
    for (start, end) in left {
        match movable.next() {
            Some(id) => {
                kept.push(id);
                updates.push(RangeAction::Update { id, start, end });
            }
            None => creates.push(RangeAction::Create { start, end }),
        }
    }
    let mut actions: Vec<RangeAction> = ours
        .iter()
        .filter(|r| !kept.contains(&r.id))
        .map(|r| RangeAction::Delete { id: r.id })
        .collect();
    actions.extend(updates);
    actions.extend(creates);
    actions
}

/// What the finalizer asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolStep {
    /// Add the finalizer, then apply.
    AddThenApply,
    /// Reserve the ranges.
    Apply,
    /// Delete our ranges, then remove the finalizer (pool deleted, or `maasSubnet` dropped).
    CleanupThenRemove,
    /// Deleted by `clusterctl move`: remove the finalizer and leave the ranges to the pool's
    /// copy in the target cluster (the ranges' comment names the pool, which keeps its
    /// namespace and name).
    RemoveOnly,
    /// Nothing for MAAS.
    Nothing,
}

/// The step for a pool going as `deletion` says, with (or without) our finalizer, asking (or
/// not) for MAAS ranges.
pub fn pool_step(deletion: Deletion, has_finalizer: bool, wants: bool) -> PoolStep {
    if deletion == Deletion::Moving && has_finalizer {
        return PoolStep::RemoveOnly;
    }
    let deleting = deletion != Deletion::No;
    match (deleting, has_finalizer, wants) {
        (false, false, true) => PoolStep::AddThenApply,
        (false, true, true) => PoolStep::Apply,
        (_, true, _) => PoolStep::CleanupThenRemove,
        (_, false, _) => PoolStep::Nothing,
    }
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
