#![allow(clippy::unwrap_used)]

use super::*;
use crate::ipam::AllocationStrategy;

fn range(start: &str, end: &str) -> IpPoolRange {
    IpPoolRange {
        start: Some(start.into()),
        end: Some(end.into()),
        ..IpPoolRange::default()
    }
}

fn subnet(cidr: &str) -> IpPoolRange {
    IpPoolRange {
        subnet: Some(cidr.into()),
        ..IpPoolRange::default()
    }
}

fn spec(pools: Vec<IpPoolRange>) -> MaasIPPoolSpec {
    MaasIPPoolSpec {
        pools,
        prefix: None,
        gateway: None,
        dns_servers: None,
        exclusions: None,
        pre_allocations: None,
        name_prefix: "pool".into(),
        cluster_name: None,
        allocation_strategy: AllocationStrategy::Sequential,
        maas_subnet: None,
    }
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn err(spec: &MaasIPPoolSpec) -> LayoutError {
    PoolLayout::from_spec(spec).unwrap_err()
}

/// The allocatable addresses in allocation order (small pools only).
fn addresses(layout: &PoolLayout) -> Vec<IpAddr> {
    layout
        .segments()
        .iter()
        .flat_map(|s| (s.start..=s.end).map(|v| from_u128(layout.family(), v)))
        .collect()
}

#[test]
fn a_subnet_leaves_out_network_gateway_and_broadcast() {
    let mut s = spec(vec![subnet("10.0.0.0/29")]);
    s.gateway = Some("10.0.0.1".into());
    s.dns_servers = Some(vec!["10.0.0.53".into()]);
    let layout = PoolLayout::from_spec(&s).unwrap();
    assert_eq!(layout.family(), Family::V4);
    assert_eq!(
        addresses(&layout),
        ["10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6"].map(ip)
    );
    assert_eq!(layout.positions(), 5);
    let info = layout.address_info(ip("10.0.0.4")).unwrap();
    assert_eq!(info.prefix, 29);
    assert_eq!(info.gateway, Some(ip("10.0.0.1")));
    assert_eq!(info.dns_servers, [ip("10.0.0.53")]);
    assert!(!layout.is_allocatable(ip("10.0.0.7")));
    assert!(!layout.is_allocatable(ip("10.0.0.1")));
    assert!(layout.is_allocatable(ip("10.0.0.6")));
    assert!(!layout.is_allocatable(ip("fd00::1")));
}

#[test]
fn tiny_networks_use_every_address() {
    let layout = PoolLayout::from_spec(&spec(vec![subnet("10.0.0.4/31")])).unwrap();
    assert_eq!(addresses(&layout), ["10.0.0.4", "10.0.0.5"].map(ip));
    let layout = PoolLayout::from_spec(&spec(vec![subnet("10.0.0.9/32")])).unwrap();
    assert_eq!(addresses(&layout), [ip("10.0.0.9")]);
}

#[test]
fn ranges_take_their_own_settings_else_the_pools() {
    let mut s = spec(vec![
        IpPoolRange {
            prefix: Some(25),
            gateway: Some("10.0.1.126".into()),
            dns_servers: Some(vec!["1.1.1.1".into()]),
            ..range("10.0.1.10", "10.0.1.12")
        },
        range("10.0.0.10", "10.0.0.11"),
    ]);
    s.prefix = Some(24);
    s.gateway = Some("10.0.0.1".into());
    s.dns_servers = Some(vec!["10.0.0.53".into(), "fd00::53".into()]);
    let layout = PoolLayout::from_spec(&s).unwrap();
    // Spec order, not address order.
    assert_eq!(
        addresses(&layout),
        [
            "10.0.1.10",
            "10.0.1.11",
            "10.0.1.12",
            "10.0.0.10",
            "10.0.0.11"
        ]
        .map(ip)
    );
    let own = layout.address_info(ip("10.0.1.11")).unwrap();
    assert_eq!(
        (own.prefix, own.gateway, own.dns_servers),
        (25, Some(ip("10.0.1.126")), &[ip("1.1.1.1")][..])
    );
    let inherited = layout.address_info(ip("10.0.0.10")).unwrap();
    assert_eq!(
        (inherited.prefix, inherited.gateway),
        (24, Some(ip("10.0.0.1")))
    );
    assert_eq!(
        dns_servers_for(&layout, ip("10.0.0.11")),
        [ip("10.0.0.53"), ip("fd00::53")]
    );
    assert_eq!(dns_servers_for(&layout, ip("10.0.1.12")), [ip("1.1.1.1")]);
    // Outside every range: the pool's servers.
    assert_eq!(
        dns_servers_for(&layout, ip("192.168.0.1")),
        [ip("10.0.0.53"), ip("fd00::53")]
    );
    assert!(layout.address_info(ip("192.168.0.1")).is_none());
}

#[test]
fn exclusions_take_addresses_ranges_and_cidrs() {
    let mut s = spec(vec![range("10.0.0.10", "10.0.0.30")]);
    s.prefix = Some(24);
    s.exclusions = Some(vec![
        "10.0.0.12".into(),
        "10.0.0.15-10.0.0.17".into(),
        "10.0.0.24/30".into(),
        "10.0.0.29 - 10.0.0.40".into(),
    ]);
    let layout = PoolLayout::from_spec(&s).unwrap();
    assert_eq!(
        addresses(&layout),
        [
            "10.0.0.10",
            "10.0.0.11",
            "10.0.0.13",
            "10.0.0.14",
            "10.0.0.18",
            "10.0.0.19",
            "10.0.0.20",
            "10.0.0.21",
            "10.0.0.22",
            "10.0.0.23",
            "10.0.0.28"
        ]
        .map(ip)
    );
    assert_eq!(layout.positions(), 11);
    // Kept in spec order for callers that check them against the ranges.
    assert_eq!(
        layout.exclusions().first(),
        Some(&(to_u128(ip("10.0.0.12")), to_u128(ip("10.0.0.12"))))
    );
    assert_eq!(
        layout.exclusions()[3],
        (to_u128(ip("10.0.0.29")), to_u128(ip("10.0.0.40")))
    );
}

#[test]
fn pre_allocations_are_kept_for_their_claim() {
    let mut s = spec(vec![subnet("10.0.0.0/29")]);
    s.pre_allocations = Some([("db-0".to_owned(), "10.0.0.3".to_owned())].into());
    let layout = PoolLayout::from_spec(&s).unwrap();
    assert_eq!(layout.pre_allocation("db-0"), Some(ip("10.0.0.3")));
    assert_eq!(layout.pre_allocation("other"), None);
    assert!(!layout.is_allocatable(ip("10.0.0.3")));
    assert_eq!(layout.positions(), 5);
    assert!(layout.address_info(ip("10.0.0.3")).is_some());
}

#[test]
fn ipv6_ranges_and_subnets() {
    let mut s = spec(vec![
        subnet("fd00:1::/126"),
        IpPoolRange {
            prefix: Some(64),
            gateway: Some("fd00:2::1".into()),
            ..range("fd00:2::10", "fd00:2::ffff")
        },
    ]);
    s.dns_servers = Some(vec!["fd00::53".into()]);
    let layout = PoolLayout::from_spec(&s).unwrap();
    assert_eq!(layout.family(), Family::V6);
    // No broadcast in IPv6: only the subnet-router anycast (network) address is left out.
    assert_eq!(
        &addresses(&layout)[..3],
        ["fd00:1::1", "fd00:1::2", "fd00:1::3"].map(ip)
    );
    assert_eq!(layout.positions(), 3 + 0xffff - 0x10 + 1);
    assert_eq!(layout.address_info(ip("fd00:2::20")).unwrap().prefix, 64);

    // A huge range counts without overflow (all of global unicast, less its network address).
    let huge = PoolLayout::from_spec(&spec(vec![subnet("2000::/3")])).unwrap();
    assert_eq!(huge.positions(), (1u128 << 125) - 1);
}

#[test]
fn no_range_takes_in_addresses_no_server_can_be_given() {
    for (text, words) in [
        ("::/0", "every address"),
        ("0.0.0.0/0", "every address"),
        ("0.0.0.0/24", "the unspecified network"),
        ("127.0.0.0/24", "loopback"),
        ("::1/128", "loopback"),
        ("169.254.0.0/24", "link-local"),
        ("fe80::/64", "link-local"),
        ("224.0.0.0/24", "multicast"),
        ("ff02::/64", "multicast"),
    ] {
        let e = PoolLayout::from_spec(&spec(vec![subnet(text)])).unwrap_err();
        assert_eq!(e.field, "spec.pools[0].subnet", "{text}");
        assert!(e.message.contains(words), "{text}: {}", e.message);
    }
    let mut s = spec(vec![range("127.0.0.2", "127.0.0.9")]);
    s.prefix = Some(24);
    let e = PoolLayout::from_spec(&s).unwrap_err();
    assert_eq!(e.field, "spec.pools[0].start");
    assert!(
        e.message.contains("127.0.0.0/8 (loopback)"),
        "{}",
        e.message
    );
    // Next to them is fine.
    PoolLayout::from_spec(&spec(vec![subnet("126.0.0.0/8"), subnet("169.253.0.0/16")])).unwrap();
}

#[test]
fn errors_name_the_field() {
    let cases: Vec<(MaasIPPoolSpec, &str, &str)> = vec![
        (
            spec(vec![subnet("10.0.0.0/24"), range("10.0.1.9", "10.0.1.2")]),
            "spec.pools[1].end",
            "before start",
        ),
        (
            spec(vec![range("10.0.0.1", "nope")]),
            "spec.pools[0].end",
            "not an IP address",
        ),
        (
            spec(vec![subnet("10.0.0.0/33")]),
            "spec.pools[0].subnet",
            "not a CIDR",
        ),
        (
            spec(vec![range("10.0.0.1", "10.0.0.9")]),
            "spec.pools[0].prefix",
            "no prefix length",
        ),
        (
            spec(vec![subnet("10.0.0.0/24"), subnet("fd00::/64")]),
            "spec.pools[1].subnet",
            "one address family",
        ),
        (
            spec(vec![subnet("10.0.0.0/24"), subnet("10.0.0.128/25")]),
            "spec.pools[1]",
            "overlaps spec.pools[0]",
        ),
        (
            spec(vec![IpPoolRange {
                prefix: Some(24),
                ..range("10.0.0.1", "10.0.1.1")
            }]),
            "spec.pools[0].end",
            "outside 10.0.0.0/24",
        ),
        (
            spec(vec![IpPoolRange {
                start: Some("10.0.1.1".into()),
                ..subnet("10.0.0.0/24")
            }]),
            "spec.pools[0].start",
            "outside subnet",
        ),
        (
            spec(vec![IpPoolRange {
                prefix: Some(16),
                ..subnet("10.0.0.0/24")
            }]),
            "spec.pools[0].prefix",
            "contradicts",
        ),
        (
            spec(vec![IpPoolRange {
                prefix: Some(40),
                ..range("10.0.0.1", "10.0.0.2")
            }]),
            "spec.pools[0].prefix",
            "not a valid IPv4 prefix",
        ),
        (
            spec(vec![IpPoolRange {
                gateway: Some("10.9.0.1".into()),
                ..subnet("10.0.0.0/24")
            }]),
            "spec.pools[0].gateway",
            "outside 10.0.0.0/24",
        ),
        (
            spec(vec![IpPoolRange {
                dns_servers: Some(vec!["1.1.1.1".into(), "x".into()]),
                ..subnet("10.0.0.0/24")
            }]),
            "spec.pools[0].dnsServers[1]",
            "not an IP address",
        ),
        (
            spec(vec![IpPoolRange {
                start: Some("10.0.0.1".into()),
                ..IpPoolRange::default()
            }]),
            "spec.pools[0].end",
            "required",
        ),
        (spec(vec![]), "spec.pools", "at least one"),
    ];
    for (s, field, message) in cases {
        let e = err(&s);
        assert_eq!(e.field, field, "{e}");
        assert!(e.message.contains(message), "{e}");
        assert!(e.to_string().starts_with(field));
    }

    let mut s = spec(vec![subnet("10.0.0.0/24")]);
    s.gateway = Some("fd00::1".into());
    assert_eq!(err(&s).field, "spec.gateway");
    s.gateway = None;
    s.prefix = Some(-1);
    assert!(
        PoolLayout::from_spec(&s).is_ok(),
        "the subnet's prefix wins"
    );
    s.exclusions = Some(vec!["10.0.0.9-10.0.0.3".into()]);
    assert_eq!(err(&s).field, "spec.exclusions[0]");
    s.exclusions = Some(vec!["10.0.0.1".into(), "fd00::/64".into()]);
    assert_eq!(err(&s).field, "spec.exclusions[1]");
    s.exclusions = Some(vec!["10.0.0.7".into()]);
    let pre = |pairs: &[(&str, &str)]| {
        Some(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        )
    };
    s.pre_allocations = pre(&[("a", "10.0.0.7")]);
    let e = err(&s);
    assert_eq!(
        (e.field.as_str(), e.message.as_str()),
        (
            "spec.preAllocations[a]",
            "10.0.0.7 is excluded by spec.exclusions[0]"
        )
    );
    s.pre_allocations = pre(&[("a", "10.0.0.8"), ("b", "10.0.0.8")]);
    let e = err(&s);
    assert_eq!(e.field, "spec.preAllocations[b]");
    assert!(e.message.contains("also pre-allocated to a"), "{e}");
    s.pre_allocations = pre(&[("a", "10.0.0.255")]);
    assert!(err(&s).message.contains("broadcast"));
    s.pre_allocations = pre(&[("a", "10.0.9.1")]);
    assert!(err(&s).message.contains("outside every range"));
    s.pre_allocations = pre(&[("a", "fd00::1")]);
    assert_eq!(err(&s).field, "spec.preAllocations[a]");
}

#[test]
fn interval_helpers() {
    assert_eq!(
        merge(vec![(5, 6), (1, 2), (3, 3), (9, 9), (4, 4)]),
        [(1, 6), (9, 9)]
    );
    assert_eq!(merge(vec![(5, 6), (1, 3)]), [(1, 3), (5, 6)]);
    assert_eq!(subtract(0, 10, &[]), [(0, 10)]);
    assert_eq!(
        subtract(0, 10, &[(0, 0), (5, 6), (10, 20)]),
        [(1, 4), (7, 9)]
    );
    assert_eq!(subtract(3, 4, &[(0, 10)]), []);
    assert_eq!(
        subtract(0, u128::MAX, &[(u128::MAX, u128::MAX)]),
        [(0, u128::MAX - 1)]
    );
    assert_eq!(host_mask(Family::V6, 0), u128::MAX);
    assert_eq!(host_mask(Family::V4, 24), 255);
}

#[test]
fn errors_carry_the_value_and_kind() {
    let e = err(&spec(vec![
        subnet("10.0.0.0/24"),
        range("10.0.1.9", "10.0.1.2"),
    ]));
    assert_eq!(e.fault, LayoutFault::Invalid("10.0.1.2".into()));
    let e = err(&spec(vec![subnet("10.0.0.0/24"), subnet("10.0.0.128/25")]));
    assert_eq!(
        (e.fault, e.message.as_str()),
        (
            LayoutFault::Invalid("10.0.0.128-10.0.0.255".into()),
            "overlaps spec.pools[0]"
        )
    );
    let e = err(&spec(vec![range("10.0.0.1", "10.0.0.9")]));
    assert_eq!(e.fault, LayoutFault::Required);
    let e = err(&spec(vec![subnet("10.0.0.0/24"), subnet("fd00::/64")]));
    assert_eq!(e.fault, LayoutFault::Invalid("fd00::/64".into()));
    let mut s = spec(vec![subnet("10.0.0.0/24")]);
    s.pre_allocations = Some(
        [("a", "10.0.0.8"), ("b", "10.0.0.8")]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .into(),
    );
    assert_eq!(err(&s).fault, LayoutFault::Duplicate("10.0.0.8".into()));
}
