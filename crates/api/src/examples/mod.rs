//! Example objects for tests against a real API server (crate `testenv`) and
//! for the offline CEL tests of this crate.
//!
//! [`valid_examples`] holds realistic objects that every kind's schema and
//! rules accept. [`invalid_examples`] holds one case per validation rule
//! (schema bound, enum, pattern, required field, and every CEL rule): the API
//! server's rejection message must contain both `expected_field` and
//! `expected_message`. Cases with `update_from` test transition rules
//! (`oldSelf`): create `update_from` first, then replace it with `object`
//! (copy `metadata.resourceVersion` from the created object).
//!
//! Objects carry `apiVersion`, `kind` and `metadata.name` but no namespace;
//! every object has a distinct name within its kind.

mod invalid_core;
mod invalid_data;
mod invalid_ops;
mod lxd;
mod valid;

use serde_json::Value;

/// A valid object of one kind.
#[derive(Clone, Debug, PartialEq)]
pub struct Example {
    /// Short description of the case.
    pub name: &'static str,
    /// Kind of `object`.
    pub kind: &'static str,
    /// The object.
    pub object: Value,
}

/// An object the API server must reject.
#[derive(Clone, Debug, PartialEq)]
pub struct InvalidExample {
    /// Case name, also used as `metadata.name`.
    pub name: &'static str,
    /// The object to create, or to replace `update_from` with.
    pub object: Value,
    /// Original object for transition (immutability) rules.
    pub update_from: Option<Value>,
    /// Field path the rejection names, e.g. `spec.providerID`.
    pub expected_field: &'static str,
    /// Text the rejection message contains.
    pub expected_message: &'static str,
}

impl InvalidExample {
    /// Kind of the object.
    pub fn kind(&self) -> &str {
        self.object
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }
}

/// One or more valid, realistic objects per kind.
pub fn valid_examples() -> Vec<Example> {
    let mut examples = valid::all();
    examples.extend(lxd::valid());
    examples
}

/// One case per validation rule of every kind.
pub fn invalid_examples() -> Vec<InvalidExample> {
    let kinds: [fn() -> Vec<InvalidExample>; 9] = [
        invalid_core::cluster,
        invalid_core::machine,
        invalid_ops::host_and_inventory,
        invalid_ops::dns_and_remediation,
        invalid_data::data_template,
        invalid_data::claim_and_data,
        invalid_data::ip_pool,
        invalid_data::ip_lock,
        lxd::invalid,
    ];
    kinds.into_iter().flat_map(|cases| cases()).collect()
}

/// A minimal valid object and what the API server stores after applying
/// schema defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct DefaultedExample {
    /// Short description of the case.
    pub name: &'static str,
    /// Kind of the object.
    pub kind: &'static str,
    /// The object as sent (fields with defaults omitted).
    pub object: Value,
    /// The object as stored: `object` with the schema defaults filled in.
    pub defaulted: Value,
}

/// Minimal objects and their defaulted form (for tests that read objects back).
pub fn defaulted_examples() -> Vec<DefaultedExample> {
    let mut examples = valid::all_defaulted();
    examples.extend(lxd::defaulted());
    examples
}

/// `patch` applied to `base` as a JSON merge patch (RFC 7386): objects
/// merge, `null` deletes, anything else replaces.
pub(crate) fn merged(base: &Value, patch: &Value) -> Value {
    match (base, patch) {
        (Value::Object(base), Value::Object(patch)) => {
            let mut out = base.clone();
            for (key, value) in patch {
                if value.is_null() {
                    out.remove(key);
                } else {
                    let merged_value = out
                        .get(key)
                        .map_or_else(|| merged(&Value::Null, value), |b| merged(b, value));
                    out.insert(key.clone(), merged_value);
                }
            }
            Value::Object(out)
        }
        (_, Value::Object(patch)) => merged(
            &Value::Object(serde_json::Map::new()),
            &Value::Object(patch.clone()),
        ),
        (_, other) => other.clone(),
    }
}

/// What the API server says of a required field left out.
const REQUIRED: &str = "Required value";
/// What the API server says of a value outside an enum.
const UNSUPPORTED: &str = "Unsupported value";

/// A create-time case: `patch` merged into `base`, named `name`.
pub(crate) fn rejected_create(
    name: &'static str,
    base: &Value,
    patch: &Value,
    expected_field: &'static str,
    expected_message: &'static str,
) -> InvalidExample {
    let mut object = merged(base, patch);
    object["metadata"]["name"] = Value::from(name);
    InvalidExample {
        name,
        object,
        update_from: None,
        expected_field,
        expected_message,
    }
}

/// An update case: `base` is created, then replaced by `base` merged with `patch`.
pub(crate) fn rejected_update(
    name: &'static str,
    base: &Value,
    patch: &Value,
    expected_field: &'static str,
    expected_message: &'static str,
) -> InvalidExample {
    let mut original = base.clone();
    original["metadata"]["name"] = Value::from(name);
    let object = merged(&original, patch);
    InvalidExample {
        name,
        object,
        update_from: Some(original),
        expected_field,
        expected_message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_follows_rfc_7386() {
        let base = json!({"a": 1, "b": {"c": 2, "d": 3}, "e": [1, 2]});
        let patch = json!({"a": null, "b": {"c": 5}, "e": [9], "f": {"g": 1}});
        assert_eq!(
            merged(&base, &patch),
            json!({"b": {"c": 5, "d": 3}, "e": [9], "f": {"g": 1}})
        );
    }
}
