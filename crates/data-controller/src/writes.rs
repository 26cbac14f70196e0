//! The writes the claim, template and IPAM reconcilers make the same way: finalizers,
//! deletes of exactly the object that was read, status. Each failure names what was being
//! done, as the kit's [`failed`] does; every reconciler's error converts from [`Failed`].

use std::fmt::Debug;

use capmaas_runtime::controller::{Base, finalizer};
use capmaas_runtime::error::{Failed, failed};
use capmaas_runtime::status::{self, Guard};
use kube::api::{Api, DeleteParams, Preconditions};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Adds `finalizer` to `obj` ([`finalizer::add`]); the object as stored.
pub async fn add_finalizer<K>(
    base: &Base,
    api: &Api<K>,
    obj: &K,
    finalizer: &str,
) -> Result<K, Failed>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    finalizer::add(api, obj, finalizer, &base.field_manager)
        .await
        .map_err(failed("updating the finalizer"))
}

/// Removes `finalizer` from `obj` ([`finalizer::remove`]); `None` when that deleted it.
pub async fn remove_finalizer<K>(
    base: &Base,
    api: &Api<K>,
    obj: &K,
    finalizer: &str,
) -> Result<Option<K>, Failed>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    finalizer::remove(api, obj, finalizer, &base.field_manager)
        .await
        .map_err(failed("updating the finalizer"))
}

/// Deletes `obj` only while it is the object that was read (UID precondition): `false` when
/// it is gone already or a later object of the same name stands there, which is left alone.
pub async fn delete_same<K>(api: &Api<K>, obj: &K, action: &'static str) -> Result<bool, Failed>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: obj.uid(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(&obj.name_any(), &params).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if matches!(e.code, 404 | 409) => Ok(false),
        Err(e) => Err(failed(action)(e)),
    }
}

/// Lets go of `obj` and deletes it: `finalizer` off, then [`delete_same`]. One deleted by
/// hand earlier is not deleted again: the finalizer was all that kept it.
pub async fn let_go_and_delete<K>(
    base: &Base,
    api: &Api<K>,
    obj: &K,
    finalizer: &str,
    action: &'static str,
) -> Result<(), Failed>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let Some(obj) = remove_finalizer(base, api, obj, finalizer).await? else {
        return Ok(());
    };
    if obj.meta().deletion_timestamp.is_none() {
        delete_same(api, &obj, action).await?;
    }
    Ok(())
}

/// Writes `status` unless `unchanged` ([`status::write_status`]); whether it wrote.
pub async fn write_status<K, S>(
    base: &Base,
    api: &Api<K>,
    obj: &K,
    status: &S,
    unchanged: bool,
    guard: Guard,
) -> Result<bool, Failed>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
    S: Serialize + ?Sized,
{
    let written = status::write_status(api, obj, &base.field_manager, status, unchanged, guard)
        .await
        .map_err(failed("writing the status"))?;
    Ok(written.is_some())
}

/// Applies the whole owned `status` of the object `name` ([`status::apply_status`]).
pub async fn apply_status<K, S>(
    base: &Base,
    api: &Api<K>,
    name: &str,
    status: &S,
) -> Result<(), Failed>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
    S: Serialize + ?Sized,
{
    status::apply_status(api, name, &base.field_manager, status)
        .await
        .map_err(failed("writing the status"))?;
    Ok(())
}
