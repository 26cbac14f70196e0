#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::json;

use super::*;
use crate::fixtures::{T0, UID, node, t};

fn patched(node: &Node, patch: &Value) -> Node {
    let mut value = serde_json::to_value(node).unwrap();
    for (k, v) in patch["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
    {
        value["metadata"]["labels"][k] = v.clone();
    }
    for (k, v) in patch["metadata"]["annotations"]
        .as_object()
        .into_iter()
        .flatten()
    {
        let annotations = value["metadata"]["annotations"].as_object_mut().unwrap();
        if v.is_null() {
            annotations.remove(k);
        } else {
            annotations.insert(k.clone(), v.clone());
        }
    }
    if let Some(taints) = patch.get("spec").and_then(|s| s.get("taints")) {
        value["spec"]["taints"] = taints.clone();
    }
    serde_json::from_value(value).unwrap()
}

#[test]
fn the_backup_round_trips_without_our_marker() {
    let n = node(T0, None);
    let fenced = patched(&n, &fence_patch(&n, UID));
    let backup = Backup::of(&fenced);
    assert!(!backup.annotations.contains_key(ANNOTATION_FENCED_BY));
    let annotations = backup.to_annotations("n1").unwrap();
    assert_eq!(annotations[ANNOTATION_NODE_NAME_BACKUP], "n1");
    assert_eq!(Backup::from_annotations(&annotations), Some(backup));
    assert_eq!(Backup::from_annotations(&BTreeMap::new()), None);
    let edited = BTreeMap::from([(ANNOTATION_NODE_LABELS_BACKUP.to_owned(), "{".to_owned())]);
    assert_eq!(
        Backup::from_annotations(&edited),
        Some(Backup::default()),
        "a broken backup still counts as taken"
    );
}

#[test]
fn fencing_adds_the_taint_and_marker_and_keeps_other_taints() {
    let n = node(T0, None);
    assert!(needs_fence(&n, FenceMode::Taint, t(T0)));
    let patch = fence_patch(&n, UID);
    assert_eq!(patch["metadata"]["resourceVersion"], "7");
    let fenced = patched(&n, &patch);
    assert!(has_out_of_service_taint(&fenced) && fenced_by(&fenced, UID));
    assert_eq!(
        fenced.spec.as_ref().unwrap().taints.as_ref().unwrap().len(),
        2
    );
    assert!(!needs_fence(&fenced, FenceMode::Taint, t(T0)));
    assert!(!needs_fence(&n, FenceMode::None, t(T0)));
    assert!(needs_fence(&n, FenceMode::Delete, t(T0 + 1)));
    assert!(
        !needs_fence(&n, FenceMode::Delete, t(T0)),
        "registered at the start"
    );
}

#[test]
fn restoring_merges_missing_keys_and_removes_only_our_fence() {
    let original = node(T0, None);
    let backup = Backup::of(&original);
    let mut fenced = patched(&original, &fence_patch(&original, UID));
    // The kubelet changed one label meanwhile and dropped another.
    let labels = fenced.metadata.labels.as_mut().unwrap();
    labels.insert("kubernetes.io/hostname".into(), "n1-new".into());
    labels.remove("node-role.kubernetes.io/worker");
    let patch = restore_patch(&fenced, Some(&backup), UID).unwrap();
    assert_eq!(
        patch["metadata"]["labels"],
        json!({"node-role.kubernetes.io/worker": ""}),
        "what the kubelet set wins"
    );
    assert_eq!(
        patch["metadata"]["annotations"],
        json!({ANNOTATION_FENCED_BY: null})
    );
    let restored = patched(&fenced, &patch);
    assert!(!has_out_of_service_taint(&restored));
    assert_eq!(
        restored
            .spec
            .as_ref()
            .unwrap()
            .taints
            .as_ref()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(restored.labels()["kubernetes.io/hostname"], "n1-new");
    assert_eq!(
        restore_patch(&restored, Some(&backup), UID),
        None,
        "nothing left"
    );
    // Somebody else's out-of-service taint stays.
    let mut theirs = patched(&original, &fence_patch(&original, "another-uid"));
    assert_eq!(restore_patch(&theirs, Some(&backup), UID), None);
    theirs
        .metadata
        .annotations
        .as_mut()
        .unwrap()
        .remove(ANNOTATION_FENCED_BY);
    assert_eq!(restore_patch(&theirs, None, UID), None);
}

#[test]
fn ready_since_needs_a_fresh_ready() {
    assert!(!ready_since(&node(T0 - 100, None), t(T0)));
    assert!(!ready_since(&node(T0 - 100, Some(T0 - 1)), t(T0)));
    assert!(ready_since(&node(T0 - 100, Some(T0)), t(T0)));
    let mut recreated = node(T0 + 5, Some(T0 + 5));
    assert!(ready_since(&recreated, t(T0)));
    recreated
        .status
        .as_mut()
        .unwrap()
        .conditions
        .as_mut()
        .unwrap()[0]
        .last_transition_time = None;
    assert!(
        ready_since(&recreated, t(T0)),
        "a Node registered after the start"
    );
}
