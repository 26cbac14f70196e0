//! The MaasIPPool IPAM provider, run in-process against a real API server (capmaas-testenv,
//! with the CAPI IPAM CRDs and the garbage collector).
//!
//! One API server hosts every scenario in its own namespace. Instance `a` serves every
//! namespace; instance `b` (a second replica, no leader election: both act) serves the
//! namespace of the race scenario too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::time::Duration;

use capmaas_api::capi::{Cluster, ClusterSpec};
use capmaas_api::capi_ipam::{IPAddress, IPAddressClaim, IPAddressClaimSpec, IPPoolReference};
use capmaas_api::conditions as cond;
use capmaas_api::ipam::IpPoolRange;
use capmaas_api::keys::{FINALIZER_IP_ADDRESS, FINALIZER_IP_ADDRESS_CLAIM, FINALIZER_MAAS_IP_POOL};
use capmaas_api::{MaasIPAddressLock, MaasIPPool, MaasIPPoolSpec};
use capmaas_runtime::BoxError;
use capmaas_runtime::embedded::Running;
use capmaas_testenv::{TestEnv, eventually};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

// The unit tests' builders; these tests use a few.
#[allow(dead_code)]
#[path = "../src/ipam/test_support.rs"]
mod test_support;

use test_support::{range, subnet};

const WAIT: Duration = Duration::from_secs(60);
const CONSUMER: &str = "consumer.example.com/in-use";

async fn start_ipam(env: &TestEnv, flags: &[&str]) -> Running {
    let config = env.kube_config().await.unwrap();
    Running::start("data-controller", config, flags, |term| async move {
        data_controller::ipam::run(&term).await;
        Ok::<(), BoxError>(())
    })
    .await
    .unwrap()
}

/// Stops one IPAM instance, failing the test unless it returns cleanly within 15 s.
async fn stop_ipam(instance: Running) {
    instance
        .stop(Duration::from_secs(15))
        .await
        .expect("IPAM stops");
}

fn pool_spec(pools: Vec<IpPoolRange>) -> MaasIPPoolSpec {
    MaasIPPoolSpec {
        name_prefix: "net".into(),
        ..test_support::spec(pools)
    }
}

/// Merge-patches the object `name` of `api`.
async fn merge<K>(api: &Api<K>, name: &str, patch: serde_json::Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap();
}

/// The first Warning Event about the object `name` of `ns`, once there is one.
async fn warning_event(
    client: &Client,
    ns: &str,
    name: &str,
) -> k8s_openapi::api::events::v1::Event {
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), ns);
    eventually("a Warning Event", WAIT, || async {
        events
            .list(&kube::api::ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .find(|e| {
                e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                    && e.type_.as_deref() == Some("Warning")
            })
    })
    .await
}

async fn create_pool(client: &Client, ns: &str, name: &str, spec: MaasIPPoolSpec) {
    Api::<MaasIPPool>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &MaasIPPool::new(name, spec))
        .await
        .unwrap();
}

fn claim_object(name: &str, pool: &str, finalizers: &[&str]) -> IPAddressClaim {
    let mut claim = IPAddressClaim::new(
        name,
        IPAddressClaimSpec {
            pool_ref: IPPoolReference::maas_ip_pool(pool),
            cluster_name: None,
        },
    );
    if !finalizers.is_empty() {
        claim.metadata.finalizers = Some(finalizers.iter().map(|f| (*f).to_owned()).collect());
    }
    claim
}

async fn create_claim(client: &Client, ns: &str, claim: &IPAddressClaim) {
    Api::<IPAddressClaim>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), claim)
        .await
        .unwrap();
}

fn ready(claim: &IPAddressClaim) -> Option<&Condition> {
    capmaas_runtime::get_condition(claim.status.as_ref()?.conditions.as_ref()?, cond::READY)
}

/// The `IPAddress` claim `name` is bound to, once it is Ready.
async fn served(client: &Client, ns: &str, name: &str) -> IPAddress {
    let claims: Api<IPAddressClaim> = Api::namespaced(client.clone(), ns);
    let addresses: Api<IPAddress> = Api::namespaced(client.clone(), ns);
    eventually(&format!("claim {name} served"), WAIT, || async {
        let claim = claims.get(name).await.unwrap();
        if ready(&claim)?.status != "True" {
            return None;
        }
        addresses.get_opt(claim.address_ref()?).await.unwrap()
    })
    .await
}

