//! The `MaasIPPool` reconciler: its finalizer, and its status — addresses in use and free
//! (the printer columns), `PoolValid` with the layout error naming the field, `Ready`,
//! `Paused`. A deleted pool waits until none of its `IPAddress`es is left.

use capmaas_runtime::error::Failed;
use std::sync::Arc;

use capmaas_api::keys::FINALIZER_MAAS_IP_POOL;
use capmaas_api::{MaasIPPool, MaasIPPoolStatus};
use capmaas_runtime::status::{Guard, now};
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use tracing::{debug, info};

use super::context::Ctx;
use super::decide::{PoolStep, decide_pool};
use super::error::Result;
use super::index::PoolKey;
use super::status::{PoolFacts, owned_pool_status, paused_pool_status, pool_status};
use crate::writes;

/// Reconciles one `MaasIPPool` (the function the kit runs).
pub async fn reconcile(pool: Arc<MaasIPPool>, ctx: Arc<Ctx>) -> Result<Action> {
    if !ctx.wait_synced().await {
        return Ok(Action::await_change());
    }
    let ns = pool.namespace().ok_or(Failed::missing("namespace"))?;
    let api: Api<MaasIPPool> = Api::namespaced(ctx.base.client.clone(), &ns);
    let key = PoolKey::of(&pool);
    let mut pool = pool.as_ref().clone();
    let paused = ctx.pool_pause(&pool);
    let objects = ctx.index().objects(&key);
    let step = decide_pool(&pool, paused.as_deref(), objects);
    debug!(?step, "step");
    let waiting_for = match step {
        PoolStep::Forget => return Ok(Action::await_change()),
        PoolStep::Paused(why) => {
            let status = paused_pool_status(&pool, &why, &now());
            write_status(&api, &pool, &status, &ctx).await?;
            return Ok(Action::await_change());
        }
        PoolStep::RemoveFinalizer => {
            writes::remove_finalizer(&ctx.base, &api, &pool, FINALIZER_MAAS_IP_POOL).await?;
            info!("pool has no address left; finalizer removed");
            return Ok(Action::await_change());
        }
        PoolStep::AddFinalizer => {
            pool = writes::add_finalizer(&ctx.base, &api, &pool, FINALIZER_MAAS_IP_POOL).await?;
            None
        }
        PoolStep::WaitForAddresses(n) => Some(n),
        PoolStep::Status => None,
    };
    let (layout, counts, stranded) = {
        let mut index = ctx.index();
        let layout = index.layout(&pool);
        (layout, index.counts(&key), index.stranded(&key))
    };
    let condition_true = |type_: &str| {
        pool.status
            .as_ref()
            .and_then(|s| s.conditions.as_deref())
            .and_then(|c| capmaas_runtime::get_condition(c, type_))
            .map(|c| c.status == "True")
    };
    let was_valid = condition_true(capmaas_api::conditions::POOL_VALID);
    let was_in_pool = condition_true(capmaas_api::conditions::ADDRESSES_IN_POOL);
    let status = pool_status(
        &pool,
        PoolFacts {
            layout: &layout,
            counts,
            waiting_for,
            stranded: &stranded,
        },
        &now(),
    );
    write_status(&api, &pool, &status, &ctx).await?;
    if let Err(e) = &layout
        && was_valid != Some(false)
    {
        ctx.base
            .events
            .warning(&pool, "InvalidPool", &e.to_string())
            .await;
    }
    if !stranded.is_empty() && was_in_pool != Some(false) {
        let message = status
            .conditions
            .as_deref()
            .and_then(|c| {
                capmaas_runtime::get_condition(c, capmaas_api::conditions::ADDRESSES_IN_POOL)
            })
            .map(|c| c.message.clone())
            .unwrap_or_default();
        ctx.base
            .events
            .warning(
                &pool,
                capmaas_api::conditions::reasons::ADDRESSES_STRANDED,
                &message,
            )
            .await;
    }
    Ok(Action::await_change())
}

async fn write_status(
    api: &Api<MaasIPPool>,
    pool: &MaasIPPool,
    status: &MaasIPPoolStatus,
    ctx: &Ctx,
) -> Result<()> {
    let unchanged = owned_pool_status(pool.status.as_ref()) == *status;
    writes::write_status(&ctx.base, api, pool, status, unchanged, Guard::None).await?;
    Ok(())
}
