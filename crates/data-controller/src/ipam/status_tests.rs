use std::sync::Arc;

use jiff::Timestamp;

use super::*;
use crate::ipam::layout::PoolLayout;
use crate::ipam::test_support::{claim, pool, spec, subnet};

fn t(secs: i64) -> Time {
    Time(Timestamp::from_second(secs).unwrap())
}

/// The facts of a pool with these counts, nothing stranded and no claim waiting.
fn counted(layout: &LayoutResult, in_use: u128, free: u128) -> PoolFacts<'_> {
    PoolFacts {
        stranded: &[],
        layout,
        counts: Some(PoolCounts { in_use, free }),
        waiting_for: None,
    }
}

#[test]
fn claim_status_settles_and_keeps_transition_times() {
    let mut c = claim("ns", "c", "p");
    let exhausted = not_ready_condition(
        super::super::decide::REASON_POOL_EXHAUSTED,
        exhausted_message("ns", "p", "c"),
    );
    let status = claim_status(&c, None, exhausted.clone(), &t(10));
    assert!(claim_status_differs(&c, &status));
    let ready = &status.conditions.as_ref().unwrap()[0];
    assert_eq!(
        ready.message,
        "MaasIPPool ns/p has no free address for IPAddressClaim ns/c; it is served as soon as an address of the pool is released"
    );
    assert_eq!(ready.observed_generation, Some(1));
    c.status = Some(status);
    let again = claim_status(&c, None, exhausted, &t(20));
    assert!(
        !claim_status_differs(&c, &again),
        "same condition: no write"
    );

    let bound = claim_status(
        &c,
        Some("p-10-0-0-5"),
        ready_condition("p-10-0-0-5", "10.0.0.5", 24, "p"),
        &t(30),
    );
    assert!(claim_status_differs(&c, &bound));
    let cond = &bound.conditions.as_ref().unwrap()[0];
    assert_eq!(
        (cond.status.as_str(), cond.last_transition_time.clone()),
        ("True", t(30))
    );
    assert_eq!(
        cond.message,
        "IPAddress p-10-0-0-5 holds 10.0.0.5/24 from MaasIPPool p"
    );
    assert_eq!(bound.address_ref.as_ref().unwrap().name, "p-10-0-0-5");
    // Other writers' conditions are not sent.
    let mut other = c.clone();
    other
        .status
        .as_mut()
        .unwrap()
        .conditions
        .as_mut()
        .unwrap()
        .push(Condition {
            type_: "Consumed".into(),
            status: "True".into(),
            reason: "X".into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: t(1),
        });
    let sent = claim_status(
        &other,
        Some("a"),
        ready_condition("a", "10.0.0.5", 24, "p"),
        &t(40),
    );
    assert_eq!(sent.conditions.unwrap().len(), 1);
}

