//! Writes on the workload Node: the fence and the restore. Every write is guarded by the
//! Node's resourceVersion or UID (the taint list is replaced whole, and a re-registered Node
//! must never be deleted for the old one).

use capmaas_runtime::error::Failed;
use k8s_openapi::api::core::v1::Node;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::{Api, ResourceExt};
use serde_json::Value;

use crate::args::FenceMode;
use crate::context::Ctx;
use crate::decide::backup;
use crate::error::{Error, Result, is_not_found};
use crate::node::{fence_patch, restore_patch};
use crate::state::{NodeView, State, namespace};

/// Fences the Node the way `mode` says.
pub(crate) async fn fence(ctx: &Ctx, state: &mut State, mode: FenceMode) -> Result<()> {
    let Some(node) = state.node().cloned() else {
        return Ok(());
    };
    let name = node.name_any();
    match mode {
        FenceMode::Taint => {
            let patch = fence_patch(&node, state.uid());
            patch_node(ctx, state, &name, &patch, "tainting").await
        }
        FenceMode::Delete => {
            let (api, cluster) = nodes(ctx, state).await?;
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: node.uid(),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            match api.delete(&name, &params).await {
                Ok(_) => {}
                Err(e) if is_not_found(&e) => {}
                Err(e) => {
                    return Err(Error::workload(&cluster, format!("deleting Node {name}"))(
                        e,
                    ));
                }
            }
            state.node = NodeView::Absent(name);
            Ok(())
        }
        FenceMode::None => Ok(()),
    }
}

/// Puts back what the backup holds and the Node lacks, and takes our fence away.
pub(crate) async fn restore(ctx: &Ctx, state: &mut State) -> Result<()> {
    let Some(node) = state.node().cloned() else {
        return Ok(());
    };
    let saved = backup(&state.remediation);
    let Some(patch) = restore_patch(&node, saved.as_ref(), state.uid()) else {
        return Ok(());
    };
    patch_node(ctx, state, &node.name_any(), &patch, "restoring").await
}

async fn patch_node(
    ctx: &Ctx,
    state: &mut State,
    name: &str,
    patch: &Value,
    what: &str,
) -> Result<()> {
    let (api, cluster) = nodes(ctx, state).await?;
    let params = PatchParams {
        field_manager: Some(ctx.base.field_manager.clone()),
        ..PatchParams::default()
    };
    let updated = api
        .patch(name, &params, &Patch::Merge(patch))
        .await
        .map_err(|e| {
            if is_not_found(&e) {
                Error::from(Failed::conflict(format!("{what} Node {name}")))
            } else {
                Error::workload(&cluster, format!("{what} Node {name}"))(e)
            }
        })?;
    state.node = NodeView::Present(Box::new(updated));
    Ok(())
}

/// The workload cluster's Node API and its `<namespace>/<cluster>` label.
async fn nodes(ctx: &Ctx, state: &State) -> Result<(Api<Node>, String)> {
    let ns = namespace(&state.remediation)?;
    let cluster = state
        .cluster_name()
        .ok_or(Failed::missing("cluster name"))?;
    let client = ctx.workload.client(&ns, &cluster).await?;
    Ok((Api::all(client), format!("{ns}/{cluster}")))
}
