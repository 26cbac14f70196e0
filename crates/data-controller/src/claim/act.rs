//! `reconcile`: observe a MaasDataClaim's world ([`State`]), [`decide`] the step, and do
//! its I/O. Status writes carry the claim's resourceVersion, so two replicas
//! never both record a rendering.

use std::sync::Arc;
use std::time::Duration;

use capmaas_api::common::PoolReference;

use capmaas_api::{MaasDataClaim, keys};
use capmaas_runtime::status::{Guard, now};
use kube::Api;
use kube::runtime::controller::Action;
use tracing::{debug, info};

use crate::claim::decide::{Step, decide, recorded_data};
use crate::claim::rendered::{self, Rendering};
use crate::claim::state::State;
use crate::claim::status::{Outcome, claim_status, paused_status};
use crate::claim::{addresses, handover};
use crate::context::Ctx;
use crate::error::Result;
use crate::writes;

/// Writes the claim status for `outcome` when it changed.
async fn write_outcome(
    ctx: &Ctx,
    api: &Api<MaasDataClaim>,
    claim: &MaasDataClaim,
    outcome: &Outcome,
) -> Result<()> {
    let status = claim_status(
        claim.status.as_ref(),
        outcome,
        claim.metadata.generation,
        &now(),
    );
    write_status(api, claim, &status, ctx).await
}

/// Writes the claim status when it changed, guarded by the resourceVersion the claim was
/// read at.
async fn write_status(
    api: &Api<MaasDataClaim>,
    claim: &MaasDataClaim,
    status: &capmaas_api::data::MaasDataClaimStatus,
    ctx: &Ctx,
) -> Result<()> {
    let unchanged = claim.status.as_ref() == Some(status);
    writes::write_status(
        &ctx.base,
        api,
        claim,
        status,
        unchanged,
        Guard::ResourceVersion,
    )
    .await?;
    Ok(())
}

/// How soon a claim looks again while the host's previous data claim hands its addresses over
/// (those writes wake the previous claim, not this one).
const HANDOVER_RETRY: Duration = Duration::from_secs(2);

/// Takes over the holds of `pools` for the claim's host, read fresh; returns the pools taken
/// over.
async fn take_over(
    ctx: &Ctx,
    claim: &MaasDataClaim,
    ns: &str,
    pools: &[PoolReference],
) -> Result<Vec<PoolReference>> {
    let held = handover::live_holds(ctx, claim, ns, pools).await?;
    if held.is_empty() {
        return Ok(Vec::new());
    }
    let machine = addresses::machine_of(ctx, claim, ns).await?;
    handover::adopt(ctx, claim, ns, &held, machine.as_deref()).await
}

/// `<kind> <name>, ...` of pools, for messages.
fn pool_names(pools: &[PoolReference]) -> String {
    let names: Vec<String> = pools
        .iter()
        .map(|p| format!("{} {}", p.kind, p.name))
        .collect();
    names.join(", ")
}

