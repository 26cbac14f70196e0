use std::collections::BTreeMap;
use std::net::IpAddr;

use super::*;
use crate::ipam::{IpPoolRange, MaasIPPoolSpec};

fn layout(pre: &[(&str, &str)]) -> PoolLayout {
    let spec = MaasIPPoolSpec {
        pools: vec![IpPoolRange {
            subnet: Some("10.0.0.0/24".into()),
            ..IpPoolRange::default()
        }],
        prefix: None,
        gateway: None,
        dns_servers: None,
        exclusions: None,
        pre_allocations: Some(
            pre.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>(),
        ),
        name_prefix: "net".into(),
        cluster_name: None,
        allocation_strategy: crate::ipam::AllocationStrategy::Sequential,
        maas_subnet: None,
    };
    PoolLayout::from_spec(&spec).unwrap()
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn a_claim_name_key_matches() {
    let l = layout(&[("m-0-net", "10.0.0.10")]);
    let got = pre_allocation_for(&l, "m-0-net", Some("m-0")).unwrap();
    assert_eq!(got.address, ip("10.0.0.10"));
    assert_eq!(got.by, MatchedBy::ClaimName);
    assert_eq!(
        got.describe(),
        "spec.preAllocations[m-0-net] (the IPAddressClaim's name)"
    );
}

#[test]
fn a_machine_name_key_matches_claims_made_for_that_machine() {
    let l = layout(&[("md-abc12", "10.0.0.11")]);
    let got = pre_allocation_for(&l, "mm-xyz-net", Some("md-abc12")).unwrap();
    assert_eq!(got.address, ip("10.0.0.11"));
    assert_eq!(got.by, MatchedBy::MachineName);
    assert_eq!(got.key, "md-abc12");
    // A claim that names no Machine only matches by its own name.
    assert_eq!(pre_allocation_for(&l, "mm-xyz-net", None), None);
    assert_eq!(pre_allocation_for(&l, "other", Some("other-machine")), None);
}

#[test]
fn the_claim_name_wins_over_the_machine_name() {
    let l = layout(&[("m-0", "10.0.0.20"), ("c-net", "10.0.0.21")]);
    let got = pre_allocation_for(&l, "c-net", Some("m-0")).unwrap();
    assert_eq!(
        (got.address, got.by),
        (ip("10.0.0.21"), MatchedBy::ClaimName)
    );
    // Without a claim-name key the Machine's applies.
    let got = pre_allocation_for(&l, "d-net", Some("m-0")).unwrap();
    assert_eq!(
        (got.address, got.by),
        (ip("10.0.0.20"), MatchedBy::MachineName)
    );
}

#[test]
fn keys_must_be_object_names() {
    assert_eq!(key_problem("m-0"), None);
    assert_eq!(key_problem("cp.example-1"), None);
    for bad in ["", "Machine_0", "-m", "a..b", &"a".repeat(254)] {
        let why = key_problem(bad).unwrap();
        assert!(
            why.starts_with("a key must be the name of an IPAddressClaim or of a Machine"),
            "{bad}: {why}"
        );
    }
}
