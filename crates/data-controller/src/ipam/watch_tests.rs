use capmaas_api::capi::ClusterSpec;
use capmaas_api::capi_ipam::{IPAddressClaimStatus, IPAddressReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher::Event;

use super::*;
use crate::ipam::test_support::{address, claim, pool, spec, subnet};

fn store<K>(objects: Vec<K>) -> Store<K>
where
    K: kube::Resource<DynamicType = ()> + Clone + 'static,
{
    let mut writer = Writer::default();
    for o in objects {
        writer.apply_watcher_event(&Event::Apply(o));
    }
    writer.as_reader()
}

fn names<K: kube::Resource>(refs: Vec<ObjectRef<K>>) -> Vec<String>
where
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    let mut n: Vec<String> = refs.into_iter().map(|r| r.name).collect();
    n.sort();
    n
}

fn bound(mut c: IPAddressClaim) -> IPAddressClaim {
    c.status = Some(IPAddressClaimStatus {
        address_ref: Some(IPAddressReference { name: "x".into() }),
        conditions: None,
    });
    c
}

fn deleting(mut c: IPAddressClaim) -> IPAddressClaim {
    c.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
    c
}

#[test]
fn releases_and_pool_changes_wake_waiting_claims_of_that_pool() {
    let mut other_ns = claim("other", "w3", "p");
    other_ns.metadata.namespace = Some("other".into());
    let claims = store(vec![
        claim("ns", "w1", "p"),
        claim("ns", "w2", "p"),
        bound(claim("ns", "b", "p")),
        deleting(claim("ns", "d", "p")),
        claim("ns", "q", "q"),
        other_ns,
    ]);
    let key = PoolKey {
        namespace: "ns".into(),
        name: "p".into(),
    };
    assert_eq!(names(waiting_claims(&claims, &key)), ["w1", "w2"]);
    let p = pool("ns", "p", spec(vec![subnet("10.0.0.0/24")]));
    assert_eq!(names(pool_to_claims(&claims, &p)), ["d", "w1", "w2"]);
    assert_eq!(names(all_waiting_claims(&claims)), ["q", "w1", "w2", "w3"]);
}

#[test]
fn addresses_wake_their_claim_pool_and_lock() {
    let a = address("ns", "p-10-0-0-1", "p", "c", "10.0.0.1", "uid-c");
    let c = address_to_claim(&a).unwrap();
    assert_eq!((c.name.as_str(), c.namespace.as_deref()), ("c", Some("ns")));
    let p = address_to_pool(&a).unwrap();
    assert_eq!((p.name.as_str(), p.namespace.as_deref()), ("p", Some("ns")));
    let l = address_to_lock(&a).unwrap();
    assert_eq!(
        (l.name.as_str(), l.namespace),
        (lock_name(a.spec.address.parse().unwrap()).as_str(), None)
    );
    let mut foreign = a.clone();
    foreign.spec.pool_ref.kind = "InClusterIPPool".into();
    assert!(address_to_claim(&foreign).is_none());
    assert!(address_to_pool(&foreign).is_none());
    assert!(address_to_lock(&foreign).is_none());
}

#[test]
fn clusters_wake_their_claims_and_pools() {
    let mut own = claim("ns", "own", "p");
    own.spec.cluster_name = Some("prod".into());
    let mut lab = claim("ns", "lab", "p");
    lab.spec.cluster_name = Some("lab".into());
    let mut pool_of_prod = pool("ns", "prod-pool", spec(vec![subnet("10.0.0.0/24")]));
    pool_of_prod.spec.cluster_name = Some("prod".into());
    let claims = store(vec![own, lab, claim("ns", "via-pool", "prod-pool")]);
    let pools = store(vec![
        pool_of_prod,
        pool("ns", "p", spec(vec![subnet("10.1.0.0/24")])),
    ]);
    let mut cluster = Cluster::new("prod", ClusterSpec::default());
    cluster.metadata.namespace = Some("ns".into());
    assert_eq!(
        names(cluster_to_claims(&claims, &pools, &cluster)),
        ["own", "via-pool"]
    );
    assert_eq!(names(cluster_to_pools(&pools, &cluster)), ["prod-pool"]);
    let before = cluster_pause(&cluster);
    cluster.spec.paused = Some(true);
    assert_ne!(before, cluster_pause(&cluster));
}

#[test]
fn pool_status_changes_do_not_wake_claims() {
    let mut p = pool("ns", "p", spec(vec![subnet("10.0.0.0/24")]));
    let before = pool_change(&p);
    p.status = Some(capmaas_api::MaasIPPoolStatus {
        addresses_in_use: Some(3),
        ..Default::default()
    });
    assert_eq!(before, pool_change(&p));
    p.metadata.generation = Some(2);
    assert_ne!(before, pool_change(&p));
}

#[test]
fn deleting_claims_wake_their_addresses() {
    let mut index = UsageIndex::new();
    index.apply(&address("ns", "p-10-0-0-1", "p", "c", "10.0.0.1", "uid-c"));
    let c = claim("ns", "c", "p");
    assert!(claim_to_addresses(&index, &c).is_empty());
    assert_eq!(
        names(claim_to_addresses(&index, &deleting(c))),
        ["p-10-0-0-1"]
    );
}

#[test]
fn a_lock_wakes_the_address_of_its_claim_only() {
    let mut index = UsageIndex::new();
    index.apply(&address("ns", "p-10-0-0-1", "p", "c", "10.0.0.1", "uid-c"));
    index.apply(&address("ns", "p-10-0-0-2", "p", "c", "10.0.0.2", "uid-c"));
    let holder = |ns: &str| capmaas_api::LockHolder {
        namespace: ns.into(),
        name: "c".into(),
        uid: "uid-c".into(),
    };
    let lock =
        |ns: &str, a: &str| MaasIPAddressLock::for_address(a.parse().unwrap(), holder(ns), "p");
    let woken = lock_to_addresses(&index, &lock("ns", "10.0.0.1"));
    assert_eq!(names(woken.clone()), ["p-10-0-0-1"]);
    assert_eq!(woken[0].namespace.as_deref(), Some("ns"));
    assert!(lock_to_addresses(&index, &lock("other", "10.0.0.1")).is_empty());
    assert!(lock_to_addresses(&index, &lock("ns", "10.0.0.3")).is_empty());
}
