//! The MaasMachineTemplate reconciler: keeps `status.capacity`, `status.nodeInfo` and the
//! `CapacityKnown` condition of every template equal to the shape [`crate::capacity`] computes
//! from the MaasHost and MaasInventory caches (the MaasMachine controller's, shared), so the
//! cluster autoscaler can scale a MachineDeployment up from zero.
//!
//! The I/O edge: read the caches, ask the pure [`capacity`](crate::capacity) functions, apply
//! the status (server-side apply of the owned fields) only when it changes, count the outcome
//! (`capmaas_machine_template_status_writes_total{result}`) and say a change in an Event. The
//! wake-ups ([`Wake`]) ride on the host and inventory watch streams of the MaasMachine
//! controller, filtered by [`crate::template_watch`].

use std::sync::Arc;

use capmaas_api::{MaasHost, MaasInventory, MaasMachineTemplate};
use capmaas_runtime::controller::Base;
use capmaas_runtime::error::{Failed, failed, is_not_found};
use capmaas_runtime::{MetricsRegistry, OwnWrites, apply_status};
use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded};
use futures::{Stream, StreamExt};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use crate::capacity::{Fit, smallest_fit, status_change, summary};
use crate::choose::Claimable;
use crate::decide::spec_request;
use crate::error::Result;
use crate::template_watch::{
    Changes, every_template, host_shape, inventory_scope, templates_for_host,
};

/// Event reason of a template whose capacity was set or changed.
pub const CAPACITY_UPDATED: &str = "CapacityUpdated";

/// What every template reconcile shares.
#[derive(Clone, Debug)]
pub struct TemplateCtx {
    /// Client, field manager (the binary's), Events, `--sync-period`.
    pub base: Base,
    /// The MaasMachine controller's MaasHost cache.
    pub hosts: Store<MaasHost>,
    /// The MaasMachine controller's MaasInventory cache.
    pub inventories: Store<MaasInventory>,
    /// Status writes by outcome.
    pub writes: StatusWrites,
    /// The templates as our last status write left them, until the cache shows it.
    pub own_writes: OwnWrites<MaasMachineTemplate>,
}

/// Reconciles one MaasMachineTemplate: computes its shape and writes the status if it changed.
///
/// Runs only once the host and inventory caches are filled ([`run_when_filled`]).
pub async fn reconcile(
    template: Arc<MaasMachineTemplate>,
    ctx: Arc<TemplateCtx>,
) -> Result<Action> {
    let template = ctx.own_writes.freshest(template.as_ref().clone());
    let namespace = template
        .namespace()
        .ok_or_else(|| Failed::missing("namespace"))?;
    let inventories = ctx.inventories.state();
    let claimable = Claimable::new(&namespace, inventories.iter().map(AsRef::as_ref));
    let hosts = ctx.hosts.state();
    let request = spec_request(&template.spec.template.spec);
    let fit = smallest_fit(&request, hosts.iter().map(AsRef::as_ref), &claimable);
    let backstop = Action::requeue(ctx.base.sync_period);
    let now = capmaas_runtime::status::now();
    let Some(status) = status_change(&template, &fit, &now) else {
        ctx.writes.unchanged();
        return Ok(backstop);
    };
    let api: Api<MaasMachineTemplate> = Api::namespaced(ctx.base.client.clone(), &namespace);
    let name = template.name_any();
    let written = match apply_status(&api, &name, &ctx.base.field_manager, &status).await {
        Ok(written) => written,
        Err(capmaas_runtime::Error::KubeApi(e)) if is_not_found(&e) => {
            return Ok(Action::await_change());
        }
        Err(e) => return Err(failed("writing the MaasMachineTemplate status")(e).into()),
    };
    ctx.writes.written();
    if let Some(seen) = template.resource_version() {
        ctx.own_writes.remember(&written, &[seen]);
    }
    announce(&ctx.base, &written, &fit).await;
    Ok(backstop)
}

/// Runs `controller` (the template controller's run) once the host and inventory caches are
/// filled: a decision on a half-listed cache would clear capacities at startup. Await it in the
/// term's own task (`tokio::join!`), not inside a reconcile: a store's readiness wakes only the
/// last of the tasks waiting for it (kube's `DelayedInit` keeps one waker), so a reconcile
/// waiting beside `/readyz` could sleep for ever.
pub async fn run_when_filled(
    hosts: &Store<MaasHost>,
    inventories: &Store<MaasInventory>,
    controller: impl Future<Output = ()>,
) {
    if hosts.wait_until_ready().await.is_ok() && inventories.wait_until_ready().await.is_ok() {
        controller.await;
    }
}

