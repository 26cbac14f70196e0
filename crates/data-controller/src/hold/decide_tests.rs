use capmaas_api::capi_ipam::{
    IPAddressClaimSpec, IPAddressClaimStatus, IPAddressReference, IPPoolReference,
};
use capmaas_api::common::{ConsumerReference, HostReference, LocalObjectReference};
use capmaas_api::host::{HostReservation, ReservationOwner};
use capmaas_api::{MaasDataClaimSpec, MaasDataClaimStatus, MaasHostSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};

use super::*;

fn at(s: &str) -> Timestamp {
    s.parse().unwrap()
}

const NOW: &str = "2026-01-01T10:00:00Z";

fn data_claim(name: &str, uid: &str, host: &str, cluster: &str) -> MaasDataClaim {
    let mut c = MaasDataClaim::new(
        name,
        MaasDataClaimSpec {
            template: LocalObjectReference { name: "t".into() },
            host_ref: Some(HostReference {
                name: host.into(),
                namespace: None,
            }),
        },
    );
    c.metadata.namespace = Some("ns".into());
    c.metadata.uid = Some(uid.into());
    c.metadata.creation_timestamp = Some(Time(at(NOW)));
    c.metadata.labels = Some([(keys::LABEL_CLUSTER_NAME.to_owned(), cluster.to_owned())].into());
    c
}

fn rendered(mut c: MaasDataClaim) -> MaasDataClaim {
    c.status = Some(MaasDataClaimStatus {
        rendered_data: Some(LocalObjectReference { name: "t-0".into() }),
        ..MaasDataClaimStatus::default()
    });
    c
}

fn host(consumer_ns: Option<&str>, reserved_for: Option<(&str, &str)>) -> MaasHost {
    let mut h = MaasHost::new(
        "h1",
        MaasHostSpec {
            system_id: "abc".into(),
            consumer_ref: consumer_ns.map(|ns| ConsumerReference {
                api_version: "infrastructure.cluster.x-k8s.io/v1beta1".into(),
                kind: "MaasMachine".into(),
                name: "mm-new".into(),
                uid: "u-mm-new".into(),
                namespace: (ns != "ns").then(|| ns.to_owned()),
            }),
            provisioning: None,
            reservation: reserved_for.map(|(uid, until)| HostReservation {
                owner: ReservationOwner {
                    api_version: None,
                    kind: "MachineDeployment".into(),
                    name: "md".into(),
                    uid: uid.into(),
                },
                expires_at: Time(at(until)),
            }),
            vms: None,
        },
    );
    h.metadata.namespace = Some("ns".into());
    h
}

fn hold(until: &str, owner: Option<&str>) -> Hold {
    Hold {
        host_namespace: "ns".into(),
        host: "h1".into(),
        until: at(until),
        owner_uid: owner.map(str::to_owned),
        namespace: "ns".into(),
        cluster: Some("c1".into()),
    }
}

fn pool() -> PoolReference {
    PoolReference {
        name: "net".into(),
        api_group: "infrastructure.cluster.x-k8s.io".into(),
        kind: "MaasIPPool".into(),
    }
}

fn held_ip_claim(t: &Hold) -> IPAddressClaim {
    let mut c = IPAddressClaim::new(
        "mm-old-net",
        IPAddressClaimSpec {
            pool_ref: IPPoolReference {
                api_group: "infrastructure.cluster.x-k8s.io".into(),
                kind: "MaasIPPool".into(),
                name: "net".into(),
            },
            cluster_name: Some("c1".into()),
        },
    );
    c.metadata.namespace = Some("ns".into());
    c.metadata.labels = Some([(keys::LABEL_CLUSTER_NAME.to_owned(), "c1".to_owned())].into());
    let mut a = std::collections::BTreeMap::from([
        (
            ANNOTATION_HELD_FOR_HOST.to_owned(),
            format!("{}/{}", t.host_namespace, t.host),
        ),
        (ANNOTATION_HELD_UNTIL.to_owned(), t.until.to_string()),
    ]);
    if let Some(o) = &t.owner_uid {
        a.insert(ANNOTATION_HELD_FOR_OWNER.to_owned(), o.clone());
    }
    c.metadata.annotations = Some(a);
    c.status = Some(IPAddressClaimStatus {
        address_ref: Some(IPAddressReference {
            name: "net-10-0-0-5".into(),
        }),
        ..IPAddressClaimStatus::default()
    });
    c
}

