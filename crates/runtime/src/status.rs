//! Server-side apply of a status subresource.
//!
//! One field manager per binary owns the status fields it sets; `force` takes fields over from a
//! previous manager (Kubernetes' advice for controllers). The apply body must carry `apiVersion`
//! and `kind`, or the API server rejects it (kube#1086).

use std::fmt::Debug;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::core::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::error::{Error, Result};

/// The apply patch body for `K`'s status: `{apiVersion, kind, status}`.
pub fn status_apply_body<K, S>(status: &S) -> Result<Value>
where
    K: Resource<DynamicType = ()>,
    S: Serialize + ?Sized,
{
    let status = serde_json::to_value(status).map_err(Error::Serialize)?;
    Ok(json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    }))
}

/// Applies `status` to the `/status` subresource of `name` with `PatchParams::apply(manager).force()`.
///
/// Fields the manager applied before but omits now are removed, so send the whole status this
/// controller owns, not a delta.
/// `status` is the typed status struct (fields `Option` with `skip_serializing_if`) or a JSON value.
pub async fn apply_status<K, S>(
    api: &Api<K>,
    name: &str,
    field_manager: &str,
    status: &S,
) -> Result<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
    S: Serialize + ?Sized,
{
    let body = status_apply_body::<K, S>(status)?;
    let params = PatchParams::apply(field_manager).force();
    Ok(api
        .patch_status(name, &params, &Patch::Apply(&body))
        .await?)
}

/// [`apply_status`] guarded by `resource_version`: when the object changed since the status was
/// computed from it (another replica or controller wrote meanwhile), the API server answers
/// 409 ([`Error::is_conflict`]) instead of this write undoing that one.
pub async fn apply_status_at<K, S>(
    api: &Api<K>,
    name: &str,
    field_manager: &str,
    status: &S,
    resource_version: &str,
) -> Result<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
    S: Serialize + ?Sized,
{
    let mut body = status_apply_body::<K, S>(status)?;
    body["metadata"] = json!({"name": name, "resourceVersion": resource_version});
    let params = PatchParams::apply(field_manager).force();
    Ok(api
        .patch_status(name, &params, &Patch::Apply(&body))
        .await?)
}

/// Whether a status write must find the object as it was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guard {
    /// The apply lands whatever changed meanwhile: the status holds only what this manager owns
    /// and computes from other objects, so a newer write of it is simply overwritten.
    None,
    /// Only while the object is still at the resourceVersion it was read at ([`apply_status_at`]):
    /// a status computed from an outdated object fails with 409 instead of undoing a newer write.
    ResourceVersion,
}

/// Writes `status` as the status of `obj` unless it is `unchanged` (no write, no watch event:
/// each controller says what "unchanged" means for the part it owns). Returns the object as
/// written, `None` when nothing was written.
pub async fn write_status<K, S>(
    api: &Api<K>,
    obj: &K,
    field_manager: &str,
    status: &S,
    unchanged: bool,
    guard: Guard,
) -> Result<Option<K>>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
    S: Serialize + ?Sized,
{
    if unchanged {
        return Ok(None);
    }
    let name = obj.meta().name.as_deref().unwrap_or_default();
    let written = match guard {
        Guard::None => apply_status(api, name, field_manager, status).await?,
        Guard::ResourceVersion => {
            let Some(rv) = obj.meta().resource_version.as_deref() else {
                return Err(Error::MissingMetadata("resourceVersion"));
            };
            apply_status_at(api, name, field_manager, status, rv).await?
        }
    };
    Ok(Some(written))
}

/// The current time as a `metav1.Time`, for [`crate::conditions::set_condition`].
pub fn now() -> Time {
    Time(jiff::Timestamp::now())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::Lease;

    #[test]
    fn body_carries_api_version_and_kind() {
        let body = status_apply_body::<Lease, _>(&json!({"ready": true})).unwrap();
        assert_eq!(
            body,
            json!({
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "status": {"ready": true}
            })
        );
    }

    #[test]
    fn unserializable_status_is_an_error() {
        // JSON object keys must be strings; a map keyed by tuples cannot serialize.
        let mut bad = std::collections::BTreeMap::new();
        bad.insert((1, 2), "x");
        let err = status_apply_body::<Lease, _>(&bad).unwrap_err();
        assert!(matches!(err, Error::Serialize(_)), "{err:?}");
    }
}
