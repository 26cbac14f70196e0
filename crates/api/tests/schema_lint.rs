//! Structural-schema lint and CRD metadata checks, without an API server.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use capmaas_api::crd::{
    CLUSTERCTL_LABEL, CLUSTERCTL_MOVE_LABEL, CONTRACT_LABEL, all_crds, crd_file_name,
};
use serde_json::Value;

#[test]
fn every_node_is_structural() {
    let mut problems = Vec::new();
    for (kind, schema) in common::schemas_by_kind() {
        common::visit(&schema, "", &mut |path, node| {
            let in_junction =
                path.contains("<oneOf") || path.contains("<anyOf") || path.contains("<allOf");
            if in_junction {
                for forbidden in ["type", "description", "default", "nullable"] {
                    if node.get(forbidden).is_some() {
                        problems.push(format!(
                            "{kind} {path}: `{forbidden}` inside oneOf/anyOf/allOf"
                        ));
                    }
                }
                return;
            }
            let typed = node.get("type").and_then(Value::as_str).is_some()
                || node.get("x-kubernetes-int-or-string").is_some()
                || node.get("x-kubernetes-preserve-unknown-fields").is_some();
            if !typed {
                problems.push(format!(
                    "{kind} {path}: no type (an untyped IpNet or enum renders like this)"
                ));
            }
            if node.get("$ref").is_some() {
                problems.push(format!("{kind} {path}: $ref is not allowed in CRD schemas"));
            }
        });
    }
    assert!(
        problems.is_empty(),
        "non-structural schema nodes:\n{}",
        problems.join("\n")
    );
}

/// CEL cost estimation needs bounds: every list in a spec has maxItems and
/// every string property in a spec has maxLength (or is an enum / date-time).
#[test]
fn spec_lists_and_strings_are_bounded() {
    let mut problems = Vec::new();
    for (kind, schema) in common::schemas_by_kind() {
        let Some(spec) = schema.pointer("/properties/spec") else {
            continue;
        };
        common::visit(
            spec,
            "spec",
            &mut |path, node| match node.get("type").and_then(Value::as_str) {
                Some("array") if node.get("maxItems").is_none() => {
                    problems.push(format!("{kind} {path}: array without maxItems"));
                }
                Some("object")
                    if node.get("additionalProperties").is_some()
                        && node.get("maxProperties").is_none() =>
                {
                    problems.push(format!("{kind} {path}: map without maxProperties"));
                }
                Some("string")
                    if !path.ends_with("{}")
                        && node.get("maxLength").is_none()
                        && node.get("enum").is_none()
                        && node.get("format").and_then(Value::as_str) != Some("date-time") =>
                {
                    problems.push(format!("{kind} {path}: string without maxLength"));
                }
                _ => {}
            },
        );
    }
    assert!(
        problems.is_empty(),
        "unbounded spec fields:\n{}",
        problems.join("\n")
    );
}

#[test]
fn conditions_are_list_maps_keyed_by_type() {
    for (kind, schema) in common::schemas_by_kind() {
        if let Some(conditions) = schema.pointer("/properties/status/properties/conditions") {
            assert_eq!(conditions["x-kubernetes-list-type"], "map", "{kind}");
            assert_eq!(
                conditions["x-kubernetes-list-map-keys"],
                serde_json::json!(["type"]),
                "{kind}"
            );
            let required = conditions
                .pointer("/items/required")
                .unwrap()
                .as_array()
                .unwrap();
            assert!(
                required.iter().any(|r| r == "type"),
                "{kind}: condition type must be required"
            );
        }
    }
}

#[test]
fn every_cel_message_names_a_spec_field() {
    for (kind, schema) in common::schemas_by_kind() {
        common::visit(&schema, "", &mut |path, node| {
            for rule in node
                .get("x-kubernetes-validations")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let message = rule["message"].as_str().unwrap_or_default();
                assert!(
                    message.starts_with("spec."),
                    "{kind} {path}: message {message:?} does not name its field"
                );
            }
        });
    }
}

