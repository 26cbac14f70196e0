//! Property tests of the review decoder: whatever arrives, `admit::review` answers (an
//! AdmissionReview, or an error for a body that is none) and never panics; an object of any
//! shape under a well-formed review is allowed, denied naming fields, or refused as
//! undecodable, for every kind in both modes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proptest::prelude::*;
use serde_json::{Value, json};
use webhook_server::admit::review;
use webhook_server::kinds::{Kind, Mode};
use webhook_server::validate::StaticLookups;

/// Any JSON value, a few levels deep, with the field names our kinds use among random ones.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        "[a-z0-9./:-]{0,20}".prop_map(Value::from),
    ];
    let key = prop_oneof![
        Just("spec".to_owned()),
        Just("pools".to_owned()),
        Just("subnet".to_owned()),
        Just("start".to_owned()),
        Just("end".to_owned()),
        Just("consumerRef".to_owned()),
        Just("hostSelector".to_owned()),
        Just("releasePolicy".to_owned()),
        Just("template".to_owned()),
        "[a-zA-Z]{1,10}",
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(key.clone(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn review_of(kind: Kind, operation: &str, object: &Value, old: &Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "00000000-0000-0000-0000-000000000001",
            "kind": {"group": "infrastructure.cluster.x-k8s.io", "version": "v1beta1", "kind": kind.name()},
            "resource": {"group": "infrastructure.cluster.x-k8s.io", "version": "v1beta1", "resource": "x"},
            "name": "n",
            "namespace": "ns",
            "operation": operation,
            "userInfo": {"username": "someone"},
            "object": object,
            "oldObject": old,
        }
    }))
    .unwrap()
}

fn with_meta(kind: Kind, mut object: Value) -> Value {
    if let Value::Object(map) = &mut object {
        map.insert(
            "apiVersion".into(),
            json!("infrastructure.cluster.x-k8s.io/v1beta1"),
        );
        map.insert("kind".into(), json!(kind.name()));
        map.insert("metadata".into(), json!({"name": "n", "namespace": "ns"}));
    }
    object
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_never_panic(body in prop::collection::vec(any::<u8>(), 0..512)) {
        for kind in Kind::ALL {
            for mode in [Mode::Validate, Mode::Mutate] {
                let _ = review(&body, mode, kind, &StaticLookups::default());
            }
        }
    }

    #[test]
    fn objects_of_any_shape_are_answered(
        object in json_value(),
        old in json_value(),
        operation in prop_oneof![Just("CREATE"), Just("UPDATE"), Just("DELETE")],
    ) {
        for kind in Kind::ALL {
            let body = review_of(kind, operation, &with_meta(kind, object.clone()), &with_meta(kind, old.clone()));
            for mode in [Mode::Validate, Mode::Mutate] {
                match review(&body, mode, kind, &StaticLookups::default()) {
                    Ok(answer) => {
                        let response = answer.review.response.expect("a review always has a response");
                        prop_assert_eq!(response.uid, "00000000-0000-0000-0000-000000000001");
                    }
                    // An object that is not the kind at all is an error for the server to
                    // answer 400 with; it is never a panic.
                    Err(e) => prop_assert!(!e.to_string().is_empty()),
                }
            }
        }
    }
}
