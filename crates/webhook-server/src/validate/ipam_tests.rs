#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use capmaas_api::MaasIPPoolStatus;
use serde_json::{Value, json};

use super::*;
use crate::validate::{DELETE_FOR_MOVE, StaticLookups};

fn pool(ns: &str, name: &str, spec: Value) -> MaasIPPool {
    let mut spec = spec;
    spec["namePrefix"] = json!(name);
    let mut p = MaasIPPool::new(name, serde_json::from_value(spec).unwrap());
    p.metadata.namespace = Some(ns.into());
    p
}

/// A /24 pool of one start/end range.
fn ranged(ns: &str, name: &str, start: &str, end: &str) -> MaasIPPool {
    pool(
        ns,
        name,
        json!({"pools": [{"start": start, "end": end}], "prefix": 24}),
    )
}

fn request<'a>(
    operation: Operation,
    object: Option<&'a MaasIPPool>,
    old: Option<&'a MaasIPPool>,
) -> Request<'a, MaasIPPool> {
    let meta = &object.or(old).unwrap().metadata;
    Request {
        operation,
        namespace: meta.namespace.as_deref().unwrap(),
        name: meta.name.as_deref().unwrap(),
        object,
        old,
    }
}

fn create(new: &MaasIPPool, others: &[&MaasIPPool]) -> Verdict {
    let lookups = StaticLookups {
        pools: others.iter().map(|p| Arc::new((*p).clone())).collect(),
        ..StaticLookups::default()
    };
    maas_ip_pool(&request(Operation::Create, Some(new), None), &lookups)
}

fn texts(v: &Verdict) -> Vec<String> {
    v.errors.iter().map(ToString::to_string).collect()
}

#[track_caller]
fn one_error(v: &Verdict, path: &str, starts: &str) -> String {
    assert_eq!(v.errors.len(), 1, "{:?}", texts(v));
    assert_eq!(v.errors[0].path.as_str(), path);
    let text = v.errors[0].to_string();
    assert!(text.starts_with(starts), "{text}");
    text
}

#[test]
fn valid_pools_pass() {
    let v4 = pool(
        "ns",
        "v4",
        json!({
            "pools": [
                {"start": "10.0.0.10", "end": "10.0.0.99"},
                {"start": "10.0.1.10", "end": "10.0.1.99", "prefix": 24, "gateway": "10.0.1.1"},
            ],
            "prefix": 24,
            "gateway": "10.0.0.1",
            "exclusions": ["10.0.0.20", "10.0.0.30-10.0.0.39", "10.0.1.64/28", "10.0.0.90-10.0.0.120"],
            "preAllocations": {"db-0": "10.0.0.11", "db-1": "10.0.1.11"},
            "maasSubnet": "10.0.0.0/16",
        }),
    );
    let v6 = pool(
        "ns",
        "v6",
        json!({"pools": [{"subnet": "fd00:1::/64"}], "gateway": "fd00:1::1"}),
    );
    // A subnet range holds its gateway: the allocator skips it.
    let subnet = pool(
        "ns",
        "subnet",
        json!({"pools": [{"subnet": "10.1.0.0/24", "gateway": "10.1.0.1"}]}),
    );
    for p in [&v4, &v6, &subnet] {
        let v = create(p, &[&v4, &v6, &subnet]);
        assert_eq!(v, Verdict::ok(), "{}", p.metadata.name.as_deref().unwrap());
    }
}

#[test]
fn layout_errors_name_their_field() {
    let p = pool(
        "ns",
        "p",
        json!({"pools": [{"subnet": "10.0.0.0/24"}, {"start": "10.0.1.9", "end": "10.0.1.2"}]}),
    );
    let text = one_error(
        &create(&p, &[]),
        "spec.pools[1].end",
        r#"spec.pools[1].end: Invalid value: "10.0.1.2": "#,
    );
    assert!(text.ends_with(": is before start 10.0.1.9"), "{text}");

    let p = pool(
        "ns",
        "p",
        json!({"pools": [{"subnet": "10.0.0.0/24"}, {"subnet": "fd00::/64"}]}),
    );
    one_error(
        &create(&p, &[]),
        "spec.pools[1].subnet",
        r#"spec.pools[1].subnet: Invalid value: "fd00::/64": "#,
    );

    let p = pool(
        "ns",
        "p",
        json!({"pools": [{"start": "10.0.0.1", "end": "10.0.0.9"}]}),
    );
    one_error(
        &create(&p, &[]),
        "spec.pools[0].prefix",
        "spec.pools[0].prefix: Required value: no prefix length",
    );

    // Never a panic on what the CEL rules should have stopped.
    let p = pool(
        "ns",
        "p",
        json!({"pools": [{"start": "10.0.0.1", "end": "nope"}], "prefix": 24}),
    );
    let text = one_error(
        &create(&p, &[]),
        "spec.pools[0].end",
        r#"spec.pools[0].end: Invalid value: "nope": "#,
    );
    assert!(text.ends_with(": is not an IP address"), "{text}");
    let p = pool(
        "ns",
        "p",
        json!({"pools": [{"subnet": "10.0.0.0/24"}], "maasSubnet": "bad"}),
    );
    one_error(
        &create(&p, &[]),
        "spec.maasSubnet",
        r#"spec.maasSubnet: Invalid value: "bad": "#,
    );
}

