//! The IPAM provider for `MaasIPPool` through the CAPI IPAM contract: every
//! `IPAddressClaim` whose `spec.poolRef` is a MaasIPPool — made by our data controller, another
//! provider or a person — gets an `IPAddress` (address, prefix, gateway, poolRef, claimRef) and
//! the claim's `status.addressRef` and `Ready` condition. See `docs/data-controller-ipam.md`.
//!
//! - Pure: [`net`] is address arithmetic and parsing; [`layout`] resolves a pool spec
//!   ([`PoolLayout`], errors naming the field) — both live in `capmaas-api`, shared with the
//!   admission webhook, and are re-exported here; [`allocator`] is the free-interval index of
//!   one pool ([`Allocator`]); [`decide`] and [`status`] are the controllers' decisions;
//!   [`watch`] maps events to objects.
//! - [`index`]: the per-process view of every pool's addresses, kept from the `IPAddress` watch.
//! - I/O: [`claim`], [`pool`] and [`address`] reconcile `IPAddressClaim`s, `MaasIPPool`s and
//!   `IPAddress`es, [`lock`] stale address locks ([`address_lock`] takes and lets go of
//!   them); `feed` runs one watch per kind for all four.
//!
//! Uniqueness is the API server's, twice over. An `IPAddress` is named after the pool's
//! `namePrefix` and the address, so a second create of an address in one pool fails whoever
//! tries it (another replica, a stale cache, a restarted process). And before it is created,
//! the claim takes the address's `MaasIPAddressLock`, a cluster-scoped object named after the
//! address alone, so two pools (of one namespace or two) cannot both hand it out. The index
//! only makes the first guess right.
//!
//! [`run`] runs the three controllers for one leadership term.

pub mod address;
pub mod address_lock;
pub mod allocator;
pub mod claim;
pub mod context;
pub mod decide;
pub mod error;
mod feed;
pub mod index;
pub mod lock;
pub mod pool;
pub mod state;
pub mod status;
pub mod watch;

#[cfg(test)]
mod test_support;

// The pool layout is shared with the admission webhook, which must reject exactly what this
// provider could not serve; the old module paths stay so the rest of the provider is unchanged.
pub use capmaas_api::ipam_layout as layout;
pub use capmaas_api::ipam_net as net;

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use capmaas_api::capi::Cluster;
use capmaas_api::capi_ipam::{IPAddress, IPAddressClaim};
use capmaas_api::{MaasIPAddressLock, MaasIPPool};
use capmaas_runtime::controller::{self as kit, Base, ReconcilerSettings, ready_when, scoped};
use futures::channel::mpsc;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use kube::runtime::{Controller, PredicateConfig, WatchStreamExt};

pub use allocator::Allocator;
pub use context::Ctx;
pub use error::{Error, Result};
pub use index::{PoolCounts, PoolKey, UsageIndex};
pub use layout::{
    AddressInfo, Family, LayoutError, PoolLayout, RangeInfo, Segment, dns_servers_for,
};

use self::feed::Feed;
use self::index::LayoutResult;

/// The `controller` label of the `IPAddressClaim` controller's metrics and logs.
pub const CLAIM_CONTROLLER: &str = "ipaddressclaim";
/// The `controller` label of the `MaasIPPool` controller.
pub const POOL_CONTROLLER: &str = "maasippool";
/// The `controller` label of the `IPAddress` controller.
pub const ADDRESS_CONTROLLER: &str = "ipaddress";
/// The `controller` label of the `MaasIPAddressLock` controller (stale locks).
pub const LOCK_CONTROLLER: &str = "maasipaddresslock";
/// Server-side watch timeout; below the idle timeouts of common load balancers.
const WATCH_TIMEOUT_SECS: u32 = 200;

/// The layout of `pool` (for the data renderer: [`dns_servers_for`] needs one).
pub fn pool_layout(pool: &MaasIPPool) -> LayoutResult {
    PoolLayout::from_spec(&pool.spec).map(Arc::new)
}

