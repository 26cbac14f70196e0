//! `reconcile`: observe a MaasDataTemplate's MaasData, let go of the orphaned ones,
//! [`decide`] the step, and do its I/O.

use capmaas_runtime::error::failed;
use std::sync::Arc;

use capmaas_api::{MaasData, MaasDataClaim, MaasDataTemplate, keys};
use capmaas_runtime::status::now;
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use tracing::info;

use crate::context::Ctx;
use crate::error::Result;
use crate::template::decide::{Step, claim_uid_of, decide};
use crate::template::state::State;
use crate::template::status::template_status;
use crate::writes;

/// Removes our finalizer from an orphaned MaasData once the API server, not only the cache,
/// shows its claim gone or re-created.
async fn let_go_of_orphan(ctx: &Ctx, ns: &str, data: &MaasData) -> Result<()> {
    let claim = Api::<MaasDataClaim>::namespaced(ctx.base.client.clone(), ns)
        .get_opt(&data.spec.claim.name)
        .await
        .map_err(failed("get MaasDataClaim"))?;
    if claim.and_then(|c| c.uid()) == claim_uid_of(data) {
        return Ok(());
    }
    let api: Api<MaasData> = Api::namespaced(ctx.base.client.clone(), ns);
    writes::remove_finalizer(&ctx.base, &api, data, keys::FINALIZER_MAAS_DATA).await?;
    info!(data = %data.name_any(), claim = %data.spec.claim.name, "MaasData of a claim that is gone let go");
    Ok(())
}

/// Reconciles one MaasDataTemplate.
pub async fn reconcile(template: Arc<MaasDataTemplate>, ctx: Arc<Ctx>) -> Result<Action> {
    let state = State::observe(&ctx, template)?;
    let (template, ns) = (&state.template, state.ns.as_str());
    for orphan in &state.orphans {
        let_go_of_orphan(&ctx, ns, orphan).await?;
    }
    let api: Api<MaasDataTemplate> = Api::namespaced(ctx.base.client.clone(), ns);
    match decide(&state.observed()) {
        Step::RemoveFinalizer => {
            let key = keys::FINALIZER_MAAS_DATA_TEMPLATE;
            writes::remove_finalizer(&ctx.base, &api, template, key).await?;
            Ok(Action::await_change())
        }
        Step::Done => Ok(Action::await_change()),
        Step::AddFinalizer => {
            let key = keys::FINALIZER_MAAS_DATA_TEMPLATE;
            writes::add_finalizer(&ctx.base, &api, template, key).await?;
            Ok(Action::await_change())
        }
        Step::WriteStatus => {
            let status = template_status(
                template.status.as_ref(),
                &state.data,
                template.metadata.deletion_timestamp.is_some(),
                template.metadata.generation,
                &now(),
            );
            if template.status.as_ref() != Some(&status) {
                writes::apply_status(&ctx.base, &api, &template.name_any(), &status).await?;
            }
            Ok(Action::requeue(ctx.base.sync_period))
        }
    }
}
