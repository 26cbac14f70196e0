use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use capmaas_api::MaasIPPoolSpec;
use capmaas_api::ipam::IpPoolRange;
use proptest::prelude::*;

use super::*;
use crate::ipam::test_support::{range, spec, subnet};

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn layout(s: &MaasIPPoolSpec) -> Arc<PoolLayout> {
    Arc::new(PoolLayout::from_spec(s).unwrap())
}

const SEQ: AllocationStrategy = AllocationStrategy::Sequential;
const RANDOM: AllocationStrategy = AllocationStrategy::Random;

#[test]
fn sequential_hands_out_the_lowest_free_in_spec_order_until_exhausted() {
    let mut s = spec(vec![range("10.0.1.10", "10.0.1.11"), subnet("10.0.0.0/30")]);
    s.prefix = Some(24);
    let mut a = Allocator::new(layout(&s));
    assert_eq!(a.free_count(), 4);
    let got: Vec<_> = std::iter::from_fn(|| a.allocate(SEQ, 0)).collect();
    assert_eq!(
        got,
        ["10.0.1.10", "10.0.1.11", "10.0.0.1", "10.0.0.2"].map(ip)
    );
    assert_eq!(a.free_count(), 0);
    assert_eq!(a.next(SEQ, 0), None);
    assert_eq!(a.next(RANDOM, 7), None);

    // A release is served next, and frees merge back into one interval.
    assert!(a.put(ip("10.0.1.11")));
    assert!(!a.put(ip("10.0.1.11")), "already free");
    assert!(!a.put(ip("10.0.0.3")), "broadcast is never allocatable");
    assert_eq!(a.allocate(SEQ, 0), Some(ip("10.0.1.11")));
    for x in ["10.0.1.10", "10.0.1.11"] {
        assert!(a.put(ip(x)));
    }
    assert_eq!(a.intervals(), 1);
    assert!(a.is_free(ip("10.0.1.10")));
    assert!(!a.is_free(ip("10.0.0.1")));
    assert!(!a.take(ip("10.0.0.1")), "already taken");
    assert!(!a.take(ip("fd00::1")), "other family");
}

#[test]
fn with_used_skips_used_and_foreign_addresses() {
    let s = spec(vec![subnet("10.0.0.0/28")]);
    let used = [
        "10.0.0.1",
        "10.0.0.2",
        "10.0.0.5",
        "192.168.1.1",
        "fd00::1",
        "10.0.0.5",
    ]
    .map(ip);
    let a = Allocator::with_used(layout(&s), used);
    assert_eq!(a.free_count(), 14 - 3);
    assert_eq!(a.next(SEQ, 0), Some(ip("10.0.0.3")));
    let mut b = Allocator::new(layout(&s));
    for u in used {
        b.take(u);
    }
    assert_eq!(a.free, b.free);
    assert_eq!(a.free_count, b.free_count);
}

#[test]
fn random_picks_free_addresses_across_the_pool() {
    let s = spec(vec![subnet("10.0.0.0/24"), subnet("10.0.1.0/24")]);
    let mut a = Allocator::new(layout(&s));
    let mut rng = 0x9e37_79b9_7f4a_7c15_u128;
    let mut seen = BTreeSet::new();
    while let Some(ip) = a.allocate(RANDOM, rng) {
        assert!(seen.insert(ip), "{ip} handed out twice");
        rng = rng
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
    }
    assert_eq!(seen.len(), 2 * 254);
    // Not simply in order.
    let first: Vec<_> = seen.iter().take(3).collect();
    assert_eq!(first.len(), 3);
}

#[test]
fn random_wraps_around_to_the_start() {
    let s = spec(vec![subnet("10.0.0.0/29")]);
    let mut a = Allocator::new(layout(&s));
    for x in ["10.0.0.4", "10.0.0.5", "10.0.0.6"] {
        a.take(ip(x));
    }
    // Position 4 (10.0.0.5) and everything after it is used: wrap to the lowest free.
    assert_eq!(a.next(RANDOM, 4), Some(ip("10.0.0.1")));
    assert_eq!(a.next(RANDOM, 1), Some(ip("10.0.0.2")));
}

