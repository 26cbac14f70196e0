//! What every reconcile shares: clients, the MaasHost cache, Events, the wait backoff, the
//! workload clients and the in-process claim tracker.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use capmaas_api::capi::{Cluster, Machine};
use capmaas_api::host::MaasHostSpec;
use capmaas_api::{MaasCluster, MaasHost, MaasInventory, MaasMachine};
use capmaas_runtime::controller::Base;
use capmaas_runtime::controller::workload::WorkloadClients;
use capmaas_runtime::own_writes::OwnSpecWrites;
use capmaas_runtime::{BackoffConfig, ObjectBackoff};
use kube::Resource;
use kube::runtime::reflector::Store;

use crate::choose::Claimable;

/// Shared by every reconcile of one leadership term.
#[derive(Clone)]
pub struct Ctx {
    /// Client, field manager, Events on MaasMachines (built once: its cache turns repeats into
    /// series), `--sync-period`.
    pub base: Base,
    /// Cache of every watched MaasHost.
    pub hosts: Store<MaasHost>,
    /// Cache of every watched MaasInventory (whose `spec.claimNamespaces` opens its hosts to
    /// other namespaces).
    pub inventories: Store<MaasInventory>,
    /// Pools asked for that no inventory imports are imported into this namespace, by an
    /// inventory open to every namespace (`None`: not at all).
    pub on_demand_inventories: Option<String>,
    /// Cache of every watched CAPI Machine (without managed fields).
    pub machines: Store<Machine>,
    /// Cache of every watched CAPI Cluster (without managed fields).
    pub clusters: Store<Cluster>,
    /// Cache of every watched MaasCluster (without managed fields): whether its hosts become
    /// LXD VM hosts (`spec.lxdConfig.enabled`).
    pub maas_clusters: Store<MaasCluster>,
    /// Cache of every watched MaasMachine (the controller's own): the machines of a Cluster,
    /// whose VMs are spread over VM hosts ([`crate::vm`]).
    pub maas_machines: Store<MaasMachine>,
    /// Per-object backoff while waiting for something we cannot watch (a free host, a Node).
    pub waits: ObjectBackoff,
    /// Workload cluster clients (guarded kubeconfigs, cached per cluster).
    pub workload: WorkloadClients,
    /// Hosts being claimed in this process.
    pub claims: ClaimTracker,
    /// The MaasMachines as our last reconciles left them ([`capmaas_runtime::own_writes`]).
    pub own_writes: capmaas_runtime::OwnWrites<capmaas_api::MaasMachine>,
    /// The host specs this process wrote last: machine-controller is their only writer.
    pub host_writes: OwnSpecWrites<MaasHostSpec>,
    /// MaasMachine UIDs whose workload Node this process has linked.
    pub linked: Arc<Mutex<HashSet<String>>>,
}

/// The reflector caches a reconcile reads.
#[derive(Clone, Debug)]
pub struct Caches {
    /// MaasHosts.
    pub hosts: Store<MaasHost>,
    /// MaasInventories.
    pub inventories: Store<MaasInventory>,
    /// CAPI Machines.
    pub machines: Store<Machine>,
    /// CAPI Clusters.
    pub clusters: Store<Cluster>,
    /// MaasClusters.
    pub maas_clusters: Store<MaasCluster>,
    /// MaasMachines.
    pub maas_machines: Store<MaasMachine>,
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("base", &self.base)
            .field("workload", &self.workload)
            .finish_non_exhaustive()
    }
}

impl Ctx {
    /// The context of one leadership term, choosing from the MaasHosts in `hosts`.
    pub fn new(
        term: &capmaas_runtime::Term,
        caches: Caches,
        on_demand_inventories: Option<String>,
    ) -> Self {
        let base = Base::for_term(term);
        Self {
            workload: WorkloadClients::new(base.client.clone()),
            base,
            hosts: caches.hosts,
            inventories: caches.inventories,
            on_demand_inventories,
            machines: caches.machines,
            clusters: caches.clusters,
            maas_clusters: caches.maas_clusters,
            maas_machines: caches.maas_machines,
            waits: ObjectBackoff::new(wait_backoff()),
            claims: ClaimTracker::default(),
            own_writes: capmaas_runtime::OwnWrites::default(),
            host_writes: OwnSpecWrites::default(),
            linked: Arc::default(),
        }
    }
}

/// Backoff while no host is free or the Node has not registered: starts short (a host may be
/// released any second, and host events wake waiting machines anyway), caps at two minutes.
pub fn wait_backoff() -> BackoffConfig {
    BackoffConfig {
        min_delay: Duration::from_secs(2),
        max_delay: Duration::from_secs(120),
        ..BackoffConfig::default()
    }
}

