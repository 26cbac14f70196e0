//! The I/O layer: observe a MaasMachine's world, and perform one decided step.

use std::time::Duration;

use capmaas_api::capi::{Cluster, Machine, is_capi_owner};
use capmaas_api::conditions::reasons;
use capmaas_api::{MaasHost, MaasMachine, keys};
use capmaas_runtime::conditions::NewCondition;
use capmaas_runtime::error_chain;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};
use serde_json::json;
use tracing::warn;

use crate::context::Ctx;
use crate::error::{Error, Result};
use crate::host_ops::{self, Mutation};
use crate::reconcile::{Step, bootstrap_secret};
use crate::status::{claimed_by, next_status, owned_status, provisioning_request, step_conditions};

/// Whether the reconcile goes on with the next step or stops with an action.
#[derive(Debug)]
pub enum Flow {
    /// Decide again with the updated state.
    Continue,
    /// Stop here.
    Done(Action),
}

/// What one reconcile knows; updated from the API's answers after each write.
#[derive(Debug, Clone)]
pub struct State {
    /// The MaasMachine.
    pub mm: MaasMachine,
    /// Its owner Machine.
    pub machine: Option<Machine>,
    /// The Machine's Cluster.
    pub cluster: Option<Cluster>,
    /// The host claimed by the MaasMachine.
    pub host: Option<MaasHost>,
}

pub(crate) fn namespace(mm: &MaasMachine) -> Result<String> {
    mm.namespace().ok_or(Error::MissingMetadata("namespace"))
}

impl State {
    /// [`State::observe`] from a fresh read of the MaasMachine; `None` when it is gone.
    pub async fn observe_fresh(ctx: &Ctx, mm: &MaasMachine) -> Result<Option<Self>> {
        let fresh = mm_api(ctx, mm)?
            .get_opt(&mm.name_any())
            .await
            .map_err(Error::kube("reading the MaasMachine"))?;
        match fresh {
            Some(fresh) => Ok(Some(Self::observe(ctx, fresh).await?)),
            None => Ok(None),
        }
    }

    /// Reads the owner Machine, its Cluster and the claimed host.
    pub async fn observe(ctx: &Ctx, mm: MaasMachine) -> Result<Self> {
        let ns = namespace(&mm)?;
        let machine = match mm
            .owner_references()
            .iter()
            .find(|o| is_capi_owner(o, "Machine"))
        {
            Some(owner) => Api::<Machine>::namespaced(ctx.client.clone(), &ns)
                .get_opt(&owner.name)
                .await
                .map_err(Error::kube(format!("reading Machine {}", owner.name)))?,
            None => None,
        };
        let cluster_name = machine
            .as_ref()
            .map(|m| m.spec.cluster_name.clone())
            .filter(|n| !n.is_empty())
            .or_else(|| mm.labels().get(keys::LABEL_CLUSTER_NAME).cloned());
        let cluster = match cluster_name {
            Some(name) => Api::<Cluster>::namespaced(ctx.client.clone(), &ns)
                .get_opt(&name)
                .await
                .map_err(Error::kube(format!("reading Cluster {name}")))?,
            None => None,
        };
        let host = find_host(ctx, &mm, &ns).await?;
        Ok(Self {
            mm,
            machine,
            cluster,
            host,
        })
    }
}

/// The host claimed by `mm`: the one recorded in status, else one the cache shows with our
/// UID (a claim whose status write was lost), always confirmed by a fresh read.
pub(crate) async fn find_host(ctx: &Ctx, mm: &MaasMachine, ns: &str) -> Result<Option<MaasHost>> {
    let api: Api<MaasHost> = Api::namespaced(ctx.client.clone(), ns);
    let recorded = mm.status.as_ref().and_then(|s| s.host_ref.as_ref());
    let cached = ctx
        .hosts
        .find(|h| h.namespace().as_deref() == Some(ns) && claimed_by(h, mm))
        .map(|h| h.name_any());
    for name in recorded.map(|r| r.name.clone()).into_iter().chain(cached) {
        let host = api
            .get_opt(&name)
            .await
            .map_err(Error::kube(format!("reading host {name}")))?;
        if let Some(host) = host.filter(|h| claimed_by(h, mm)) {
            return Ok(Some(host));
        }
    }
    Ok(None)
}