#[test]
fn pool_status_counts_conditions_and_last_updated() {
    let mut p = pool("ns", "p", spec(vec![subnet("10.0.0.0/24")]));
    let layout = PoolLayout::from_spec(&p.spec).map(Arc::new);
    let facts = counted(&layout, 2, 252);
    let status = pool_status(&p, facts, &t(10));
    assert_eq!(
        (status.addresses_in_use, status.addresses_free),
        (Some(2), Some(252))
    );
    assert_eq!(status.last_updated, Some(t(10)));
    assert_eq!(status.observed_generation, Some(1));
    let types: Vec<_> = status
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .map(|c| (c.type_.as_str(), c.status.as_str()))
        .collect();
    assert_eq!(
        types,
        [
            ("Ready", "True"),
            ("PoolValid", "True"),
            ("AddressesInPool", "True"),
            ("Paused", "False")
        ]
    );
    p.status = Some(status.clone());
    assert_eq!(
        pool_status(&p, facts, &t(20)),
        status,
        "nothing changed: nothing moves"
    );

    let invalid = PoolLayout::from_spec(&spec(vec![subnet("10.0.0.0/24"), subnet("10.0.0.0/25")]))
        .map(Arc::new);
    let bad = pool_status(
        &p,
        PoolFacts {
            stranded: &[],
            layout: &invalid,
            counts: None,
            waiting_for: None,
        },
        &t(30),
    );
    let valid =
        capmaas_runtime::get_condition(bad.conditions.as_deref().unwrap(), cond::POOL_VALID)
            .unwrap();
    assert_eq!(
        (valid.status.as_str(), valid.reason.as_str()),
        ("False", "InvalidPool")
    );
    assert_eq!(valid.message, "spec.pools[1]: overlaps spec.pools[0]");
    assert_eq!(bad.last_updated, Some(t(30)));
    assert_eq!(bad.addresses_free, None);

    let deleting = pool_status(
        &p,
        PoolFacts {
            waiting_for: Some(1),
            ..counted(&layout, 1, 253)
        },
        &t(40),
    );
    let ready =
        capmaas_runtime::get_condition(deleting.conditions.as_deref().unwrap(), cond::READY)
            .unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", REASON_DELETING)
    );

    let paused = paused_pool_status(&p, "Cluster prod is paused", &t(50));
    let c = capmaas_runtime::get_condition(paused.conditions.as_deref().unwrap(), cond::PAUSED)
        .unwrap();
    assert_eq!(
        (c.status.as_str(), c.message.as_str()),
        ("True", "Cluster prod is paused")
    );
    assert_eq!(paused.addresses_in_use, Some(2), "counts kept while paused");
    assert_eq!(saturating_i64(u128::MAX), i64::MAX);
}

#[test]
fn other_writers_pool_conditions_are_neither_sent_nor_compared() {
    let mut p = pool("ns", "p", spec(vec![subnet("10.0.0.0/24")]));
    let layout = PoolLayout::from_spec(&p.spec).map(Arc::new);
    let facts = counted(&layout, 0, 254);
    let mut status = pool_status(&p, facts, &t(10));
    status.conditions.as_mut().unwrap().push(Condition {
        type_: "MAASRangesReserved".into(),
        status: "True".into(),
        reason: "Reserved".into(),
        message: String::new(),
        observed_generation: None,
        last_transition_time: t(5),
    });
    p.status = Some(status);
    let next = pool_status(&p, facts, &t(20));
    let types: Vec<_> = next
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .map(|c| c.type_.as_str())
        .collect();
    assert_eq!(types, POOL_CONDITIONS);
    assert_eq!(
        next,
        owned_pool_status(p.status.as_ref()),
        "unchanged: no write"
    );
    let paused = paused_pool_status(&p, "x", &t(30));
    assert_eq!(paused.conditions.as_ref().unwrap().len(), 4);
}

#[test]
fn addresses_left_outside_a_shrunk_pool_are_named() {
    let p = pool("ns", "p", spec(vec![subnet("10.0.0.0/24")]));
    let layout = PoolLayout::from_spec(&p.spec).map(Arc::new);
    let stranded: Vec<std::net::IpAddr> = (1..=12)
        .map(|i| format!("10.0.1.{i}").parse().unwrap())
        .collect();
    let status = pool_status(
        &p,
        PoolFacts {
            stranded: &stranded,
            ..counted(&layout, 12, 254)
        },
        &t(10),
    );
    let condition = status
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "AddressesInPool")
        .unwrap();
    assert_eq!(
        (condition.status.as_str(), condition.reason.as_str()),
        ("False", "AddressesStranded")
    );
    assert!(
        condition.message.starts_with(
            "12 address(es) in use are outside the pool's ranges or excluded: 10.0.1.1, 10.0.1.2,"
        ),
        "{}",
        condition.message
    );
    assert!(
        condition.message.contains("10.0.1.10 and 2 more"),
        "{}",
        condition.message
    );
}