#[test]
fn a_reserved_host_keeps_the_addresses_until_the_reservation_lapses() {
    let old = data_claim("mm-old", "u-old", "h1", "c1");
    let h = host(None, Some(("md-uid", "2026-01-01T10:10:00Z")));
    let terms = hold_terms(&old, Some(&h), None, at(NOW)).unwrap();
    assert_eq!(
        terms,
        HoldTerms {
            host: "ns/h1".into(),
            until: at("2026-01-01T10:10:00Z"),
            owner_uid: Some("md-uid".into()),
        }
    );
    // An expired reservation, no reservation, no host: released as before.
    let expired = host(None, Some(("md-uid", "2026-01-01T09:59:59Z")));
    assert_eq!(hold_terms(&old, Some(&expired), None, at(NOW)), None);
    assert_eq!(
        hold_terms(&old, Some(&host(None, None)), None, at(NOW)),
        None
    );
    assert_eq!(hold_terms(&old, None, None, at(NOW)), None);
}

#[test]
fn a_host_the_next_machine_claimed_already_keeps_them_for_its_data_claim_only() {
    let old = data_claim("mm-old", "u-old", "h1", "c1");
    let h = host(Some("ns"), None);
    let next = data_claim("mm-new", "u-new", "h1", "c1");
    let terms = hold_terms(&old, Some(&h), Some(&next), at(NOW)).unwrap();
    assert_eq!(terms.until, at("2026-01-01T10:05:00Z"));
    assert_eq!(terms.owner_uid, None);
    // No data claim of the next machine yet, one of another Cluster, one already rendered,
    // or a consumer of another namespace: nothing is kept.
    assert_eq!(hold_terms(&old, Some(&h), None, at(NOW)), None);
    let other = data_claim("mm-new", "u-new", "h1", "c2");
    assert_eq!(hold_terms(&old, Some(&h), Some(&other), at(NOW)), None);
    assert_eq!(
        hold_terms(&old, Some(&h), Some(&rendered(next.clone())), at(NOW)),
        None
    );
    assert_eq!(
        hold_terms(
            &old,
            Some(&host(Some("team-b"), None)),
            Some(&next),
            at(NOW)
        ),
        None
    );
}

#[test]
fn a_hold_is_read_back_from_its_annotations_and_never_while_owned() {
    let t = hold("2026-01-01T10:10:00Z", Some("md-uid"));
    let mut c = held_ip_claim(&t);
    assert_eq!(Hold::of(&c), Some(t));
    c.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "infrastructure.cluster.x-k8s.io/v1beta1".into(),
        kind: "MaasDataClaim".into(),
        name: "mm-new".into(),
        uid: "u-new".into(),
        ..OwnerReference::default()
    }]);
    assert_eq!(Hold::of(&c), None, "adopted: a claim's address again");
    c.metadata.owner_references = None;
    c.metadata.annotations = None;
    assert_eq!(Hold::of(&c), None);
}

#[test]
fn a_hold_is_kept_while_the_host_waits_for_its_owner_or_the_handover() {
    let t = hold("2026-01-01T10:10:00Z", Some("md-uid"));
    let reserved = host(None, Some(("md-uid", "2026-01-01T10:10:00Z")));
    assert_eq!(
        hold_step(&t, Some(&reserved), None, at(NOW)),
        HoldStep::Keep(Duration::from_secs(600))
    );
    // The next machine claimed the host; its data claim is not rendered yet.
    let claimed = host(Some("ns"), None);
    let next = data_claim("mm-new", "u-new", "h1", "c1");
    assert_eq!(
        hold_step(&t, Some(&claimed), Some(&next), at(NOW)),
        HoldStep::Keep(Duration::from_secs(600))
    );
    assert_eq!(
        hold_step(&t, Some(&claimed), None, at(NOW)),
        HoldStep::Keep(Duration::from_secs(600))
    );
}