/// Performs `step`.
pub async fn act(ctx: &Ctx, state: &mut State, step: Step) -> Result<Flow> {
    let backstop = Action::requeue(ctx.options.sync_period);
    match &step {
        Step::WaitForOwner | Step::Done => Ok(Flow::Done(Action::await_change())),
        Step::WaitForCluster => Ok(Flow::Done(Action::requeue(Duration::from_secs(30)))),
        Step::Paused
        | Step::WaitForClusterInfrastructure
        | Step::WaitForBootstrapData
        | Step::WaitForRelease { .. } => {
            write_status(
                ctx,
                state,
                step_conditions(&step, state.host.as_ref()),
                false,
            )
            .await?;
            Ok(Flow::Done(backstop))
        }
        Step::AddFinalizer => {
            add_finalizer(ctx, state).await?;
            Ok(Flow::Continue)
        }
        Step::ChooseHost => crate::claiming::choose_and_claim(ctx, state).await,
        Step::HostLost => {
            if write_status(ctx, state, step_conditions(&step, None), false).await? {
                publish(
                    ctx,
                    &state.mm,
                    EventType::Warning,
                    reasons::MACHINE_NOT_FOUND,
                    "the machine has a providerID but its MaasHost is no longer claimed for it",
                )
                .await;
            }
            Ok(Flow::Done(backstop))
        }
        Step::RecordHost => {
            write_status(
                ctx,
                state,
                step_conditions(&step, state.host.as_ref()),
                false,
            )
            .await?;
            Ok(Flow::Continue)
        }
        Step::RequestDeployment => request_deployment(ctx, state).await,
        Step::WaitForDeployment {
            reason,
            message,
            failed,
        } => {
            let changed = write_status(
                ctx,
                state,
                step_conditions(&step, state.host.as_ref()),
                false,
            )
            .await?;
            if changed && *failed {
                publish(ctx, &state.mm, EventType::Warning, reason, message).await;
            }
            Ok(Flow::Done(backstop))
        }
        Step::SetProviderId => {
            crate::deployed::set_provider_id(ctx, state).await?;
            Ok(Flow::Continue)
        }
        Step::Provisioned => crate::deployed::provisioned(ctx, state).await,
        Step::ClearProvisioning => {
            let Some(name) = state.host.as_ref().map(ResourceExt::name_any) else {
                return Ok(Flow::Continue);
            };
            write_status(
                ctx,
                state,
                step_conditions(&step, state.host.as_ref()),
                false,
            )
            .await?;
            let mm = state.mm.clone();
            state.host =
                host_ops::update_host(ctx, &namespace(&mm)?, &name, "clearing provisioning", |h| {
                    if !claimed_by(h, &mm) || h.spec.provisioning.is_none() {
                        return Mutation::Keep;
                    }
                    h.spec.provisioning = None;
                    Mutation::Write
                })
                .await?
                .filter(|h| claimed_by(h, &mm));
            publish(
                ctx,
                &mm,
                EventType::Normal,
                "ReleaseRequested",
                &format!("release of host {name} requested"),
            )
            .await;
            Ok(Flow::Continue)
        }
        Step::ReleaseHost => crate::release::release_host(ctx, state).await,
        Step::RemoveFinalizer => {
            remove_finalizer(ctx, state).await?;
            ctx.errors.reset(&ObjectRef::from_obj(&state.mm));
            ctx.waits.reset(&ObjectRef::from_obj(&state.mm));
            if let Some(uid) = state.mm.uid() {
                ctx.forget_linked(&uid);
            }
            Ok(Flow::Done(Action::await_change()))
        }
    }
}

/// Applies the owned status after `conditions` (and the provisioning signals); returns whether
/// anything changed (nothing is written otherwise).
///
/// The apply carries the resourceVersion the status was computed from: a status computed from
/// an outdated object (another replica wrote meanwhile) fails with 409 instead of undoing that
/// write, and the reconcile decides again on a fresh read.
pub(crate) async fn write_status(
    ctx: &Ctx,
    state: &mut State,
    conditions: Vec<NewCondition>,
    provisioned: bool,
) -> Result<bool> {
    let now = capmaas_runtime::status::now();
    let next = next_status(
        &state.mm,
        state.host.as_ref(),
        conditions,
        provisioned,
        &now,
    );
    if next == owned_status(&state.mm) {
        return Ok(false);
    }
    let name = state.mm.name_any();
    let rv = state
        .mm
        .resource_version()
        .ok_or(Error::MissingMetadata("resourceVersion"))?;
    let status = serde_json::to_value(&next).map_err(|source| Error::Serialize {
        what: "the MaasMachine status",
        source,
    })?;
    let body = json!({
        "apiVersion": MaasMachine::api_version(&()),
        "kind": MaasMachine::kind(&()),
        "metadata": {"name": name, "resourceVersion": rv},
        "status": status,
    });
    let params = PatchParams::apply(&ctx.options.field_manager).force();
    state.mm = mm_api(ctx, &state.mm)?
        .patch_status(&name, &params, &Patch::Apply(&body))
        .await
        .map_err(|e| {
            if crate::error::is_conflict(&e) {
                Error::Conflict("writing the status".into())
            } else {
                Error::kube("writing the status")(e)
            }
        })?;
    Ok(true)
}

