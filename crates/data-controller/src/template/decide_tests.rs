use super::*;
use crate::template::fixtures::{data, owned, t};

#[test]
fn only_deleting_data_whose_claim_is_gone_or_re_created_are_let_go() {
    let all = [
        owned("live", 0, "u-live", true, true),
        owned("gone", 1, "u-gone", true, true),
        owned("again", 2, "u-old", true, true),
        owned("gone-too", 3, "u-x", false, true),
        owned("gone-also", 4, "u-y", true, false),
    ];
    let live = |claim: &str| match claim {
        "live" => Some("u-live".to_owned()),
        "again" => Some("u-new".to_owned()),
        _ => None,
    };
    let names: Vec<i32> = orphaned(&all, live).iter().map(|d| d.spec.index).collect();
    // Not deleting (garbage collection will) or without our finalizer: nothing to do.
    assert_eq!(names, [1, 2]);
}

#[test]
fn the_finalizer_goes_on_first_and_off_once_nothing_uses_the_template() {
    let mut template: MaasDataTemplate = serde_json::from_value(serde_json::json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "MaasDataTemplate",
        "metadata": {"name": "t"},
        "spec": {}
    }))
    .unwrap();
    let used = [data("c", 0)];
    let step =
        |template: &MaasDataTemplate, data: &[Arc<MaasData>]| decide(&Observed { template, data });
    assert_eq!(step(&template, &used), Step::AddFinalizer);
    template.metadata.finalizers = Some(vec![keys::FINALIZER_MAAS_DATA_TEMPLATE.into()]);
    assert_eq!(step(&template, &used), Step::WriteStatus);
    template.metadata.deletion_timestamp = Some(t(1));
    assert_eq!(step(&template, &used), Step::WriteStatus, "in use: kept");
    assert_eq!(step(&template, &[]), Step::RemoveFinalizer);
    template.metadata.finalizers = None;
    assert_eq!(step(&template, &[]), Step::Done);
}