#[test]
fn a_start_end_range_around_its_gateway_is_rejected() {
    let mut p = ranged("ns", "p", "10.0.0.1", "10.0.0.50");
    p.spec.gateway = Some("10.0.0.1".into());
    let text = one_error(
        &create(&p, &[]),
        "spec.pools[0]",
        r#"spec.pools[0]: Invalid value: "10.0.0.1-10.0.0.50": contains the gateway 10.0.0.1 (spec.gateway)"#,
    );
    assert!(text.contains("spec.gateway"));

    p.spec.gateway = None;
    p.spec.pools[0].gateway = Some("10.0.0.25".into());
    one_error(
        &create(&p, &[]),
        "spec.pools[0]",
        r#"spec.pools[0]: Invalid value: "10.0.0.1-10.0.0.50": contains the gateway 10.0.0.25 (spec.pools[0].gateway)"#,
    );

    p.spec.pools[0].gateway = Some("10.0.0.254".into());
    assert!(create(&p, &[]).allowed());
}

#[test]
fn overlapping_ranges_of_one_pool_are_rejected_on_the_later() {
    let p = pool(
        "ns",
        "p",
        json!({"pools": [{"subnet": "10.0.0.0/24"}, {"start": "10.0.1.0", "end": "10.0.1.9", "prefix": 24}, {"subnet": "10.0.0.128/25"}]}),
    );
    one_error(
        &create(&p, &[]),
        "spec.pools[2]",
        r#"spec.pools[2]: Invalid value: "10.0.0.128-10.0.0.255": overlaps spec.pools[0]"#,
    );
}

#[test]
fn exclusions_outside_every_range_or_reversed_are_rejected() {
    let mut p = ranged("ns", "p", "10.0.0.10", "10.0.0.20");
    p.spec.exclusions = Some(vec![
        "10.0.0.15".into(),
        "10.0.5.0/24".into(),
        "10.0.0.21-10.0.0.30".into(),
        "10.0.0.5-10.0.0.10".into(),
    ]);
    let v = create(&p, &[]);
    assert_eq!(
        texts(&v),
        [
            r#"spec.exclusions[1]: Invalid value: "10.0.5.0/24": outside every range of spec.pools; it excludes nothing"#,
            r#"spec.exclusions[2]: Invalid value: "10.0.0.21-10.0.0.30": outside every range of spec.pools; it excludes nothing"#,
        ]
    );

    p.spec.exclusions = Some(vec!["10.0.0.18-10.0.0.12".into()]);
    let text = one_error(
        &create(&p, &[]),
        "spec.exclusions[0]",
        r#"spec.exclusions[0]: Invalid value: "10.0.0.18-10.0.0.12": "#,
    );
    assert!(text.ends_with("10.0.0.12 is before 10.0.0.18"), "{text}");
}

#[test]
fn pre_allocations_inside_the_ranges_and_once() {
    let mut p = ranged("ns", "p", "10.0.0.10", "10.0.0.20");
    p.spec.exclusions = Some(vec!["10.0.0.15".into()]);
    let pre = |pairs: &[(&str, &str)]| {
        Some(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        )
    };

    p.spec.pre_allocations = pre(&[("db-0", "10.0.0.30")]);
    one_error(
        &create(&p, &[]),
        "spec.preAllocations[db-0]",
        r#"spec.preAllocations[db-0]: Invalid value: "10.0.0.30": is outside every range of spec.pools"#,
    );

    p.spec.pre_allocations = pre(&[("db-0", "10.0.0.15")]);
    one_error(
        &create(&p, &[]),
        "spec.preAllocations[db-0]",
        r#"spec.preAllocations[db-0]: Invalid value: "10.0.0.15": is excluded by spec.exclusions[0]"#,
    );

    p.spec.pre_allocations = pre(&[("db-0", "10.0.0.11"), ("db-1", "10.0.0.11")]);
    let v = create(&p, &[]);
    one_error(
        &v,
        "spec.preAllocations[db-1]",
        r#"spec.preAllocations[db-1]: Duplicate value: "10.0.0.11": is also pre-allocated to db-0"#,
    );
    assert_eq!(v.errors[0].reason(), "FieldValueDuplicate");

    p.spec.pre_allocations = pre(&[("db-0", "10.0.0.11"), ("db-1", "10.0.0.12")]);
    assert!(create(&p, &[]).allowed());
}