#[test]
fn ipv6_allocation_near_the_top_of_the_space() {
    let s = spec(vec![IpPoolRange {
        prefix: Some(120),
        ..range(
            // The top of what a pool may hold (ff00::/8 above it is multicast).
            "feff:ffff:ffff:ffff:ffff:ffff:ffff:fffd",
            "feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        )
    }]);
    let mut a = Allocator::new(layout(&s));
    let got: Vec<_> = std::iter::from_fn(|| a.allocate(SEQ, 0)).collect();
    assert_eq!(got.len(), 3);
    assert!(a.put(got[2]));
    assert!(a.put(got[1]));
    assert_eq!(a.intervals(), 1);
    let huge = Allocator::new(layout(&spec(vec![subnet("fd00::/64")])));
    assert_eq!(huge.free_count(), (1u128 << 64) - 1);
    assert_eq!(huge.next(SEQ, 0), Some(ip("fd00::1")));
    assert!(huge.next(RANDOM, u128::MAX).is_some());
}

/// A pool of IPv4 ranges in 10.0.0.0/22 with prefix 24, per-range gateways, exclusions and
/// pre-allocations; and the allocatable addresses in allocation order, worked out by brute
/// force independently of [`PoolLayout`].
fn pool() -> impl Strategy<Value = (MaasIPPoolSpec, Vec<u32>)> {
    let ranges = prop::collection::vec(
        (
            0u8..4,
            any::<u8>(),
            any::<u8>(),
            prop::option::of(any::<u8>()),
        ),
        1..4,
    );
    let exclusions = prop::collection::vec((0u8..4, any::<u8>(), 0u8..6), 0..6);
    let pre = prop::collection::vec((0u8..4, any::<u8>()), 0..4);
    (ranges, exclusions, pre).prop_map(|(ranges, exclusions, pre)| {
        let v4 = |t: u8, x: u8| Ipv4Addr::new(10, 0, t, x);
        let mut s = spec(
            ranges
                .iter()
                .map(|&(t, a, b, g)| IpPoolRange {
                    gateway: g.map(|g| v4(t, g).to_string()),
                    ..range(&v4(t, a.min(b)).to_string(), &v4(t, a.max(b)).to_string())
                })
                .collect(),
        );
        s.prefix = Some(24);
        let excluded: Vec<(u32, u32)> = exclusions
            .iter()
            .map(|&(t, a, len)| (u32::from(v4(t, a)), u32::from(v4(t, a.saturating_add(len)))))
            .collect();
        s.exclusions = Some(
            excluded
                .iter()
                .map(|&(lo, hi)| format!("{}-{}", Ipv4Addr::from(lo), Ipv4Addr::from(hi)))
                .collect(),
        );
        s.pre_allocations = Some(
            pre.iter()
                .enumerate()
                .map(|(i, &(t, x))| (format!("claim-{i}"), v4(t, x).to_string()))
                .collect(),
        );
        let pre: Vec<u32> = pre.iter().map(|&(t, x)| u32::from(v4(t, x))).collect();
        let mut order = Vec::new();
        for &(t, a, b, g) in &ranges {
            for x in a.min(b)..=a.max(b) {
                let v = u32::from(v4(t, x));
                let reserved = x == 0 || x == 255 || g == Some(x);
                let excluded = excluded.iter().any(|&(lo, hi)| lo <= v && v <= hi);
                if !reserved && !excluded && !pre.contains(&v) {
                    order.push(v);
                }
            }
        }
        (s, order)
    })
}

#[derive(Debug, Clone)]
enum Op {
    Sequential,
    Random(u128),
    Release(usize),
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(
        prop_oneof![
            3 => Just(Op::Sequential),
            3 => any::<u128>().prop_map(Op::Random),
            2 => any::<usize>().prop_map(Op::Release),
        ],
        0..400,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// No address is ever handed out twice; only allocatable addresses are handed out (never a
    /// network, broadcast, gateway, excluded or pre-allocated one); sequential is the lowest
    /// free in allocation order; the free count and exhaustion match the brute-force model.
    #[test]
    fn never_twice_and_always_the_model((s, order) in pool(), ops in ops()) {
        let Ok(layout) = PoolLayout::from_spec(&s) else {
            return Ok(());
        };
        let allowed: BTreeSet<u32> = order.iter().copied().collect();
        prop_assert_eq!(layout.positions(), order.len() as u128);
        let mut a = Allocator::new(Arc::new(layout));
        let mut held: Vec<u32> = Vec::new();
        for op in ops {
            let model_free: Vec<u32> = order.iter().copied().filter(|v| !held.contains(v)).collect();
            match op {
                Op::Sequential | Op::Random(_) => {
                    let (strategy, r) = match op {
                        Op::Random(r) => (RANDOM, r),
                        _ => (SEQ, 0),
                    };
                    let got = a.allocate(strategy, r);
                    match got {
                        None => prop_assert!(model_free.is_empty(), "exhausted with {} free", model_free.len()),
                        Some(IpAddr::V4(v)) => {
                            let v = u32::from(v);
                            prop_assert!(!held.contains(&v), "{} handed out twice", Ipv4Addr::from(v));
                            prop_assert!(allowed.contains(&v), "{} is not allocatable", Ipv4Addr::from(v));
                            if strategy == SEQ {
                                prop_assert_eq!(Some(v), model_free.first().copied());
                            }
                            held.push(v);
                        }
                        Some(other) => prop_assert!(false, "{other} is not IPv4"),
                    }
                }
                Op::Release(i) => {
                    if !held.is_empty() {
                        let v = held.swap_remove(i % held.len());
                        prop_assert!(a.put(IpAddr::V4(Ipv4Addr::from(v))));
                    }
                }
            }
            prop_assert_eq!(a.free_count(), (order.len() - held.len()) as u128);
        }
        // Rebuilding from what is held gives the same index.
        let rebuilt = Allocator::with_used(a.layout().clone(), held.iter().map(|&v| IpAddr::V4(Ipv4Addr::from(v))));
        prop_assert_eq!(rebuilt.free_count(), a.free_count());
        prop_assert_eq!(rebuilt.next(SEQ, 0), a.next(SEQ, 0));
    }
}
