//! The controller kit: the plumbing every controller of this project shares, written once.
//!
//! A controller crate brings its watches, its pure `decide` and its `act`; the kit brings:
//! - [`Base`]: the client, field manager, Events and sync period every context embeds;
//! - [`cached`]: a reflector store and the watch stream that fills it;
//! - [`run`]: drives a kube [`Controller`](kube::runtime::Controller) for one leadership term —
//!   stops it when the term ends, wraps every reconcile (timer, span, metrics, backoff reset),
//!   applies [`error_policy`] and logs the stream;
//! - [`walk`] over [`Steps`]: the step loop of a reconcile that decides, performs one step and decides again;
//! - [`ready_when`]: marks the term ready once the caches it needs are filled;
//! - [`scoped`]: the namespaced-or-cluster-wide `Api` that `--namespace` asks for;
//! - [`finalizer`]: add and remove a finalizer with a guarded JSON patch;
//! - [`Events`]: publishes Kubernetes Events without ever failing a reconcile;
//! - [`workload`]: clients of workload clusters built from CAPI's kubeconfig Secrets, refusing
//!   exec plugins and file references, cached per cluster.
//!
//! See `docs/architecture.md` ("Writing a controller") for the module layout that goes with it.

mod base;
mod cached;
pub mod events;
pub mod finalizer;
mod reconciler;
mod steps;
pub mod workload;

use std::future::Future;

use kube::core::NamespaceResourceScope;
use kube::{Api, Client, Resource};
use tokio_util::sync::CancellationToken;

pub use base::Base;
pub use cached::{Keep, cached};
pub use events::Events;
pub use reconciler::{ReconcilerSettings, error_policy, run, run_traced};
pub use steps::{Flow, Steps, walk};

use crate::health::Health;

/// The value a watch predicate (`WatchStreamExt::predicate_filter`) compares: a hash of what of
/// an object matters to the watcher, so changes of anything else (status rewrites, managed
/// fields) wake nobody.
pub fn predicate_hash(value: impl std::hash::Hash) -> u64 {
    use std::hash::Hasher;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    value.hash(&mut hasher);
    hasher.finish()
}

/// A reflector store holding `objects` as after a watch's initial list: what the pure mappers
/// and decisions read, for their tests and for tools that look at objects offline.
pub fn filled_store<K>(objects: impl IntoIterator<Item = K>) -> kube::runtime::reflector::Store<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    use kube::runtime::watcher::Event;
    let (reader, mut writer) = kube::runtime::reflector::store();
    writer.apply_watcher_event(&Event::Init);
    for object in objects {
        writer.apply_watcher_event(&Event::InitApply(object));
    }
    writer.apply_watcher_event(&Event::InitDone);
    reader
}

/// Drops an object's managed fields before a reflector stores it (`WatchStreamExt::modify`):
/// no controller reads them, and they are most of a typical object's memory.
pub fn without_managed_fields<K: Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

/// `Api::namespaced(namespace)` when the binary watches one namespace, else `Api::all`.
pub fn scoped<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// Marks `health` ready once `synced` resolves to `true` (typically every store's
/// `wait_until_ready`), unless `cancel` fires first. Readiness stays off when a cache never
/// fills: the pod is then not ready, which is the truth.
pub async fn ready_when(
    health: &Health,
    cancel: &CancellationToken,
    synced: impl Future<Output = bool>,
) {
    tokio::select! {
        () = cancel.cancelled() => {}
        ready = synced => {
            if ready {
                tracing::info!("caches synced; ready");
                health.mark_ready();
            }
        }
    }
}
