//! The writes every path shares: finalizer, endpoint, status, Events.

use capmaas_api::cluster::ApiEndpoint;
use capmaas_api::conditions as cond;
use capmaas_api::keys::FINALIZER_MAAS_CLUSTER;
use capmaas_api::{MaasCluster, MaasClusterStatus};
use capmaas_runtime::{apply_status, error_chain};
use kube::api::{Patch, PatchParams};
use kube::runtime::events::{Event, EventType};
use kube::{Api, Resource, ResourceExt};
use serde_json::json;
use tracing::{debug, info};

use crate::controller::Ctx;
use crate::error::{Error, Result};

/// Adds or removes our finalizer with a resourceVersion precondition, so a concurrent change
/// to the list is never overwritten (the write fails and is retried instead).
pub(crate) async fn set_finalizers(
    api: &Api<MaasCluster>,
    mc: &MaasCluster,
    present: bool,
) -> Result<MaasCluster> {
    let mut finalizers: Vec<String> = mc
        .finalizers()
        .iter()
        .filter(|f| *f != FINALIZER_MAAS_CLUSTER)
        .cloned()
        .collect();
    if present {
        finalizers.push(FINALIZER_MAAS_CLUSTER.to_owned());
    }
    let patch = json!({
        "metadata": {
            "finalizers": finalizers,
            "resourceVersion": mc.resource_version(),
        }
    });
    api.patch(
        &mc.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map_err(Error::kube("patch MaasCluster finalizers"))
}

pub(crate) async fn set_endpoint(
    api: &Api<MaasCluster>,
    mc: &MaasCluster,
    endpoint: &ApiEndpoint,
) -> Result<MaasCluster> {
    let patch = json!({ "spec": { "controlPlaneEndpoint": endpoint } });
    let updated = api
        .patch(
            &mc.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .map_err(Error::kube("patch MaasCluster spec.controlPlaneEndpoint"))?;
    info!(
        host = endpoint.host,
        port = endpoint.port,
        "control-plane endpoint set"
    );
    Ok(updated)
}

/// Applies the status unless it is already what the API server holds (no write, no event storm).
pub(crate) async fn write_status(
    api: &Api<MaasCluster>,
    mc: &MaasCluster,
    status: &MaasClusterStatus,
    ctx: &Ctx,
) -> Result<()> {
    if mc.status.as_ref() == Some(status) {
        return Ok(());
    }
    apply_status(api, &mc.name_any(), &ctx.field_manager, status)
        .await
        .map_err(Error::Status)?;
    Ok(())
}

/// An Event when the workload API server becomes available or stops answering.
pub(crate) async fn announce_api_server(
    ctx: &Ctx,
    mc: &MaasCluster,
    before: Option<&MaasClusterStatus>,
    after: &MaasClusterStatus,
) {
    let status_of = |s: Option<&MaasClusterStatus>| {
        s.and_then(|s| s.conditions.as_deref())
            .and_then(|c| capmaas_runtime::get_condition(c, cond::API_SERVER_AVAILABLE))
            .map(|c| (c.status.clone(), c.message.clone()))
    };
    let (old, new) = (status_of(before), status_of(Some(after)));
    match (old.as_ref().map(|o| o.0.as_str()), new) {
        (Some("True"), Some((s, _))) if s == "True" => {}
        (_, Some((s, message))) if s == "True" => {
            publish(ctx, mc, EventType::Normal, "APIServerAvailable", &message).await;
        }
        (Some("True"), Some((s, message))) if s == "False" => {
            publish(
                ctx,
                mc,
                EventType::Warning,
                "APIServerUnavailable",
                &message,
            )
            .await;
        }
        _ => {}
    }
}

pub(crate) async fn publish(
    ctx: &Ctx,
    mc: &MaasCluster,
    type_: EventType,
    reason: &str,
    note: &str,
) {
    let event = Event {
        type_,
        reason: reason.to_owned(),
        note: Some(note.to_owned()),
        action: "Reconcile".to_owned(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&event, &mc.object_ref(&())).await {
        // Events are for humans; failing to record one must not fail the reconcile.
        debug!(reason, error = %error_chain(&e), "cannot publish event");
    }
}
