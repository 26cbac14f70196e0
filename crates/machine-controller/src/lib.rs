//! The MaasMachine controller of the MAAS Cluster API provider (binary `machine-controller`).
//!
//! For each MaasMachine it waits for the Cluster's infrastructure and the Machine's bootstrap
//! data, chooses a MaasHost with a pure ranking ([`choose`]), claims it with an optimistic
//! lock, asks the MAAS gateway to deploy it (through `spec.provisioning` on the host), and once
//! the host is deployed sets `spec.providerID` (`maas:///<zone>/<system_id>`), the addresses,
//! the provisioning signals, and the workload Node's `spec.providerID`. Deleting releases the
//! host and, with `nodeReuse`, keeps it reserved for the owner's next machine.
//!
//! Layout (the one every controller crate shares, see `docs/architecture.md`): [`decide`],
//! [`choose`], [`status`] and [`watch`] are pure; [`act`] observes (through [`state`]),
//! decides and performs one step at a time, calling the step modules `claiming.rs`,
//! `deployed.rs` and `release.rs`, which write through [`state`] and [`host_ops`]; the plumbing
//! (run loop, error policy, finalizers, Events, workload clients) comes from
//! [`capmaas_runtime::controller`].

pub mod act;
pub mod args;
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
pub mod watch;
pub mod workload;

#[cfg(test)]
mod test_support;

use std::sync::Arc;

use capmaas_api::capi::{Cluster, Machine};
use capmaas_api::{MaasDataClaim, MaasHost, MaasInventory, MaasMachine};
use capmaas_runtime::controller::{
    self as kit, ReconcilerSettings, ready_when, scoped, without_managed_fields,
};
use capmaas_runtime::{BoxError, CommonArgs, Runtime};

use kube::runtime::{Controller, PredicateConfig, WatchStreamExt, reflector, watcher};

pub use args::ControllerArgs;
pub use error::{Error, Result};

use crate::context::{Caches, Ctx};

/// Binary name; also gives the field manager and event reporter `capmaas-machine-controller`
/// and the Lease name.
pub const BINARY: &str = "machine-controller";
/// Default `--concurrency` / `--machine-concurrency` (CAPMAAS uses 2).
pub const DEFAULT_CONCURRENCY: u16 = 10;
/// The `controller` label of this controller's metrics and logs.
pub const CONTROLLER: &str = "maasmachine";

/// Runs the binary: the runtime from the common flags (`--machine-concurrency` counts as
/// `--concurrency`), then [`run`] in each leadership term.
pub async fn start(common: CommonArgs, args: ControllerArgs) -> Result<(), BoxError> {
    let runtime = Runtime::builder(BINARY)
        .with_args(args.apply_to(common))
        .default_concurrency(DEFAULT_CONCURRENCY)
        .build()
        .await?;
    runtime.run(move |term| run(term, args.clone())).await?;
    Ok(())
}

/// Runs the MaasMachine controller for one leadership term.
///
/// Watches MaasMachines; MaasHosts through a reflector whose cache is also the list hosts are
/// chosen from; Machines and Clusters (see [`watch`]). Ready once the MaasMachine and MaasHost
/// caches are filled.
pub async fn run(term: capmaas_runtime::Context, args: ControllerArgs) -> Result<(), BoxError> {
    let ns = term.settings.namespace.as_deref();
    let watch = &term.clients.watch;
    let wc = watcher::Config::default();
    // Inventories: which other namespaces' hosts a machine may claim, and whether a pool is
    // imported at all. A change wakes nothing by itself: waiting machines retry on backoff.
    let (inventories, inventory_writer) = reflector::store::<MaasInventory>();
    let inventory_stream = reflector::reflector(
        inventory_writer,
        watcher(scoped::<MaasInventory>(watch, ns), wc.clone()),
    )
    .default_backoff()
    .touched_objects();
    let (hosts, host_writer) = reflector::store::<MaasHost>();
    let host_stream = reflector::reflector(
        host_writer,
        watcher(scoped::<MaasHost>(watch, ns), wc.clone()),
    )
    .default_backoff()
    .touched_objects();
    // The controller's own kind through a reflector of its own, so that its trigger stream
    // can be filtered while the store sees every change.
    let (machines, machine_writer) = reflector::store::<MaasMachine>();
    let machine_stream = reflector::reflector(
        machine_writer,
        watcher(scoped::<MaasMachine>(watch, ns), wc.clone()),
    )
    .default_backoff()
    .touched_objects()
    .predicate_filter(watch::maas_machine_change, PredicateConfig::default());
    // CAPI Machines and Clusters are cached too: a reconcile reads its owner Machine and its
    // Cluster from the caches instead of two GETs (a change wakes the machines it concerns,
    // so a reconcile that saw an older copy is followed by one that sees the new).
    let (machine_cache, machine_cache_writer) = reflector::store::<Machine>();
    let capi_machines = reflector::reflector(
        machine_cache_writer,
        watcher(scoped::<Machine>(watch, ns), wc.clone()).modify(without_managed_fields),
    )
    .default_backoff()
    .touched_objects()
    .predicate_filter(watch::machine_change, PredicateConfig::default());
    let (cluster_cache, cluster_cache_writer) = reflector::store::<Cluster>();
    let clusters = reflector::reflector(
        cluster_cache_writer,
        watcher(scoped::<Cluster>(watch, ns), wc.clone()).modify(without_managed_fields),
    )
    .default_backoff()
    .touched_objects()
    .predicate_filter(watch::cluster_change, PredicateConfig::default());
    let ctx = Arc::new(Ctx::new(
        &term,
        Caches {
            hosts: hosts.clone(),
            inventories: inventories.clone(),
            machines: machine_cache.clone(),
            clusters: cluster_cache.clone(),
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
        // A data claim's rendering (or its failure) wakes its machine.
        .owns(scoped::<MaasDataClaim>(watch, ns), wc.clone())
        .watches_stream(capi_machines, |machine| watch::map_machine(&machine))
        .watches_stream(clusters, move |cluster| {
            watch::map_cluster(&cluster_members, &cluster)
        });
    // `capmaas_machines` reads this term's MaasMachine cache.
    let _machine_metrics =
        metrics_machines::MachineMetrics::get_or_register(&term.metrics).attach(machines.clone());
    let ready = ready_when(&term.health, &term.cancel, async move {
        machines.wait_until_ready().await.is_ok()
            && hosts.wait_until_ready().await.is_ok()
            && inventories.wait_until_ready().await.is_ok()
            && machine_cache.wait_until_ready().await.is_ok()
            && cluster_cache.wait_until_ready().await.is_ok()
    });
    let settings = ReconcilerSettings::for_term(&term, CONTROLLER);
    tokio::join!(
        ready,
        kit::run_traced(
            controller,
            settings,
            ctx,
            act::reconcile,
            watch::trace_relation
        )
    );
    Ok(())
}
