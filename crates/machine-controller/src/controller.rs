//! Wiring: watches, mappers, the reconcile wrapper (metrics, backoff) and observation.
//!
//! Watches: MaasMachines (main), MaasHosts (reflected into a cache used for choosing, mapped to
//! their consumer, and free hosts wake the machines waiting for one), Machines (mapped through
//! `spec.infrastructureRef`) and Clusters (mapped to their MaasMachines by the cluster-name
//! label, so a pause or an infrastructure change is seen at once).

use std::sync::Arc;
use std::time::Duration;

use capmaas_api::capi::{Cluster, Machine};
use capmaas_api::conditions::{self as cond, reasons};
use capmaas_api::host::ProvisioningState;
use capmaas_api::{MaasHost, MaasMachine, keys};
use capmaas_runtime::{BoxError, ErrorCategory, KubeClients, ObjectBackoff, error_chain};
use futures::StreamExt;
use kube::runtime::controller::{Action, Config as ControllerConfig};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::actions::{self, Flow, State};
use crate::context::{BINARY, Ctx, Options, wait_backoff};
use crate::error::Error;
use crate::reconcile::{Observed, decide};

/// Most steps one reconcile performs before yielding (each step is one write at most).
const MAX_STEPS: usize = 12;

/// Runs the controller for one leadership term of the runtime.
pub async fn run(ctx: capmaas_runtime::Context) -> Result<(), BoxError> {
    let options = Options::from_settings(&ctx.settings, Some(ctx.reconcile.controller(BINARY)));
    let health = ctx.health.clone();
    run_controller(
        ctx.clients.clone(),
        options,
        ctx.cancel.clone(),
        move || {
            health.mark_ready();
        },
    )
    .await
}

fn scoped<K>(client: Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>,
{
    match namespace {
        Some(ns) => Api::namespaced(client, ns),
        None => Api::all(client),
    }
}

/// Runs the controller until `cancel`; `on_ready` is called once the caches are filled.
pub async fn run_controller(
    clients: KubeClients,
    options: Options,
    cancel: CancellationToken,
    on_ready: impl FnOnce() + Send + 'static,
) -> Result<(), BoxError> {
    let namespace = options.namespace.clone();
    let ns = namespace.as_deref();
    let watch_config = watcher::Config::default();
    let (host_store, host_writer) = reflector::store::<MaasHost>();
    let host_stream = reflector::reflector(
        host_writer,
        watcher(
            scoped::<MaasHost>(clients.watch.clone(), ns),
            watch_config.clone(),
        ),
    )
    .default_backoff()
    .touched_objects();

    let controller = Controller::new(
        scoped::<MaasMachine>(clients.watch.clone(), ns),
        watch_config.clone(),
    )
    .with_config(ControllerConfig::default().concurrency(options.concurrency));
    let machines = controller.store();
    let ctx = Arc::new(Ctx {
        client: clients.api.clone(),
        recorder: capmaas_runtime::event_recorder(clients.api.clone(), BINARY),
        hosts: host_store.clone(),
        errors: ObjectBackoff::default(),
        waits: ObjectBackoff::new(wait_backoff()),
        workload: crate::workload::WorkloadClients::default(),
        claims: crate::context::ClaimTracker::default(),
        linked: Arc::default(),
        options,
    });

    let ready_machines = machines.clone();
    let ready_hosts = host_store.clone();
    let ready_cancel = cancel.clone();
    tokio::spawn(async move {
        tokio::select! {
            () = ready_cancel.cancelled() => {}
            ready = async { ready_machines.wait_until_ready().await.and(ready_hosts.wait_until_ready().await) } => {
                if ready.is_ok() {
                    info!("caches synced");
                    on_ready();
                }
            }
        }
    });

    let host_waiters = machines.clone();
    let cluster_members = machines.clone();
    controller
        .watches_stream(host_stream, move |host| map_host(&host_waiters, &host))
        .watches(
            scoped::<Machine>(clients.watch.clone(), ns),
            watch_config.clone(),
            |machine| map_machine(&machine),
        )
        .watches(
            scoped::<Cluster>(clients.watch.clone(), ns),
            watch_config,
            move |cluster| map_cluster(&cluster_members, &cluster),
        )
        .graceful_shutdown_on(cancel.cancelled_owned())
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            match result {
                Ok((obj, _)) => debug!(name = %obj.name, namespace = ?obj.namespace, "reconciled"),
                Err(kube::runtime::controller::Error::ObjectNotFound(obj)) => {
                    debug!(%obj, "object gone before its reconcile");
                }
                Err(e) => warn!(error = %error_chain(&e), "reconcile failed"),
            }
        })
        .await;
    Ok(())
}