#[test]
fn a_hold_is_released_when_the_reservation_lapses_or_the_host_goes_elsewhere() {
    let t = hold("2026-01-01T10:10:00Z", Some("md-uid"));
    let reserved = host(None, Some(("md-uid", "2026-01-01T10:10:00Z")));
    let release = |step: HoldStep| match step {
        HoldStep::Release(why) => why,
        HoldStep::Keep(_) => panic!("kept"),
    };
    let why = release(hold_step(
        &t,
        Some(&reserved),
        None,
        at("2026-01-01T10:10:00Z"),
    ));
    assert!(why.contains("lapsed"), "{why}");
    assert_eq!(
        release(hold_step(&t, None, None, at(NOW))),
        "MaasHost ns/h1 is gone"
    );
    let why = release(hold_step(&t, Some(&host(None, None)), None, at(NOW)));
    assert!(why.contains("neither reserved nor claimed"), "{why}");
    let other_owner = host(None, Some(("other-uid", "2026-01-01T10:10:00Z")));
    let why = release(hold_step(&t, Some(&other_owner), None, at(NOW)));
    assert!(why.contains("reserved for another owner"), "{why}");
    let why = release(hold_step(
        &t,
        Some(&host(Some("team-b"), None)),
        None,
        at(NOW),
    ));
    assert!(why.contains("namespace team-b"), "{why}");
    let claimed = host(Some("ns"), None);
    let other_cluster = data_claim("mm-x", "u-x", "h1", "c2");
    let why = release(hold_step(&t, Some(&claimed), Some(&other_cluster), at(NOW)));
    assert_eq!(why, "MaasHost ns/h1 went to Cluster c2");
    let done = rendered(data_claim("mm-new", "u-new", "h1", "c1"));
    let why = release(hold_step(&t, Some(&claimed), Some(&done), at(NOW)));
    assert!(why.contains("rendered without it"), "{why}");
}

#[test]
fn only_the_next_data_claim_on_the_same_host_cluster_and_pool_adopts() {
    let t = hold("2026-01-01T10:10:00Z", None);
    let ip = held_ip_claim(&t);
    let next = data_claim("mm-new", "u-new", "h1", "c1");
    assert!(adoptable(&t, &ip, &next, &pool(), at(NOW)));
    let other_host = data_claim("mm-new", "u-new", "h2", "c1");
    assert!(!adoptable(&t, &ip, &other_host, &pool(), at(NOW)));
    let other_cluster = data_claim("mm-new", "u-new", "h1", "c2");
    assert!(!adoptable(&t, &ip, &other_cluster, &pool(), at(NOW)));
    let mut other_pool = pool();
    other_pool.name = "storage".into();
    assert!(!adoptable(&t, &ip, &next, &other_pool, at(NOW)));
    assert!(!adoptable(
        &t,
        &ip,
        &next,
        &pool(),
        at("2026-01-01T10:10:00Z")
    ));
    let mut unserved = ip.clone();
    unserved.status = None;
    assert!(!adoptable(&t, &unserved, &next, &pool(), at(NOW)));
    let mut deleting = ip;
    deleting.metadata.deletion_timestamp = Some(Time(at(NOW)));
    assert!(!adoptable(&t, &deleting, &next, &pool(), at(NOW)));
}

#[test]
fn a_new_data_claim_waits_for_the_previous_one_on_its_host_for_a_while() {
    let next = data_claim("mm-new", "u-new", "h1", "c1");
    let old = data_claim("mm-old", "u-old", "h1", "c1");
    let elsewhere = data_claim("mm-x", "u-x", "h2", "c1");
    let all = [next.clone(), elsewhere.clone(), old.clone()];
    assert_eq!(
        predecessor(&all, &next, at(NOW)).map(ResourceExt::name_any),
        Some("mm-old".into())
    );
    assert!(predecessor([&next, &elsewhere], &next, at(NOW)).is_none());
    // After the grace the new claim stops waiting.
    assert!(predecessor(&all, &next, at("2026-01-01T10:05:00Z")).is_none());
}
