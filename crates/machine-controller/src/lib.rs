//! The MaasMachine controller of the MAAS Cluster API provider (binary `machine-controller`).
//!
//! For each MaasMachine it waits for the Cluster's infrastructure and the Machine's bootstrap
//! data, chooses a MaasHost with a pure ranking ([`choose`]), claims it with an optimistic
//! lock, asks the MAAS gateway to deploy it (through `spec.provisioning` on the host), and once
//! the host is deployed sets `spec.providerID` (`maas:///<zone>/<system_id>`), the addresses,
//! the provisioning signals, and the workload Node's `spec.providerID`. Deleting releases the
//! host and, with `nodeReuse`, keeps it reserved for the owner's next machine.
//!
//! A second controller in the same binary keeps each MaasMachineTemplate's `status.capacity`
//! and `status.nodeInfo` (the cluster autoscaler's scale from zero) equal to the smallest
//! MaasHost that fits it: [`capacity`] and [`template_watch`] are pure, [`templates`] reads the
//! shared caches and writes the status.
//!
//! Layout (the one every controller crate shares, see `docs/architecture.md`): [`decide`],
//! [`choose`], [`status`] and [`watch`] are pure; [`act`] observes (through [`state`]),
//! decides and performs one step at a time, calling the step modules `claiming.rs`,
//! `deployed.rs` and `release.rs`, which write through [`state`] and [`host_ops`]; the plumbing
//! (run loop, error policy, finalizers, Events, workload clients) comes from
//! [`capmaas_runtime::controller`].

pub mod act;
pub mod args;
pub mod capacity;
pub mod choose;
mod claiming;
pub mod context;
mod data;
pub mod decide;
mod deployed;
pub mod error;
pub mod host_ops;
pub mod metrics_machines;
pub mod on_demand;
mod release;
pub mod reuse;
pub mod state;
pub mod status;
pub mod template_watch;
pub mod templates;
pub mod vm;
mod vm_ops;
pub mod watch;
pub mod workload;

#[cfg(test)]
mod test_support;

use std::sync::Arc;

use capmaas_api::capi::{Cluster, Machine};
use capmaas_api::{
    MaasCluster, MaasDataClaim, MaasHost, MaasInventory, MaasMachine, MaasMachineTemplate,
};
use capmaas_runtime::controller::{
    self as kit, Keep, ReconcilerSettings, cached, ready_when, scoped,
};
use capmaas_runtime::{BoxError, CommonArgs};
use kube::runtime::{Controller, PredicateConfig, WatchStreamExt, watcher};

pub use args::{ABOUT, BINARY, ControllerArgs, DEFAULT_CONCURRENCY};
pub use error::{Error, Result};

use crate::context::{Caches, Ctx};

/// The `controller` label of this controller's metrics and logs.
pub const CONTROLLER: &str = "maasmachine";
/// The `controller` label of the MaasMachineTemplate controller (autoscaling from zero:
/// `status.capacity`, [`templates`]).
pub const TEMPLATE_CONTROLLER: &str = "maasmachinetemplate";

/// Runs the binary: the runtime from the common flags (`--machine-concurrency` counts as
/// `--concurrency`), then [`run`] in each leadership term.
pub async fn start(common: CommonArgs, args: ControllerArgs) -> Result<(), BoxError> {
    let common = args.apply_to(common);
    capmaas_runtime::serve(BINARY, DEFAULT_CONCURRENCY, common, args, run).await
}

