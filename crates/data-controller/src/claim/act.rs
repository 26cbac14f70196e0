//! `reconcile`: observe a MaasDataClaim's world from the reflector stores, [`decide`] the
//! step, and do its I/O. Status writes carry the claim's resourceVersion, so two replicas
//! never both record a rendering.

use capmaas_runtime::error::{Failed, failed};
use std::collections::BTreeMap;
use std::sync::Arc;

use capmaas_api::capi::Cluster;
use capmaas_api::{MaasDataClaim, MaasDataTemplate, keys};
use capmaas_runtime::controller::finalizer;
use capmaas_runtime::status::{self, Guard, now};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};
use tracing::{debug, info};

use crate::claim::addresses;
use crate::claim::decide::{Observed, Step, decide, recorded_data};
use crate::claim::rendered::{self, Rendering};
use crate::claim::status::{Outcome, claim_status, paused_status};
use crate::context::Ctx;
use crate::error::Result;
use crate::render;

/// Whether the claim, or the Cluster it is labelled with, is paused.
async fn is_paused(ctx: &Ctx, claim: &MaasDataClaim, ns: &str) -> Result<bool> {
    if claim.annotations().contains_key(keys::ANNOTATION_PAUSED) {
        return Ok(true);
    }
    let Some(cluster) = claim.labels().get(keys::LABEL_CLUSTER_NAME) else {
        return Ok(false);
    };
    let cluster = Api::<Cluster>::namespaced(ctx.base.client.clone(), ns)
        .get_opt(cluster)
        .await
        .map_err(failed("read Cluster"))?;
    Ok(cluster.is_some_and(|c| c.is_paused()))
}

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

async fn write_status(
    api: &Api<MaasDataClaim>,
    claim: &MaasDataClaim,
    status: &capmaas_api::data::MaasDataClaimStatus,
    ctx: &Ctx,
) -> Result<()> {
    let unchanged = claim.status.as_ref() == Some(status);
    status::write_status(
        api,
        claim,
        &ctx.base.field_manager,
        status,
        unchanged,
        Guard::ResourceVersion,
    )
    .await
    .map_err(failed("writing the status"))?;
    Ok(())
}

/// Reconciles one MaasDataClaim (the function the kit runs).
pub async fn reconcile(claim: Arc<MaasDataClaim>, ctx: Arc<Ctx>) -> Result<Action> {
    let ns = claim.namespace().ok_or(Failed::missing("namespace"))?;
    let api: Api<MaasDataClaim> = Api::namespaced(ctx.base.client.clone(), &ns);
    let template: Option<Arc<MaasDataTemplate>> = ctx
        .templates
        .get(&ObjectRef::new(&claim.spec.template.name).within(&ns));
    let paused = is_paused(&ctx, &claim, &ns).await?;
    let pools = template
        .as_ref()
        .map(|t| render::pools_of(&t.spec))
        .unwrap_or_default();
    let observed_addresses: BTreeMap<_, _> = addresses::observe(&ctx, &claim, &ns, &pools);
    if claim.metadata.deletion_timestamp.is_none() && !paused {
        addresses::protect(&ctx, &claim, &ns, &pools).await?;
    }
    let data = recorded_data(&claim).and_then(|n| ctx.data.get(&ObjectRef::new(n).within(&ns)));
    let step = decide(&Observed {
        claim: &claim,
        template: template.as_deref(),
        paused,
        data: data.as_deref(),
        addresses: &observed_addresses,
    });
    debug!(?step, "step");
    match step {
        Step::Done => Ok(Action::requeue(ctx.base.sync_period)),
        Step::Rendered => {
            // Conditions written by a replica whose caches lagged are set right (no write when
            // they already are).
            if let Some(data) = recorded_data(&claim) {
                let outcome = Outcome::Rendered(data.to_owned());
                write_outcome(&ctx, &api, &claim, &outcome).await?;
                crate::claim::index::delete_unrecorded(&ctx, &claim, &ns, data).await?;
            }
            Ok(Action::requeue(ctx.base.sync_period))
        }
        Step::HeldByConsumer => Ok(Action::await_change()),
        Step::Paused => {
            let status = paused_status(claim.status.as_ref(), claim.metadata.generation, &now());
            write_status(&api, &claim, &status, &ctx).await?;
            Ok(Action::await_change())
        }
        Step::Cleanup => {
            addresses::delete_all(&ctx, &claim, &ns).await?;
            crate::claim::cleanup::delete_data(&ctx, &claim, &ns).await?;
            finalizer::remove(
                &api,
                &claim,
                keys::FINALIZER_MAAS_DATA_CLAIM,
                &ctx.base.field_manager,
            )
            .await
            .map_err(failed("updating the finalizer"))?;
            info!("data claim released");
            Ok(Action::await_change())
        }
        Step::AddFinalizer => {
            finalizer::add(
                &api,
                &claim,
                keys::FINALIZER_MAAS_DATA_CLAIM,
                &ctx.base.field_manager,
            )
            .await
            .map_err(failed("updating the finalizer"))?;
            Ok(Action::await_change())
        }
        Step::WaitForTemplate => {
            let outcome = Outcome::TemplateMissing(claim.spec.template.name.clone());
            write_outcome(&ctx, &api, &claim, &outcome).await?;
            Ok(Action::await_change())
        }
        Step::ClaimAddresses(missing) => {
            addresses::create(&ctx, &claim, &ns, &missing).await?;
            let names: Vec<String> = missing
                .iter()
                .map(|p| format!("{} {}", p.kind, p.name))
                .collect();
            let outcome =
                Outcome::AddressesPending(format!("address claimed from {}", names.join(", ")));
            write_outcome(&ctx, &api, &claim, &outcome).await?;
            Ok(Action::await_change())
        }
        Step::WaitForAddresses(why) => {
            write_outcome(&ctx, &api, &claim, &Outcome::AddressesPending(why)).await?;
            Ok(Action::await_change())
        }
        Step::Render => {
            let Some(template) = template else {
                return Ok(Action::await_change());
            };
            match rendered::render(&ctx, &claim, &ns, &template, &observed_addresses).await? {
                Rendering::Done(data) => {
                    write_outcome(&ctx, &api, &claim, &Outcome::Rendered(data.clone())).await?;
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
                    write_outcome(&ctx, &api, &claim, &Outcome::RenderFailed(why)).await?;
                    Ok(Action::await_change())
                }
            }
        }
    }
}
