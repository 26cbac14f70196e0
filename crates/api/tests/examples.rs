//! The examples match the Rust types, cover every kind, and carry the
//! defaults the schema (and serde) apply.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeSet;

use capmaas_api::examples::{defaulted_examples, invalid_examples, valid_examples};
use capmaas_api::*;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

const KINDS: [&str; 13] = [
    "MaasCluster",
    "MaasClusterTemplate",
    "MaasMachine",
    "MaasMachineTemplate",
    "MaasInventory",
    "MaasHost",
    "MaasDNSRecord",
    "MaasDataTemplate",
    "MaasDataClaim",
    "MaasData",
    "MaasIPPool",
    "MaasRemediation",
    "MaasRemediationTemplate",
];

fn round_trip<T: DeserializeOwned + Serialize>(value: &Value) -> Result<Value, serde_json::Error> {
    let typed: T = serde_json::from_value(value.clone())?;
    serde_json::to_value(typed)
}

/// The object through the Rust type of its kind and back.
fn typed_round_trip(kind: &str, value: &Value) -> Result<Value, serde_json::Error> {
    match kind {
        "MaasCluster" => round_trip::<MaasCluster>(value),
        "MaasClusterTemplate" => round_trip::<MaasClusterTemplate>(value),
        "MaasMachine" => round_trip::<MaasMachine>(value),
        "MaasMachineTemplate" => round_trip::<MaasMachineTemplate>(value),
        "MaasInventory" => round_trip::<MaasInventory>(value),
        "MaasHost" => round_trip::<MaasHost>(value),
        "MaasDNSRecord" => round_trip::<MaasDNSRecord>(value),
        "MaasDataTemplate" => round_trip::<MaasDataTemplate>(value),
        "MaasDataClaim" => round_trip::<MaasDataClaim>(value),
        "MaasData" => round_trip::<MaasData>(value),
        "MaasIPPool" => round_trip::<MaasIPPool>(value),
        "MaasIPAddressLock" => round_trip::<MaasIPAddressLock>(value),
        "MaasRemediation" => round_trip::<MaasRemediation>(value),
        "MaasRemediationTemplate" => round_trip::<MaasRemediationTemplate>(value),
        other => panic!("unknown kind {other}"),
    }
}

/// Paths of `subset` missing from, or different in, `superset`.
fn missing_paths(superset: &Value, subset: &Value, path: &str, out: &mut Vec<String>) {
    match (superset, subset) {
        (Value::Object(sup), Value::Object(sub)) => {
            for (key, value) in sub {
                match sup.get(key) {
                    Some(s) => missing_paths(s, value, &format!("{path}.{key}"), out),
                    None => out.push(format!("{path}.{key}")),
                }
            }
        }
        (Value::Array(sup), Value::Array(sub)) if sup.len() == sub.len() => {
            for (i, (s, v)) in sup.iter().zip(sub).enumerate() {
                missing_paths(s, v, &format!("{path}[{i}]"), out);
            }
        }
        (s, v) if s == v => {}
        _ => out.push(path.to_owned()),
    }
}

#[test]
fn every_kind_has_valid_and_invalid_examples() {
    let valid: BTreeSet<&str> = valid_examples().iter().map(|e| e.kind).collect();
    let invalid: Vec<InvalidKind> = invalid_examples()
        .iter()
        .map(|c| InvalidKind(c.kind().to_owned()))
        .collect();
    for kind in KINDS {
        assert!(valid.contains(kind), "no valid example for {kind}");
        assert!(
            invalid.iter().any(|k| k.0 == kind),
            "no invalid example for {kind}"
        );
    }
}

struct InvalidKind(String);

#[test]
fn valid_examples_are_well_formed_and_match_the_types() {
    let mut names = BTreeSet::new();
    for example in valid_examples() {
        let object = &example.object;
        assert_eq!(object["apiVersion"], API_VERSION, "{}", example.name);
        assert_eq!(object["kind"], example.kind, "{}", example.name);
        assert!(
            object.pointer("/metadata/namespace").is_none(),
            "{}: examples are namespace-less",
            example.name
        );
        let name = object["metadata"]["name"].as_str().unwrap();
        assert!(
            names.insert((example.kind, name.to_owned())),
            "duplicate {} {name}",
            example.kind
        );
        let back = typed_round_trip(example.kind, object)
            .unwrap_or_else(|e| panic!("{}: {e}", example.name));
        let mut missing = Vec::new();
        missing_paths(&back, object, "", &mut missing);
        assert!(
            missing.is_empty(),
            "{}: fields unknown to the Rust type (typos?): {missing:?}",
            example.name
        );
    }
}

#[test]
fn invalid_examples_have_unique_dns_names() {
    let mut names = BTreeSet::new();
    for case in invalid_examples() {
        assert!(names.insert(case.name), "duplicate case {}", case.name);
        assert_eq!(case.object["metadata"]["name"], case.name);
        assert!(case.name.len() <= 63, "{}", case.name);
        assert!(
            case.name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
            "{} is not a DNS label",
            case.name
        );
        assert!(
            case.expected_field.starts_with("spec."),
            "{}: field {}",
            case.name,
            case.expected_field
        );
        if let Some(original) = &case.update_from {
            assert_eq!(original["metadata"]["name"], case.name);
            assert_ne!(
                original, &case.object,
                "{}: an update must change something",
                case.name
            );
        }
    }
}

#[test]
fn schema_defaults_fill_the_defaulted_examples() {
    let schemas = common::schemas_by_kind();
    for example in defaulted_examples() {
        let applied = kube::core::cel::apply_defaults(&schemas[example.kind], &example.object);
        assert_eq!(
            applied["spec"], example.defaulted["spec"],
            "{}",
            example.name
        );
    }
}

#[test]
fn serde_defaults_equal_schema_defaults() {
    for example in defaulted_examples() {
        let back = typed_round_trip(example.kind, &example.object).unwrap();
        assert_eq!(back["spec"], example.defaulted["spec"], "{}", example.name);
    }
}

#[test]
fn remediation_defaults_follow_metal3() {
    let spec: MaasRemediationSpec = serde_json::from_value(serde_json::json!({})).unwrap();
    assert_eq!(spec.strategy.retry_limit, 1);
    assert_eq!(spec.strategy.timeout_seconds, 600);
    let inventory: MaasInventorySpec =
        serde_json::from_value(serde_json::json!({"resourcePool": "k8s"})).unwrap();
    assert_eq!(inventory.sync_interval_seconds, 30);
}