async fn pool_counts(client: &Client, ns: &str, name: &str) -> (Option<i64>, Option<i64>) {
    let pool = Api::<MaasIPPool>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .unwrap();
    let status = pool.status.unwrap_or_default();
    (status.addresses_in_use, status.addresses_free)
}

async fn counts_become(client: &Client, ns: &str, pool: &str, in_use: i64, free: i64) {
    let wanted = (Some(in_use), Some(free));
    let mut last = (None, None);
    for _ in 0..(WAIT.as_millis() / 100) {
        last = pool_counts(client, ns, pool).await;
        if last == wanted {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let p = Api::<MaasIPPool>::namespaced(client.clone(), ns)
        .get(pool)
        .await
        .unwrap();
    panic!(
        "pool {pool}: counts {last:?}, wanted {wanted:?}; status {:?}",
        p.status
    );
}

/// Every claim's address and every address's claim, checked for double booking: no two
/// `IPAddress`es of an address, no two claims on one `IPAddress`, no claim pointing at an
/// `IPAddress` of another claim.
///
/// Claims are listed *before* addresses. The two lists are two moments, and only this order is
/// sound: a claim never moves away from an address it names while that address exists, so an
/// address listed later is still the one the claim named. Listed the other way round, an
/// extra address released by one claim and handed to the next between the two lists looks
/// like a claim pointing at another claim's address.
async fn check_never_twice(client: &Client, ns: &str) -> BTreeMap<String, IpAddr> {
    let claims = Api::<IPAddressClaim>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    let addresses = Api::<IPAddress>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    let mut by_address = BTreeMap::new();
    for a in &addresses {
        let ip: IpAddr = a.spec.address.parse().unwrap();
        if let Some(other) = by_address.insert(ip, a.name_any()) {
            panic!("{ip} is held by IPAddress {other} and {}", a.name_any());
        }
    }
    let by_name: BTreeMap<String, &IPAddress> =
        addresses.iter().map(|a| (a.name_any(), a)).collect();
    let mut bound = BTreeMap::new();
    let mut refs = BTreeSet::new();
    for c in &claims {
        // A terminating claim keeps the addressRef it had while its address is released, as
        // CAPI's in-cluster provider does: once the IPAddress is deleted, the same name may be
        // created for the next claim before this one's finalizer is gone.
        if c.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let Some(name) = c.address_ref() else {
            continue;
        };
        assert!(
            refs.insert(name.to_owned()),
            "two claims point at IPAddress {name}"
        );
        if let Some(a) = by_name.get(name) {
            assert_eq!(
                a.spec.claim_ref.name,
                c.name_any(),
                "claim {} points at another claim's address",
                c.name_any()
            );
            bound.insert(c.name_any(), a.spec.address.parse().unwrap());
        }
    }
    bound
}

/// 30 claims created at once, served by two replicas at the same time: all served, with
/// distinct addresses inside the pool (never an excluded address or the gateway), the
/// pre-allocation honoured, no second address left behind, the counts right.
async fn thirty_claims_two_replicas(client: &Client, ns: &str) {
    let mut spec = pool_spec(vec![range("10.10.0.10", "10.10.0.60")]);
    spec.prefix = Some(24);
    spec.gateway = Some("10.10.0.1".into());
    spec.exclusions = Some(vec!["10.10.0.20-10.10.0.24".into(), "10.10.0.30".into()]);
    spec.pre_allocations = Some([("claim-7".to_owned(), "10.10.0.50".to_owned())].into());
    create_pool(client, ns, "race", spec).await;
    let names: Vec<String> = (0..30).map(|i| format!("claim-{i}")).collect();
    futures::future::join_all(
        names
            .iter()
            .map(|n| async move { create_claim(client, ns, &claim_object(n, "race", &[])).await }),
    )
    .await;
    // Checked over and over while the replicas race, not only at the end.
    let bound = eventually("30 claims served", WAIT, || async {
        let bound = check_never_twice(client, ns).await;
        (bound.len() == 30).then_some(bound)
    })
    .await;
    let allowed = |ip: &IpAddr| {
        let IpAddr::V4(v4) = ip else { return false };
        let last = v4.octets()[3];
        v4.octets()[..3] == [10, 10, 0]
            && (10..=60).contains(&last)
            && !(20..=24).contains(&last)
            && last != 30
    };
    for (claim, ip) in &bound {
        assert!(allowed(ip), "{claim} got {ip}");
    }
    assert_eq!(bound["claim-7"], "10.10.0.50".parse::<IpAddr>().unwrap());
    let a = served(client, ns, "claim-3").await;
    assert_eq!(
        (a.spec.prefix, a.spec.gateway.as_deref()),
        (24, Some("10.10.0.1"))
    );
    assert_eq!(a.finalizers(), [FINALIZER_IP_ADDRESS]);
    let owners: Vec<_> = a
        .owner_references()
        .iter()
        .map(|o| o.kind.as_str())
        .collect();
    assert_eq!(owners, ["IPAddressClaim", "MaasIPPool"]);
    // Extras of the race are released: exactly one IPAddress per claim.
    eventually("one IPAddress per claim", WAIT, || async {
        let n = Api::<IPAddress>::namespaced(client.clone(), ns)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len();
        (n == 30).then_some(())
    })
    .await;
    check_never_twice(client, ns).await;
    // 51 addresses - 6 excluded - 1 pre-allocated = 44 allocatable; 29 of them used.
    counts_become(client, ns, "race", 30, 15).await;
    let pool = Api::<MaasIPPool>::namespaced(client.clone(), ns)
        .get("race")
        .await
        .unwrap();
    assert!(
        pool.finalizers()
            .contains(&FINALIZER_MAAS_IP_POOL.to_owned())
    );
    for name in &names {
        let c = Api::<IPAddressClaim>::namespaced(client.clone(), ns)
            .get(name)
            .await
            .unwrap();
        assert!(
            c.finalizers()
                .contains(&FINALIZER_IP_ADDRESS_CLAIM.to_owned())
        );
    }
}

/// Every address held across `namespaces`, checked for double booking across them too.
async fn held_across(client: &Client, namespaces: &[&str]) -> BTreeMap<IpAddr, (String, String)> {
    let mut held = BTreeMap::new();
    for ns in namespaces {
        for (claim, ip) in check_never_twice(client, ns).await {
            if let Some(other) = held.insert(ip, ((*ns).to_owned(), claim.clone())) {
                panic!("{ip} is held by {other:?} and by {ns}/{claim}");
            }
        }
    }
    held
}

/// The address locks of `prefix` (`10.60.0.`): address → (namespace, claim).
async fn locks_of(client: &Client, prefix: &str) -> BTreeMap<IpAddr, (String, String)> {
    Api::<MaasIPAddressLock>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|l| l.spec.address.starts_with(prefix))
        .map(|l| {
            (
                l.spec.address.parse().unwrap(),
                (l.spec.claim.namespace, l.spec.claim.name),
            )
        })
        .collect()
}

/// Two pools in two namespaces over the same 12 addresses (sites that should not overlap, but
/// do), 10 claims in each created at once and served by two replicas (one serving both
/// namespaces, one the second only): never one address to two claims, whatever the namespace;
/// each address held has one lock naming its claim; released addresses serve waiting claims of
/// either namespace; a lock deleted by hand still holds; nothing is locked at the end.
async fn overlapping_pools_in_two_namespaces(client: &Client, first: &str, second: &str) {
    let sites = [first, second];
    for ns in sites {
        let mut spec = pool_spec(vec![range("10.60.0.1", "10.60.0.12")]);
        spec.prefix = Some(24);
        spec.name_prefix = "site".into();
        create_pool(client, ns, "site", spec).await;
    }
    let claims: Vec<(&str, String)> = sites
        .iter()
        .flat_map(|ns| (0..10).map(move |i| (*ns, format!("c-{i}"))))
        .collect();
    futures::future::join_all(claims.iter().map(|(ns, name)| async move {
        create_claim(client, ns, &claim_object(name, "site", &[])).await;
    }))
    .await;
    // Checked over and over while the replicas race, not only at the end.
    let held = eventually("12 addresses held across both namespaces", WAIT, || async {
        let held = held_across(client, &sites).await;
        (held.len() == 12).then_some(held)
    })
    .await;
    eventually(
        "one lock per address held, naming its claim",
        WAIT,
        || async { (locks_of(client, "10.60.0.").await == held).then_some(()) },
    )
    .await;

    // Three released (from the namespace with the most): their addresses go to waiting claims.
    let busiest = if held.values().filter(|(ns, _)| ns == first).count() >= 6 {
        first
    } else {
        second
    };
    let released: Vec<(IpAddr, String)> = held
        .iter()
        .filter(|(_, (ns, _))| ns == busiest)
        .take(3)
        .map(|(ip, (_, claim))| (*ip, claim.clone()))
        .collect();
    let api: Api<IPAddressClaim> = Api::namespaced(client.clone(), busiest);
    for (_, claim) in &released {
        api.delete(claim, &DeleteParams::default()).await.unwrap();
    }
    let again = eventually(
        "12 addresses held again by the waiting claims",
        WAIT,
        || async {
            let held = held_across(client, &sites).await;
            let renewed = released.iter().all(|(ip, claim)| {
                held.get(ip)
                    .is_some_and(|(ns, c)| ns != busiest || c != claim)
            });
            (held.len() == 12 && renewed).then_some(held)
        },
    )
    .await;
    eventually("the locks follow the new holders", WAIT, || async {
        (locks_of(client, "10.60.0.").await == again).then_some(())
    })
    .await;

    // A lock deleted by hand keeps holding (terminating, its finalizer on) while its claim
    // holds the address: the waiting claims, woken by nothing, still cannot take it.
    let (ip, holder) = again.iter().next().map(|(ip, h)| (*ip, h.clone())).unwrap();
    let locks: Api<MaasIPAddressLock> = Api::all(client.clone());
    let name = capmaas_api::ipam_lock::lock_name(ip);
    locks.delete(&name, &DeleteParams::default()).await.unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let terminating = locks.get(&name).await.unwrap();
    assert!(terminating.metadata.deletion_timestamp.is_some());
    assert_eq!(
        (
            terminating.spec.claim.namespace,
            terminating.spec.claim.name
        ),
        holder
    );
    assert_eq!(held_across(client, &sites).await, again);

    // Everything released: no lock is left.
    for ns in sites {
        Api::<IPAddressClaim>::namespaced(client.clone(), ns)
            .delete_collection(&DeleteParams::default(), &ListParams::default())
            .await
            .unwrap();
    }
    eventually("no lock left", WAIT, || async {
        locks_of(client, "10.60.0.").await.is_empty().then_some(())
    })
    .await;
}

/// A full pool answers `PoolExhausted` naming the pool and the claim, and serves the claim as
/// soon as another claim is deleted.
async fn exhausted_then_served(client: &Client, ns: &str) {
    let mut spec = pool_spec(vec![subnet("10.20.0.0/30")]);
    spec.name_prefix = "small".into();
    create_pool(client, ns, "small", spec).await;
    for name in ["a", "b"] {
        create_claim(client, ns, &claim_object(name, "small", &[])).await;
    }
    let a = served(client, ns, "a").await;
    let b = served(client, ns, "b").await;
    assert_eq!(
        BTreeSet::from([a.spec.address.as_str(), b.spec.address.as_str()]),
        BTreeSet::from(["10.20.0.1", "10.20.0.2"]),
        "network and broadcast are never handed out"
    );
    create_claim(client, ns, &claim_object("c", "small", &[])).await;
    let claims: Api<IPAddressClaim> = Api::namespaced(client.clone(), ns);
    let condition = eventually("PoolExhausted", WAIT, || async {
        let c = claims.get("c").await.unwrap();
        ready(&c).filter(|r| r.reason == "PoolExhausted").cloned()
    })
    .await;
    assert_eq!(condition.status, "False");
    assert!(
        condition
            .message
            .contains(&format!("MaasIPPool {ns}/small")),
        "{}",
        condition.message
    );
    assert!(
        condition
            .message
            .contains(&format!("IPAddressClaim {ns}/c")),
        "{}",
        condition.message
    );
    counts_become(client, ns, "small", 2, 0).await;

    claims.delete("a", &DeleteParams::default()).await.unwrap();
    let c = served(client, ns, "c").await;
    assert_eq!(
        c.spec.address, a.spec.address,
        "the released address serves the waiting claim"
    );
    eventually("claim a gone", WAIT, || async {
        claims.get_opt("a").await.unwrap().is_none().then_some(())
    })
    .await;
    counts_become(client, ns, "small", 2, 0).await;
    check_never_twice(client, ns).await;

    // An exclusion over an address in use is accepted, and the pool says which address it
    // strands (condition and Warning Event); lifting it clears the condition.
    let pools: Api<MaasIPPool> = Api::namespaced(client.clone(), ns);
    let in_pool = |p: MaasIPPool| {
        p.status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == cond::ADDRESSES_IN_POOL)
    };
    let exclude = |list: Vec<String>| json!({"spec": {"exclusions": list}});
    merge(&pools, "small", exclude(vec![b.spec.address.clone()])).await;
    let stranded = eventually("AddressesStranded", WAIT, || async {
        in_pool(pools.get("small").await.unwrap()).filter(|c| c.status == "False")
    })
    .await;
    assert_eq!(stranded.reason, "AddressesStranded");
    assert!(
        stranded.message.contains(&b.spec.address),
        "{}",
        stranded.message
    );
    let warned = warning_event(client, ns, "small").await;
    assert_eq!(warned.reason.as_deref(), Some("AddressesStranded"));
    merge(&pools, "small", json!({"spec": {"exclusions": null}})).await;
    eventually("AddressesInPool again", WAIT, || async {
        in_pool(pools.get("small").await.unwrap()).filter(|c| c.status == "True")
    })
    .await;

    // Deleting the pool waits for its addresses.
    pools
        .delete("small", &DeleteParams::default())
        .await
        .unwrap();
    eventually("pool waits for its addresses", WAIT, || async {
        let p = pools.get("small").await.unwrap();
        let ready = p
            .status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == cond::READY)?;
        (ready.reason == "Deleting").then_some(())
    })
    .await;
    for name in ["b", "c"] {
        claims.delete(name, &DeleteParams::default()).await.unwrap();
    }
    eventually("pool gone", WAIT, || async {
        pools
            .get_opt("small")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
}

/// A consumer's finalizer on the claim means "in use": the address stays until it is gone.
/// A claim deleted right after its creation leaves no address behind.
async fn in_use_handshake(client: &Client, ns: &str) {
    let mut spec = pool_spec(vec![subnet("10.30.0.0/24")]);
    spec.name_prefix = "held".into();
    create_pool(client, ns, "held", spec).await;
    create_claim(client, ns, &claim_object("held", "held", &[CONSUMER])).await;
    let address = served(client, ns, "held").await;
    let claims: Api<IPAddressClaim> = Api::namespaced(client.clone(), ns);
    let addresses: Api<IPAddress> = Api::namespaced(client.clone(), ns);
    claims
        .delete("held", &DeleteParams::default())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let still = addresses.get(&address.name_any()).await.unwrap();
    assert!(
        still.metadata.deletion_timestamp.is_none(),
        "released while the consumer holds the claim"
    );
    assert!(
        claims
            .get("held")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );
    claims
        .patch(
            "held",
            &PatchParams::default(),
            &Patch::Json::<()>(
                serde_json::from_value(json!([
                    {"op": "test", "path": "/metadata/finalizers/0", "value": CONSUMER},
                    {"op": "remove", "path": "/metadata/finalizers/0"}
                ]))
                .unwrap(),
            ),
        )
        .await
        .unwrap();
    eventually("claim and address gone", WAIT, || async {
        let gone = claims.get_opt("held").await.unwrap().is_none()
            && addresses
                .get_opt(&address.name_any())
                .await
                .unwrap()
                .is_none();
        gone.then_some(())
    })
    .await;

    // Created and deleted at once: whatever was allocated is released.
    create_claim(client, ns, &claim_object("fleeting", "held", &[])).await;
    claims
        .delete("fleeting", &DeleteParams::default())
        .await
        .unwrap();
    eventually("no address left behind", WAIT, || async {
        let left = addresses.list(&ListParams::default()).await.unwrap().items;
        (left.is_empty() && claims.get_opt("fleeting").await.unwrap().is_none()).then_some(())
    })
    .await;
    counts_become(client, ns, "held", 0, 254).await;
}

/// An IPv6 range: address, prefix, gateway and the address's name; and an invalid pool names
/// the field in `PoolValid` and in the claim's condition.
async fn ipv6_and_invalid_pools(client: &Client, ns: &str) {
    let mut spec = pool_spec(vec![IpPoolRange {
        prefix: Some(64),
        gateway: Some("fd00:10::1".into()),
        ..range("fd00:10::10", "fd00:10::20")
    }]);
    spec.name_prefix = "v6".into();
    spec.dns_servers = Some(vec!["fd00:10::53".into()]);
    create_pool(client, ns, "v6", spec).await;
    create_claim(client, ns, &claim_object("six", "v6", &[])).await;
    let a = served(client, ns, "six").await;
    assert_eq!(a.name_any(), "v6-fd00-10--10");
    assert_eq!(a.spec.address, "fd00:10::10");
    assert_eq!(
        (a.spec.prefix, a.spec.gateway.as_deref()),
        (64, Some("fd00:10::1"))
    );
    counts_become(client, ns, "v6", 1, 16).await;

    let mut bad = pool_spec(vec![
        range("10.40.0.10", "10.40.0.20"),
        range("10.40.0.15", "10.40.0.30"),
    ]);
    bad.prefix = Some(24);
    bad.name_prefix = "bad".into();
    create_pool(client, ns, "bad", bad).await;
    let pools: Api<MaasIPPool> = Api::namespaced(client.clone(), ns);
    let valid = eventually("PoolValid=False", WAIT, || async {
        let p = pools.get("bad").await.unwrap();
        p.status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == cond::POOL_VALID)
    })
    .await;
    assert_eq!(
        (valid.status.as_str(), valid.reason.as_str()),
        ("False", "InvalidPool")
    );
    assert_eq!(valid.message, "spec.pools[1]: overlaps spec.pools[0]");
    create_claim(client, ns, &claim_object("on-bad", "bad", &[])).await;
    let claims: Api<IPAddressClaim> = Api::namespaced(client.clone(), ns);
    let condition = eventually("AllocationFailed", WAIT, || async {
        ready(&claims.get("on-bad").await.unwrap()).cloned()
    })
    .await;
    assert_eq!(condition.reason, "AllocationFailed");
    assert!(
        condition
            .message
            .contains("spec.pools[1]: overlaps spec.pools[0]"),
        "{}",
        condition.message
    );
    // A claim on a pool that does not exist is told so by its condition and a Warning Event.
    create_claim(client, ns, &claim_object("on-missing", "no-such-pool", &[])).await;
    let condition = eventually("no such pool", WAIT, || async {
        ready(&claims.get("on-missing").await.unwrap()).cloned()
    })
    .await;
    assert!(condition.message.contains("not found"), "{condition:?}");
    let warned = warning_event(client, ns, "on-missing").await;
    assert!(
        warned
            .note
            .as_deref()
            .unwrap_or_default()
            .contains("not found"),
        "{warned:?}"
    );
    // Fixing the pool serves the claim.
    merge(
        &pools,
        "bad",
        json!({"spec": {"pools": [{"start": "10.40.0.10", "end": "10.40.0.30"}]}}),
    )
    .await;
    assert_eq!(
        served(client, ns, "on-bad").await.spec.address,
        "10.40.0.10"
    );
}