#[test]
fn crd_names_labels_categories_and_columns() {
    let expected_plurals = [
        "maasclusters",
        "maasclustertemplates",
        "maasmachines",
        "maasmachinetemplates",
        "maasinventories",
        "maashosts",
        "maasdnsrecords",
        "maasdatatemplates",
        "maasdataclaims",
        // flect.Pluralize keeps words ending in "ata" (datum -> data) as they are.
        "maasdata",
        "maasippools",
        "maasipaddresslocks",
        "maasremediations",
        "maasremediationtemplates",
    ];
    let crds = all_crds();
    assert_eq!(crds.len(), expected_plurals.len());
    for (crd, plural) in crds.iter().zip(expected_plurals) {
        let names = &crd.spec.names;
        let name = crd.metadata.name.as_deref().unwrap();
        assert_eq!(name, format!("{plural}.infrastructure.cluster.x-k8s.io"));
        assert_eq!(names.plural, plural);
        assert_eq!(
            crd_file_name(crd),
            format!("infrastructure.cluster.x-k8s.io_{plural}.yaml")
        );
        // The address lock is installation-wide; every other kind lives in a namespace.
        let cluster_scoped = names.kind == "MaasIPAddressLock";
        assert_eq!(
            crd.spec.scope,
            if cluster_scoped {
                "Cluster"
            } else {
                "Namespaced"
            },
            "{name}"
        );
        assert_eq!(crd.spec.versions.len(), 1, "{name}");
        let version = &crd.spec.versions[0];
        assert_eq!(version.name, "v1beta1");
        assert!(version.served && version.storage, "{name}");
        let labels = crd.metadata.labels.as_ref().unwrap();
        assert_eq!(
            labels.get(CONTRACT_LABEL).map(String::as_str),
            Some("v1beta1"),
            "{name}"
        );
        assert_eq!(
            labels.get(CLUSTERCTL_LABEL).map(String::as_str),
            Some(""),
            "{name}"
        );
        let moved =
            ["MaasDataTemplate", "MaasIPPool", "MaasInventory"].contains(&names.kind.as_str());
        assert_eq!(
            labels.contains_key(CLUSTERCTL_MOVE_LABEL),
            moved,
            "{name}: move label"
        );
        assert_eq!(
            names.categories.as_deref(),
            Some(&["cluster-api".to_owned(), "maas".to_owned()][..]),
            "{name}"
        );
        assert_eq!(names.short_names.as_ref().map(Vec::len), Some(1), "{name}");
        let columns = version.additional_printer_columns.as_ref().unwrap();
        assert!(columns.len() >= 2, "{name}: printer columns");
        assert_eq!(columns.last().unwrap().name, "Age", "{name}");
        // Templates have no status, but MaasMachineTemplate: the cluster autoscaler reads the
        // shape of its nodes there (status.capacity, status.nodeInfo).
        let is_template = names.kind.ends_with("Template")
            && names.kind != "MaasDataTemplate"
            && names.kind != "MaasMachineTemplate";
        let has_status = version
            .subresources
            .as_ref()
            .and_then(|s| s.status.as_ref())
            .is_some();
        assert_eq!(
            has_status,
            !is_template && !cluster_scoped,
            "{name}: status subresource"
        );
    }
}

#[test]
fn maas_host_columns_are_the_operator_view() {
    let crd = all_crds()
        .into_iter()
        .find(|c| c.spec.names.kind == "MaasHost")
        .unwrap();
    let columns: Vec<String> = crd.spec.versions[0]
        .additional_printer_columns
        .as_ref()
        .unwrap()
        .iter()
        .map(|c| c.name.clone())
        .collect();
    for wanted in [
        "SystemID",
        "MAASStatus",
        "Power",
        "Consumer",
        "Zone",
        "Pool",
        "CPU",
        "MemoryMiB",
        "Age",
    ] {
        assert!(
            columns.iter().any(|c| c == wanted),
            "missing column {wanted}: {columns:?}"
        );
    }
}