impl Ctx {
    /// Whether the hosts of `cluster`'s machines become LXD VM hosts: its infrastructure
    /// cluster is a MaasCluster (in the cache) with `spec.lxdConfig.enabled`.
    pub fn registers_vm_hosts(&self, cluster: Option<&Cluster>) -> bool {
        let Some(cluster) = cluster else {
            return false;
        };
        let namespace = cluster.metadata.namespace.clone().unwrap_or_default();
        cluster
            .spec
            .infrastructure_ref
            .as_ref()
            .filter(|r| r.kind == MaasCluster::kind(&()))
            .and_then(|r| {
                self.maas_clusters
                    .get(&kube::runtime::reflector::ObjectRef::new(&r.name).within(&namespace))
            })
            .and_then(|mc| mc.spec.lxd_config.as_ref().map(|lxd| lxd.enabled))
            .unwrap_or(false)
    }

    /// Which hosts the machines of `namespace` may claim ([`Claimable`]).
    pub fn claimable_namespaces(&self, namespace: &str) -> Claimable {
        let inventories = self.inventories.state();
        Claimable::new(namespace, inventories.iter().map(AsRef::as_ref))
    }

    /// Whether this process already linked the Node of the machine with `uid`.
    pub fn is_linked(&self, uid: &str) -> bool {
        self.linked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(uid)
    }

    /// Forgets a deleted machine.
    pub fn forget_linked(&self, uid: &str) {
        self.linked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(uid);
    }

    /// Remembers that the Node of the machine with `uid` is linked.
    pub fn mark_linked(&self, uid: &str) {
        self.linked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(uid.to_owned());
    }
}

/// How long an in-process claim marker keeps other reconciles away from a host: long enough
/// for the host watch to show the claim, short enough that a crashed attempt frees it soon.
pub const CLAIM_MARK_TTL: Duration = Duration::from_secs(30);

/// Hosts that reconciles of this process are claiming or just claimed.
///
/// Not a lock for correctness (the resourceVersion precondition is): it keeps concurrent
/// reconciles, which all rank the same hosts first, from colliding on the same host and
/// paying a conflict and a retry each.
#[derive(Debug, Clone, Default)]
pub struct ClaimTracker {
    marks: Arc<Mutex<ClaimMarks>>,
}

/// `(namespace, host)` → `(machine UID, marked at)`.
type ClaimMarks = HashMap<(String, String), (String, Instant)>;

impl ClaimTracker {
    fn lock(&self) -> std::sync::MutexGuard<'_, ClaimMarks> {
        self.marks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Marks `namespace/host` as being claimed by `uid`; `false` if another machine holds a
    /// fresh mark.
    pub fn try_mark(&self, namespace: &str, host: &str, uid: &str) -> bool {
        let mut marks = self.lock();
        let now = Instant::now();
        marks.retain(|_, (_, at)| now.duration_since(*at) < CLAIM_MARK_TTL);
        let key = (namespace.to_owned(), host.to_owned());
        match marks.get(&key) {
            Some((holder, _)) if holder != uid => false,
            _ => {
                marks.insert(key, (uid.to_owned(), now));
                true
            }
        }
    }

    /// Drops the mark of `uid` on `namespace/host` (the claim failed or was released).
    pub fn unmark(&self, namespace: &str, host: &str, uid: &str) {
        let mut marks = self.lock();
        let key = (namespace.to_owned(), host.to_owned());
        if marks.get(&key).is_some_and(|(holder, _)| holder == uid) {
            marks.remove(&key);
        }
    }

    /// Hosts (`namespace/name`, as [`crate::choose::host_key`]) marked by machines other
    /// than `uid`.
    pub fn marked_by_others(&self, uid: &str) -> BTreeSet<String> {
        let now = Instant::now();
        self.lock()
            .iter()
            .filter(|(_, (holder, at))| holder != uid && now.duration_since(*at) < CLAIM_MARK_TTL)
            .map(|((ns, host), _)| format!("{ns}/{host}"))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_exclude_other_machines_only() {
        let t = ClaimTracker::default();
        assert!(t.try_mark("ns", "h1", "a"));
        assert!(t.try_mark("ns", "h1", "a"), "the holder may retry");
        assert!(!t.try_mark("ns", "h1", "b"));
        assert!(t.try_mark("other", "h1", "b"), "namespaces are separate");
        assert_eq!(
            t.marked_by_others("b"),
            BTreeSet::from(["ns/h1".to_owned()])
        );
        assert_eq!(
            t.marked_by_others("a"),
            BTreeSet::from(["other/h1".to_owned()])
        );
        t.unmark("ns", "h1", "b");
        assert!(!t.try_mark("ns", "h1", "b"), "only the holder unmarks");
        t.unmark("ns", "h1", "a");
        assert!(t.try_mark("ns", "h1", "b"));
    }
}
