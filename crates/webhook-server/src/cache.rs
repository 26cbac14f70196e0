//! Watch caches of the objects cross-object rules look at (MaasIPPools, MaasInventories), so an
//! admission review never waits on an API call.
//!
//! A cache can lag a write by the watch latency: two conflicting objects created within that
//! window can both pass. That window is covered where it matters by the controllers themselves
//! (maas-client's per-machine binding Lease; address names that make a second IPAddress for one
//! address impossible); the webhook's job is the clear, early error in the common case.

use std::sync::Arc;

use capmaas_api::dns::AllowedDomains;
use capmaas_api::{MaasIPPool, MaasInventory};
use capmaas_runtime::controller::{Keep, cached, scoped};
use futures::StreamExt;
use kube::Client;
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use tokio_util::sync::CancellationToken;

use crate::validate::Lookups;

/// The watch caches.
#[derive(Clone, Debug)]
pub struct Caches {
    pools: Store<MaasIPPool>,
    inventories: Store<MaasInventory>,
    dns_domains: AllowedDomains,
}

impl Caches {
    /// Starts the reflectors (in the background until `cancel`) and returns their stores, with
    /// the installation's allowed DNS domains beside them.
    pub fn start(
        client: &Client,
        namespace: Option<&str>,
        dns_domains: AllowedDomains,
        cancel: &CancellationToken,
    ) -> Self {
        let pools = reflect::<MaasIPPool>(client, namespace, cancel);
        let inventories = reflect::<MaasInventory>(client, namespace, cancel);
        Self {
            pools,
            inventories,
            dns_domains,
        }
    }

    /// Resolves once every cache holds its initial list.
    pub async fn wait_until_ready(&self) -> bool {
        self.pools.wait_until_ready().await.is_ok()
            && self.inventories.wait_until_ready().await.is_ok()
    }
}

impl Lookups for Caches {
    fn ip_pools(&self) -> Vec<Arc<MaasIPPool>> {
        self.pools.state()
    }

    fn inventories(&self) -> Vec<Arc<MaasInventory>> {
        self.inventories.state()
    }

    fn dns_domains(&self) -> &AllowedDomains {
        &self.dns_domains
    }
}

fn reflect<K>(client: &Client, namespace: Option<&str>, cancel: &CancellationToken) -> Store<K>
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    // Only what the rules read: the spec, names and status counters; managed fields are noise.
    let (store, stream) = cached(
        scoped::<K>(client, namespace),
        watcher::Config::default(),
        Keep::WithoutManagedFields,
    );
    let cancel = cancel.clone();
    tokio::spawn(async move {
        let drive = stream.for_each(|_| async {});
        tokio::select! {
            () = cancel.cancelled() => {}
            () = drive => {}
        }
    });
    store
}
