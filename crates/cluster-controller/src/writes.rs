//! The writes the passes share: endpoint, status, and the Events that announce the API server.

use capmaas_api::cluster::ApiEndpoint;
use capmaas_api::conditions as cond;
use capmaas_api::{MaasCluster, MaasClusterStatus};
use capmaas_runtime::controller::workload::reason::{KUBECONFIG_INVALID, KUBECONFIG_REFUSED};
use capmaas_runtime::error::failed;
use capmaas_runtime::status::{self, Guard};
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use tracing::info;

use crate::context::Ctx;
use crate::error::Result;

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
        .map_err(failed("patch MaasCluster spec.controlPlaneEndpoint"))?;
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
    let unchanged = mc.status.as_ref() == Some(status);
    status::write_status(
        api,
        mc,
        &ctx.base.field_manager,
        status,
        unchanged,
        Guard::None,
    )
    .await
    .map_err(failed("writing the status"))?;
    Ok(())
}

/// An Event when the workload API server becomes available or stops answering, and a Warning
/// naming the reason when its kubeconfig is refused or unusable (a person must fix the Secret).
pub(crate) async fn announce_api_server(
    ctx: &Ctx,
    mc: &MaasCluster,
    before: Option<&MaasClusterStatus>,
    after: &MaasClusterStatus,
) {
    let condition = |s: Option<&MaasClusterStatus>| {
        s.and_then(|s| s.conditions.as_deref())
            .and_then(|c| capmaas_runtime::get_condition(c, cond::API_SERVER_AVAILABLE))
            .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
    };
    let (old, Some((status, reason, message))) = (condition(before), condition(Some(after))) else {
        return;
    };
    let was = |s: &str| old.as_ref().is_some_and(|o| o.0 == s);
    let same_reason = old.as_ref().is_some_and(|o| o.1 == reason);
    match status.as_str() {
        "True" if !was("True") => {
            ctx.base
                .events
                .normal(mc, "APIServerAvailable", &message)
                .await;
        }
        "False"
            if (reason == KUBECONFIG_REFUSED || reason == KUBECONFIG_INVALID) && !same_reason =>
        {
            ctx.base.events.warning(mc, &reason, &message).await;
        }
        "False" if was("True") => {
            ctx.base
                .events
                .warning(mc, "APIServerUnavailable", &message)
                .await;
        }
        _ => {}
    }
}