/// Claims of a paused Cluster wait; unpausing serves them. Claims of other pool kinds are
/// left alone.
async fn paused_and_foreign_claims(client: &Client, ns: &str) {
    let mut cluster = Cluster::new("prod", ClusterSpec::default());
    cluster.spec.paused = Some(true);
    let clusters: Api<Cluster> = Api::namespaced(client.clone(), ns);
    clusters
        .create(&PostParams::default(), &cluster)
        .await
        .unwrap();
    let mut spec = pool_spec(vec![subnet("10.50.0.0/24")]);
    spec.name_prefix = "paused".into();
    create_pool(client, ns, "paused", spec).await;
    let mut claim = claim_object("waits", "paused", &[]);
    claim.spec.cluster_name = Some("prod".into());
    create_claim(client, ns, &claim).await;
    let mut foreign = claim_object("foreign", "other", &[]);
    foreign.spec.pool_ref = IPPoolReference {
        api_group: "ipam.cluster.x-k8s.io".into(),
        kind: "InClusterIPPool".into(),
        name: "other".into(),
    };
    create_claim(client, ns, &foreign).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let claims: Api<IPAddressClaim> = Api::namespaced(client.clone(), ns);
    for name in ["waits", "foreign"] {
        let c = claims.get(name).await.unwrap();
        assert!(
            c.finalizers().is_empty() && c.status.is_none(),
            "{name} was touched: {c:?}"
        );
    }
    merge(&clusters, "prod", json!({"spec": {"paused": false}})).await;
    assert_eq!(served(client, ns, "waits").await.spec.address, "10.50.0.1");
    let foreign = claims.get("foreign").await.unwrap();
    assert!(foreign.finalizers().is_empty() && foreign.status.is_none());
}

