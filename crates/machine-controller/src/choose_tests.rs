use super::*;
use capmaas_api::common::{ConsumerReference, HostSelectorRequirement};
use capmaas_api::host::{HostReservation, MaasHostStatus, ReservationOwner};
use capmaas_api::inventory::ClaimNamespaces;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::test_support::unclaimed_host;

fn now() -> jiff::Timestamp {
    jiff::Timestamp::from_second(1_800_000_000).unwrap()
}

fn host(name: &str, zone: &str, cpu: i32, mem: i64) -> MaasHost {
    let mut h = unclaimed_host(name);
    h.status = Some(MaasHostStatus {
        zone: Some(zone.into()),
        pool: Some("default".into()),
        cpu_count: Some(cpu),
        memory_mib: Some(mem),
        storage_gib: Some(500),
        tags: Some(vec!["virtual".into()]),
        provisioning_state: Some(ProvisioningState::Available),
        ..MaasHostStatus::default()
    });
    h
}

fn names(r: &Ranking<'_>) -> Vec<String> {
    r.candidates.iter().map(|h| h.name_any()).collect()
}

/// `h` reserved for the MachineDeployment of UID `uid` for `expires_in_secs` more seconds.
fn reserved_by(mut h: MaasHost, uid: &str, expires_in_secs: i64) -> MaasHost {
    h.spec.reservation = Some(HostReservation {
        owner: ReservationOwner {
            api_version: Some("cluster.x-k8s.io/v1beta2".into()),
            kind: "MachineDeployment".into(),
            name: format!("md-{uid}"),
            uid: uid.into(),
        },
        expires_at: Time(now() + jiff::SignedDuration::from_secs(expires_in_secs)),
    });
    h
}

fn request() -> HostRequest {
    HostRequest {
        min_cpu: 2,
        min_memory_mib: 4096,
        ..HostRequest::default()
    }
}

/// [`request`] from a machine whose owner (for node reuse) has UID `owner`.
fn request_of(owner: &str) -> HostRequest {
    HostRequest {
        reuse_owner_uid: Some(owner.into()),
        ..request()
    }
}

#[test]
fn smallest_fit_then_name() {
    let hosts = vec![
        host("big", "z1", 32, 262_144),
        host("b-small", "z1", 4, 8192),
        host("a-small", "z2", 4, 8192),
        host("mid-cpu-less-mem", "z1", 8, 4096),
        host("same-cpu-more-mem", "z1", 4, 16384),
    ];
    let r = rank_hosts(&request(), &hosts, now());
    assert_eq!(
        names(&r),
        [
            "a-small",
            "b-small",
            "same-cpu-more-mem",
            "mid-cpu-less-mem",
            "big"
        ]
    );
    assert_eq!(r.best().unwrap().name_any(), "a-small");
    assert!(r.excluded.is_empty());
    assert_eq!(r.considered(), 5);
}

#[test]
fn ranking_does_not_depend_on_input_order() {
    let mut hosts = vec![
        host("h3", "z1", 4, 8192),
        host("h1", "z1", 4, 8192),
        host("h2", "z1", 2, 8192),
    ];
    let first = names(&rank_hosts(&request(), &hosts, now()));
    hosts.reverse();
    assert_eq!(names(&rank_hosts(&request(), &hosts, now())), first);
    assert_eq!(first, ["h2", "h1", "h3"]);
}

#[test]
fn reserved_for_this_owner_beats_smaller_hosts_and_zone() {
    let reserved = reserved_by(host("reserved", "z2", 64, 524_288), "owner-a", 600);
    let hosts = vec![host("small", "z1", 2, 4096), reserved];
    assert_eq!(
        names(&rank_hosts(&request_of("owner-a"), &hosts, now())),
        ["reserved", "small"]
    );
}

#[test]
fn reservation_for_another_owner_excludes_until_it_expires() {
    let reserved = reserved_by(host("reserved", "z1", 2, 4096), "owner-b", 600);
    let hosts = vec![reserved.clone()];
    let req = request_of("owner-a");
    let r = rank_hosts(&req, &hosts, now());
    assert!(r.candidates.is_empty());
    assert_eq!(r.excluded.get(&Exclusion::ReservedForOther), Some(&1));
    // A machine without an owner cannot take it either.
    let r = rank_hosts(&request(), &hosts, now());
    assert_eq!(r.excluded.get(&Exclusion::ReservedForOther), Some(&1));

    // Expired: free for anyone, and no longer preferred by its old owner.
    let reserved = reserved_by(reserved, "owner-b", -1);
    let hosts = vec![host("a", "z1", 2, 4096), reserved];
    let r = rank_hosts(&req, &hosts, now());
    assert_eq!(names(&r), ["a", "reserved"]);
    assert_eq!(
        names(&rank_hosts(&request_of("owner-b"), &hosts, now())),
        ["a", "reserved"]
    );
}

