use super::*;
use std::time::{Duration, Instant};

fn host(name: &str) -> ObjectRef<MaasHost> {
    ObjectRef::new(name).within("ns")
}

#[test]
fn hosts_register_and_leave() {
    let in_flight = InFlight::default();
    in_flight.watch("b", host("hb"));
    in_flight.watch("a", host("ha"));
    assert!(in_flight.is_watched("a"));
    assert_eq!(
        in_flight
            .due(0, Duration::from_secs(2), Instant::now())
            .iter()
            .map(|(id, _)| id.as_str())
            .collect::<Vec<_>>(),
        ["a", "b"],
        "batches are stable: ordered by system id"
    );
    in_flight.forget("a");
    assert!(!in_flight.is_watched("a"));
    assert_eq!(in_flight.len(), 1);
}

#[test]
fn a_machine_not_shown_is_read_directly_once() {
    let in_flight = InFlight::default();
    in_flight.watch("a", host("ha"));
    in_flight.mark_unseen("a");
    // Not observed: nothing to flag.
    in_flight.mark_unseen("zz");
    assert!(in_flight.take_unseen("a"));
    assert!(
        !in_flight.take_unseen("a"),
        "the flag is cleared by the read"
    );
    assert!(!in_flight.take_unseen("zz"));
}

#[test]
fn deleted_hosts_are_dropped_with_their_flags() {
    let in_flight = InFlight::default();
    in_flight.watch("a", host("ha"));
    in_flight.watch("b", host("hb"));
    in_flight.mark_unseen("a");
    in_flight.retain(|h| h.name == "hb");
    assert!(!in_flight.is_watched("a"));
    assert!(!in_flight.take_unseen("a"));
    assert!(in_flight.is_watched("b"));
}

#[test]
fn not_shown_lists_what_the_answer_lacks() {
    let shown: HashSet<&str> = ["a", "c"].into_iter().collect();
    assert_eq!(not_shown(["a", "b", "c", "d"], &shown), ["b", "d"]);
    assert!(not_shown(["a"], &shown).is_empty());
}

#[test]
fn a_machine_long_in_flight_is_observed_less_often_but_within_an_eighth_of_its_age() {
    let interval = Duration::from_secs(2);
    let secs = Duration::from_secs;
    assert_eq!(stretch(secs(0), interval), 1);
    assert_eq!(stretch(secs(31), interval), 1, "young: every interval");
    assert_eq!(stretch(secs(32), interval), 2);
    assert_eq!(stretch(secs(64), interval), 4);
    assert_eq!(stretch(secs(128), interval), MAX_STRETCH);
    assert_eq!(
        stretch(secs(3600), interval),
        MAX_STRETCH,
        "never later than the cap"
    );
    assert_eq!(stretch(secs(3600), Duration::ZERO), 1);
    for age in (0..2000).map(secs) {
        let wait = interval * u32::try_from(stretch(age, interval)).unwrap();
        assert!(wait == interval || wait <= age / 8, "{age:?}: {wait:?}");
    }
}

#[test]
fn machines_due_at_a_tick_share_it_and_old_ones_skip_ticks() {
    let in_flight = InFlight::default();
    let interval = Duration::from_secs(1);
    let start = Instant::now();
    in_flight.watch_since("old", host("h-old"), start);
    let later = start + Duration::from_secs(100);
    // Registering again (every reconcile does) keeps the age.
    in_flight.watch_since("old", host("h-old"), later);
    let ids = |tick| -> Vec<String> {
        in_flight
            .due(tick, interval, later)
            .into_iter()
            .map(|(id, _)| id)
            .collect()
    };
    assert_eq!(ids(8), ["old"]);
    assert!(
        ids(3).is_empty(),
        "a tick with only old machines not due costs no call"
    );
    in_flight.watch_since("young", host("h-young"), later);
    assert_eq!(ids(3), ["young"]);
    assert_eq!(
        ids(16),
        ["old", "young"],
        "the old one rides along with the young one"
    );
}
