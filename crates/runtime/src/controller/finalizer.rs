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
/// [`Error::Conflict`] when the finalizer list changed since `obj` was read.
pub async fn add<K>(api: &Api<K>, obj: &K, finalizer: &str, field_manager: &str) -> Result<K>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    if has(obj, finalizer) {
        return Ok(obj.clone());
    }
    let patch = add_patch(obj.meta().finalizers.as_deref(), finalizer);
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
        Err(e) => Err(Error::Kube(e)),
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
