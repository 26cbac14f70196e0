//! The MaasRemediation controller (binary `remediation-controller`).
//!
//! A MachineHealthCheck whose `remediation.templateRef` names a MaasRemediationTemplate makes
//! CAPI create a MaasRemediation named after each unhealthy Machine. Strategy `Reboot`: back
//! the workload Node's labels and annotations up, fence the Node (out-of-service taint, or
//! delete it), ask the MAAS gateway for a power cycle with a `reboot.maas.cluster.x-k8s.io/`
//! annotation on the MaasHost, wait for the server and the Node to come back, restore the
//! Node. After `retryLimit` attempts of `timeoutSeconds` each it gives up: the host is marked
//! unhealthy and the Machine's `OwnerRemediated=False` makes its owner replace it. Progress is
//! recorded on the objects only, so a killed controller resumes without a second power cycle.
//!
//! Layout (the one every controller crate shares, see `docs/architecture.md`): [`decide`],
//! [`status`], [`node`] and [`watch`] are pure; [`act`] observes (through [`state`]), decides
//! and performs one step at a time through `writes.rs`, `host_ops.rs` and `node_ops.rs`; the
//! plumbing comes from [`capmaas_runtime::controller`].

pub mod act;
pub mod args;
pub mod context;
pub mod decide;
pub mod error;
mod host_ops;
pub mod keys;
pub mod node;
mod node_ops;
pub mod state;
pub mod status;
pub mod watch;
mod writes;

#[cfg(test)]
mod fixtures;

use std::sync::Arc;

use capmaas_api::capi::{Cluster, Machine};
use capmaas_api::{MaasHost, MaasRemediation};
use capmaas_runtime::controller::{
    self as kit, Keep, ReconcilerSettings, cached, ready_when, scoped,
};
use capmaas_runtime::{BoxError, CommonArgs};
use kube::runtime::{Controller, watcher};

pub use args::{ABOUT, BINARY, ControllerArgs, DEFAULT_CONCURRENCY, FenceMode};
pub use error::{Error, Result};

use crate::context::Ctx;

/// The `controller` label of this controller's metrics and logs.
pub const CONTROLLER: &str = "maasremediation";

/// Runs the binary: the runtime from the common flags, then [`run`] in each leadership term.
pub async fn start(common: CommonArgs, args: ControllerArgs) -> Result<(), BoxError> {
    capmaas_runtime::serve(BINARY, DEFAULT_CONCURRENCY, common, args, run).await
}

/// Runs the MaasRemediation controller for one leadership term.
///
/// Watches MaasRemediations; MaasHosts through a reflector whose cache also finds hosts a
/// remediation still holds off; Machines and Clusters (see [`watch`]). Ready once the
/// MaasRemediation and MaasHost caches are filled.
pub async fn run(term: capmaas_runtime::Term, args: ControllerArgs) -> Result<(), BoxError> {
    let ns = term.settings.namespace.as_deref();
    let watch = &term.clients.watch;
    let wc = watcher::Config::default();
    let (hosts, host_stream) = cached(scoped::<MaasHost>(watch, ns), wc.clone(), Keep::Everything);
    let controller = Controller::new(scoped::<MaasRemediation>(watch, ns), wc.clone());
    let remediations = controller.store();
    let ctx = Arc::new(Ctx::new(&term, hosts.clone(), &args));
    let (by_host, by_cluster) = (remediations.clone(), remediations.clone());
    let controller = controller
        .watches_stream(host_stream, move |host| watch::map_host(&by_host, &host))
        .watches(scoped::<Machine>(watch, ns), wc.clone(), |machine| {
            watch::map_machine(&machine)
        })
        .watches(scoped::<Cluster>(watch, ns), wc, move |cluster| {
            watch::map_cluster(&by_cluster, &cluster)
        });
    let ready = ready_when(&term.health, &term.cancel, async move {
        remediations.wait_until_ready().await.is_ok() && hosts.wait_until_ready().await.is_ok()
    });
    let settings = ReconcilerSettings::for_term(&term, CONTROLLER);
    tokio::join!(ready, kit::run(controller, settings, ctx, act::reconcile));
    Ok(())
}
