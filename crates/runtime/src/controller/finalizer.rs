//! Adding and removing a finalizer, the same way everywhere.
//!
//! The patch is a JSON patch that first `test`s the finalizer list it read, as
//! `kube::runtime::finalizer` does: a concurrent change to the list (another controller adding
//! its own finalizer) fails the patch instead of being overwritten, and the caller decides again
//! on a fresh read. Controllers call these as steps of their own `decide`/`act` loop rather than
//! through `kube::runtime::finalizer`, which spends a whole extra reconcile after adding.

use std::fmt::Debug;

use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::error::{Error, Result};

/// Whether `obj` carries `finalizer`.
pub fn has<K: Resource>(obj: &K, finalizer: &str) -> bool {
    obj.meta()
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == finalizer))
}

/// Adds `finalizer` to `obj` (no write when it is there); returns the object as stored.
///
/// The same patch records the current trace on the object
/// ([`crate::trace_context::TRACEPARENT_ANNOTATION`], when spans are exported): the first write
/// a controller makes to a new object, so later reconciles of it can join the trace of its
/// creation at no extra write.
///
/// [`Error::Conflict`] when the finalizer list changed since `obj` was read.
pub async fn add<K>(api: &Api<K>, obj: &K, finalizer: &str, field_manager: &str) -> Result<K>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    if has(obj, finalizer) {
        return Ok(obj.clone());
    }
    let mut patch = add_patch(obj.meta().finalizers.as_deref(), finalizer);
    if let Some(traceparent) = crate::trace_context::current_traceparent() {
        extend(
            &mut patch,
            annotation_patch(obj.meta().annotations.is_some(), &traceparent),
        );
    }
    match json_patch(api, obj, patch, field_manager).await? {
        Some(updated) => Ok(updated),
        None => Err(Error::Gone(obj.name_any())),
    }
}

/// Removes `finalizer` from `obj` (no write when it is absent); returns the object as stored,
/// or `None` when it is gone (removing the last finalizer of a deleted object deletes it).
///
/// [`Error::Conflict`] when the finalizer list changed since `obj` was read.
pub async fn remove<K>(
    api: &Api<K>,
    obj: &K,
    finalizer: &str,
    field_manager: &str,
) -> Result<Option<K>>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let Some(patch) = remove_patch(obj.meta().finalizers.as_deref(), finalizer) else {
        return Ok(Some(obj.clone()));
    };
    json_patch(api, obj, patch, field_manager).await
}

fn add_patch(current: Option<&[String]>, finalizer: &str) -> Value {
    match current {
        None => json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": [finalizer]}
        ]),
        Some(list) => json!([
            {"op": "test", "path": "/metadata/finalizers", "value": list},
            {"op": "add", "path": "/metadata/finalizers/-", "value": finalizer}
        ]),
    }
}

/// Sets the trace annotation; when the object has no annotations yet, the whole map is added
/// under a test that it is still absent (so a map added meanwhile is not replaced).
fn annotation_patch(has_annotations: bool, traceparent: &str) -> Value {
    let key = crate::trace_context::TRACEPARENT_ANNOTATION;
    if has_annotations {
        // JSON pointer escaping (RFC 6901): `~` is `~0`, `/` is `~1`.
        let escaped = key.replace('~', "~0").replace('/', "~1");
        json!([{"op": "add", "path": format!("/metadata/annotations/{escaped}"), "value": traceparent}])
    } else {
        json!([
            {"op": "test", "path": "/metadata/annotations", "value": null},
            {"op": "add", "path": "/metadata/annotations", "value": {key: traceparent}}
        ])
    }
}

fn extend(patch: &mut Value, more: Value) {
    if let (Value::Array(ops), Value::Array(more)) = (patch, more) {
        ops.extend(more);
    }
}

fn remove_patch(current: Option<&[String]>, finalizer: &str) -> Option<Value> {
    let index = current?.iter().position(|f| f == finalizer)?;
    let path = format!("/metadata/finalizers/{index}");
    Some(json!([
        {"op": "test", "path": path, "value": finalizer},
        {"op": "remove", "path": path}
    ]))
}

async fn json_patch<K>(
    api: &Api<K>,
    obj: &K,
    patch: Value,
    field_manager: &str,
) -> Result<Option<K>>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let patch = serde_json::from_value(patch).map_err(Error::Serialize)?;
    let params = PatchParams {
        field_manager: Some(field_manager.to_owned()),
        ..PatchParams::default()
    };
    match api
        .patch(&obj.name_any(), &params, &Patch::Json::<()>(patch))
        .await
    {
        Ok(updated) => Ok(Some(updated)),
        // Already gone (e.g. its last finalizer was removed by an earlier attempt).
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
        // The patch is well-formed; 422 means its `test` failed: the list changed meanwhile.
        Err(kube::Error::Api(s)) if s.code == 422 || s.code == 409 => {
            Err(Error::Conflict("the finalizer list changed"))
        }
        Err(e) => Err(Error::KubeApi(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    #[test]
    fn add_tests_the_list_it_read() {
        assert_eq!(
            add_patch(None, "f"),
            json!([{"op": "test", "path": "/metadata/finalizers", "value": null},
                   {"op": "add", "path": "/metadata/finalizers", "value": ["f"]}])
        );
        let list = vec!["a".to_owned()];
        assert_eq!(
            add_patch(Some(&list), "f")[1],
            json!({"op": "add", "path": "/metadata/finalizers/-", "value": "f"})
        );
    }

    #[test]
    fn trace_annotation_is_escaped_or_added_with_the_map() {
        assert_eq!(
            annotation_patch(true, "00-x")[0]["path"],
            "/metadata/annotations/maas.cluster.x-k8s.io~1traceparent"
        );
        let whole = annotation_patch(false, "00-x");
        assert_eq!(whole[0]["op"], "test");
        assert_eq!(
            whole[1]["value"]["maas.cluster.x-k8s.io/traceparent"],
            "00-x"
        );
    }

    #[test]
    fn remove_tests_the_entry_it_removes() {
        let list = vec!["a".to_owned(), "f".to_owned()];
        assert_eq!(
            remove_patch(Some(&list), "f"),
            Some(
                json!([{"op": "test", "path": "/metadata/finalizers/1", "value": "f"},
                        {"op": "remove", "path": "/metadata/finalizers/1"}])
            )
        );
        assert_eq!(remove_patch(Some(&list), "x"), None);
        assert_eq!(remove_patch(None, "f"), None);
        let mut cm = ConfigMap::default();
        assert!(!has(&cm, "f"));
        cm.metadata.finalizers = Some(list);
        assert!(has(&cm, "f"));
    }
}
