//! Syntax of host selectors, label maps and string lists shared by several kinds.

use std::collections::{BTreeMap, HashMap};

use capmaas_api::common::{HostSelector, SelectorOperator};

use crate::field::{FieldPath, Verdict};
use capmaas_api::names::{label_key_problem, label_value_problem};

/// `spec.hostSelector`: label keys and values a Kubernetes label selector accepts, so a typo
/// is an error now rather than a machine that never finds a host.
pub(super) fn host_selector(selector: &HostSelector, path: &FieldPath, v: &mut Verdict) {
    if let Some(labels) = &selector.match_labels {
        label_map(labels, &path.child("matchLabels"), v);
    }
    for (i, requirement) in selector.match_expressions.iter().flatten().enumerate() {
        let at = path.child("matchExpressions").index(i);
        if let Some(problem) = label_key_problem(&requirement.key) {
            v.invalid(&at.child("key"), &requirement.key, problem);
        }
        if matches!(
            requirement.operator,
            SelectorOperator::In | SelectorOperator::NotIn
        ) {
            let values = requirement.values.as_deref().unwrap_or_default();
            for (j, value) in values.iter().enumerate() {
                if let Some(problem) = label_value_problem(value) {
                    v.invalid(&at.child("values").index(j), value, problem);
                }
            }
            unique(values, &at.child("values"), v);
        }
    }
}

/// A map of labels: every key and value in label syntax.
pub(super) fn label_map(labels: &BTreeMap<String, String>, path: &FieldPath, v: &mut Verdict) {
    for (key, value) in labels {
        if let Some(problem) = label_key_problem(key) {
            v.invalid(&path.key(key), key, problem);
        }
        if let Some(problem) = label_value_problem(value) {
            v.invalid(&path.key(key), value, problem);
        }
    }
}

/// A list whose entries must be unique: the second occurrence is the error.
pub(super) fn unique(values: &[String], path: &FieldPath, v: &mut Verdict) {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (i, value) in values.iter().enumerate() {
        if let Some(first) = seen.insert(value, i) {
            seen.insert(value, first);
            v.duplicate(
                &path.index(i),
                value,
                format!("already listed as {}", path.index(first)),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use capmaas_api::common::HostSelectorRequirement;

    #[test]
    fn selector_keys_and_values_are_checked_and_named() {
        let selector = HostSelector {
            match_labels: Some(BTreeMap::from([
                ("maas.cluster.x-k8s.io/zone".into(), "z1".into()),
                ("bad key".into(), "ok".into()),
            ])),
            match_expressions: Some(vec![
                HostSelectorRequirement {
                    key: "rack".into(),
                    operator: SelectorOperator::In,
                    values: Some(vec!["r1".into(), "r 2".into(), "r1".into()]),
                },
                HostSelectorRequirement {
                    key: "-gpu".into(),
                    operator: SelectorOperator::Exists,
                    values: None,
                },
            ]),
        };
        let mut v = Verdict::ok();
        host_selector(
            &selector,
            &FieldPath::root("spec").child("hostSelector"),
            &mut v,
        );
        let paths: Vec<&str> = v.errors.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "spec.hostSelector.matchLabels[bad key]",
                "spec.hostSelector.matchExpressions[0].values[1]",
                "spec.hostSelector.matchExpressions[0].values[2]",
                "spec.hostSelector.matchExpressions[1].key",
            ]
        );
        assert!(
            v.errors[2]
                .to_string()
                .contains("already listed as spec.hostSelector.matchExpressions[0].values[0]")
        );
    }

    #[test]
    fn a_well_formed_selector_passes() {
        let selector = HostSelector {
            match_labels: Some(BTreeMap::from([(
                "tag.maas.cluster.x-k8s.io/gpu".into(),
                String::new(),
            )])),
            match_expressions: Some(vec![HostSelectorRequirement {
                key: "maas.cluster.x-k8s.io/pool".into(),
                operator: SelectorOperator::NotIn,
                values: Some(vec!["spare".into()]),
            }]),
        };
        let mut v = Verdict::ok();
        host_selector(&selector, &FieldPath::root("spec"), &mut v);
        assert_eq!(v, Verdict::ok());
    }
}
