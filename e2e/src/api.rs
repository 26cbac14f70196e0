//! Small helpers over the Kubernetes API that the harness, the scenarios and the benchmarks
//! share: a dynamic API found by discovery, server-side apply of any object, and polling.

use std::time::Duration;

use capmaas_testenv::poll_until;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::pinned_kind;
use serde_json::Value;

use crate::error::{Error, Result};

/// A dynamic API for `group/version` `kind` in namespace `ns`, found by discovery.
pub async fn dynamic_api(
    client: &kube::Client,
    ns: &str,
    group: &str,
    version: &str,
    kind: &str,
) -> Result<Api<DynamicObject>> {
    let (resource, _) = pinned_kind(client, &GroupVersionKind::gvk(group, version, kind))
        .await
        .map_err(Error::kube(format!("discovering {group}/{version} {kind}")))?;
    Ok(Api::namespaced_with(client.clone(), ns, &resource))
}

/// Server-side applies `object` with field manager `e2e`.
pub async fn apply(client: &kube::Client, object: &Value) -> Result<DynamicObject> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default();
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let (resource, _) = pinned_kind(client, &GroupVersionKind::gvk(group, version, kind))
        .await
        .map_err(Error::kube(format!("discovering {api_version} {kind}")))?;
    let api: Api<DynamicObject> = match object["metadata"]["namespace"].as_str() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    api.patch(
        name,
        &PatchParams::apply("e2e").force(),
        &Patch::Apply(object),
    )
    .await
    .map_err(Error::kube(format!("applying {kind} {name}")))
}

/// Polls `check` every `every` until it returns `Some`, or fails after `timeout`
/// ([`capmaas_testenv::poll_until`]; a timeout is [`Error::Timeout`]).
pub async fn wait_for<T, F, Fut>(
    what: &str,
    timeout: Duration,
    every: Duration,
    check: F,
) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>>>,
{
    poll_until(timeout, every, check)
        .await?
        .ok_or_else(|| Error::Timeout {
            what: what.into(),
            seconds: timeout.as_secs(),
        })
}