/// The IPAM controllers of one leadership term, built but not yet running.
pub struct Ipam {
    term: capmaas_runtime::Term,
    ctx: Arc<Ctx>,
    claims: Feed<IPAddressClaim>,
    addresses: Feed<IPAddress>,
    pools: Feed<MaasIPPool>,
    clusters: Feed<Cluster>,
    locks: Feed<MaasIPAddressLock>,
}

impl std::fmt::Debug for Ipam {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ipam")
            .field("ctx", &self.ctx)
            .finish_non_exhaustive()
    }
}

impl Ipam {
    /// The watches (one per kind, scoped by `--namespace`) and the shared context of `term`.
    pub fn new(term: &capmaas_runtime::Term) -> Self {
        let ns = term.settings.namespace.as_deref();
        let watch = &term.clients.watch;
        let wc = watcher::Config::default().timeout(WATCH_TIMEOUT_SECS);
        let claims = Feed::new(scoped::<IPAddressClaim>(watch, ns), wc.clone());
        let addresses = Feed::new(scoped::<IPAddress>(watch, ns), wc.clone());
        let pools = Feed::new(scoped::<MaasIPPool>(watch, ns), wc.clone());
        let clusters = Feed::new(scoped::<Cluster>(watch, ns), wc.clone());
        // The lock of an address is installation-wide, whatever namespace this replica serves.
        let locks = Feed::new(kube::Api::all(watch.clone()), wc);
        let ctx = Arc::new(Ctx {
            base: Base::for_term(term),
            index: Arc::new(Mutex::new(UsageIndex::new())),
            claims: claims.store(),
            pools: pools.store(),
            clusters: clusters.store(),
            addresses: addresses.store(),
            locks: locks.store(),
            synced: vec![
                claims.ready(),
                addresses.ready(),
                pools.ready(),
                clusters.ready(),
                locks.ready(),
            ],
        });
        Self {
            term: term.clone(),
            ctx,
            claims,
            addresses,
            pools,
            clusters,
            locks,
        }
    }