#[test]
fn reservation_expiring_exactly_now_is_expired() {
    let h = reserved_by(host("r", "z1", 2, 4096), "owner-b", 0);
    assert!(!reservation_active(&h, now()));
    assert!(!reserved_for(&h, Some("owner-b"), now()));
}

#[test]
fn failure_domain_is_hard() {
    let hosts = vec![
        host("z1-small", "z1", 2, 4096),
        host("z2-big", "z2", 16, 65536),
    ];
    let mut req = request();
    req.failure_domain = Some("z2".into());
    let r = rank_hosts(&req, &hosts, now());
    assert_eq!(names(&r), ["z2-big"]);
    assert_eq!(r.excluded.get(&Exclusion::FailureDomain), Some(&1));

    req.failure_domain = Some("z3".into());
    let r = rank_hosts(&req, &hosts, now());
    assert!(r.candidates.is_empty());
    let (reason, message) = no_host_explanation(&req, &r);
    assert_eq!(reason, reasons::NO_CAPACITY_IN_FAILURE_DOMAIN);
    assert!(message.contains("2 outside failureDomain z3"), "{message}");
}

#[test]
fn state_filters() {
    let mut consumed = host("consumed", "z1", 2, 4096);
    consumed.spec.consumer_ref = Some(ConsumerReference {
        api_version: "infrastructure.cluster.x-k8s.io/v1beta1".into(),
        kind: "MaasMachine".into(),
        name: "other".into(),
        uid: "u".into(),
        namespace: None,
    });
    let mut deploying = host("deploying", "z1", 2, 4096);
    deploying.status.as_mut().unwrap().provisioning_state = Some(ProvisioningState::Deploying);
    let mut no_state = host("no-state", "z1", 2, 4096);
    no_state.status.as_mut().unwrap().provisioning_state = None;
    let mut missing = host("missing", "z1", 2, 4096);
    missing.status.as_mut().unwrap().missing = Some(true);
    let mut unhealthy = host("unhealthy", "z1", 2, 4096);
    unhealthy
        .annotations_mut()
        .insert(keys::ANNOTATION_HOST_UNHEALTHY.into(), "true".into());
    let mut deleting = host("deleting", "z1", 2, 4096);
    deleting.metadata.deletion_timestamp = Some(Time(now()));
    let mut no_status = host("no-status", "z1", 2, 4096);
    no_status.status = None;
    let mut reboot_left = host("reboot-left", "z1", 2, 4096);
    reboot_left.annotations_mut().insert(
        format!("{}maasremediation-x", keys::ANNOTATION_REBOOT_PREFIX),
        "ns/m".into(),
    );
    let hosts = vec![
        consumed,
        deploying,
        no_state,
        missing,
        unhealthy,
        deleting,
        no_status,
        reboot_left,
    ];
    let r = rank_hosts(&request(), &hosts, now());
    assert!(r.candidates.is_empty());
    assert_eq!(r.excluded.get(&Exclusion::Consumed), Some(&1));
    assert_eq!(r.excluded.get(&Exclusion::NotAvailable), Some(&3));
    assert_eq!(r.excluded.get(&Exclusion::Missing), Some(&1));
    assert_eq!(r.excluded.get(&Exclusion::Unhealthy), Some(&1));
    assert_eq!(r.excluded.get(&Exclusion::Deleting), Some(&1));
    assert_eq!(r.excluded.get(&Exclusion::RebootRequested), Some(&1));
    assert!(!Exclusion::Consumed.is_constraint());
    assert!(Exclusion::Cpu.is_constraint());
}