#[test]
fn pre_allocation_keys_must_name_a_claim_or_a_machine() {
    let mut p = ranged("ns", "p", "10.0.0.10", "10.0.0.20");
    // A Machine name (e.g. a control-plane machine) is as good a key as a claim name.
    p.spec.pre_allocations = Some([("cp-x7k2p".to_owned(), "10.0.0.11".to_owned())].into());
    assert!(create(&p, &[]).allowed());
    p.spec.pre_allocations = Some([("Node_0".to_owned(), "10.0.0.11".to_owned())].into());
    one_error(
        &create(&p, &[]),
        "spec.preAllocations[Node_0]",
        r#"spec.preAllocations[Node_0]: Invalid value: "Node_0": a key must be the name of an IPAddressClaim or of a Machine"#,
    );
}

#[test]
fn ranges_must_lie_in_the_maas_subnet() {
    let p = pool(
        "ns",
        "p",
        json!({"pools": [{"subnet": "10.20.1.0/24"}, {"start": "10.21.0.10", "end": "10.21.0.20", "prefix": 24}], "maasSubnet": "10.20.0.0/16"}),
    );
    one_error(
        &create(&p, &[]),
        "spec.pools[1]",
        r#"spec.pools[1]: Invalid value: "10.21.0.10-10.21.0.20": outside spec.maasSubnet 10.20.0.0/16"#,
    );

    let p = pool(
        "ns",
        "p",
        json!({"pools": [{"subnet": "fd00::/64"}], "maasSubnet": "10.20.0.0/16"}),
    );
    one_error(
        &create(&p, &[]),
        "spec.pools[0]",
        r#"spec.pools[0]: Invalid value: "fd00::-fd00::ffff:ffff:ffff:ffff": outside spec.maasSubnet"#,
    );
}

#[test]
fn a_gateway_outside_the_network_is_the_layouts_error() {
    // The layout refuses such a pool (the controller would not serve it), so it is an error,
    // not a warning.
    let mut p = ranged("ns", "p", "10.0.0.10", "10.0.0.20");
    p.spec.gateway = Some("10.0.9.1".into());
    one_error(
        &create(&p, &[]),
        "spec.gateway",
        r#"spec.gateway: Invalid value: "10.0.9.1": is outside 10.0.0.0/24, the network of spec.pools[0]"#,
    );
}

#[test]
fn same_namespace_overlap_is_rejected_naming_the_other_pool() {
    let existing = pool(
        "ns",
        "a",
        json!({"pools": [{"subnet": "10.0.0.0/24"}, {"subnet": "10.0.5.0/24"}]}),
    );
    let new = pool(
        "ns",
        "b",
        json!({"pools": [{"subnet": "10.0.9.0/24"}, {"start": "10.0.5.100", "end": "10.0.5.200", "prefix": 24}]}),
    );
    let text = one_error(
        &create(&new, &[&existing]),
        "spec.pools[1]",
        r#"spec.pools[1]: Invalid value: "10.0.5.100-10.0.5.200": overlaps spec.pools[1] (10.0.5.0-10.0.5.255) of MaasIPPool ns/a"#,
    );
    assert!(
        text.ends_with("would hand out the same addresses twice"),
        "{text}"
    );
    assert!(create(&ranged("ns", "c", "10.0.6.1", "10.0.6.9"), &[&existing]).allowed());
    // Another family never overlaps.
    let v6 = pool("ns", "d", json!({"pools": [{"subnet": "2000::/3"}]}));
    assert!(create(&v6, &[&existing]).allowed());
}

#[test]
fn other_namespace_overlap_is_a_warning() {
    let existing = ranged("site-a", "a", "10.0.0.10", "10.0.0.50");
    let new = ranged("site-b", "b", "10.0.0.40", "10.0.0.60");
    let v = create(&new, &[&existing]);
    assert!(v.allowed(), "{:?}", texts(&v));
    assert_eq!(v.warnings.len(), 1);
    assert!(
        v.warnings[0].starts_with("spec.pools[0]: 10.0.0.40-10.0.0.60 overlaps spec.pools[0] (10.0.0.10-10.0.0.50) of MaasIPPool site-a/a in another namespace"),
        "{}",
        v.warnings[0]
    );
}

