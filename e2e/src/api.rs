//! Small helpers over the Kubernetes API that the harness, the scenarios and the benchmarks
//! share: a dynamic API found by discovery, server-side apply of any object, and polling.

use std::time::Duration;

use capmaas_testenv::poll_until;
use kube::api::{Api, DynamicObject};
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
    Ok(capmaas_testenv::objects::apply(client, object, "e2e").await?)
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
