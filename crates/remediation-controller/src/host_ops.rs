//! Writes on MaasHosts: our reboot request and the unhealthy mark. Each is one annotation key,
//! written by merge patch (no other key is touched, so no resourceVersion guard is needed).

use capmaas_api::MaasHost;
use capmaas_runtime::error::Failed;
use capmaas_runtime::error::failed;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::context::Ctx;
use crate::error::{Result, is_not_found};
use crate::state::{State, namespace};

/// Sets (`Some`) or removes (`None`) annotation `key` on host `name`, and puts the answer
/// into `state`. A host gone meanwhile is a conflict: the loop reads again.
pub(crate) async fn annotate(
    ctx: &Ctx,
    state: &mut State,
    name: &str,
    key: &str,
    value: Option<&str>,
) -> Result<()> {
    // The host is written where it lives: an inventory open to the machine's namespace keeps
    // its hosts in its own.
    let host_namespace = match state
        .host
        .iter()
        .chain(&state.held)
        .find(|h| h.name_any() == name)
        .and_then(ResourceExt::namespace)
    {
        Some(ns) => ns,
        None => namespace(&state.remediation)?,
    };
    let api: Api<MaasHost> = Api::namespaced(ctx.base.client.clone(), &host_namespace);
    let patch = json!({"metadata": {"annotations": {key: value}}});
    let params = PatchParams {
        field_manager: Some(ctx.base.field_manager.clone()),
        ..PatchParams::default()
    };
    let action = || match value {
        Some(_) => format!("annotating MaasHost {name} {key}"),
        None => format!("removing annotation {key} from MaasHost {name}"),
    };
    let updated = match api.patch(name, &params, &Patch::Merge(&patch)).await {
        Ok(host) => host,
        Err(e) if is_not_found(&e) => return Err(Failed::conflict(action()).into()),
        Err(e) => return Err(failed(action())(e).into()),
    };
    if state.host.as_ref().is_some_and(|h| h.name_any() == name) {
        state.host = Some(updated);
    } else {
        state.held.retain(|h| h.name_any() != name);
        if state.holds(&updated) {
            state.held.push(updated);
        }
    }
    Ok(())
}
