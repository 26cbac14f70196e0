//! The MaasIPPool reconciler: a pool with `spec.maasSubnet` has each of its
//! ranges reserved in MAAS as a `reserved` IP range, so MAAS never hands those addresses to
//! other machines. The ranges follow the pool's edits and are deleted with it (finalizer
//! [`FINALIZER_MAAS_IP_POOL_RANGES`]; data-controller holds its own pool finalizer).
//!
//! Ownership: a MAAS range is this pool's only when its comment is exactly
//! [`comment`] (`capmaas MaasIPPool <namespace>/<name>`); any other range (made by hand, by
//! another pool, dynamic ranges) is never modified or deleted. MAAS refusing a range (it
//! overlaps a dynamic or a foreign range) is reported in the `MAASRangesReserved` condition,
//! written by server-side apply with the gateway's field manager and containing only that
//! condition, so it does not fight data-controller over the address counts.

use std::net::IpAddr;
use std::sync::Arc;

use capmaas_api::conditions::{self as cond, reasons};
use capmaas_api::ipam::{IpPoolRange, MaasIPPoolSpec};
use capmaas_api::ipam_net::{Family, from_u128, to_u128};
use capmaas_api::keys::FINALIZER_MAAS_IP_POOL_RANGES;
use capmaas_api::{MaasIPPool, MaasIPPoolStatus};
use capmaas_runtime::conditions::{ConditionStatus, NewCondition, get_condition, set_condition};
use capmaas_runtime::controller::finalizer;
use capmaas_runtime::status::{apply_status, now};
use ipnet::IpNet;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use maas_api_client::{IpRange, IpRangeSpec, IpRangeType, MaasError};
use tracing::info;

use crate::context::Gateway;
use crate::error::{Error, Result};
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

/// Reconciles one MaasIPPool.
pub async fn reconcile(pool: Arc<MaasIPPool>, gw: Arc<Gateway>) -> Result<Action> {
    let api: Api<MaasIPPool> = Api::namespaced(
        gw.base.client.clone(),
        &pool.namespace().unwrap_or_default(),
    );
    let manager = &gw.base.field_manager;
    let step = pool_step(
        Deletion::of(pool.meta()),
        finalizer::has(pool.as_ref(), FINALIZER_MAAS_IP_POOL_RANGES),
        pool.spec.maas_subnet.is_some(),
    );
    match step {
        PoolStep::AddThenApply => {
            let pool = finalizer::add(&api, &pool, FINALIZER_MAAS_IP_POOL_RANGES, manager)
                .await
                .map_err(Error::Finalizer)?;
            apply(&pool, &gw, &api).await
        }
        PoolStep::Apply => apply(&pool, &gw, &api).await,
        PoolStep::CleanupThenRemove => {
            cleanup(&pool, &gw).await?;
            if pool.meta().deletion_timestamp.is_none() {
                // maasSubnet dropped: our condition goes with the ranges.
                apply_status(
                    &api,
                    &pool.name_any(),
                    manager,
                    &MaasIPPoolStatus::default(),
                )
                .await?;
            }
            finalizer::remove(&api, &pool, FINALIZER_MAAS_IP_POOL_RANGES, manager)
                .await
                .map_err(Error::Finalizer)?;
            Ok(Action::await_change())
        }
        PoolStep::RemoveOnly => {
            finalizer::remove(&api, &pool, FINALIZER_MAAS_IP_POOL_RANGES, manager)
                .await
                .map_err(Error::Finalizer)?;
            Ok(Action::await_change())
        }
        PoolStep::Nothing => Ok(Action::await_change()),
    }
}

