//! The MaasDataClaim of a MaasMachine with `spec.dataTemplate`: made once a host is claimed
//! (the rendering reads the host's interfaces and labels), awaited before the deployment is
//! requested, and let go only once the host is released, so an address is never handed to
//! another machine while the old server may still answer on it.
//!
//! The claim is named after the MaasMachine, owned by it (garbage collection is the backstop)
//! and carries our finalizer, which keeps it — and so its index and addresses — even when
//! something else deletes it early; data-controller releases nothing while it is there.

use capmaas_api::common::LocalObjectReference;
use capmaas_api::data::MaasDataClaimSpec;
use capmaas_api::{MaasDataClaim, keys};
use capmaas_runtime::controller::Flow;
use capmaas_runtime::controller::finalizer;
use capmaas_runtime::error::{Failed, failed};
use capmaas_runtime::trace_context;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams, Preconditions};
use kube::{Resource, ResourceExt};

use crate::context::Ctx;
use crate::error::Result;
use crate::state::{State, namespace};

/// Creates the claim for the claimed host.
pub(crate) async fn create_claim(ctx: &Ctx, state: &mut State) -> Result<Flow> {
    let (Some(template), Some(host)) = (&state.mm.spec.data_template, &state.host) else {
        return Ok(Flow::Continue);
    };
    let ns = namespace(&state.mm)?;
    let owner = state
        .mm
        .controller_owner_ref(&())
        .ok_or(Failed::missing("uid"))?;
    let mut labels = std::collections::BTreeMap::new();
    if let Some(cluster) = state.mm.labels().get(keys::LABEL_CLUSTER_NAME) {
        labels.insert(keys::LABEL_CLUSTER_NAME.to_owned(), cluster.clone());
    }
    let mut claim = MaasDataClaim::new(
        &state.mm.name_any(),
        MaasDataClaimSpec {
            template: LocalObjectReference::new(template.name.clone()),
            host_ref: Some(crate::choose::host_ref(&state.mm, host)),
        },
    );
    claim.metadata = ObjectMeta {
        name: Some(state.mm.name_any()),
        labels: Some(labels),
        owner_references: Some(vec![owner]),
        finalizers: Some(vec![keys::FINALIZER_MAAS_MACHINE.to_owned()]),
        ..ObjectMeta::default()
    };
    // data-controller's rendering joins this machine's trace.
    trace_context::stamp(&mut claim.metadata);
    let api: Api<MaasDataClaim> = Api::namespaced(ctx.base.client.clone(), &ns);
    state.data_claim = match api.create(&PostParams::default(), &claim).await {
        Ok(made) => Some(made),
        // Made by an earlier attempt (or a replica): read it; one of another MaasMachine of
        // the same name (not ours) is reported by waiting on it.
        Err(kube::Error::Api(e)) if e.code == 409 => api
            .get_opt(&state.mm.name_any())
            .await
            .map_err(failed("reading the MaasDataClaim"))?,
        Err(e) => return Err(failed("creating the MaasDataClaim")(e).into()),
    };
    let note = format!("claimed data from MaasDataTemplate {}", template.name);
    ctx.base
        .events
        .normal(&state.mm, "DataClaimed", &note)
        .await;
    Ok(Flow::Continue)
}

/// Deleting, the host released: drops our finalizer from the claim and deletes it.
pub(crate) async fn release(ctx: &Ctx, state: &mut State) -> Result<Flow> {
    let Some(claim) = state.data_claim.take() else {
        return Ok(Flow::Continue);
    };
    let ns = namespace(&state.mm)?;
    let api: Api<MaasDataClaim> = Api::namespaced(ctx.base.client.clone(), &ns);
    finalizer::remove(
        &api,
        &claim,
        keys::FINALIZER_MAAS_MACHINE,
        &ctx.base.field_manager,
    )
    .await
    .map_err(failed("releasing the MaasDataClaim"))?;
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: claim.uid(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(&claim.name_any(), &params).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if matches!(e.code, 404 | 409) => {}
        Err(e) => return Err(failed("deleting the MaasDataClaim")(e).into()),
    }
    state.data = None;
    Ok(Flow::Continue)
}
