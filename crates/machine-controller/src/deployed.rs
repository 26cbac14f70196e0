//! The host is deployed: fix the machine's identity, report it, and link the workload Node.

use capmaas_api::conditions::reasons;
use capmaas_api::machine::provider_id;
use capmaas_runtime::controller::Flow;
use capmaas_runtime::controller::workload::WorkloadError;
use capmaas_runtime::error::failed;
use capmaas_runtime::error_chain;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use serde_json::json;
use tracing::debug;

use crate::context::Ctx;
use crate::decide::Step;
use crate::error::Result;
use crate::state::{State, mm_api, namespace, write_status};
use crate::status::step_conditions;
use crate::workload::{NodeLink, link_node};

pub(crate) async fn set_provider_id(ctx: &Ctx, state: &mut State) -> Result<()> {
    let Some(host) = state.host.as_ref() else {
        return Ok(());
    };
    let system_id = host.spec.system_id.clone();
    // Never rewritten once set: the workload Node's copy is immutable.
    let provider = state.mm.spec.provider_id.clone().unwrap_or_else(|| {
        provider_id(
            host.status.as_ref().and_then(|s| s.zone.as_deref()),
            &system_id,
        )
    });
    let patch = json!({"spec": {"providerID": provider, "systemID": system_id}});
    let params = PatchParams {
        field_manager: Some(ctx.base.field_manager.clone()),
        ..PatchParams::default()
    };
    state.replace_mm(
        mm_api(ctx, &state.mm)?
            .patch(&state.mm.name_any(), &params, &Patch::Merge(&patch))
            .await
            .map_err(failed("setting spec.providerID"))?,
    );
    Ok(())
}

pub(crate) async fn provisioned(ctx: &Ctx, state: &mut State) -> Result<Flow> {
    let was_provisioned = state.mm.status.as_ref().and_then(|s| s.ready) == Some(true);
    let conditions = step_conditions(&Step::Provisioned, state.host.as_ref());
    write_status(ctx, state, conditions, true).await?;
    let provider = state.mm.spec.provider_id.clone().unwrap_or_default();
    // Announced once; when this reconcile links the Node too, in the same Event.
    let mut deployed = (!was_provisioned).then(|| format!("host deployed; providerID {provider}"));
    let flow = link_workload_node(ctx, state, &provider, &mut deployed).await;
    if let Some(note) = deployed {
        ctx.base
            .events
            .normal(&state.mm, reasons::MACHINE_DEPLOYED, &note)
            .await;
    }
    flow
}

/// Sets the providerID on the workload Node once it exists. A link made while `deployed` (the
/// note of the `MachineDeployed` Event still to come) is pending is added to that note; a later
/// one is its own `NodeProviderIDSet` Event.
async fn link_workload_node(
    ctx: &Ctx,
    state: &State,
    provider: &str,
    deployed: &mut Option<String>,
) -> Result<Flow> {
    let backstop = Action::requeue(ctx.base.sync_period);
    let uid = state.mm.uid().unwrap_or_default();
    let node_known = state
        .machine
        .as_ref()
        .and_then(|m| m.status.as_ref())
        .is_some_and(|s| s.node_ref.is_some());
    if node_known || ctx.is_linked(&uid) {
        return Ok(Flow::Done(backstop));
    }
    let (Some(machine), Some(hostname)) = (
        state.machine.as_ref(),
        state
            .host
            .as_ref()
            .and_then(|h| h.status.as_ref())
            .and_then(|s| s.hostname.clone()),
    ) else {
        return Ok(Flow::Done(backstop));
    };
    let ns = namespace(&state.mm)?;
    let cluster = machine.spec.cluster_name.clone();
    let obj = ObjectRef::from_obj(&state.mm);
    let client = match ctx.workload.client(&ns, &cluster).await {
        Ok(client) => client,
        Err(e) => return kubeconfig_problem(ctx, state, e, &obj).await,
    };
    match link_node(&client, &format!("{ns}/{cluster}"), &hostname, provider).await {
        Ok(NodeLink::Linked { node, patched }) => {
            ctx.mark_linked(&uid);
            ctx.waits.reset(&obj);
            if patched {
                match deployed.as_mut() {
                    Some(note) => *note = format!("{note}, set on Node {node}"),
                    None => {
                        ctx.base
                            .events
                            .normal(
                                &state.mm,
                                "NodeProviderIDSet",
                                &format!("set providerID {provider} on Node {node}"),
                            )
                            .await;
                    }
                }
            }
            Ok(Flow::Done(backstop))
        }
        Ok(NodeLink::NodeNotFound) => Ok(Flow::Done(Action::requeue(ctx.waits.next_delay(&obj)))),
        Ok(NodeLink::ProviderIdMismatch { node, existing }) => {
            ctx.base
                .events
                .warning(
                    &state.mm,
                    "NodeProviderUpdateFailed",
                    &format!("Node {node} already has providerID {existing}, expected {provider}"),
                )
                .await;
            Ok(Flow::Done(backstop))
        }
        Err(e) => {
            ctx.workload.forget(&ns, &cluster);
            ctx.base
                .events
                .warning(&state.mm, "NodeProviderUpdateFailed", &error_chain(&e))
                .await;
            Ok(Flow::Done(Action::requeue(ctx.waits.next_delay(&obj))))
        }
    }
}

/// No client of the workload cluster: a Warning Event whose reason names the kind of problem
/// (`KubeconfigMissing`, `KubeconfigRefused`, ...; the recorder turns repeats into a series).
/// A missing or unreadable Secret is waited for with the wait backoff (CAPI writes it soon); a
/// refused or unusable one is a spec problem and fails the reconcile, which the kit requeues
/// after its long invalid-spec delay.
async fn kubeconfig_problem(
    ctx: &Ctx,
    state: &State,
    error: WorkloadError,
    obj: &ObjectRef<capmaas_api::MaasMachine>,
) -> Result<Flow> {
    ctx.base
        .events
        .warning(&state.mm, error.reason(), &error_chain(&error))
        .await;
    match error {
        WorkloadError::Missing { .. } | WorkloadError::Unreadable { .. } => {
            debug!(error = %error_chain(&error), "no workload cluster client yet");
            Ok(Flow::Done(Action::requeue(ctx.waits.next_delay(obj))))
        }
        WorkloadError::Refused { .. } | WorkloadError::Invalid { .. } => Err(error.into()),
    }
}