#[test]
fn resource_constraints() {
    let hosts = vec![
        host("few-cpu", "z1", 1, 65536),
        host("little-mem", "z1", 8, 2048),
        host("fits", "z1", 2, 4096),
    ];
    let r = rank_hosts(&request(), &hosts, now());
    assert_eq!(names(&r), ["fits"]);
    assert_eq!(r.excluded.get(&Exclusion::Cpu), Some(&1));
    assert_eq!(r.excluded.get(&Exclusion::Memory), Some(&1));

    let mut req = request();
    req.min_disk_gib = Some(1000);
    let r = rank_hosts(&req, &hosts, now());
    assert_eq!(r.excluded.get(&Exclusion::Disk), Some(&1));
    assert!(r.candidates.is_empty());
}

#[test]
fn pool_and_tags() {
    let mut gpu = host("gpu", "z1", 2, 4096);
    gpu.status.as_mut().unwrap().tags = Some(vec!["gpu".into(), "virtual".into()]);
    let mut other_pool = host("other-pool", "z1", 2, 4096);
    other_pool.status.as_mut().unwrap().pool = Some("prod".into());
    let hosts = vec![gpu, other_pool, host("plain", "z1", 2, 4096)];
    let mut req = request();
    req.tags = vec!["gpu".into(), "virtual".into()];
    req.resource_pool = Some("default".into());
    let r = rank_hosts(&req, &hosts, now());
    assert_eq!(names(&r), ["gpu"]);
    assert_eq!(r.excluded.get(&Exclusion::ResourcePool), Some(&1));
    assert_eq!(r.excluded.get(&Exclusion::Tags), Some(&1));
    let (reason, message) = no_host_explanation(
        &req,
        &Ranking {
            candidates: vec![],
            excluded: r.excluded.clone(),
        },
    );
    assert_eq!(reason, reasons::NO_HOST_AVAILABLE);
    assert!(
        message.contains("1 outside resourcePool default"),
        "{message}"
    );
    assert!(
        message.contains("1 without tags [gpu, virtual]"),
        "{message}"
    );
}

fn labelled(name: &str, labels: &[(&str, &str)]) -> MaasHost {
    let mut h = host(name, "z1", 2, 4096);
    for (k, v) in labels {
        h.labels_mut().insert((*k).into(), (*v).into());
    }
    h
}

fn requirement(key: &str, operator: SelectorOperator, values: &[&str]) -> HostSelectorRequirement {
    HostSelectorRequirement {
        key: key.into(),
        operator,
        values: (!values.is_empty()).then(|| values.iter().map(|v| (*v).to_string()).collect()),
    }
}

#[test]
fn host_selector_semantics() {
    let rack1 = labelled("rack1", &[("rack", "1"), ("ssd", "true")]);
    let rack2 = labelled("rack2", &[("rack", "2")]);
    let bare = labelled("bare", &[]);
    let all = [&rack1, &rack2, &bare];
    let matching = |selector: HostSelector| -> Vec<String> {
        all.iter()
            .filter(|h| selector_matches(&selector, h.labels()))
            .map(|h| h.name_any())
            .collect()
    };
    let labels_only = HostSelector {
        match_labels: Some([("rack".to_owned(), "1".to_owned())].into()),
        match_expressions: None,
    };
    assert_eq!(matching(labels_only), ["rack1"]);
    let expr = |r: HostSelectorRequirement| HostSelector {
        match_labels: None,
        match_expressions: Some(vec![r]),
    };
    assert_eq!(
        matching(expr(requirement("rack", SelectorOperator::In, &["1", "2"]))),
        ["rack1", "rack2"]
    );
    assert_eq!(
        matching(expr(requirement("rack", SelectorOperator::NotIn, &["1"]))),
        ["rack2", "bare"]
    );
    assert_eq!(
        matching(expr(requirement("ssd", SelectorOperator::Exists, &[]))),
        ["rack1"]
    );
    assert_eq!(
        matching(expr(requirement(
            "ssd",
            SelectorOperator::DoesNotExist,
            &[]
        ))),
        ["rack2", "bare"]
    );
    assert_eq!(
        matching(HostSelector::default()),
        ["rack1", "rack2", "bare"]
    );

    let hosts = vec![rack1.clone(), rack2.clone(), bare.clone()];
    let mut req = request();
    req.host_selector = Some(HostSelector {
        match_labels: Some([("rack".to_owned(), "2".to_owned())].into()),
        match_expressions: Some(vec![requirement(
            "ssd",
            SelectorOperator::DoesNotExist,
            &[],
        )]),
    });
    let r = rank_hosts(&req, &hosts, now());
    assert_eq!(names(&r), ["rack2"]);
    assert_eq!(r.excluded.get(&Exclusion::Selector), Some(&2));
}

