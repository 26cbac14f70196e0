//! What every reconcile of the IPAM controllers shares: clients, the caches, the usage index.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use capmaas_api::capi::Cluster;
use capmaas_api::capi_ipam::{IPAddress, IPAddressClaim};
use capmaas_api::{MaasIPAddressLock, MaasIPPool};
use capmaas_runtime::controller::Base;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};
use tokio::sync::watch;

use super::decide::pause_reason;
use super::index::UsageIndex;

/// Shared by every reconcile of one leadership term.
#[derive(Clone)]
pub struct Ctx {
    /// Client, field manager, Events on claims and pools.
    pub base: Base,
    /// Addresses of every pool, kept from the `IPAddress` watch.
    pub index: Arc<Mutex<UsageIndex>>,
    /// Cache of `IPAddressClaim`s.
    pub claims: Store<IPAddressClaim>,
    /// Cache of `MaasIPPool`s.
    pub pools: Store<MaasIPPool>,
    /// Cache of CAPI `Cluster`s (pause).
    pub clusters: Store<Cluster>,
    /// Cache of `IPAddress`es.
    pub addresses: Store<IPAddress>,
    /// Cache of the installation-wide address locks (cluster-scoped, whatever `--namespace`).
    pub locks: Store<MaasIPAddressLock>,
    /// One per watch (claims, addresses, pools, clusters, locks): `true` once its cache holds
    /// the first full list (for addresses: and the index too).
    pub synced: Vec<watch::Receiver<bool>>,
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

impl Ctx {
    /// The usage index, locked. Never held across an `.await`.
    pub fn index(&self) -> MutexGuard<'_, UsageIndex> {
        // Every index update is applied whole; a panic elsewhere cannot leave it half-written.
        self.index.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until every cache and the index are filled: deciding on a half-filled index would
    /// allocate a second address to a claim that has one.
    pub async fn wait_synced(&self) -> bool {
        for synced in &self.synced {
            if synced.clone().wait_for(|s| *s).await.is_err() {
                return false;
            }
        }
        true
    }

    /// The MaasIPPool `name` of `namespace`, from the cache.
    pub fn pool(&self, namespace: &str, name: &str) -> Option<Arc<MaasIPPool>> {
        self.pools.get(&ObjectRef::new(name).within(namespace))
    }

    fn cluster(&self, namespace: &str, name: Option<&str>) -> Option<Arc<Cluster>> {
        self.clusters.get(&ObjectRef::new(name?).within(namespace))
    }

    /// Why `claim` (of `pool`) is paused, if it is.
    pub fn claim_pause(&self, claim: &IPAddressClaim, pool: Option<&MaasIPPool>) -> Option<String> {
        let ns = claim.namespace().unwrap_or_default();
        let claim_cluster = self.cluster(&ns, claim.cluster_name());
        let pool_cluster = pool.and_then(|p| self.cluster(&ns, p.spec.cluster_name.as_deref()));
        pause_reason(
            Some(claim),
            pool,
            claim_cluster.as_deref(),
            pool_cluster.as_deref(),
        )
    }

    /// Why `pool` is paused, if it is.
    pub fn pool_pause(&self, pool: &MaasIPPool) -> Option<String> {
        let ns = pool.namespace().unwrap_or_default();
        let cluster = self.cluster(&ns, pool.spec.cluster_name.as_deref());
        pause_reason(None, Some(pool), None, cluster.as_deref())
    }
}