/// A claim that took an address's lock and died before creating its `IPAddress` (a SIGKILL of
/// data-controller between the two writes) finishes that allocation after the restart: it takes
/// the address it locked, not the pool's next free one, so a full pool has room for every claim
/// (the e2e `data` scenario starved a machine on this until the lock was swept as stale).
async fn a_crashed_allocation_is_finished_on_its_locked_address(client: &Client, ns: &str) {
    let mut spec = pool_spec(vec![subnet("10.77.0.0/30")]);
    spec.name_prefix = "resumed".into();
    create_pool(client, ns, "resumed", spec).await;
    let claims: Api<IPAddressClaim> = Api::namespaced(client.clone(), ns);
    // Paused while the test writes the state a crash leaves: the lock of .2, no IPAddress.
    // Locks are cluster-wide: a subnet no other scenario uses.
    let mut first = claim_object("first", "resumed", &[FINALIZER_IP_ADDRESS_CLAIM]);
    first
        .annotations_mut()
        .insert("cluster.x-k8s.io/paused".into(), String::new());
    create_claim(client, ns, &first).await;
    let first = claims.get("first").await.unwrap();
    let holder = capmaas_api::LockHolder {
        namespace: ns.into(),
        name: "first".into(),
        uid: first.uid().unwrap(),
    };
    let locked: IpAddr = "10.77.0.2".parse().unwrap();
    Api::<MaasIPAddressLock>::all(client.clone())
        .create(
            &PostParams::default(),
            &MaasIPAddressLock::for_address(locked, holder, "resumed"),
        )
        .await
        .unwrap();
    merge(
        &claims,
        "first",
        json!({"metadata": {"annotations": {"cluster.x-k8s.io/paused": null}}}),
    )
    .await;
    assert_eq!(served(client, ns, "first").await.spec.address, "10.77.0.2");
    create_claim(client, ns, &claim_object("second", "resumed", &[])).await;
    assert_eq!(served(client, ns, "second").await.spec.address, "10.77.0.1");
}

