//! The MaasCluster controller (binary `cluster-controller`).
//!
//! For each MaasCluster owned by a Cluster API `Cluster`: honour pause and external management,
//! add the finalizer, publish failure domains (MAAS zones), settle the control-plane endpoint
//! (the user's, or `<cluster>.<dnsDomain>` served by a `MaasDNSRecord` that follows the
//! control-plane machines' addresses; with a [`hosted`] control plane, the one its provider
//! sets, waited for), report `initialization.provisioned`, and keep an
//! `APIServerAvailable` condition from one shared, backed-off prober of workload API servers.
//! Deleting waits for the cluster's MaasMachines, then deletes the DNS record.
//!
//! Layout (the one every controller crate shares, see `docs/architecture.md`): [`decide`],
//! [`hosted`], [`status`] and [`addresses`] are pure; [`act`] reads, decides and dispatches to
//! the passes in `apply.rs` and `cleanup.rs`, which write through `writes.rs`; [`watch`] maps
//! other objects to MaasClusters; the plumbing comes from [`capmaas_runtime::controller`].

pub mod act;
pub mod addresses;
mod apply;
pub mod args;
mod cleanup;
pub mod context;
pub mod decide;
pub mod error;
pub mod hosted;
pub mod prober;
pub mod status;
pub mod watch;
mod writes;

#[cfg(test)]
mod fixtures;

use std::sync::Arc;

use capmaas_api::capi::Cluster;
use capmaas_api::{MaasCluster, MaasDNSRecord, MaasMachine};
use capmaas_runtime::controller::{self as kit, Base, ReconcilerSettings, ready_when, scoped};
use capmaas_runtime::{BoxError, CommonArgs};
use kube::runtime::{Controller, PredicateConfig, WatchStreamExt, watcher};

pub use args::{ABOUT, BINARY, ControllerArgs, DEFAULT_CONCURRENCY};
pub use error::{Error, Result};

use crate::context::Ctx;
use crate::prober::Prober;

/// The `controller` label of this controller's metrics and logs.
pub const CONTROLLER: &str = "maascluster";
/// Server-side watch timeout; below the idle timeouts of common load balancers.
const WATCH_TIMEOUT_SECS: u32 = 200;

/// Runs the binary: the runtime from the common flags, then [`run`] in each leadership term.
pub async fn start(common: CommonArgs, args: ControllerArgs) -> Result<(), BoxError> {
    capmaas_runtime::serve(BINARY, DEFAULT_CONCURRENCY, common, args, run).await
}

/// Runs the MaasCluster controller for one leadership term.
pub async fn run(term: capmaas_runtime::Term, args: ControllerArgs) -> Result<(), BoxError> {
    let ns = term.settings.namespace.as_deref();
    let watch = &term.clients.watch;
    let wc = watcher::Config::default().timeout(WATCH_TIMEOUT_SECS);
    let controller = Controller::new(scoped::<MaasCluster>(watch, ns), wc.clone());
    let store = controller.store();
    let (prober, woken) = Prober::new(
        term.clients.api.clone(),
        args.prober_config(),
        Some(store.clone()),
        term.cancel.child_token(),
    );
    let ctx = Arc::new(Ctx {
        base: Base::for_term(&term),
        prober,
        hosted: args.hosted_kinds(),
    });
    let machine_store = store.clone();
    let controller = controller
        .owns(scoped::<MaasDNSRecord>(watch, ns), wc.clone())
        .watches_stream(
            watcher(scoped::<Cluster>(watch, ns), wc.clone())
                .default_backoff()
                .touched_objects()
                .predicate_filter(watch::cluster_change, PredicateConfig::default()),
            |c| watch::map_cluster(&c),
        )
        .watches(scoped::<MaasMachine>(watch, ns), wc, move |m| {
            watch::map_machine(&machine_store, &m)
        })
        .reconcile_on(woken);
    let ready = ready_when(&term.health, &term.cancel, async move {
        store.wait_until_ready().await.is_ok()
    });
    let settings = ReconcilerSettings::for_term(&term, CONTROLLER);
    tokio::join!(ready, kit::run(controller, settings, ctx, act::reconcile));
    Ok(())
}
