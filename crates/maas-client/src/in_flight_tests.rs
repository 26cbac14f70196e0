use super::*;

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
            .snapshot()
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
