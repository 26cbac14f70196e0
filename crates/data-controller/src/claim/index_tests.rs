use super::*;

#[test]
fn of_two_made_for_one_claim_the_recorded_one_stays() {
    let data = |i: i32| {
        let mut d = MaasData::new(
            &maas_data_name("t", i),
            MaasDataSpec {
                index: i,
                template: LocalObjectReference::new("t"),
                claim: LocalObjectReference::new("c"),
                meta_data: None,
                network_data: None,
            },
        );
        d.metadata.name = Some(maas_data_name("t", i));
        d
    };
    let (keep, extra) = keep_one(vec![data(4), data(1), data(7)], None).unwrap();
    assert_eq!(keep.spec.index, 1);
    assert!(extra.is_empty(), "nothing deleted before one is recorded");
    let (keep, extra) = keep_one(vec![data(4), data(1), data(7)], Some("t-4")).unwrap();
    assert_eq!(keep.spec.index, 4, "the recorded one wins");
    assert_eq!(
        extra.iter().map(|d| d.spec.index).collect::<Vec<_>>(),
        vec![1, 7]
    );
    assert!(keep_one(Vec::new(), None).is_none());
}
