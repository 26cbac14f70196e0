//! Objects of any kind as JSON, for tests that walk example lists through the API server.

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::core::{DynamicObject, GroupVersionKind, Status};
use kube::discovery::{ApiResource, pinned_kind};
use serde_json::Value;

use crate::error::{Error, Result};

/// The API of `apiVersion`/`kind` (discovered, so any served CRD works): in `namespace`, or
/// cluster-wide for a cluster-scoped kind.
pub async fn kind_api(
    client: &kube::Client,
    namespace: &str,
    api_version: &str,
    kind: &str,
) -> Result<Api<DynamicObject>> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let (resource, capabilities) =
        pinned_kind(client, &GroupVersionKind::gvk(group, version, kind))
            .await
            .map_err(Error::kube(format!("discovering {api_version} {kind}")))?;
    Ok(match capabilities.scope {
        kube::discovery::Scope::Cluster => Api::all_with(client.clone(), &resource),
        kube::discovery::Scope::Namespaced => {
            Api::namespaced_with(client.clone(), namespace, &resource)
        }
    })
}

/// The API of the namespaced `kind` (resource `plural`) of `api_version` in `namespace`, named
/// rather than discovered: for kinds whose CRDs a test installs itself.
pub fn namespaced_api(
    client: &kube::Client,
    namespace: &str,
    api_version: &str,
    kind: &str,
    plural: &str,
) -> Api<DynamicObject> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let resource = ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: api_version.into(),
        kind: kind.into(),
        plural: plural.into(),
    };
    Api::namespaced_with(client.clone(), namespace, &resource)
}

/// The Secret `<cluster>-kubeconfig` CAPI writes for a workload cluster, holding `value` (a
/// kubeconfig) under key `value`.
pub fn kubeconfig_secret(cluster: &str, value: &[u8]) -> Secret {
    Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(format!("{cluster}-kubeconfig")),
            ..Default::default()
        },
        data: Some([("value".to_owned(), ByteString(value.to_vec()))].into()),
        ..Default::default()
    }
}

/// The Events of `namespace` with `reason` that pass `wanted`.
pub async fn events(
    client: &kube::Client,
    namespace: &str,
    reason: &str,
    wanted: impl Fn(&Event) -> bool,
) -> Result<Vec<Event>> {
    let listed = Api::<Event>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await
        .map_err(Error::kube(format!("listing events in {namespace}")))?;
    Ok(listed
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason) && wanted(e))
        .collect())
}

/// The name of the object Event `event` is about.
pub fn regarding_name(event: &Event) -> Option<&str> {
    event.regarding.as_ref()?.name.as_deref()
}

/// Server-side applies `object` (namespaced when its metadata names a namespace, else
/// cluster-scoped) with field manager `field_manager`, forcing conflicts: the test's word wins.
pub async fn apply(
    client: &kube::Client,
    object: &Value,
    field_manager: &str,
) -> Result<DynamicObject> {
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
        &PatchParams::apply(field_manager).force(),
        &Patch::Apply(object),
    )
    .await
    .map_err(Error::kube(format!("applying {kind} {name}")))
}

/// What the API server answered to a create or update.
#[derive(Debug)]
pub enum Answer {
    /// Stored, as returned.
    Accepted(Box<DynamicObject>),
    /// Refused with this status.
    Rejected(Box<Status>),
}

/// Creates `object` in `namespace`; with `update_from`, creates that first and then replaces it
/// with `object` (carrying the resourceVersion over). A refusal is an [`Answer`]; only other
/// failures (a refused `update_from`, transport errors) are errors.
pub async fn create_or_update(
    client: &kube::Client,
    namespace: &str,
    object: &Value,
    update_from: Option<&Value>,
) -> Result<Answer> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default();
    let api = kind_api(client, namespace, api_version, kind).await?;
    let decode = |v: &Value| -> Result<DynamicObject> {
        serde_json::from_value(v.clone()).map_err(|e| Error::Manifest {
            path: format!("<{kind}>").into(),
            message: e.to_string(),
        })
    };
    let pp = PostParams::default();
    let result = match update_from {
        Some(original) => {
            let created = api
                .create(&pp, &decode(original)?)
                .await
                .map_err(Error::kube(format!("creating the original {kind}")))?;
            let mut updated = decode(object)?;
            updated.metadata.resource_version = created.metadata.resource_version;
            let name = updated.metadata.name.clone().unwrap_or_default();
            api.replace(&name, &pp, &updated).await
        }
        None => api.create(&pp, &decode(object)?).await,
    };
    match result {
        Ok(stored) => Ok(Answer::Accepted(Box::new(stored))),
        Err(kube::Error::Api(status)) => Ok(Answer::Rejected(status)),
        Err(e) => Err(Error::kube(format!("writing {kind}"))(e)),
    }
}

/// `expected` is contained in `actual`: every field of `expected` has the same value.
pub fn json_contains(actual: &Value, expected: &Value) -> bool {
    match (actual, expected) {
        (Value::Object(a), Value::Object(e)) => e
            .iter()
            .all(|(k, v)| a.get(k).is_some_and(|av| json_contains(av, v))),
        (Value::Array(a), Value::Array(e)) => {
            a.len() == e.len() && a.iter().zip(e).all(|(av, ev)| json_contains(av, ev))
        }
        (a, e) => a == e,
    }
}

/// What `deploy/base` gives each of `components`: the provider's namespace, then each
/// component's ServiceAccount and RBAC, as documents to apply (the tests that run a binary
/// with exactly its Deployment's permissions).
pub fn deploy_base_rbac(components: &[&str]) -> Result<Vec<Value>> {
    let base = crate::paths::repo_root().join("deploy/base");
    let mut documents = load_yaml_documents(&base.join("namespace.yaml"))?;
    for component in components {
        for file in ["serviceaccount.yaml", "rbac.yaml"] {
            documents.extend(load_yaml_documents(&base.join(component).join(file))?);
        }
    }
    Ok(documents)
}

/// Every document of a YAML stream (e.g. manifests in `deploy/`), skipping empty ones.
pub fn load_yaml_documents(path: &std::path::Path) -> Result<Vec<Value>> {
    let text =
        std::fs::read_to_string(path).map_err(Error::io(format!("reading {}", path.display())))?;
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).map_err(|e| Error::Manifest {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}
