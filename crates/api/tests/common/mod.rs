//! Helpers shared by the integration tests of this crate.

#![allow(dead_code)] // each test binary uses a subset of the helpers

use std::collections::BTreeMap;

use capmaas_api::crd::{all_crds, schema_json};
use serde_json::Value;

/// openAPIV3Schema of every CRD, by kind.
pub(crate) fn schemas_by_kind() -> BTreeMap<String, Value> {
    all_crds()
        .iter()
        .map(|crd| {
            (
                crd.spec.names.kind.clone(),
                schema_json(crd).expect("schema"),
            )
        })
        .collect()
}

/// Visit every schema node with its path (`.` for properties, `[]` for
/// items, `{}` for map values).
pub(crate) fn visit(schema: &Value, path: &str, f: &mut dyn FnMut(&str, &Value)) {
    f(path, schema);
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, sub) in props {
            let child = if path.is_empty() {
                name.clone()
            } else {
                format!("{path}.{name}")
            };
            visit(sub, &child, f);
        }
    }
    if let Some(items) = schema.get("items") {
        visit(items, &format!("{path}[]"), f);
    }
    if let Some(values) = schema.get("additionalProperties").filter(|v| v.is_object()) {
        visit(values, &format!("{path}{{}}"), f);
    }
    for key in ["oneOf", "anyOf", "allOf"] {
        if let Some(branches) = schema.get(key).and_then(Value::as_array) {
            for (i, branch) in branches.iter().enumerate() {
                visit(branch, &format!("{path}<{key}{i}>"), f);
            }
        }
    }
}