/// Runs the MaasMachine controller for one leadership term.
///
/// Watches MaasMachines; MaasHosts through a reflector whose cache is also the list hosts are
/// chosen from; Machines and Clusters (see [`watch`]). Runs the MaasMachineTemplate controller
/// ([`templates`]) beside it on the same MaasHost and MaasInventory caches. Ready once every
/// cache is filled.
pub async fn run(term: capmaas_runtime::Term, args: ControllerArgs) -> Result<(), BoxError> {
    let ns = term.settings.namespace.as_deref();
    let watch = &term.clients.watch;
    let wc = watcher::Config::default();
    // Inventories: which other namespaces' hosts a machine may claim, and whether a pool is
    // imported at all. A change wakes no machine by itself: waiting machines retry on backoff.
    let (inventories, inventory_stream) = cached(
        scoped::<MaasInventory>(watch, ns),
        wc.clone(),
        Keep::Everything,
    );
    let (hosts, host_stream) = cached(scoped::<MaasHost>(watch, ns), wc.clone(), Keep::Everything);
    // MaasMachineTemplates (their `status.capacity`): woken by their spec, and by the changes of
    // hosts and inventories that may reshape them, read off the two streams above.
    let (templates, template_stream) = cached(
        scoped::<MaasMachineTemplate>(watch, ns),
        wc.clone(),
        Keep::WithoutManagedFields,
    );
    let template_stream = template_stream
        .predicate_filter(template_watch::template_change, PredicateConfig::default());
    let (wake, template_wakes) = templates::Wake::new(templates.clone(), inventories.clone());
    let host_stream = wake.clone().on_hosts(host_stream, hosts.clone());
    let inventory_stream = wake.on_inventories(inventory_stream);
    // The controller's own kind through a cache of its own, so that its trigger stream can be
    // filtered while the store sees every change.
    let (machines, machine_stream) = cached(
        scoped::<MaasMachine>(watch, ns),
        wc.clone(),
        Keep::Everything,
    );
    let machine_stream =
        machine_stream.predicate_filter(watch::maas_machine_change, PredicateConfig::default());
    // CAPI Machines and Clusters are cached too: a reconcile reads its owner Machine and its
    // Cluster from the caches instead of two GETs (a change wakes the machines it concerns,
    // so a reconcile that saw an older copy is followed by one that sees the new).
    let (machine_cache, capi_machines) = cached(
        scoped::<Machine>(watch, ns),
        wc.clone(),
        Keep::WithoutManagedFields,
    );
    let capi_machines =
        capi_machines.predicate_filter(watch::machine_change, PredicateConfig::default());
    let (cluster_cache, clusters) = cached(
        scoped::<Cluster>(watch, ns),
        wc.clone(),
        Keep::WithoutManagedFields,
    );
    let clusters = clusters.predicate_filter(watch::cluster_change, PredicateConfig::default());
    // MaasClusters: read when a deployment is requested (`spec.lxdConfig.enabled`); a change
    // wakes no machine, since it applies to deployments requested after it.
    let (maas_cluster_cache, maas_clusters) = cached(
        scoped::<MaasCluster>(watch, ns),
        wc.clone(),
        Keep::WithoutManagedFields,
    );
    let ctx = Arc::new(Ctx::new(
        &term,
        Caches {
            hosts: hosts.clone(),
            inventories: inventories.clone(),
            machines: machine_cache.clone(),
            clusters: cluster_cache.clone(),
            maas_clusters: maas_cluster_cache.clone(),
            maas_machines: machines.clone(),
        },
        args.on_demand_namespace(ns),
    ));
    let (host_waiters, cluster_members) = (machines.clone(), machines.clone());
    let host_inventories = inventories.clone();
    let controller = Controller::for_stream(machine_stream, machines.clone())
        .watches_stream(host_stream, move |host| {
            watch::map_host(&host_waiters, &host_inventories, &host)
        })
        .watches_stream(inventory_stream, |_| std::iter::empty())
        .watches_stream(maas_clusters, |_| std::iter::empty())
        // A data claim's rendering (or its failure) wakes its machine.
        .owns(scoped::<MaasDataClaim>(watch, ns), wc.clone())
        .watches_stream(capi_machines, |machine| watch::map_machine(&machine))
        .watches_stream(clusters, move |cluster| {
            watch::map_cluster(&cluster_members, &cluster)
        });
    // `capmaas_machines` reads this term's MaasMachine cache.
    let _machine_metrics =
        metrics_machines::MachineMetrics::get_or_register(&term.metrics).attach(machines.clone());
    let template_ctx = Arc::new(templates::TemplateCtx {
        base: capmaas_runtime::controller::Base::for_term(&term),
        hosts: hosts.clone(),
        inventories: inventories.clone(),
        writes: templates::StatusWrites::get_or_register(&term.metrics),
        own_writes: capmaas_runtime::OwnWrites::default(),
    });
    let template_controller =
        Controller::for_stream(template_stream, templates.clone()).reconcile_on(template_wakes);
    let (template_hosts, template_inventories) = (hosts.clone(), inventories.clone());
    let ready = ready_when(&term.health, &term.cancel, async move {
        machines.wait_until_ready().await.is_ok()
            && hosts.wait_until_ready().await.is_ok()
            && inventories.wait_until_ready().await.is_ok()
            && machine_cache.wait_until_ready().await.is_ok()
            && cluster_cache.wait_until_ready().await.is_ok()
            && maas_cluster_cache.wait_until_ready().await.is_ok()
            && templates.wait_until_ready().await.is_ok()
    });
    let settings = ReconcilerSettings::for_term(&term, CONTROLLER);
    let template_settings = ReconcilerSettings::for_term(&term, TEMPLATE_CONTROLLER);
    tokio::join!(
        ready,
        kit::run_traced(
            controller,
            settings,
            ctx,
            act::reconcile,
            watch::trace_relation
        ),
        templates::run_when_filled(
            &template_hosts,
            &template_inventories,
            kit::run(
                template_controller,
                template_settings,
                template_ctx,
                templates::reconcile
            )
        )
    );
    Ok(())
}
