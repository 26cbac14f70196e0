use super::*;
use crate::cache::tests::machine;

fn hosts() -> BTreeMap<String, (String, String)> {
    BTreeMap::from([
        ("m1".to_owned(), ("ns".to_owned(), "h1".to_owned())),
        ("m2".to_owned(), ("ns".to_owned(), "h2".to_owned())),
    ])
}

#[test]
fn annotated_allocations_of_this_installation_need_no_lookup() {
    let mut m = machine("elsewhere", 6);
    m.workload_annotations = ann::desired_machine_annotations("i", "ns", "h9", None, None);
    assert_eq!(
        recognition(&m, "i", &hosts(), &BTreeSet::new()),
        Recognition::Annotated
    );
    // Another installation's annotations: not ours, even on the machine of one of our hosts.
    let mut other = machine("m1", 6);
    other.workload_annotations = ann::desired_machine_annotations("j", "ns", "h1", None, None);
    assert_eq!(
        recognition(&other, "i", &hosts(), &BTreeSet::new()),
        Recognition::Unknown
    );
}

#[test]
fn the_machine_of_a_watched_host_is_looked_up_unless_claimed_or_on_its_way_back() {
    let claimed = BTreeSet::from(["m2".to_owned()]);
    assert_eq!(
        recognition(&machine("m1", 6), "i", &hosts(), &claimed),
        Recognition::LookUp("ns".into(), "h1".into())
    );
    assert_eq!(
        recognition(&machine("m2", 6), "i", &hosts(), &claimed),
        Recognition::Claimed
    );
    // Releasing (12) or disk erasing (14): left alone by the sweep whoever holds it.
    for status in [12, 14] {
        assert_eq!(
            recognition(&machine("m1", status), "i", &hosts(), &claimed),
            Recognition::Unknown
        );
    }
    // A machine no watched host names: a human's, or another gateway's.
    assert_eq!(
        recognition(&machine("m7", 6), "i", &hosts(), &claimed),
        Recognition::Unknown
    );
}
