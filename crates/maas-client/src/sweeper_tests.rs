use super::*;
use crate::cache::tests::machine;
use capmaas_api::common::{EraseMode, ReleasePolicy};

/// A cluster-wide gateway seeing the hosts named after their machines in namespace `ns`.
fn cluster_wide(ids: &[&str]) -> SweepScope {
    SweepScope::new(None, ids.iter().map(|id| ("ns", *id)))
}

/// A sweep of installation `i` at `now` with no grace, nothing unclaimed and nothing seen before.
fn first_sweep(
    ours: &[Machine],
    claimed: &BTreeSet<String>,
    now: Instant,
    scope: &SweepScope,
) -> SweepPlan {
    plan_sweep(
        ours,
        &BTreeMap::new(),
        claimed,
        &BTreeSet::new(),
        &BTreeMap::new(),
        now,
        Duration::ZERO,
        "i",
        scope,
    )
}

fn released(plan: &SweepPlan) -> Vec<&str> {
    plan.release.iter().map(|r| r.system_id.as_str()).collect()
}

#[test]
fn orphans_are_released_after_the_grace_period_only() {
    let now = Instant::now();
    let grace = Duration::from_secs(60);
    let ours = [
        machine("claimed", 6),
        machine("orphan", 10),
        machine("old", 6),
        machine("going", 12),
    ];
    let claimed = BTreeSet::from(["claimed".to_owned()]);
    let seen = BTreeMap::from([("old".to_owned(), now.checked_sub(grace).unwrap())]);
    let plan = plan_sweep(
        &ours,
        &BTreeMap::new(),
        &claimed,
        &BTreeSet::new(),
        &seen,
        now,
        grace,
        "i",
        &cluster_wide(&["claimed", "orphan", "old", "going"]),
    );
    assert_eq!(plan.adopted, vec!["claimed".to_owned()]);
    assert_eq!(released(&plan), vec!["old"]);
    assert_eq!(plan.pending.keys().collect::<Vec<_>>(), vec!["orphan"]);

    // Claimed again before the grace period ends: forgotten, never released.
    let claimed = BTreeSet::from(["claimed".to_owned(), "orphan".to_owned()]);
    let plan = plan_sweep(
        &ours[..2],
        &BTreeMap::new(),
        &claimed,
        &BTreeSet::new(),
        &plan.pending,
        now + grace * 2,
        grace,
        "i",
        &cluster_wide(&["claimed", "orphan"]),
    );
    assert!(plan.pending.is_empty());
    assert!(plan.release.is_empty());
}

#[test]
fn zero_grace_releases_at_once() {
    let now = Instant::now();
    let plan = first_sweep(
        &[machine("x", 10)],
        &BTreeSet::new(),
        now,
        &cluster_wide(&["x"]),
    );
    assert_eq!(released(&plan), vec!["x"]);
}

#[test]
fn orphans_are_released_with_the_recorded_erase_and_failed_releases_again() {
    let now = Instant::now();
    let policy = |erase| ReleasePolicy {
        erase,
        force: false,
    };
    let annotated = |id: &str, status: i64, erase| {
        let mut m = machine(id, status);
        m.workload_annotations =
            ann::desired_machine_annotations("i", "ns", id, None, Some(&policy(erase)));
        m
    };
    let ours = [
        annotated("deployed", 6, EraseMode::Secure),
        // Failed disk erasing (15) and Releasing failed (13): sent again.
        annotated("erase-failed", 15, EraseMode::Quick),
        annotated("release-failed", 13, EraseMode::None),
        // Nothing recorded (allocated, never annotated): the safest erase.
        machine("bare", 10),
        // Disk erasing (14): in progress, left alone.
        annotated("erasing", 14, EraseMode::Secure),
    ];
    let plan = first_sweep(
        &ours,
        &BTreeSet::new(),
        now,
        &cluster_wide(&[
            "deployed",
            "erase-failed",
            "release-failed",
            "bare",
            "erasing",
        ]),
    );
    assert_eq!(
        released(&plan),
        vec!["deployed", "erase-failed", "release-failed", "bare"]
    );
    let flags = |r: &OrphanRelease| {
        (
            r.request.erase,
            r.request.secure_erase,
            r.request.quick_erase,
        )
    };
    let got: Vec<_> = plan.release.iter().map(flags).collect();
    assert_eq!(
        got,
        vec![
            (true, true, false),
            (true, false, true),
            (false, false, false),
            (true, true, false),
        ]
    );
}

