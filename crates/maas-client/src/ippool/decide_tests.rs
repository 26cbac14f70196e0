//! Unit tests of the pool → MAAS reserved ranges plan.

use std::net::IpAddr;

use capmaas_api::ipam::MaasIPPoolSpec;
use maas_api_client::IpRange;
use serde_json::json;

use super::*;

fn spec(pools: &serde_json::Value) -> MaasIPPoolSpec {
    serde_json::from_value(json!({"pools": pools, "namePrefix": "p", "maasSubnet": "10.20.0.0/16"}))
        .unwrap()
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn range(id: i64, start: &str, end: &str, comment: &str, subnet: i64) -> IpRange {
    serde_json::from_value(
        json!({"id": id, "type": "reserved", "start_ip": start, "end_ip": end,
        "comment": comment, "subnet": {"id": subnet, "cidr": "10.20.0.0/16"}}),
    )
    .unwrap()
}

#[test]
fn pool_entries_become_merged_usable_ranges() {
    let wanted = wanted_ranges(&spec(&json!([
        {"start": "10.20.1.10", "end": "10.20.1.20"},
        {"start": "10.20.1.21", "end": "10.20.1.30"},
        {"start": "10.20.1.25", "end": "10.20.1.26"},
        {"subnet": "10.20.8.0/24"},
        {"subnet": "10.20.9.7/32"},
        {"subnet": "fd00::/64"},
        {"subnet": "10.20.10.0/24", "start": "10.20.10.5", "end": "10.20.10.9"}
    ])))
    .unwrap();
    assert_eq!(
        wanted,
        vec![
            (ip("10.20.1.10"), ip("10.20.1.30")),
            (ip("10.20.8.1"), ip("10.20.8.254")),
            (ip("10.20.9.7"), ip("10.20.9.7")),
            (ip("10.20.10.5"), ip("10.20.10.9")),
            (ip("fd00::1"), ip("fd00::ffff:ffff:ffff:ffff")),
        ]
    );
    for bad in [
        json!([{"start": "10.20.1.9", "end": "10.20.1.1"}]),
        json!([{"start": "10.20.1.1", "end": "fd00::1"}]),
        json!([{"start": "x", "end": "10.20.1.1"}]),
        json!([{"subnet": "10.20.1.0"}]),
        json!([{"start": "10.20.1.1"}]),
    ] {
        assert!(wanted_ranges(&spec(&bad)).is_err(), "{bad}");
    }
}

#[test]
fn only_our_ranges_are_kept_moved_or_deleted() {
    let mark = comment("ns", "pool");
    assert_eq!(mark, "capmaas MaasIPPool ns/pool");
    assert_eq!(comment("n", &"x".repeat(400)).chars().count(), 255);
    let existing = vec![
        range(1, "10.20.1.10", "10.20.1.30", &mark, 1),
        range(2, "10.20.2.10", "10.20.2.30", &mark, 1),
        range(3, "10.20.3.10", "10.20.3.30", "by hand", 1),
        range(
            4,
            "10.20.4.10",
            "10.20.4.30",
            "capmaas MaasIPPool ns/pool-2",
            1,
        ),
        range(5, "10.20.5.10", "10.20.5.30", &mark, 9),
    ];
    let mine = ours(&existing, &mark);
    assert_eq!(
        mine.iter().map(|r| r.id).collect::<Vec<_>>(),
        [1, 2, 5],
        "by exact comment"
    );
    let wanted = [
        (ip("10.20.1.10"), ip("10.20.1.30")),
        (ip("10.20.6.1"), ip("10.20.6.9")),
        (ip("10.20.7.1"), ip("10.20.7.9")),
    ];
    assert_eq!(
        plan_ranges(&wanted, &mine, 1),
        vec![
            RangeAction::Delete { id: 5 },
            RangeAction::Update {
                id: 2,
                start: ip("10.20.6.1"),
                end: ip("10.20.6.9")
            },
            RangeAction::Create {
                start: ip("10.20.7.1"),
                end: ip("10.20.7.9")
            },
        ],
        "kept, moved within the subnet, the one on another subnet deleted, one created"
    );
    assert!(
        plan_ranges(&wanted[..1], &mine[..1], 1).is_empty(),
        "in sync: nothing"
    );
    assert_eq!(
        plan_ranges(&[], &mine, 1),
        vec![
            RangeAction::Delete { id: 1 },
            RangeAction::Delete { id: 2 },
            RangeAction::Delete { id: 5 }
        ]
    );
}

#[test]
fn finalizer_follows_the_maas_subnet() {
    use crate::ownership::Deletion::{Deleting, Moving, No};
    assert_eq!(pool_step(No, false, true), PoolStep::AddThenApply);
    assert_eq!(pool_step(No, true, true), PoolStep::Apply);
    assert_eq!(pool_step(No, true, false), PoolStep::CleanupThenRemove);
    assert_eq!(pool_step(Deleting, true, true), PoolStep::CleanupThenRemove);
    assert_eq!(pool_step(No, false, false), PoolStep::Nothing);
    assert_eq!(pool_step(Deleting, false, true), PoolStep::Nothing);
    // Moved by clusterctl: the copy in the target cluster keeps the ranges.
    assert_eq!(pool_step(Moving, true, true), PoolStep::RemoveOnly);
    assert_eq!(pool_step(Moving, true, false), PoolStep::RemoveOnly);
    assert_eq!(pool_step(Moving, false, true), PoolStep::Nothing);
}
