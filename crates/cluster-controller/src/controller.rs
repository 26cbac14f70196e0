//! The I/O layer: watches, reads, and the writes `reconcile.rs` decides on.

use std::sync::Arc;
use std::time::Duration;

use capmaas_api::capi::Cluster;
use capmaas_api::keys::{LABEL_CLUSTER_NAME, LABEL_CONTROL_PLANE};
use capmaas_api::{MaasCluster, MaasDNSRecord, MaasMachine};
use capmaas_runtime::{BoxError, ControllerMetrics, ErrorCategory, ObjectBackoff, error_chain};
use futures::StreamExt;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::events::Recorder;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use tracing::{Instrument, debug, info, info_span, warn};

use crate::apply::{apply, pause};
use crate::args::ControllerArgs;
use crate::cleanup::cleanup;
use crate::error::{Error, Result};
use crate::prober::Prober;
use crate::reconcile::{has_finalizer, is_externally_managed, owner_cluster_name, pause_reason};
use crate::writes::set_finalizers;

/// Server-side watch timeout; below the idle timeouts of common load balancers.
const WATCH_TIMEOUT_SECS: u32 = 200;
/// Backstop while the owner Cluster named by the owner reference is not found.
const OWNER_MISSING_RETRY: Duration = Duration::from_secs(30);

/// What every reconcile shares.
pub struct Ctx {
    pub(crate) client: Client,
    pub(crate) field_manager: String,
    pub(crate) recorder: Recorder,
    pub(crate) prober: Prober,
    pub(crate) backoff: ObjectBackoff,
    pub(crate) metrics: ControllerMetrics,
    pub(crate) sync_period: Duration,
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("field_manager", &self.field_manager)
            .field("prober", &self.prober)
            .finish_non_exhaustive()
    }
}

fn scoped<K>(client: Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    match namespace {
        Some(ns) => Api::namespaced(client, ns),
        None => Api::all(client),
    }
}

/// Runs the MaasCluster controller until `rt.cancel` fires.
pub async fn run(rt: capmaas_runtime::Context, args: ControllerArgs) -> Result<(), BoxError> {
    let ns = rt.settings.namespace.as_deref();
    let watch = rt.clients.watch.clone();
    let wc = watcher::Config::default().timeout(WATCH_TIMEOUT_SECS);
    let controller = Controller::new(scoped::<MaasCluster>(watch.clone(), ns), wc.clone());
    let store = controller.store();
    let (prober, woken) = Prober::new(
        rt.clients.api.clone(),
        args.prober_config(),
        Some(store.clone()),
        rt.cancel.child_token(),
    );
    let ctx = Arc::new(Ctx {
        client: rt.clients.api.clone(),
        field_manager: rt.settings.field_manager.clone(),
        recorder: capmaas_runtime::event_recorder(rt.clients.api.clone(), &rt.settings.binary),
        prober,
        backoff: ObjectBackoff::default(),
        metrics: rt.reconcile.controller(&rt.settings.binary),
        sync_period: rt.settings.sync_period,
    });
    let machine_store = store.clone();
    let controller = controller
        .owns(scoped::<MaasDNSRecord>(watch.clone(), ns), wc.clone())
        .watches(scoped::<Cluster>(watch.clone(), ns), wc.clone(), |c| {
            map_cluster(&c)
        })
        .watches(scoped::<MaasMachine>(watch, ns), wc, move |m| {
            map_machine(&machine_store, &m)
        })
        .reconcile_on(woken)
        .with_config(controller::Config::default().concurrency(rt.settings.concurrency))
        .graceful_shutdown_on(rt.cancel.clone().cancelled_owned());

    let health = rt.health.clone();
    tokio::spawn(async move {
        if store.wait_until_ready().await.is_ok() {
            health.mark_ready();
        }
    });
    info!("MaasCluster controller started");
    controller
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            match result {
                Ok((obj, _)) => debug!(object = %obj, "reconciled"),
                Err(controller::Error::ObjectNotFound(obj)) => debug!(object = %obj, "object gone"),
                Err(controller::Error::ReconcilerFailed(_, obj)) => {
                    debug!(object = %obj, "reconcile failed");
                }
                Err(e) => warn!(error = %error_chain(&e), "controller stream error"),
            }
        })
        .await;
    info!("MaasCluster controller stopped");
    Ok(())
}

