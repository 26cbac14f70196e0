//! `reconcile` of an IPAddressClaim that is a hold: keep it while its host waits for the next
//! machine, release it otherwise. Anything else (a data claim's address) is left alone.

use std::sync::Arc;

use capmaas_api::capi_ipam::IPAddressClaim;
use capmaas_api::{MaasHost, keys};
use capmaas_runtime::controller::finalizer;
use capmaas_runtime::error::failed;
use kube::api::{Api, DeleteParams, Preconditions};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use tracing::info;

use crate::context::Ctx;
use crate::error::Result;
use crate::hold::decide::{Hold, HoldStep, hold_step, host_of};
use crate::writes;

/// Deletes the hold `ip_claim` exactly as read (UID and resourceVersion: a hold taken over
/// meanwhile is left alone), then takes the in-use finalizer off so its pool frees the address.
/// Returns whether it was released.
pub async fn release(ctx: &Ctx, ip_claim: &IPAddressClaim, why: &str) -> Result<bool> {
    let ns = ip_claim.namespace().unwrap_or_default();
    let api: Api<IPAddressClaim> = Api::namespaced(ctx.base.client.clone(), &ns);
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: ip_claim.uid(),
            resource_version: ip_claim.resource_version(),
        }),
        ..DeleteParams::default()
    };
    match api.delete(&ip_claim.name_any(), &params).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if matches!(e.code, 404 | 409) => return Ok(false),
        Err(e) => return Err(failed("delete held IPAddressClaim")(e).into()),
    }
    let in_use = keys::FINALIZER_ADDRESS_IN_USE;
    if finalizer::has(ip_claim, in_use) {
        writes::remove_finalizer(&ctx.base, &api, ip_claim, in_use).await?;
    }
    info!(ipaddressclaim = %ip_claim.name_any(), why, "address hold released");
    Ok(true)
}

/// Reconciles one IPAddressClaim of the data claims' store: a hold is kept or released.
pub async fn reconcile(ip_claim: Arc<IPAddressClaim>, ctx: Arc<Ctx>) -> Result<Action> {
    let Some(hold) = Hold::of(&ip_claim) else {
        return Ok(Action::await_change());
    };
    if ip_claim.meta().deletion_timestamp.is_some() {
        // Deleted by hand: released like any address of a released claim.
        release(&ctx, &ip_claim, "deleted").await?;
        return Ok(Action::await_change());
    }
    let host = Api::<MaasHost>::namespaced(ctx.base.client.clone(), &hold.host_namespace)
        .get_opt(&hold.host)
        .await
        .map_err(failed("read MaasHost"))?;
    let held_for = Some((hold.host_namespace.clone(), hold.host.clone()));
    let successor = ctx.claims.state().into_iter().find(|c| {
        c.namespace().as_deref() == Some(hold.namespace.as_str())
            && c.metadata.deletion_timestamp.is_none()
            && host_of(c) == held_for
    });
    let now = capmaas_runtime::status::now().0;
    match hold_step(&hold, host.as_ref(), successor.as_deref(), now) {
        HoldStep::Keep(left) => Ok(Action::requeue(left.min(ctx.base.sync_period))),
        HoldStep::Release(why) => {
            release(&ctx, &ip_claim, &why).await?;
            Ok(Action::await_change())
        }
    }
}
