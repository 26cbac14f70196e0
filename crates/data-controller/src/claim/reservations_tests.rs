use super::*;

fn set(v: &[i32]) -> BTreeSet<i32> {
    v.iter().copied().collect()
}

#[test]
fn concurrent_picks_of_one_template_get_distinct_indexes_until_the_hold_ends() {
    let reservations = Reservations::default();
    let t0 = Instant::now();
    let used = set(&[0, 2]);
    assert_eq!(reservations.take("ns", "t", &used, t0), 1);
    assert_eq!(reservations.take("ns", "t", &used, t0), 3);
    // Another template or namespace is independent.
    assert_eq!(reservations.take("ns", "u", &used, t0), 1);
    assert_eq!(reservations.take("other", "t", &used, t0), 1);
    reservations.give_back("ns", "t", 1);
    assert_eq!(reservations.take("ns", "t", &used, t0), 1);
    // Held indexes expire: the cache knows by then.
    let later = t0 + RESERVATION_HOLD;
    assert_eq!(reservations.take("ns", "t", &used, later), 1);
}

#[test]
fn the_lowest_free_index_fills_gaps_first() {
    assert_eq!(lowest_free(&set(&[])), 0);
    assert_eq!(lowest_free(&set(&[0, 1, 2])), 3);
    assert_eq!(lowest_free(&set(&[0, 2, 3])), 1);
    assert_eq!(lowest_free(&set(&[1, 2])), 0);
    assert_eq!(
        lowest_free(&set(&[-4, 0, 1])),
        2,
        "negative indexes do not exist"
    );
}
