//! Writes on the MaasRemediation (status, Node backup) and on its Machine (the hand-back).

use capmaas_api::MaasRemediationStatus;
use capmaas_api::capi::Machine;
use capmaas_api::keys::FINALIZER_MAAS_REMEDIATION;
use capmaas_runtime::controller::finalizer;
use capmaas_runtime::error::failed;
use capmaas_runtime::status::Guard;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use crate::context::Ctx;
use crate::error::Result;
use crate::keys::{CONDITION_OWNER_REMEDIATED, REASON_WAITING_FOR_REMEDIATION};
use crate::node::Backup;
use crate::state::{State, api, namespace};

/// Applies `status`, guarded by the resourceVersion it was computed from: a status computed
/// from an outdated object fails with a conflict and the step loop reads again.
pub(crate) async fn write_status(
    ctx: &Ctx,
    state: &mut State,
    status: &MaasRemediationStatus,
) -> Result<()> {
    let r = &state.remediation;
    let written = capmaas_runtime::status::write_status(
        &api(ctx, r)?,
        r,
        &ctx.base.field_manager,
        status,
        false,
        Guard::ResourceVersion,
    )
    .await
    .map_err(failed("writing the status"))?;
    if let Some(written) = written {
        state.remediation = written;
    }
    Ok(())
}

/// Adds our finalizer.
pub(crate) async fn add_finalizer(ctx: &Ctx, state: &mut State) -> Result<()> {
    let r = &state.remediation;
    state.remediation = finalizer::add(
        &api(ctx, r)?,
        r,
        FINALIZER_MAAS_REMEDIATION,
        &ctx.base.field_manager,
    )
    .await
    .map_err(failed("adding the finalizer"))?;
    Ok(())
}

/// Removes our finalizer (the object may go at once).
pub(crate) async fn remove_finalizer(ctx: &Ctx, state: &mut State) -> Result<()> {
    let r = &state.remediation;
    let removed = finalizer::remove(
        &api(ctx, r)?,
        r,
        FINALIZER_MAAS_REMEDIATION,
        &ctx.base.field_manager,
    )
    .await
    .map_err(failed("removing the finalizer"))?;
    if let Some(r) = removed {
        state.remediation = r;
    }
    Ok(())
}

/// Records the Node's labels and annotations on the remediation (guarded by its
/// resourceVersion, so a second reconcile never records a Node it already fenced).
pub(crate) async fn record_backup(ctx: &Ctx, state: &mut State) -> Result<()> {
    let Some(node) = state.node() else {
        return Ok(());
    };
    let annotations = Backup::of(node)
        .to_annotations(&node.name_any())
        .map_err(failed("encoding the Node backup"))?;
    let r = &state.remediation;
    let patch = json!({
        "metadata": {"resourceVersion": r.resource_version(), "annotations": annotations}
    });
    let params = PatchParams {
        field_manager: Some(ctx.base.field_manager.clone()),
        ..PatchParams::default()
    };
    state.remediation = api(ctx, r)?
        .patch(&r.name_any(), &params, &Patch::Merge(&patch))
        .await
        .map_err(failed("recording the Node backup"))?;
    Ok(())
}

/// Sets the Machine's v1beta2 condition `OwnerRemediated=False` (reason
/// `WaitingForRemediation`, as the MachineHealthCheck writes it for machines without external
/// remediation), by server-side apply of that one list entry under our field manager: the
/// MachineSet or KubeadmControlPlane then deletes and replaces the Machine.
pub(crate) async fn hand_back_machine(
    ctx: &Ctx,
    state: &mut State,
    message: &str,
    now: &Time,
) -> Result<()> {
    let name = state.remediation.name_any();
    let body = json!({
        "apiVersion": Machine::api_version(&()),
        "kind": Machine::kind(&()),
        "metadata": {"name": name},
        "status": {"conditions": [{
            "type": CONDITION_OWNER_REMEDIATED,
            "status": "False",
            "reason": REASON_WAITING_FOR_REMEDIATION,
            "message": message,
            "lastTransitionTime": now,
        }]}
    });
    Api::<Machine>::namespaced(ctx.base.client.clone(), &namespace(&state.remediation)?)
        .patch_status(
            &name,
            &PatchParams::apply(&ctx.base.field_manager).force(),
            &Patch::Apply(&body),
        )
        .await
        .map_err(failed(format!("setting OwnerRemediated on Machine {name}")))?;
    state.owner_remediated = true;
    Ok(())
}