fn recorded(id: &str, status: i64, host_namespace: Option<&str>) -> Machine {
    let mut m = machine(id, status);
    if let Some(ns) = host_namespace {
        m.workload_annotations = ann::desired_machine_annotations("i", ns, id, None, None);
    }
    m
}

#[test]
fn a_scoped_gateway_adopts_and_releases_only_allocations_recorded_for_its_namespace() {
    let now = Instant::now();
    // The hosts the gateway sees in `a` (by system id).
    let scope = SweepScope::new(Some("a"), [("a", "bare-host-of-a")]);
    let ours = [
        // Recorded for a host of ours: released (orphan) or adopted (claimed).
        recorded("mine", 6, Some("a")),
        recorded("mine-claimed", 6, Some("a")),
        // Recorded for namespace b: never released, never adopted, even if a host of ours
        // with the same system id claims it.
        recorded("theirs", 6, Some("b")),
        recorded("theirs-claimed", 6, Some("b")),
        // A failed release recorded for b: not sent again by this gateway.
        recorded("theirs-failed", 15, Some("b")),
        // Nothing recorded: not provably ours, unless a host of ours claims it (allocated,
        // annotations not yet written).
        recorded("bare", 10, None),
        recorded("bare-claimed", 10, None),
        // Nothing recorded, but the machine of a host of `a` (the gateway died between allocate
        // and annotate, the claim was dropped meanwhile): ours, an orphan.
        recorded("bare-host-of-a", 10, None),
        // On its way back: nothing to do, nothing to report.
        recorded("theirs-erasing", 14, Some("b")),
        // A prefix is not a namespace.
        recorded("prefix", 6, Some("ab")),
    ];
    let claimed = BTreeSet::from([
        "mine-claimed".to_owned(),
        "theirs-claimed".to_owned(),
        "bare-claimed".to_owned(),
    ]);
    let plan = first_sweep(&ours, &claimed, now, &scope);
    assert_eq!(released(&plan), vec!["mine", "bare-host-of-a"]);
    assert_eq!(plan.adopted, vec!["mine-claimed", "bare-claimed"]);
    assert!(plan.pending.is_empty());
    let not_ours: Vec<(&str, Option<&str>)> = plan
        .not_ours
        .iter()
        .map(|n| (n.system_id.as_str(), n.recorded_host.as_deref()))
        .collect();
    assert_eq!(
        not_ours,
        vec![
            ("theirs", Some("b/theirs")),
            ("theirs-claimed", Some("b/theirs-claimed")),
            ("theirs-failed", Some("b/theirs-failed")),
            ("bare", None),
            ("prefix", Some("ab/prefix")),
        ]
    );
    // Never released after any grace period: out of scope is not a pending orphan.
    let later = plan_sweep(
        &ours,
        &BTreeMap::new(),
        &claimed,
        &BTreeSet::new(),
        &plan.pending,
        now + Duration::from_secs(3600),
        Duration::from_secs(60),
        "i",
        &scope,
    );
    assert_eq!(later.not_ours, plan.not_ours);
    // Only in-scope orphans wait for their grace period; out of scope is never pending.
    assert_eq!(
        later.pending.keys().collect::<Vec<_>>(),
        vec!["bare-host-of-a", "mine"]
    );
}

#[test]
fn a_cluster_wide_gateway_releases_the_orphans_of_the_namespaces_it_serves_only() {
    let ours = [
        recorded("a", 6, Some("a")),
        // Recorded for a host of `b`, gone (deleted): `b` has other hosts, an orphan.
        recorded("b", 6, Some("b")),
        recorded("bare", 10, None),
        // Recorded for a namespace this management cluster does not serve: another management
        // cluster's (the source of a `clusterctl move`, or its target installed beforehand).
        recorded("elsewhere", 6, Some("c")),
        recorded("bare-elsewhere", 10, None),
    ];
    let hosts = [("a", "a"), ("b", "other-of-b"), ("d", "bare")];
    for namespace in [None, Some("")] {
        let scope = SweepScope::new(namespace, hosts);
        assert!(matches!(scope, SweepScope::ClusterWide { .. }), "{scope:?}");
        let plan = first_sweep(&ours, &BTreeSet::new(), Instant::now(), &scope);
        assert_eq!(released(&plan), vec!["a", "b", "bare"]);
        let left: Vec<&str> = plan.not_ours.iter().map(|n| n.system_id.as_str()).collect();
        assert_eq!(left, vec!["elsewhere", "bare-elsewhere"]);
    }
}

