//! `reconcile` for MaasIPPools: reads MAAS, applies the plan of [`super::decide`], reports it in the pool's status.

use capmaas_runtime::error::failed;
use std::net::IpAddr;
use std::sync::Arc;

use capmaas_api::conditions::{self as cond, reasons};
use capmaas_api::keys::FINALIZER_MAAS_IP_POOL_RANGES;
use capmaas_api::{MaasIPPool, MaasIPPoolStatus};
use capmaas_runtime::conditions::{ConditionStatus, NewCondition, get_condition, set_condition};
use capmaas_runtime::controller::finalizer;
use capmaas_runtime::status::{apply_status, now};
use ipnet::IpNet;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use maas_api_client::{IpRange, IpRangeSpec, MaasError, Subnet};
use tracing::info;

use super::decide::{PoolStep, RangeAction, comment, ours, plan_ranges, pool_step, wanted_ranges};
use crate::context::Gateway;
use crate::error::{Error, Result};
use crate::ownership::Deletion;

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
                .map_err(failed("updating the finalizer"))?;
            apply(&pool, &gw, &api).await
        }
        PoolStep::Apply => apply(&pool, &gw, &api).await,
        PoolStep::CleanupThenRemove => {
            cleanup(&pool, &gw).await?;
            if pool.meta().deletion_timestamp.is_none() {
                // maasSubnet dropped: our condition goes with the ranges.
                let cleared = MaasIPPoolStatus::default();
                apply_status(&api, &pool.name_any(), manager, &cleared).await?;
            }
            remove_finalizer(&api, &pool, manager).await
        }
        PoolStep::RemoveOnly => remove_finalizer(&api, &pool, manager).await,
        PoolStep::Nothing => Ok(Action::await_change()),
    }
}

async fn remove_finalizer(
    api: &Api<MaasIPPool>,
    pool: &MaasIPPool,
    manager: &str,
) -> Result<Action> {
    finalizer::remove(api, pool, FINALIZER_MAAS_IP_POOL_RANGES, manager)
        .await
        .map_err(failed("updating the finalizer"))?;
    Ok(Action::await_change())
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
    let subnets = gw
        .maas
        .list_subnets()
        .await
        .map_err(Error::maas("list subnets"))?;
    let subnet = match matching_subnet(&subnets, &cidr, &wanted) {
        Ok(subnet) => subnet,
        Err(message) => {
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
    };
    let (mark, existing) = marked_ranges(pool, gw).await?;
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

/// The MAAS subnet that is `cidr` and holds every wanted range; otherwise why not, for the
/// `MAASSubnetMismatch` condition.
fn matching_subnet<'a>(
    subnets: &'a [Subnet],
    cidr: &str,
    wanted: &[(IpAddr, IpAddr)],
) -> std::result::Result<&'a Subnet, String> {
    let net: Option<IpNet> = cidr.trim().parse::<IpNet>().ok().map(|n| n.trunc());
    let Some(subnet) = subnets.iter().find(|s| Some(s.cidr.trunc()) == net) else {
        return Err(format!("MAAS has no subnet {cidr}"));
    };
    match wanted
        .iter()
        .find(|(s, e)| !subnet.cidr.contains(s) || !subnet.cidr.contains(e))
    {
        Some((start, end)) => Err(format!(
            "range {start}-{end} is outside MAAS subnet {}",
            subnet.cidr
        )),
        None => Ok(subnet),
    }
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

/// The comment that marks this pool's MAAS ranges, and every MAAS range (the caller picks
/// the marked ones with [`ours`]).
async fn marked_ranges(pool: &MaasIPPool, gw: &Gateway) -> Result<(String, Vec<IpRange>)> {
    let mark = comment(&pool.namespace().unwrap_or_default(), &pool.name_any());
    let existing = gw
        .maas
        .list_ipranges()
        .await
        .map_err(Error::maas("list IP ranges"))?;
    Ok((mark, existing))
}

/// Deletes this pool's MAAS ranges (wherever they are), never another's.
async fn cleanup(pool: &MaasIPPool, gw: &Gateway) -> Result<()> {
    let (mark, existing) = marked_ranges(pool, gw).await?;
    for range in ours(&existing, &mark) {
        match gw.maas.delete_iprange(range.id).await {
            Ok(()) | Err(MaasError::NotFound { .. }) => {}
            Err(e) => return Err(Error::maas("delete IP range")(e)),
        }
        info!(pool = %pool.name_any(), id = range.id, "deleted MAAS reserved range");
    }
    Ok(())
}
