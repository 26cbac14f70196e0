use std::sync::Arc;

use capmaas_api::capi::ClusterSpec;
use capmaas_api::capi_ipam::{IPAddressClaimStatus, IPAddressReference, IPPoolReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::*;
use crate::ipam::index::AddressEntry;
use crate::ipam::test_support::{address, claim, pool, spec, subnet};
use capmaas_api::ipam_preallocation::MatchedBy;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn entry(name: &str, claim: &str, addr: &str, claim_uid: &str) -> AddressEntry {
    AddressEntry::of(&address("ns", name, "p", claim, addr, claim_uid)).unwrap()
}

fn deleting<K: Resource>(mut obj: K) -> K {
    obj.meta_mut().deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
    obj
}

fn with_finalizers<K: Resource>(mut obj: K, finalizers: &[&str]) -> K {
    obj.meta_mut().finalizers = Some(finalizers.iter().map(|f| (*f).to_owned()).collect());
    obj
}

struct World {
    claim: IPAddressClaim,
    pool: Option<MaasIPPool>,
    layout: Option<LayoutResult>,
    paused: Option<String>,
    addresses: Vec<AddressEntry>,
}

impl World {
    fn new() -> Self {
        let mut s = spec(vec![subnet("10.0.0.0/24")]);
        s.pre_allocations = Some([("db".to_owned(), "10.0.0.9".to_owned())].into());
        let p = pool("ns", "p", s);
        let layout = PoolLayout::from_spec(&p.spec).map(Arc::new);
        Self {
            claim: with_finalizers(claim("ns", "c", "p"), &[FINALIZER_IP_ADDRESS_CLAIM]),
            pool: Some(p),
            layout: Some(layout),
            paused: None,
            addresses: Vec::new(),
        }
    }

    fn decide(&self) -> ClaimStep {
        decide_claim(&Observed {
            claim: &self.claim,
            pool: self.pool.as_ref(),
            layout: self.layout.as_ref(),
            paused: self.paused.as_deref(),
            addresses: &self.addresses,
        })
    }
}

#[test]
fn other_pools_are_ignored_and_pause_wins() {
    let mut w = World::new();
    w.claim.spec.pool_ref = IPPoolReference {
        api_group: "ipam.cluster.x-k8s.io".into(),
        kind: "InClusterIPPool".into(),
        name: "p".into(),
    };
    assert_eq!(w.decide(), ClaimStep::Ignore);
    let mut w = World::new();
    w.paused = Some("Cluster x is paused".into());
    w.claim = deleting(w.claim);
    assert_eq!(w.decide(), ClaimStep::Paused("Cluster x is paused".into()));
}

#[test]
fn a_new_claim_gets_the_finalizer_then_an_address() {
    let mut w = World::new();
    w.claim = claim("ns", "c", "p");
    assert_eq!(w.decide(), ClaimStep::AddFinalizer);
    let w = World::new();
    assert_eq!(
        w.decide(),
        ClaimStep::Allocate {
            pre_allocated: None
        }
    );
    let mut w = World::new();
    w.claim = with_finalizers(claim("ns", "db", "p"), &[FINALIZER_IP_ADDRESS_CLAIM]);
    assert_eq!(
        w.decide(),
        ClaimStep::Allocate {
            pre_allocated: Some(PreAllocated {
                address: ip("10.0.0.9"),
                key: "db".into(),
                by: MatchedBy::ClaimName,
            })
        }
    );
}

fn for_machine(mut c: IPAddressClaim, machine: &str) -> IPAddressClaim {
    c.metadata.annotations = Some([(ANNOTATION_MACHINE.to_owned(), machine.to_owned())].into());
    c
}

#[test]
fn a_pre_allocation_keyed_by_the_machine_name_serves_its_claim() {
    // `db` is a Machine here: the claim data-controller makes for it is `mm-db-p`.
    let mut w = World::new();
    w.claim = for_machine(w.claim.clone(), "db");
    assert_eq!(machine_of(&w.claim), Some("db"));
    assert_eq!(
        w.decide(),
        ClaimStep::Allocate {
            pre_allocated: Some(PreAllocated {
                address: ip("10.0.0.9"),
                key: "db".into(),
                by: MatchedBy::MachineName,
            })
        }
    );
    // The claim's own name wins when both match.
    let mut s = spec(vec![subnet("10.0.0.0/24")]);
    s.pre_allocations = Some(
        [
            ("db".to_owned(), "10.0.0.9".to_owned()),
            ("c".to_owned(), "10.0.0.10".to_owned()),
        ]
        .into(),
    );
    w.layout = Some(PoolLayout::from_spec(&s).map(Arc::new));
    let ClaimStep::Allocate {
        pre_allocated: Some(p),
    } = w.decide()
    else {
        panic!("expected an allocation")
    };
    assert_eq!((p.address, p.by), (ip("10.0.0.10"), MatchedBy::ClaimName));
    // An empty annotation names no Machine.
    w.claim = for_machine(w.claim.clone(), "");
    assert_eq!(machine_of(&w.claim), None);
}

#[test]
fn a_claim_without_a_usable_pool_fails_naming_the_pool() {
    let mut w = World::new();
    w.pool = None;
    w.layout = None;
    let ClaimStep::Fail { reason, message } = w.decide() else {
        panic!("not a failure");
    };
    assert_eq!(reason, REASON_ALLOCATION_FAILED);
    assert_eq!(message, "MaasIPPool ns/p not found");

    let mut w = World::new();
    w.layout = Some(PoolLayout::from_spec(&spec(vec![subnet("x")])).map(Arc::new));
    let ClaimStep::Fail { message, .. } = w.decide() else {
        panic!("not a failure");
    };
    assert!(
        message.starts_with("MaasIPPool ns/p is invalid: spec.pools[0].subnet:"),
        "{message}"
    );

    let mut w = World::new();
    w.pool = w.pool.map(deleting);
    assert!(
        matches!(w.decide(), ClaimStep::Fail { message, .. } if message.contains("being deleted"))
    );
}

#[test]
fn an_existing_address_is_reused_and_extras_are_released() {
    let mut w = World::new();
    w.addresses = vec![entry("p-10-0-0-7", "c", "10.0.0.7", "uid-c")];
    // Found through the index after a crash between create and status write.
    assert!(
        matches!(w.decide(), ClaimStep::Bind { keep, extras } if keep.name == "p-10-0-0-7" && extras.is_empty())
    );

    // Two replicas both created one: the lowest wins, unless the status already names one.
    w.addresses
        .push(entry("p-10-0-0-3", "c", "10.0.0.3", "uid-c"));
    assert_eq!(
        w.decide(),
        ClaimStep::Bind {
            keep: entry("p-10-0-0-3", "c", "10.0.0.3", "uid-c"),
            extras: vec!["p-10-0-0-7".into()],
        }
    );
    w.claim.status = Some(IPAddressClaimStatus {
        address_ref: Some(IPAddressReference {
            name: "p-10-0-0-7".into(),
        }),
        conditions: None,
    });
    assert!(
        matches!(w.decide(), ClaimStep::Bind { keep, extras } if keep.name == "p-10-0-0-7" && extras == ["p-10-0-0-3"])
    );

    // An address left by an earlier claim of the same name is not this claim's.
    let mut w = World::new();
    w.addresses = vec![entry("p-10-0-0-7", "c", "10.0.0.7", "uid-of-an-earlier-c")];
    assert_eq!(
        w.decide(),
        ClaimStep::Allocate {
            pre_allocated: None
        }
    );
    assert!(!belongs_to(&w.addresses[0], &w.claim));
    // A hand-made address without a claim owner counts.
    let mut hand_made = address("ns", "x", "p", "c", "10.0.0.8", "");
    hand_made.metadata.owner_references = None;
    assert!(belongs_to(&AddressEntry::of(&hand_made).unwrap(), &w.claim));
}

#[test]
fn deletion_waits_for_consumers_then_releases() {
    let mut w = World::new();
    w.addresses = vec![entry("p-10-0-0-7", "c", "10.0.0.7", "uid-c")];
    w.claim = deleting(with_finalizers(
        claim("ns", "c", "p"),
        &["consumer.example.com/in-use", FINALIZER_IP_ADDRESS_CLAIM],
    ));
    assert_eq!(
        w.decide(),
        ClaimStep::InUse(vec!["consumer.example.com/in-use".into()])
    );
    assert!(!may_release_address(&w.addresses[0], Some(&w.claim)));
    w.claim = deleting(with_finalizers(
        claim("ns", "c", "p"),
        &[FINALIZER_IP_ADDRESS_CLAIM],
    ));
    assert_eq!(w.decide(), ClaimStep::Release(vec!["p-10-0-0-7".into()]));
    assert!(may_release_address(&w.addresses[0], Some(&w.claim)));
    w.addresses.clear();
    assert_eq!(w.decide(), ClaimStep::Release(vec![]));
    w.claim = deleting(claim("ns", "c", "p"));
    assert_eq!(w.decide(), ClaimStep::Forget);
}

#[test]
fn addresses_are_released_only_when_their_claim_lets_go() {
    let e = entry("p-10-0-0-7", "c", "10.0.0.7", "uid-c");
    assert!(may_release_address(&e, None));
    let live = with_finalizers(claim("ns", "c", "p"), &[FINALIZER_IP_ADDRESS_CLAIM]);
    assert!(!may_release_address(&e, Some(&live)));
    let mut reborn = live.clone();
    reborn.metadata.uid = Some("new".into());
    assert!(may_release_address(&e, Some(&reborn)));
}

#[test]
fn an_address_whose_claim_vanished_is_an_orphan_unless_made_by_hand() {
    let e = entry("p-10-0-0-7", "c", "10.0.0.7", "uid-c");
    let mut live = claim("ns", "c", "p");
    live.metadata.uid = Some("uid-c".into());
    assert!(!is_orphan(&e, Some(&live)));
    assert!(is_orphan(&e, None), "the claim is gone");
    let mut reborn = live.clone();
    reborn.metadata.uid = Some("new".into());
    assert!(is_orphan(&e, Some(&reborn)), "a new claim of the same name");
    let by_hand = AddressEntry {
        claim_uid: None,
        ..e.clone()
    };
    assert!(!is_orphan(&by_hand, None), "no claim owner: made by hand");
    let deleting = AddressEntry {
        deleting: true,
        ..e
    };
    assert!(!is_orphan(&deleting, None), "already going");
}

#[test]
fn pause_comes_from_annotations_and_clusters() {
    let c = claim("ns", "c", "p");
    let p = pool("ns", "p", spec(vec![subnet("10.0.0.0/24")]));
    let mut cluster = Cluster::new("prod", ClusterSpec::default());
    assert_eq!(pause_reason(Some(&c), Some(&p), Some(&cluster), None), None);
    cluster.spec.paused = Some(true);
    assert_eq!(
        pause_reason(Some(&c), Some(&p), None, Some(&cluster)).as_deref(),
        Some("Cluster prod is paused")
    );
    let mut annotated = p.clone();
    annotated.metadata.annotations =
        Some([(ANNOTATION_PAUSED.to_owned(), "true".to_owned())].into());
    assert!(
        pause_reason(Some(&c), Some(&annotated), None, None)
            .unwrap()
            .contains("MaasIPPool p")
    );
    let mut annotated = c.clone();
    annotated.metadata.annotations = Some([(ANNOTATION_PAUSED.to_owned(), String::new())].into());
    assert!(
        pause_reason(Some(&annotated), None, None, None)
            .unwrap()
            .contains("IPAddressClaim")
    );
}

#[test]
fn address_names_are_one_per_address() {
    assert_eq!(address_name("pool", ip("10.0.0.5")), "pool-10-0-0-5");
    assert_eq!(address_name("v6", ip("fd00::5")), "v6-fd00--5");
    assert_eq!(address_name("v6", ip("fd00::")), "v6-fd00--0");
    assert_eq!(address_name("v6", ip("::")), "v6---0");
    assert_eq!(address_name("v6", ip("::1")), "v6---1");
    assert_eq!(address_name("v6", ip("FD00:0:0::A")), "v6-fd00--a");
    assert_ne!(
        address_name("v6", ip("::ffff:10.0.0.5")),
        address_name("v6", ip("::ffff:10:0:0:5"))
    );
}

#[test]
fn the_address_object_follows_the_contract() {
    let mut s = spec(vec![subnet("10.0.0.0/24")]);
    s.gateway = Some("10.0.0.1".into());
    s.name_prefix = "prod-net".into();
    let p = pool("ns", "p", s);
    let layout = PoolLayout::from_spec(&p.spec).unwrap();
    let mut c = claim("ns", "c", "p");
    c.spec.cluster_name = Some("prod".into());
    let a = address_object(&c, &p, &layout, ip("10.0.0.5")).unwrap();
    assert_eq!(a.metadata.name.as_deref(), Some("prod-net-10-0-0-5"));
    assert_eq!(a.metadata.namespace.as_deref(), Some("ns"));
    assert_eq!(a.spec.address, "10.0.0.5");
    assert_eq!(a.spec.prefix, 24);
    assert_eq!(a.spec.gateway.as_deref(), Some("10.0.0.1"));
    assert_eq!(a.spec.claim_ref.name, "c");
    assert_eq!(a.spec.pool_ref, IPPoolReference::maas_ip_pool("p"));
    assert_eq!(a.finalizers(), [FINALIZER_IP_ADDRESS]);
    assert_eq!(
        a.labels().get(LABEL_CLUSTER_NAME).map(String::as_str),
        Some("prod")
    );
    let owners = a.owner_references();
    assert_eq!(owners.len(), 2);
    assert_eq!(
        (
            owners[0].kind.as_str(),
            owners[0].uid.as_str(),
            owners[0].controller
        ),
        ("IPAddressClaim", "uid-c", Some(true))
    );
    assert_eq!(owners[0].api_version, "ipam.cluster.x-k8s.io/v1beta2");
    assert_eq!(
        (
            owners[1].kind.as_str(),
            owners[1].uid.as_str(),
            owners[1].controller
        ),
        ("MaasIPPool", "uid-p", Some(false))
    );
    assert!(
        address_object(&c, &p, &layout, ip("192.168.0.1")).is_none(),
        "outside the pool"
    );
}

#[test]
fn pools_get_a_finalizer_and_wait_for_their_addresses() {
    let p = pool("ns", "p", spec(vec![subnet("10.0.0.0/24")]));
    assert_eq!(decide_pool(&p, None, 0), PoolStep::AddFinalizer);
    let p = with_finalizers(p, &[FINALIZER_MAAS_IP_POOL]);
    assert_eq!(decide_pool(&p, None, 3), PoolStep::Status);
    assert_eq!(decide_pool(&p, Some("x"), 3), PoolStep::Paused("x".into()));
    let p = deleting(p);
    assert_eq!(decide_pool(&p, None, 3), PoolStep::WaitForAddresses(3));
    assert_eq!(decide_pool(&p, None, 0), PoolStep::RemoveFinalizer);
    let p = with_finalizers(p, &[]);
    assert_eq!(decide_pool(&p, None, 0), PoolStep::Forget);
}

fn lock(address: &str, uid: &str) -> MaasIPAddressLock {
    MaasIPAddressLock::for_address(
        ip(address),
        LockHolder {
            namespace: "other".into(),
            name: "c".into(),
            uid: uid.into(),
        },
        "p",
    )
}

#[test]
fn a_lock_is_free_ours_or_another_claims() {
    assert_eq!(lock_state(None, "u1"), LockState::Free);
    assert_eq!(
        lock_state(Some(&lock("10.0.0.5", "u1")), "u1"),
        LockState::Ours
    );
    // Another incarnation of a claim of the same name is another holder.
    let LockState::Theirs(holder) = lock_state(Some(&lock("10.0.0.5", "u2")), "u1") else {
        panic!("another claim's lock");
    };
    assert_eq!(
        (holder.namespace.as_str(), holder.uid.as_str()),
        ("other", "u2")
    );
}

#[test]
fn a_lock_nothing_holds_goes_only_once_it_is_stale() {
    let stale = Duration::from_secs(300);
    assert_eq!(
        decide_lock(true, Some(Duration::from_secs(9999)), stale),
        LockDecision::Keep
    );
    assert_eq!(
        decide_lock(false, Some(Duration::from_secs(100)), stale),
        LockDecision::Recheck(Duration::from_secs(200))
    );
    assert_eq!(
        decide_lock(false, None, stale),
        LockDecision::Recheck(stale)
    );
    assert_eq!(decide_lock(false, Some(stale), stale), LockDecision::Sweep);
}
