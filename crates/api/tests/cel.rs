//! CEL rules evaluated offline with kube's `cel` feature (kube-cel, which
//! includes the Kubernetes `isIP`/`isCIDR` library): every CEL-backed invalid
//! example fails with its message at its field, every valid example passes,
//! and every CEL rule in the CRDs has an invalid example.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::{BTreeMap, BTreeSet};

use capmaas_api::examples::{invalid_examples, valid_examples};
use kube::core::cel::Validator;
use serde_json::Value;

/// (kind, message) of every CEL rule.
fn cel_messages(schemas: &BTreeMap<String, Value>) -> BTreeSet<(String, String)> {
    let mut messages = BTreeSet::new();
    for (kind, schema) in schemas {
        common::visit(schema, "", &mut |_, node| {
            for rule in node
                .get("x-kubernetes-validations")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                messages.insert((kind.clone(), rule["message"].as_str().unwrap().to_owned()));
            }
        });
    }
    messages
}

#[test]
fn valid_examples_pass_cel_on_create_and_unchanged_update() {
    let schemas = common::schemas_by_kind();
    let validator = Validator::new();
    for example in valid_examples() {
        let schema = &schemas[example.kind];
        if let Err(errors) = validator.validate(schema, &example.object, None) {
            panic!("{} rejected on create: {errors}", example.name);
        }
        if let Err(errors) = validator.validate(schema, &example.object, Some(&example.object)) {
            panic!("{} rejected on an unchanged update: {errors}", example.name);
        }
    }
}

#[test]
fn cel_invalid_examples_fail_with_their_message_at_their_field() {
    let schemas = common::schemas_by_kind();
    let messages = cel_messages(&schemas);
    let validator = Validator::new();
    let mut checked = 0;
    for case in invalid_examples() {
        let kind = case.kind().to_owned();
        if !messages.contains(&(kind.clone(), case.expected_message.to_owned())) {
            continue; // an OpenAPI schema rule: checked against a real API server by testenv
        }
        let schema = &schemas[&kind];
        if let Some(original) = &case.update_from {
            assert!(
                validator.validate(schema, original, None).is_ok(),
                "{}: the original object must be valid",
                case.name
            );
        }
        let errors = validator
            .validate(schema, &case.object, case.update_from.as_ref())
            .expect_err(&format!("{} passed CEL validation", case.name));
        assert!(
            errors
                .iter()
                .any(|e| e.message == case.expected_message && e.field_path == case.expected_field),
            "{}: expected {:?} at {:?}, got {errors}",
            case.name,
            case.expected_message,
            case.expected_field
        );
        checked += 1;
    }
    assert!(checked >= 40, "only {checked} CEL cases were checked");
}

#[test]
fn every_cel_rule_has_an_invalid_example() {
    let schemas = common::schemas_by_kind();
    let covered: BTreeSet<(String, String)> = invalid_examples()
        .iter()
        .map(|c| (c.kind().to_owned(), c.expected_message.to_owned()))
        .collect();
    let missing: Vec<_> = cel_messages(&schemas)
        .difference(&covered)
        .cloned()
        .collect();
    assert!(
        missing.is_empty(),
        "CEL rules without an invalid example: {missing:#?}"
    );
}

#[test]
fn transition_rules_do_not_fire_on_create() {
    let schemas = common::schemas_by_kind();
    let validator = Validator::new();
    for case in invalid_examples()
        .into_iter()
        .filter(|c| c.update_from.is_some())
    {
        let schema = &schemas[case.kind()];
        let result = validator.validate(schema, &case.object, None);
        assert!(
            result.is_ok(),
            "{}: the changed object alone must be valid: {result:?}",
            case.name
        );
    }
}