/// A Cluster wakes the MaasCluster its `infrastructureRef` names (pause changes, endpoint).
pub fn map_cluster(cluster: &Cluster) -> Option<ObjectRef<MaasCluster>> {
    let ns = cluster.namespace()?;
    Some(ObjectRef::new(cluster.maas_cluster_name()?).within(&ns))
}

/// A control-plane MaasMachine (addresses for the DNS record), or any MaasMachine being deleted
/// (deletion of the cluster waits for them), wakes its cluster's MaasCluster.
pub fn map_machine(
    store: &Store<MaasCluster>,
    machine: &MaasMachine,
) -> Vec<ObjectRef<MaasCluster>> {
    let labels = machine.labels();
    let relevant =
        labels.contains_key(LABEL_CONTROL_PLANE) || machine.metadata.deletion_timestamp.is_some();
    let (Some(cluster), Some(ns)) = (labels.get(LABEL_CLUSTER_NAME), machine.namespace()) else {
        return Vec::new();
    };
    if !relevant {
        return Vec::new();
    }
    store
        .state_filter(|mc| {
            mc.namespace().as_deref() == Some(ns.as_str())
                && (owner_cluster_name(mc) == Some(cluster.as_str())
                    || mc.labels().get(LABEL_CLUSTER_NAME) == Some(cluster))
        })
        .iter()
        .map(|mc| ObjectRef::from_obj(mc.as_ref()))
        .collect()
}

// kube-runtime fixes this signature.
#[allow(clippy::needless_pass_by_value)]
fn error_policy(mc: Arc<MaasCluster>, error: &Error, ctx: Arc<Ctx>) -> Action {
    let action = ctx
        .backoff
        .error_action(&ObjectRef::from_obj(mc.as_ref()), error);
    warn!(
        namespace = mc.namespace().unwrap_or_default(),
        name = mc.name_any(),
        category = error.category(),
        error = %error_chain(error),
        ?action,
        "reconcile failed"
    );
    action
}

async fn reconcile(mc: Arc<MaasCluster>, ctx: Arc<Ctx>) -> Result<Action> {
    let _timer = ctx.metrics.start_reconcile();
    let span = info_span!(
        "reconcile",
        namespace = mc.namespace().unwrap_or_default(),
        name = mc.name_any()
    );
    let result = reconcile_object(&mc, &ctx).instrument(span).await;
    match &result {
        Ok(_) => {
            ctx.backoff.reset(&ObjectRef::from_obj(mc.as_ref()));
            ctx.metrics.reconcile_succeeded();
        }
        Err(e) => ctx.metrics.reconcile_failed(e.category()),
    }
    result
}

async fn reconcile_object(mc: &MaasCluster, ctx: &Ctx) -> Result<Action> {
    let ns = mc.namespace().ok_or(Error::MissingMetadata("namespace"))?;
    let api: Api<MaasCluster> = Api::namespaced(ctx.client.clone(), &ns);
    let key = ObjectRef::from_obj(mc);
    let cluster_name = owner_cluster_name(mc).map(str::to_owned);
    let cluster = match &cluster_name {
        Some(name) => Api::<Cluster>::namespaced(ctx.client.clone(), &ns)
            .get_opt(name)
            .await
            .map_err(Error::kube("get Cluster"))?,
        None => None,
    };

    if mc.metadata.deletion_timestamp.is_some() {
        if !has_finalizer(mc) {
            return Ok(Action::await_change());
        }
        if let Some(why) = pause_reason(mc, cluster.as_ref()) {
            return pause(&api, mc, &key, &why, ctx).await;
        }
        return cleanup(&api, mc, &key, cluster_name.as_deref(), ctx).await;
    }
    if is_externally_managed(mc) {
        debug!("externally managed (cluster.x-k8s.io/managed-by); leaving it alone");
        return Ok(Action::await_change());
    }
    let Some(cluster_name) = cluster_name else {
        // CAPI sets the owner reference; that update wakes us.
        debug!("waiting for the owner Cluster reference");
        return Ok(Action::await_change());
    };
    let Some(cluster) = cluster else {
        info!(cluster = cluster_name, "owner Cluster not found yet");
        return Ok(Action::requeue(OWNER_MISSING_RETRY));
    };
    if let Some(why) = pause_reason(mc, Some(&cluster)) {
        return pause(&api, mc, &key, &why, ctx).await;
    }
    let mc = if has_finalizer(mc) {
        mc.clone()
    } else {
        set_finalizers(&api, mc, true).await?
    };
    apply(&api, &mc, &key, &cluster_name, &cluster, ctx).await
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
