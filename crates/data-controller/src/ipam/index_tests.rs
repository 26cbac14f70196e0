use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::*;
use crate::ipam::test_support::{address, pool, spec, subnet};

const SEQ: AllocationStrategy = AllocationStrategy::Sequential;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn setup() -> (UsageIndex, PoolKey, MaasIPPool) {
    let mut index = UsageIndex::new();
    let p = pool("ns", "p", spec(vec![subnet("10.0.0.0/29")]));
    let key = PoolKey::of(&p);
    assert!(index.layout(&p).is_ok());
    (index, key, p)
}

#[test]
fn watched_addresses_are_used_and_released() {
    let (mut index, key, _) = setup();
    let now = Instant::now();
    index.apply(&address("ns", "p-10-0-0-1", "p", "a", "10.0.0.1", "uid-a"));
    index.apply(&address("ns", "p-10-0-0-2", "p", "b", "10.0.0.2", "uid-b"));
    // Other pools and other namespaces do not count.
    index.apply(&address("ns", "q-10-0-0-3", "q", "c", "10.0.0.3", "uid-c"));
    index.apply(&address(
        "other",
        "p-10-0-0-3",
        "p",
        "c",
        "10.0.0.3",
        "uid-c",
    ));
    assert_eq!(index.counts(&key), Some(PoolCounts { in_use: 2, free: 4 }));
    assert_eq!(index.objects(&key), 2);
    assert_eq!(index.allocate(&key, SEQ, 0, now), Some(ip("10.0.0.3")));
    let entries = index.claim_addresses("ns", "a");
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].address, Some(ip("10.0.0.1")));
    assert_eq!(entries[0].claim_uid.as_deref(), Some("uid-a"));

    // A deletion frees the address: it is the next one handed out.
    let gone = address("ns", "p-10-0-0-1", "p", "a", "10.0.0.1", "uid-a");
    assert_eq!(index.remove(&gone), Some(key.clone()));
    assert!(index.claim_addresses("ns", "a").is_empty());
    assert_eq!(index.allocate(&key, SEQ, 0, now), Some(ip("10.0.0.1")));
    // A note of the creation after the watch saw it go does not bring it back.
    index.unreserve(&key, ip("10.0.0.1"));
    index.note_created(&gone);
    assert!(index.entry("ns", "p-10-0-0-1").is_none());
}

#[test]
fn reservations_hold_until_the_object_shows_up_or_they_expire() {
    let (mut index, key, _) = setup();
    let t0 = Instant::now();
    let a = index.allocate(&key, SEQ, 0, t0).unwrap();
    assert_eq!(a, ip("10.0.0.1"));
    // A concurrent reconcile of this process gets another address.
    assert_eq!(index.allocate(&key, SEQ, 0, t0), Some(ip("10.0.0.2")));
    // The create of .2 failed: it is free again.
    index.unreserve(&key, ip("10.0.0.2"));
    assert_eq!(index.allocate(&key, SEQ, 0, t0), Some(ip("10.0.0.2")));
    // The object for .1 shows up: the reservation becomes the object.
    index.apply(&address("ns", "p-10-0-0-1", "p", "a", "10.0.0.1", "uid-a"));
    index.unreserve(&key, a);
    assert_eq!(index.counts(&key).unwrap().in_use, 1);
    // .2 was never confirmed: after the TTL it is handed out again.
    let later = t0 + RESERVATION_TTL + Duration::from_secs(1);
    assert_eq!(index.allocate(&key, SEQ, 0, later), Some(ip("10.0.0.2")));
    assert_eq!(index.allocate(&key, SEQ, 0, later), Some(ip("10.0.0.3")));
}

#[test]
fn pre_allocations_are_reserved_once() {
    let mut index = UsageIndex::new();
    let mut s = spec(vec![subnet("10.0.0.0/29")]);
    s.pre_allocations = Some([("db".to_owned(), "10.0.0.6".to_owned())].into());
    let p = pool("ns", "p", s);
    let key = PoolKey::of(&p);
    index.layout(&p).unwrap();
    let now = Instant::now();
    assert!(index.reserve(&key, ip("10.0.0.6"), now));
    assert!(!index.reserve(&key, ip("10.0.0.6"), now));
    index.unreserve(&key, ip("10.0.0.6"));
    index.apply(&address(
        "ns",
        "p-10-0-0-6",
        "p",
        "db",
        "10.0.0.6",
        "uid-db",
    ));
    assert!(!index.reserve(&key, ip("10.0.0.6"), now));
    assert_eq!(index.counts(&key), Some(PoolCounts { in_use: 1, free: 5 }));
}

#[test]
fn layouts_follow_the_spec_generation_and_reset_rebuilds() {
    let (mut index, key, mut p) = setup();
    index.apply(&address("ns", "p-10-0-0-1", "p", "a", "10.0.0.1", "uid-a"));
    assert_eq!(index.counts(&key).unwrap().free, 5);
    p.spec.pools = vec![subnet("10.0.0.0/28")];
    // Same generation: the cached layout stays.
    assert_eq!(index.layout(&p).unwrap().positions(), 6);
    p.metadata.generation = Some(2);
    assert_eq!(index.layout(&p).unwrap().positions(), 14);
    assert_eq!(index.counts(&key).unwrap().free, 13);
    p.spec.pools = vec![subnet("10.0.0.0/33")];
    p.metadata.generation = Some(3);
    assert!(index.layout(&p).is_err());
    assert_eq!(index.counts(&key), None);
    assert_eq!(index.allocate(&key, SEQ, 0, Instant::now()), None);

    p.spec.pools = vec![subnet("10.0.0.0/29")];
    p.metadata.generation = Some(4);
    index.layout(&p).unwrap();
    let mut deleting = address("ns", "p-10-0-0-2", "p", "b", "10.0.0.2", "uid-b");
    deleting.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
    index.reset([&deleting]);
    assert_eq!(index.counts(&key), Some(PoolCounts { in_use: 1, free: 5 }));
    assert!(index.entry("ns", "p-10-0-0-1").is_none());
    assert!(index.entry("ns", "p-10-0-0-2").unwrap().deleting);
    assert_eq!(
        index.allocate(&key, SEQ, 0, Instant::now()),
        Some(ip("10.0.0.1"))
    );
}

#[test]
fn duplicate_holders_keep_the_address_until_the_last_goes() {
    let (mut index, key, _) = setup();
    let a = address("ns", "p-10-0-0-1", "p", "a", "10.0.0.1", "uid-a");
    let b = address("ns", "hand-made", "p", "b", "10.0.0.1", "uid-b");
    index.apply(&a);
    index.apply(&b);
    index.apply(&a);
    assert_eq!(index.objects(&key), 2);
    index.remove(&a);
    assert_eq!(
        index.allocate(&key, SEQ, 0, Instant::now()),
        Some(ip("10.0.0.2"))
    );
    index.remove(&b);
    assert_eq!(
        index.allocate(&key, SEQ, 0, Instant::now()),
        Some(ip("10.0.0.1"))
    );
    assert_eq!(index.objects(&key), 0);
}