async fn apply(pool: &MaasIPPool, gw: &Gateway, api: &Api<MaasIPPool>) -> Result<Action> {
    let resync = Action::requeue(gw.base.sync_period);
    let cidr = pool.spec.maas_subnet.clone().unwrap_or_default();
    let wanted = match wanted_ranges(&pool.spec) {
        Ok(w) => w,
        Err(message) => {
            report(pool, gw, api, false, reasons::INVALID_POOL, &message).await?;
            return Ok(resync);
        }
    };
    let net: Option<IpNet> = cidr.trim().parse::<IpNet>().ok().map(|n| n.trunc());
    let subnets = gw
        .maas
        .list_subnets()
        .await
        .map_err(Error::maas("list subnets"))?;
    let Some(subnet) = subnets.iter().find(|s| Some(s.cidr.trunc()) == net) else {
        let message = format!("MAAS has no subnet {cidr}");
        report(
            pool,
            gw,
            api,
            false,
            reasons::MAAS_SUBNET_MISMATCH,
            &message,
        )
        .await?;
        return Ok(resync);
    };
    if let Some((start, end)) = wanted
        .iter()
        .find(|(s, e)| !subnet.cidr.contains(s) || !subnet.cidr.contains(e))
    {
        let message = format!("range {start}-{end} is outside MAAS subnet {}", subnet.cidr);
        report(
            pool,
            gw,
            api,
            false,
            reasons::MAAS_SUBNET_MISMATCH,
            &message,
        )
        .await?;
        return Ok(resync);
    }
    let mark = comment(&pool.namespace().unwrap_or_default(), &pool.name_any());
    let existing = gw
        .maas
        .list_ipranges()
        .await
        .map_err(Error::maas("list IP ranges"))?;
    let mine = ours(&existing, &mark);
    let mut refusals = Vec::new();
    for action in plan_ranges(&wanted, &mine, subnet.id) {
        let outcome = match &action {
            RangeAction::Delete { id } => match gw.maas.delete_iprange(*id).await {
                Ok(()) | Err(MaasError::NotFound { .. }) => Ok(()),
                Err(e) => Err(e),
            },
            RangeAction::Update { id, start, end } => {
                let spec = IpRangeSpec::reserved(*start, *end, Some(subnet.id), &mark);
                gw.maas.update_iprange(*id, &spec).await.map(drop)
            }
            RangeAction::Create { start, end } => {
                let spec = IpRangeSpec::reserved(*start, *end, Some(subnet.id), &mark);
                gw.maas.create_iprange(&spec).await.map(drop)
            }
        };
        match outcome {
            Ok(()) => info!(pool = %pool.name_any(), ?action, "MAAS reserved range changed"),
            Err(e @ (MaasError::BadRequest { .. } | MaasError::Forbidden { .. })) => {
                let message = e.maas_message();
                let what = match action {
                    RangeAction::Create { start, end } | RangeAction::Update { start, end, .. } => {
                        format!("{start}-{end}")
                    }
                    RangeAction::Delete { id } => format!("range {id}"),
                };
                refusals.push(format!("{what}: {message}"));
            }
            Err(e) => return Err(Error::maas("change IP range")(e)),
        }
    }
    if refusals.is_empty() {
        let listed: Vec<String> = wanted.iter().map(|(s, e)| format!("{s}-{e}")).collect();
        let message = format!(
            "reserved in MAAS subnet {}: {}",
            subnet.cidr,
            listed.join(", ")
        );
        report(pool, gw, api, true, reasons::RECONCILED, &message).await?;
    } else {
        let message = format!("MAAS refused: {}", refusals.join("; "));
        report(pool, gw, api, false, reasons::MAAS_RANGE_REFUSED, &message).await?;
    }
    Ok(resync)
}

/// Writes `MAASRangesReserved` (alone, with the gateway's field manager) when it changed; a
/// Warning Event when it turns False with a new message.
async fn report(
    pool: &MaasIPPool,
    gw: &Gateway,
    api: &Api<MaasIPPool>,
    ok: bool,
    reason: &str,
    message: &str,
) -> Result<()> {
    let status = if ok {
        ConditionStatus::True
    } else {
        ConditionStatus::False
    };
    let previous = pool
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .and_then(|c| get_condition(c, cond::MAAS_RANGES_RESERVED))
        .cloned();
    let mut conditions: Vec<_> = previous.clone().into_iter().collect();
    let new = NewCondition::new(cond::MAAS_RANGES_RESERVED, status, reason)
        .message(message)
        .observed_generation(pool.metadata.generation);
    let changed = set_condition(&mut conditions, new, &now());
    if !changed && previous.is_some() {
        return Ok(());
    }
    let body = MaasIPPoolStatus {
        conditions: Some(conditions),
        ..MaasIPPoolStatus::default()
    };
    apply_status(api, &pool.name_any(), &gw.base.field_manager, &body).await?;
    if !ok {
        gw.base.events.warning(pool, reason, message).await;
    }
    Ok(())
}

/// Deletes this pool's MAAS ranges (wherever they are), never another's.
async fn cleanup(pool: &MaasIPPool, gw: &Gateway) -> Result<()> {
    let mark = comment(&pool.namespace().unwrap_or_default(), &pool.name_any());
    let existing = gw
        .maas
        .list_ipranges()
        .await
        .map_err(Error::maas("list IP ranges"))?;
    for range in ours(&existing, &mark) {
        match gw.maas.delete_iprange(range.id).await {
            Ok(()) | Err(MaasError::NotFound { .. }) => {}
            Err(e) => return Err(Error::maas("delete IP range")(e)),
        }
        info!(pool = %pool.name_any(), id = range.id, "deleted MAAS reserved range");
    }
    Ok(())
}

#[cfg(test)]
#[path = "ippool_tests.rs"]
mod tests;