/// A host maps to its consumer; a free, available host wakes the machines waiting for one.
fn map_host(machines: &Store<MaasMachine>, host: &MaasHost) -> Vec<ObjectRef<MaasMachine>> {
    let Some(namespace) = host.namespace() else {
        return Vec::new();
    };
    if let Some(consumer) = &host.spec.consumer_ref {
        if consumer.kind == MaasMachine::kind(&()) {
            return vec![ObjectRef::new(&consumer.name).within(&namespace)];
        }
        return Vec::new();
    }
    let available = host.status.as_ref().and_then(|s| s.provisioning_state)
        == Some(ProvisioningState::Available);
    if !available {
        return Vec::new();
    }
    machines
        .state()
        .iter()
        .filter(|m| m.namespace().as_deref() == Some(namespace.as_str()) && waiting_for_host(m))
        .map(|m| ObjectRef::from_obj(m.as_ref()))
        .collect()
}

fn waiting_for_host(mm: &MaasMachine) -> bool {
    mm.metadata.deletion_timestamp.is_none()
        && mm
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == cond::HOST_ASSOCIATED))
            .is_some_and(|c| {
                c.status == "False"
                    && (c.reason == reasons::NO_HOST_AVAILABLE
                        || c.reason == reasons::NO_CAPACITY_IN_FAILURE_DOMAIN)
            })
}

fn map_machine(machine: &Machine) -> Option<ObjectRef<MaasMachine>> {
    let reference = &machine.spec.infrastructure_ref;
    if reference.kind != MaasMachine::kind(&()) || reference.api_group != MaasMachine::group(&()) {
        return None;
    }
    Some(ObjectRef::new(&reference.name).within(&machine.namespace()?))
}

fn map_cluster(machines: &Store<MaasMachine>, cluster: &Cluster) -> Vec<ObjectRef<MaasMachine>> {
    let namespace = cluster.namespace();
    let name = cluster.name_any();
    machines
        .state()
        .iter()
        .filter(|m| {
            m.namespace() == namespace && m.labels().get(keys::LABEL_CLUSTER_NAME) == Some(&name)
        })
        .map(|m| ObjectRef::from_obj(m.as_ref()))
        .collect()
}

async fn reconcile(mm: Arc<MaasMachine>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let metrics = ctx.options.metrics.clone();
    let _timer = metrics
        .as_ref()
        .map(capmaas_runtime::ControllerMetrics::start_reconcile);
    let span = tracing::info_span!("reconcile", namespace = ?mm.namespace(), name = %mm.name_any());
    let result = tracing::Instrument::instrument(reconcile_steps(&mm, &ctx), span).await;
    match &result {
        Ok(_) => {
            ctx.errors.reset(&ObjectRef::from_obj(mm.as_ref()));
            if let Some(m) = &metrics {
                m.reconcile_succeeded();
            }
        }
        Err(e) => {
            if let Some(m) = &metrics {
                m.reconcile_failed(e.category());
            }
        }
    }
    result
}

async fn reconcile_steps(mm: &MaasMachine, ctx: &Ctx) -> Result<Action, Error> {
    let mut state = State::observe(ctx, mm.clone()).await?;
    for _ in 0..MAX_STEPS {
        let step = decide(&Observed {
            maas_machine: &state.mm,
            machine: state.machine.as_ref(),
            cluster: state.cluster.as_ref(),
            host: state.host.as_ref(),
        });
        debug!(?step, "step");
        match actions::act(ctx, &mut state, step).await {
            Ok(Flow::Continue) => {}
            Ok(Flow::Done(action)) => return Ok(action),
            // Someone wrote in between: decide again on what is there now.
            Err(e) if e.is_conflict() => {
                debug!(error = %error_chain(&e), "conflict, observing again");
                match State::observe_fresh(ctx, &state.mm).await? {
                    Some(fresh) => state = fresh,
                    None => return Ok(Action::await_change()),
                }
            }
            Err(e) => return Err(e),
        }
    }
    // Progress every step so far; look again soon rather than loop unbounded.
    Ok(Action::requeue(Duration::from_secs(1)))
}

#[allow(clippy::needless_pass_by_value)] // the signature kube's Controller::run expects
fn error_policy(mm: Arc<MaasMachine>, error: &Error, ctx: Arc<Ctx>) -> Action {
    let action = ctx
        .errors
        .error_action(&ObjectRef::from_obj(mm.as_ref()), error);
    if error.is_conflict() {
        debug!(name = %mm.name_any(), error = %error_chain(error), "conflict, retrying");
    } else {
        warn!(
            name = %mm.name_any(),
            namespace = ?mm.namespace(),
            category = error.category(),
            error = %error_chain(error),
            "reconcile failed"
        );
    }
    action
}