#[tokio::test]
async fn ipam_against_a_real_api_server() {
    // `RUST_LOG=data_controller=debug` shows the controllers' logs.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let (race, exhausted, handshake, v6, paused) = (
        env.create_namespace("ipam-race").await.unwrap(),
        env.create_namespace("ipam-exhausted").await.unwrap(),
        env.create_namespace("ipam-handshake").await.unwrap(),
        env.create_namespace("ipam-v6").await.unwrap(),
        env.create_namespace("ipam-paused").await.unwrap(),
    );
    let resumed = env.create_namespace("ipam-resumed").await.unwrap();
    let (site_a, site_b) = (
        env.create_namespace("ipam-site-a").await.unwrap(),
        env.create_namespace("ipam-site-b").await.unwrap(),
    );
    let a = start_ipam(&env, &["--concurrency=4"]).await;
    let b = start_ipam(&env, &["--concurrency=4", &format!("--namespace={race}")]).await;
    let c = start_ipam(&env, &["--concurrency=4", &format!("--namespace={site_b}")]).await;
    tokio::join!(
        thirty_claims_two_replicas(&client, &race),
        exhausted_then_served(&client, &exhausted),
        in_use_handshake(&client, &handshake),
        ipv6_and_invalid_pools(&client, &v6),
        paused_and_foreign_claims(&client, &paused),
        overlapping_pools_in_two_namespaces(&client, &site_a, &site_b),
        a_crashed_allocation_is_finished_on_its_locked_address(&client, &resumed),
    );
    tokio::join!(stop_ipam(a), stop_ipam(b), stop_ipam(c));
}