/// Reconciles one MaasDataClaim (the function the kit runs).
pub async fn reconcile(claim: Arc<MaasDataClaim>, ctx: Arc<Ctx>) -> Result<Action> {
    let state = State::observe(&ctx, claim).await?;
    let (claim, ns) = (&state.claim, state.ns.as_str());
    let api: Api<MaasDataClaim> = Api::namespaced(ctx.base.client.clone(), ns);
    if claim.metadata.deletion_timestamp.is_none() && !state.paused {
        addresses::protect(&ctx, claim, ns, &state.pools).await?;
    }
    let step = decide(&state.observed());
    debug!(?step, "step");
    match step {
        Step::Done => Ok(Action::requeue(ctx.base.sync_period)),
        Step::Rendered => {
            // Conditions written by a replica whose caches lagged are set right (no write when
            // they already are).
            if let Some(data) = recorded_data(claim) {
                let outcome = Outcome::Rendered(data.to_owned());
                write_outcome(&ctx, &api, claim, &outcome).await?;
                crate::claim::index::delete_unrecorded(&ctx, claim, ns, data).await?;
            }
            Ok(Action::requeue(ctx.base.sync_period))
        }
        Step::HeldByConsumer => Ok(Action::await_change()),
        Step::Paused => {
            let status = paused_status(claim.status.as_ref(), claim.metadata.generation, &now());
            write_status(&api, claim, &status, &ctx).await?;
            Ok(Action::await_change())
        }
        Step::Cleanup => {
            handover::release_addresses(&ctx, claim, ns).await?;
            crate::claim::cleanup::delete_data(&ctx, claim, ns).await?;
            writes::remove_finalizer(&ctx.base, &api, claim, keys::FINALIZER_MAAS_DATA_CLAIM)
                .await?;
            info!("data claim released");
            Ok(Action::await_change())
        }
        Step::AddFinalizer => {
            writes::add_finalizer(&ctx.base, &api, claim, keys::FINALIZER_MAAS_DATA_CLAIM).await?;
            Ok(Action::await_change())
        }
        Step::WaitForTemplate => {
            let outcome = Outcome::TemplateMissing(claim.spec.template.name.clone());
            write_outcome(&ctx, &api, claim, &outcome).await?;
            Ok(Action::await_change())
        }
        Step::AdoptAddresses(held) => {
            let pools: Vec<_> = held.iter().map(|(p, _)| p.clone()).collect();
            let taken = take_over(&ctx, claim, ns, &pools).await?;
            let outcome = Outcome::AddressesPending(format!(
                "address of the host's previous machine taken over from {}",
                pool_names(&taken)
            ));
            write_outcome(&ctx, &api, claim, &outcome).await?;
            Ok(Action::requeue(HANDOVER_RETRY))
        }
        Step::WaitForHandover(why) => {
            write_outcome(&ctx, &api, claim, &Outcome::AddressesPending(why)).await?;
            Ok(Action::requeue(HANDOVER_RETRY))
        }
        Step::ClaimAddresses(missing) => {
            // A hold the cache does not show yet is taken over rather than a new address made.
            let taken = take_over(&ctx, claim, ns, &missing).await?;
            let missing: Vec<PoolReference> =
                missing.into_iter().filter(|p| !taken.contains(p)).collect();
            if missing.is_empty() {
                return Ok(Action::requeue(HANDOVER_RETRY));
            }
            addresses::create(&ctx, claim, ns, &missing).await?;
            let outcome =
                Outcome::AddressesPending(format!("address claimed from {}", pool_names(&missing)));
            write_outcome(&ctx, &api, claim, &outcome).await?;
            Ok(Action::await_change())
        }
        Step::WaitForAddresses(why) => {
            write_outcome(&ctx, &api, claim, &Outcome::AddressesPending(why)).await?;
            Ok(Action::await_change())
        }
        Step::Render => {
            let Some(template) = &state.template else {
                return Ok(Action::await_change());
            };
            match rendered::render(&ctx, claim, ns, template, &state.addresses).await? {
                Rendering::Done(data) => {
                    write_outcome(&ctx, &api, claim, &Outcome::Rendered(data.clone())).await?;
                    let note = format!("rendered into MaasData {data}");
                    ctx.base
                        .events
                        .normal(claim.as_ref(), "Rendered", &note)
                        .await;
                    Ok(Action::requeue(ctx.base.sync_period))
                }
                Rendering::Failed(why) => {
                    if claim.status.as_ref().and_then(|s| s.error_message.as_ref()) != Some(&why) {
                        ctx.base
                            .events
                            .warning(claim.as_ref(), "RenderFailed", &why)
                            .await;
                    }
                    write_outcome(&ctx, &api, claim, &Outcome::RenderFailed(why)).await?;
                    Ok(Action::await_change())
                }
            }
        }
    }
}