#[test]
fn other_namespace_overlap_in_the_same_maas_subnet_is_rejected() {
    let mut existing = ranged("site-a", "a", "10.20.0.10", "10.20.0.50");
    existing.spec.maas_subnet = Some("10.20.0.0/16".into());
    let mut new = ranged("site-b", "b", "10.20.0.40", "10.20.0.60");
    new.spec.maas_subnet = Some("10.20.0.0/16".into());
    one_error(
        &create(&new, &[&existing]),
        "spec.pools[0]",
        r#"spec.pools[0]: Invalid value: "10.20.0.40-10.20.0.60": overlaps spec.pools[0] (10.20.0.10-10.20.0.50) of MaasIPPool site-a/a, and both pools reserve from MAAS subnet 10.20.0.0/16"#,
    );
    // Another MAAS subnet (another MAAS, say): only a warning.
    new.spec.maas_subnet = Some("10.20.0.0/24".into());
    let v = create(&new, &[&existing]);
    assert!(v.allowed());
    assert_eq!(v.warnings.len(), 1);
}

#[test]
fn pools_that_do_not_parse_are_skipped() {
    let broken = pool(
        "ns",
        "broken",
        json!({"pools": [{"start": "10.0.0.1", "end": "10.0.0.9"}]}),
    );
    assert!(create(&ranged("ns", "p", "10.0.0.1", "10.0.0.9"), &[&broken]).allowed());
}

#[test]
fn an_update_is_not_compared_with_the_pools_old_version() {
    let old = ranged("ns", "p", "10.0.0.10", "10.0.0.20");
    let new = ranged("ns", "p", "10.0.0.10", "10.0.0.30");
    let lookups = StaticLookups {
        pools: vec![Arc::new(old.clone())],
        ..StaticLookups::default()
    };
    let v = maas_ip_pool(
        &request(Operation::Update, Some(&new), Some(&old)),
        &lookups,
    );
    assert_eq!(v, Verdict::ok());
}

#[test]
fn an_update_leaving_the_spec_alone_is_not_checked() {
    // Admitted before these rules: its finalizer must still be removable.
    let mut old = ranged("ns", "p", "10.0.0.1", "10.0.0.20");
    old.spec.gateway = Some("10.0.0.1".into());
    let mut new = old.clone();
    new.metadata.finalizers = Some(vec![]);
    let none = StaticLookups::default();
    assert!(maas_ip_pool(&request(Operation::Update, Some(&new), Some(&old)), &none).allowed());
    new.spec.pools[0].end = Some("10.0.0.30".into());
    let v = maas_ip_pool(&request(Operation::Update, Some(&new), Some(&old)), &none);
    one_error(&v, "spec.pools[0]", "spec.pools[0]: Invalid value");
}

#[test]
fn deleting_a_pool_in_use_warns_and_is_allowed() {
    let mut old = ranged("ns", "p", "10.0.0.10", "10.0.0.20");
    old.status = Some(MaasIPPoolStatus {
        addresses_in_use: Some(3),
        ..MaasIPPoolStatus::default()
    });
    let none = StaticLookups::default();
    let v = maas_ip_pool(&request(Operation::Delete, None, Some(&old)), &none);
    assert!(v.allowed());
    assert_eq!(v.warnings.len(), 1);
    assert!(
        v.warnings[0].starts_with(
            "status.addressesInUse: 3 addresses of this pool are in use; the pool stays Terminating"
        ),
        "{}",
        v.warnings[0]
    );

    old.metadata.annotations = Some([(DELETE_FOR_MOVE.to_owned(), String::new())].into());
    assert_eq!(
        maas_ip_pool(&request(Operation::Delete, None, Some(&old)), &none),
        Verdict::ok()
    );

    old.metadata.annotations = None;
    old.status = Some(MaasIPPoolStatus::default());
    assert_eq!(
        maas_ip_pool(&request(Operation::Delete, None, Some(&old)), &none),
        Verdict::ok()
    );
}

#[test]
fn overlap_walk_finds_every_meeting_range_once() {
    let span = |first, last, index| Span { first, last, index };
    let mine = [span(0, 9, 2), span(20, 29, 0), span(40, 49, 1)];
    let theirs = [
        span(5, 6, 0),
        span(8, 21, 1),
        span(25, 25, 2),
        span(50, 60, 3),
    ];
    assert_eq!(overlapping(&mine, &theirs), [(2, 0), (0, 1)]);
    assert_eq!(overlapping(&mine, &[]), []);
}

#[test]
fn a_pool_of_addresses_no_server_can_be_given_is_refused_naming_the_field() {
    let v = create(
        &pool("ns", "all", json!({"pools": [{"subnet": "::/0"}]})),
        &[],
    );
    assert!(!v.allowed());
    assert_eq!(v.errors[0].path.as_str(), "spec.pools[0].subnet");
    assert!(
        v.errors[0].detail.contains("every address"),
        "{:?}",
        v.errors
    );
    let v = create(
        &pool("ns", "lo", json!({"pools": [{"subnet": "127.0.0.0/24"}]})),
        &[],
    );
    assert!(v.errors[0].detail.contains("loopback"), "{:?}", v.errors);
}