    /// Resolves to `true` once every cache and the usage index are filled (for `/readyz`).
    pub fn synced(&self) -> impl Future<Output = bool> + Send + 'static {
        let ctx = self.ctx.clone();
        async move { ctx.wait_synced().await }
    }

    /// The shared context (caches, usage index).
    pub fn context(&self) -> &Arc<Ctx> {
        &self.ctx
    }

    /// Runs the watches and the `IPAddressClaim`, `MaasIPPool` and `IPAddress` controllers
    /// until the term ends.
    pub async fn run(self) {
        let Self {
            term,
            ctx,
            mut claims,
            mut addresses,
            mut pools,
            mut clusters,
            mut locks,
        } = self;
        let (wake, woken) = mpsc::unbounded::<ObjectRef<IPAddressClaim>>();
        let (claim_store, pool_store) = (claims.store(), pools.store());

        let claim_controller = {
            let (for_pools, for_clusters, pools_of) =
                (claim_store.clone(), claim_store.clone(), pool_store.clone());
            Controller::for_stream(claims.subscribe(), claim_store.clone())
                .watches_stream(addresses.subscribe(), |a| watch::address_to_claim(&a))
                .watches_stream(
                    pools
                        .subscribe()
                        .predicate_filter(watch::pool_change, PredicateConfig::default()),
                    move |p| watch::pool_to_claims(&for_pools, &p),
                )
                .watches_stream(
                    clusters
                        .subscribe()
                        .predicate_filter(watch::cluster_pause, PredicateConfig::default()),
                    move |c| watch::cluster_to_claims(&for_clusters, &pools_of, &c),
                )
                .reconcile_on(woken)
        };
        let pool_controller = {
            let pools_of = pool_store.clone();
            Controller::for_stream(pools.subscribe(), pool_store.clone())
                .watches_stream(addresses.subscribe(), |a| watch::address_to_pool(&a))
                .watches_stream(
                    clusters
                        .subscribe()
                        .predicate_filter(watch::cluster_pause, PredicateConfig::default()),
                    move |c| watch::cluster_to_pools(&pools_of, &c),
                )
        };
        let address_controller = {
            let (index, index_of_locks) = (ctx.index.clone(), ctx.index.clone());
            Controller::for_stream(addresses.subscribe(), addresses.store())
                .watches_stream(claims.subscribe(), move |c| {
                    let index = index.lock().unwrap_or_else(PoisonError::into_inner);
                    watch::claim_to_addresses(&index, &c)
                })
                .watches_stream(locks.subscribe(), move |l| {
                    let index = index_of_locks
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner);
                    watch::lock_to_addresses(&index, &l)
                })
        };

        let lock_controller = Controller::for_stream(locks.subscribe(), locks.store())
            .watches_stream(addresses.subscribe(), |a| watch::address_to_lock(&a));
        // A lock let go: claims that found its address locked try again.
        let lock_hook = {
            let (claims, wake) = (claim_store.clone(), wake.clone());
            move |event: &Event<MaasIPAddressLock>, _: &Store<MaasIPAddressLock>| {
                if matches!(event, Event::Delete(_)) {
                    for claim in watch::all_waiting_claims(&claims) {
                        let _ = wake.unbounded_send(claim);
                    }
                }
            }
        };

        let address_hook = {
            let index = ctx.index.clone();
            let claims = claim_store.clone();
            move |event: &Event<IPAddress>, store: &Store<IPAddress>| {
                let woken = {
                    let mut index = index.lock().unwrap_or_else(PoisonError::into_inner);
                    match event {
                        Event::Apply(a) => {
                            index.apply(a);
                            Vec::new()
                        }
                        // A release: the claims waiting for an address of that pool try again.
                        Event::Delete(a) => index
                            .remove(a)
                            .map(|pool| watch::waiting_claims(&claims, &pool))
                            .unwrap_or_default(),
                        Event::InitDone => {
                            let all = store.state();
                            index.reset(all.iter().map(AsRef::as_ref));
                            // Deletions during a re-list are not seen one by one.
                            watch::all_waiting_claims(&claims)
                        }
                        Event::Init | Event::InitApply(_) => Vec::new(),
                    }
                };
                for claim in woken {
                    let _ = wake.unbounded_send(claim);
                }
            }
        };
        let cancel = &term.cancel;
        // Boxed: nine futures side by side are large.
        Box::pin(async {
            tokio::join!(
                claims.run(cancel.clone(), |_, _| {}),
                addresses.run(cancel.clone(), address_hook),
                pools.run(cancel.clone(), |_, _| {}),
                clusters.run(cancel.clone(), |_, _| {}),
                locks.run(cancel.clone(), lock_hook),
                kit::run(
                    claim_controller,
                    ReconcilerSettings::for_term(&term, CLAIM_CONTROLLER),
                    ctx.clone(),
                    claim::reconcile,
                ),
                kit::run(
                    pool_controller,
                    ReconcilerSettings::for_term(&term, POOL_CONTROLLER),
                    ctx.clone(),
                    pool::reconcile,
                ),
                kit::run(
                    address_controller,
                    ReconcilerSettings::for_term(&term, ADDRESS_CONTROLLER),
                    ctx.clone(),
                    address::reconcile,
                ),
                kit::run(
                    lock_controller,
                    ReconcilerSettings::for_term(&term, LOCK_CONTROLLER),
                    ctx,
                    lock::reconcile,
                ),
            );
        })
        .await;
    }
}

/// Runs the IPAM provider for one leadership term and returns when the term ends. Marks the
/// term ready once its caches are filled; a binary running other controllers in the same term
/// can instead build an [`Ipam`] and combine [`Ipam::synced`] with its own caches.
pub async fn run(term: &capmaas_runtime::Term) {
    let ipam = Ipam::new(term);
    let synced = ipam.synced();
    tokio::join!(
        ready_when(&term.health, &term.cancel, synced),
        Box::pin(ipam.run())
    );
}