#[test]
fn allocations_left_alone_are_reported_once() {
    let not_ours = |ids: &[&str]| SweepPlan {
        not_ours: ids
            .iter()
            .map(|id| NotOurs {
                system_id: (*id).to_owned(),
                recorded_host: None,
            })
            .collect(),
        ..SweepPlan::default()
    };
    let ids = |v: Vec<&NotOurs>| -> Vec<String> { v.iter().map(|n| n.system_id.clone()).collect() };
    let first = not_ours(&["x", "y"]);
    let (new, reported) = to_report(&first, &BTreeSet::new());
    assert_eq!(ids(new), vec!["x", "y"]);
    let (new, reported) = to_report(&first, &reported);
    assert!(new.is_empty());
    // y left (released by its own gateway), z appeared: only z is new.
    let second = not_ours(&["x", "z"]);
    let (new, reported) = to_report(&second, &reported);
    assert_eq!(ids(new), vec!["z"]);
    // y back: reported again.
    let third = not_ours(&["x", "y", "z"]);
    let (new, _) = to_report(&third, &reported);
    assert_eq!(ids(new), vec!["y"]);
}

#[test]
fn an_allocation_for_an_unclaimed_host_of_ours_waits_for_its_machine() {
    // Imported after `clusterctl move`: the host `ns/moved` is here, not consumed yet, and MAAS
    // records the allocation for it. Its MaasMachine claims it again once the move is done.
    let ours = [recorded("moved", 6, Some("ns")), recorded("bare", 10, None)];
    let scope = cluster_wide(&["moved", "bare"]);
    let unclaimed = BTreeSet::from(["ns/moved".to_owned(), "ns/bare".to_owned()]);
    let plan = plan_sweep(
        &ours,
        &BTreeMap::new(),
        &BTreeSet::new(),
        &unclaimed,
        &BTreeMap::new(),
        Instant::now(),
        Duration::ZERO,
        "i",
        &scope,
    );
    assert_eq!(plan.adopted, vec!["moved"]);
    // Nothing recorded on the machine: an allocation lost before its annotations, an orphan.
    assert_eq!(released(&plan), vec!["bare"]);
}

#[test]
fn an_orphan_without_annotations_is_released_with_the_erase_its_identity_carries() {
    let now = Instant::now();
    let ours = [
        machine("quick", 6),
        machine("legacy", 6),
        machine("other-ns", 6),
    ];
    let identified = BTreeMap::from([
        (
            "quick".to_owned(),
            Identified {
                host: Some("ns/quick".into()),
                release: Some(ReleasePolicy {
                    erase: EraseMode::Quick,
                    force: true,
                }),
            },
        ),
        // The previous version's bare installation id: no host, no policy.
        ("legacy".to_owned(), Identified::default()),
        (
            "other-ns".to_owned(),
            Identified {
                host: Some("elsewhere/other-ns".into()),
                release: None,
            },
        ),
    ]);
    let scope = SweepScope::new(Some("ns"), [("ns", "quick"), ("ns", "legacy")]);
    let plan = plan_sweep(
        &ours,
        &identified,
        &BTreeSet::new(),
        &BTreeSet::new(),
        &BTreeMap::new(),
        now,
        Duration::ZERO,
        "i",
        &scope,
    );
    assert_eq!(released(&plan), vec!["quick", "legacy"]);
    let quick = &plan.release[0].request;
    assert!(quick.erase && quick.quick_erase && !quick.secure_erase && quick.force);
    let legacy = &plan.release[1].request;
    assert!(legacy.erase && legacy.secure_erase && !legacy.force);
    // An identity for a host of another namespace is that namespace's gateway's.
    assert_eq!(plan.not_ours.len(), 1);
    assert_eq!(
        plan.not_ours[0].recorded_host.as_deref(),
        Some("elsewhere/other-ns")
    );
    // The same allocation, waiting for its host to be claimed again, is kept.
    let unclaimed = BTreeSet::from(["ns/quick".to_owned()]);
    let kept = plan_sweep(
        &ours[..1],
        &identified,
        &BTreeSet::new(),
        &unclaimed,
        &BTreeMap::new(),
        now,
        Duration::ZERO,
        "i",
        &scope,
    );
    assert!(kept.release.is_empty());
    assert_eq!(kept.adopted, vec!["quick"]);
}