pub(crate) async fn publish(
    ctx: &Ctx,
    mm: &MaasMachine,
    type_: EventType,
    reason: &str,
    note: &str,
) {
    let event = Event {
        type_,
        reason: reason.to_owned(),
        note: Some(note.chars().take(1000).collect()),
        action: "Reconcile".to_owned(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&event, &mm.object_ref(&())).await {
        warn!(reason, error = %error_chain(&e), "cannot publish event");
    }
}

pub(crate) fn mm_api(ctx: &Ctx, mm: &MaasMachine) -> Result<Api<MaasMachine>> {
    Ok(Api::namespaced(ctx.client.clone(), &namespace(mm)?))
}

async fn add_finalizer(ctx: &Ctx, state: &mut State) -> Result<()> {
    // Test-and-add: a concurrent change to the finalizer list makes the patch fail instead of
    // overwriting someone else's finalizer.
    let patch = match state.mm.metadata.finalizers.as_ref() {
        None => json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": [keys::FINALIZER_MAAS_MACHINE]}
        ]),
        Some(list) => json!([
            {"op": "test", "path": "/metadata/finalizers", "value": list},
            {"op": "add", "path": "/metadata/finalizers/-", "value": keys::FINALIZER_MAAS_MACHINE}
        ]),
    };
    json_patch(ctx, state, patch, "adding the finalizer").await
}

async fn remove_finalizer(ctx: &Ctx, state: &mut State) -> Result<()> {
    let Some(index) = state
        .mm
        .finalizers()
        .iter()
        .position(|f| f == keys::FINALIZER_MAAS_MACHINE)
    else {
        return Ok(());
    };
    let path = format!("/metadata/finalizers/{index}");
    let body = json!([
        {"op": "test", "path": path, "value": keys::FINALIZER_MAAS_MACHINE},
        {"op": "remove", "path": path}
    ]);
    json_patch(ctx, state, body, "removing the finalizer").await
}

async fn json_patch(
    ctx: &Ctx,
    state: &mut State,
    patch: serde_json::Value,
    what: &str,
) -> Result<()> {
    let patch = serde_json::from_value(patch).map_err(|source| Error::Serialize {
        what: "a JSON patch",
        source,
    })?;
    let params = PatchParams {
        field_manager: Some(ctx.options.field_manager.clone()),
        ..PatchParams::default()
    };
    let name = state.mm.name_any();
    match mm_api(ctx, &state.mm)?
        .patch(&name, &params, &Patch::Json::<()>(patch))
        .await
    {
        Ok(mm) => {
            state.mm = mm;
            Ok(())
        }
        // Removing the last finalizer of a deleted object deletes it: nothing comes back.
        Err(e) if crate::error::is_not_found(&e) => Ok(()),
        // Our patch is well-formed; 422 means its `test` failed: the list changed meanwhile.
        Err(kube::Error::Api(s)) if s.code == 422 => Err(Error::Conflict(what.to_owned())),
        Err(e) => Err(Error::kube(what)(e)),
    }
}

async fn request_deployment(ctx: &Ctx, state: &mut State) -> Result<Flow> {
    let (Some(host), Some(machine)) = (state.host.as_ref(), state.machine.as_ref()) else {
        return Ok(Flow::Continue);
    };
    let Some(user_data) = bootstrap_secret(&state.mm, machine) else {
        return Ok(Flow::Continue);
    };
    let request = provisioning_request(&state.mm, user_data, host);
    let name = host.name_any();
    let mm = state.mm.clone();
    state.host =
        host_ops::update_host(ctx, &namespace(&mm)?, &name, "requesting deployment", |h| {
            if !claimed_by(h, &mm) || h.spec.provisioning.is_some() {
                return Mutation::Keep;
            }
            h.spec.provisioning = Some(request.clone());
            Mutation::Write
        })
        .await?
        .filter(|h| claimed_by(h, &mm));
    publish(
        ctx,
        &mm,
        EventType::Normal,
        reasons::MACHINE_DEPLOY_STARTED,
        &format!(
            "deployment of host {name} with image {} requested",
            mm.spec.image
        ),
    )
    .await;
    Ok(Flow::Continue)
}