/// One Event per written change: the new capacity, or why there is none.
async fn announce(base: &Base, template: &MaasMachineTemplate, fit: &Fit<'_>) {
    match fit {
        Fit::Host(host) => {
            let capacity = template
                .status
                .as_ref()
                .and_then(|s| s.capacity.clone())
                .unwrap_or_default();
            let message = format!(
                "capacity {} from MaasHost {}/{}",
                summary(&capacity),
                host.namespace().unwrap_or_default(),
                host.name_any()
            );
            base.events
                .normal(template, CAPACITY_UPDATED, &message)
                .await;
        }
        Fit::NoHost(message) => {
            let reason = capmaas_api::machine::template_conditions::NO_HOST_FITS;
            base.events.warning(template, reason, message).await;
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

/// `capmaas_machine_template_status_writes_total{result}`: reconciles of a MaasMachineTemplate
/// that wrote its status (`written`) or found nothing to write (`unchanged`). A steady
/// `written` rate while the inventory is quiet would be a write storm.
#[derive(Clone, Debug)]
pub struct StatusWrites {
    family: Family<ResultLabels, Counter>,
}

impl StatusWrites {
    /// The process's counter (registered once per registry).
    pub fn get_or_register(registry: &MetricsRegistry) -> Self {
        registry.get_or_register(|r| {
            let family = Family::default();
            r.register(
                "machine_template_status_writes",
                "MaasMachineTemplate status reconciles by result: written, or unchanged (nothing to write)",
                family.clone(),
            );
            Self { family }
        })
    }

    fn written(&self) {
        self.family
            .get_or_create(&ResultLabels { result: "written" })
            .inc();
    }

    fn unchanged(&self) {
        self.family
            .get_or_create(&ResultLabels {
                result: "unchanged",
            })
            .inc();
    }

    /// Writes so far.
    pub fn written_count(&self) -> u64 {
        self.family
            .get_or_create(&ResultLabels { result: "written" })
            .get()
    }
}

/// Wakes the templates a change of a MaasHost or a MaasInventory may reshape: built on the
/// MaasMachine controller's watch streams, which pass through unchanged.
#[derive(Clone, Debug)]
pub struct Wake {
    tx: UnboundedSender<ObjectRef<MaasMachineTemplate>>,
    templates: Store<MaasMachineTemplate>,
    inventories: Store<MaasInventory>,
}

impl Wake {
    /// The waker, and the stream of templates to reconcile (`Controller::reconcile_on`).
    pub fn new(
        templates: Store<MaasMachineTemplate>,
        inventories: Store<MaasInventory>,
    ) -> (Self, UnboundedReceiver<ObjectRef<MaasMachineTemplate>>) {
        let (tx, rx) = unbounded();
        let wake = Self {
            tx,
            templates,
            inventories,
        };
        (wake, rx)
    }

    fn send(&self, templates: Vec<ObjectRef<MaasMachineTemplate>>) {
        for template in templates {
            // The template controller is gone only when the term ends.
            let _ = self.tx.unbounded_send(template);
        }
    }

    /// `hosts` (the stream that fills `cache`), waking the templates of the namespaces that may
    /// claim a host whose shape changed, appeared or went.
    pub fn on_hosts<S>(
        self,
        hosts: S,
        cache: Store<MaasHost>,
    ) -> impl Stream<Item = Result<MaasHost, watcher::Error>> + Send + 'static
    where
        S: Stream<Item = Result<MaasHost, watcher::Error>> + Send + 'static,
    {
        let mut changes = Changes::<MaasHost>::default();
        hosts.inspect(move |event| {
            if let Ok(host) = event {
                let present = cache.get(&ObjectRef::from_obj(host)).is_some();
                if changes.changed(host, host_shape(host), present) {
                    self.send(templates_for_host(&self.templates, &self.inventories, host));
                }
            }
        })
    }

    /// `inventories` (the stream that fills the inventory cache), waking every template when
    /// an inventory's spec changed, or it appeared or went.
    pub fn on_inventories<S>(
        self,
        inventories: S,
    ) -> impl Stream<Item = Result<MaasInventory, watcher::Error>> + Send + 'static
    where
        S: Stream<Item = Result<MaasInventory, watcher::Error>> + Send + 'static,
    {
        let mut changes = Changes::<MaasInventory>::default();
        inventories.inspect(move |event| {
            if let Ok(inventory) = event {
                let present = self
                    .inventories
                    .get(&ObjectRef::from_obj(inventory))
                    .is_some();
                if changes.changed(inventory, inventory_scope(inventory), present) {
                    self.send(every_template(&self.templates));
                }
            }
        })
    }
}
