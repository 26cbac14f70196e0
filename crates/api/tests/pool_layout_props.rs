//! Property test of the pool layout parser (`PoolLayout::from_spec`, shared by the webhook and
//! data-controller): any spec, well-formed or not, is either refused with an error naming a
//! `spec.` field, or gives a layout whose ranges are ordered, hold no address of a
//! special-purpose block, and whose pre-allocations lie in its ranges. It never panics.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::IpAddr;

use capmaas_api::ipam::{IpPoolRange, MaasIPPoolSpec};
use capmaas_api::ipam_layout::PoolLayout;
use proptest::prelude::*;

/// Addresses, networks and ranges near the interesting edges, with some garbage.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        (0u8..=255, 0u8..=255).prop_map(|(c, d)| format!("10.0.{c}.{d}")),
        (0u8..=32).prop_map(|p| format!("10.0.0.0/{p}")),
        (0u8..=33).prop_map(|p| format!("127.0.0.0/{p}")),
        Just("0.0.0.0/0".to_owned()),
        Just("::/0".to_owned()),
        (0u16..=0xffff).prop_map(|h| format!("fd00::{h:x}")),
        (0u8..=129).prop_map(|p| format!("fd00::/{p}")),
        Just("fe80::1".to_owned()),
        Just("ff02::1".to_owned()),
        Just("10.0.0.10-10.0.0.20".to_owned()),
        Just("10.0.0.20 - 10.0.0.10".to_owned()),
        "[0-9a-f.:/ -]{0,24}",
    ]
}

fn range() -> impl Strategy<Value = IpPoolRange> {
    (
        proptest::option::of(text()),
        proptest::option::of(text()),
        proptest::option::of(text()),
        proptest::option::of(-4i32..140),
        proptest::option::of(text()),
    )
        .prop_map(|(start, end, subnet, prefix, gateway)| IpPoolRange {
            start,
            end,
            subnet,
            prefix,
            gateway,
            ..IpPoolRange::default()
        })
}

fn spec() -> impl Strategy<Value = MaasIPPoolSpec> {
    (
        prop::collection::vec(range(), 0..4),
        proptest::option::of(-4i32..140),
        proptest::option::of(text()),
        proptest::option::of(prop::collection::vec(text(), 0..4)),
        proptest::option::of(prop::collection::btree_map("[a-c]", text(), 0..3)),
    )
        .prop_map(|(pools, prefix, gateway, exclusions, pre_allocations)| {
            let mut spec: MaasIPPoolSpec =
                serde_json::from_value(serde_json::json!({"pools": [], "namePrefix": "p"}))
                    .unwrap();
            spec.pools = pools;
            spec.prefix = prefix;
            spec.gateway = gateway;
            spec.exclusions = exclusions;
            spec.pre_allocations = pre_allocations;
            spec
        })
}

fn special(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            v4.is_loopback() || v4.is_link_local() || v4.is_multicast() || v4.octets()[0] == 0
        }
        IpAddr::V6(v6) => {
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (v6.segments()[0] & 0xffc0) == 0xfe80
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn any_spec_is_refused_naming_a_field_or_laid_out_soundly(spec in spec()) {
        match PoolLayout::from_spec(&spec) {
            Err(e) => {
                prop_assert!(e.field.starts_with("spec."), "{}", e.field);
                prop_assert!(!e.message.is_empty());
            }
            Ok(layout) => {
                for r in layout.ranges() {
                    prop_assert!(r.first <= r.last, "{:?}", r);
                    for edge in [r.first, r.last] {
                        prop_assert!(!special(edge), "{edge} handed out: {:?}", spec);
                    }
                }
                for (claim, ip) in layout.pre_allocations() {
                    prop_assert!(layout.range_of(*ip).is_some(), "{claim}: {ip} outside");
                }
            }
        }
    }
}