#[test]
fn explanation_for_an_empty_namespace() {
    let empty: Vec<MaasHost> = Vec::new();
    let r = rank_hosts(&request(), &empty, now());
    let (reason, message) = no_host_explanation(&request(), &r);
    assert_eq!(reason, reasons::NO_HOST_AVAILABLE);
    assert!(
        message.starts_with("no MaasHost this namespace may claim"),
        "{message}"
    );
}

#[test]
fn explanation_counts_each_host_once_by_first_failing_filter() {
    // Too small AND consumed: counted as consumed only.
    let mut h = host("h", "z1", 1, 1024);
    h.spec.consumer_ref = Some(ConsumerReference::default());
    let hosts = vec![h, host("small", "z1", 1, 8192)];
    let r = rank_hosts(&request(), &hosts, now());
    let (_, message) = no_host_explanation(&request(), &r);
    assert_eq!(
        message,
        "no free MaasHost fits among 2: 1 claimed by other machines; 1 below minCPU 2"
    );
}

fn inventory(name: &str, namespace: &str, claim: Option<ClaimNamespaces>) -> MaasInventory {
    let mut inv = MaasInventory::new(
        name,
        capmaas_api::MaasInventorySpec {
            resource_pool: "default".into(),
            zones: None,
            tags: None,
            sync_interval_seconds: 30,
            host_labels: None,
            claim_namespaces: claim,
        },
    );
    inv.metadata.namespace = Some(namespace.into());
    inv
}

fn imported(name: &str, namespace: &str, inventory: Option<&str>) -> MaasHost {
    let mut h = host(name, "z1", 4, 8192);
    h.metadata.namespace = Some(namespace.into());
    if let Some(inv) = inventory {
        h.labels_mut()
            .insert(keys::LABEL_HOST_INVENTORY.into(), inv.into());
    }
    h
}

#[test]
fn claimable_hosts_are_the_namespace_s_own_and_those_of_admitting_inventories() {
    let open = ClaimNamespaces {
        names: Some(vec!["team-a".into()]),
        name_matches: None,
    };
    let inventories = [
        inventory("shared", "capmaas-system", Some(open)),
        inventory("private", "capmaas-system", None),
        inventory("team-b", "team-b", Some(ClaimNamespaces::all())),
    ];
    let claimable = Claimable::new("team-a", &inventories);
    assert!(claimable.reaches_other_namespaces());
    assert!(
        claimable.admits_host(&imported("own", "team-a", None)),
        "own namespace, hand-made"
    );
    assert!(claimable.admits_host(&imported("s", "capmaas-system", Some("shared"))));
    assert!(claimable.admits_host(&imported("b", "team-b", Some("team-b"))));
    assert!(!claimable.admits_host(&imported("p", "capmaas-system", Some("private"))));
    assert!(
        !claimable.admits_host(&imported("h", "capmaas-system", None)),
        "a hand-made host of another namespace"
    );
    assert!(
        !claimable.admits_host(&imported("x", "other", Some("shared"))),
        "an inventory of the same name in another namespace"
    );
    let closed = Claimable::new("team-c", &inventories[..2]);
    assert!(!closed.reaches_other_namespaces());
    assert!(!closed.admits_host(&imported("s", "capmaas-system", Some("shared"))));
}

#[test]
fn own_hosts_rank_before_equal_hosts_of_other_namespaces_and_busy_keys_carry_the_namespace() {
    let hosts = [
        imported("a-shared", "capmaas-system", Some("shared")),
        imported("b-own", "team-a", None),
    ];
    let mut request = HostRequest {
        namespace: Some("team-a".into()),
        ..request()
    };
    assert_eq!(
        names(&rank_hosts(&request, &hosts, now())),
        ["b-own", "a-shared"]
    );
    request.busy_hosts = BTreeSet::from(["team-a/b-own".to_owned()]);
    assert_eq!(names(&rank_hosts(&request, &hosts, now())), ["a-shared"]);
    request.busy_hosts = BTreeSet::from(["capmaas-system/b-own".to_owned()]);
    assert_eq!(
        names(&rank_hosts(&request, &hosts, now())),
        ["b-own", "a-shared"],
        "a host of the same name in another namespace is another host"
    );
}
