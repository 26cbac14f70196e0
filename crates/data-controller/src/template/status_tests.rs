use super::*;
use crate::template::fixtures::{data, t};

#[test]
fn indexes_are_listed_in_order_and_an_unchanged_status_keeps_its_time() {
    let all = [data("c", 2), data("a", 0), data("b", 1), data("c", 7)];
    let first = template_status(None, &all, false, Some(1), &t(1));
    let indexes = first.indexes.clone().unwrap();
    assert_eq!(
        indexes
            .iter()
            .map(|i| (i.name.as_str(), i.index))
            .collect::<Vec<_>>(),
        vec![("a", 0), ("b", 1), ("c", 2)]
    );
    assert_eq!(first.allocated_indexes, Some(3));
    assert_eq!(
        template_status(Some(&first), &all, false, Some(1), &t(2)),
        first
    );
    let deleting = template_status(Some(&first), &all, true, Some(1), &t(3));
    let conditions = deleting.conditions.unwrap();
    let ready = conditions.iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", REASON_IN_USE)
    );
}
