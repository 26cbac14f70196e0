//! Defaults the CRD schema cannot express, applied to the object as JSON.
//!
//! Only absent fields are filled, never a value someone wrote: a GitOps tool comparing the
//! stored object with the one in Git then sees only additions, which it ignores. Each default
//! is listed beside its field in `docs/crd-reference.md`.

use capmaas_api::keys::LABEL_CLUSTER_NAME;
use serde_json::{Map, Value};

use crate::kinds::Kind;

/// The port of a control-plane endpoint written without one (kubeadm's default).
pub const DEFAULT_API_SERVER_PORT: i64 = 6443;

/// Fills in `kind`'s defaults on `object` (the whole object: apiVersion, metadata, spec).
pub fn apply(kind: Kind, object: &mut Value) {
    match kind {
        Kind::MaasCluster => endpoint_port(object.get_mut("spec")),
        Kind::MaasClusterTemplate => endpoint_port(
            object
                .get_mut("spec")
                .and_then(|s| s.get_mut("template"))
                .and_then(|t| t.get_mut("spec")),
        ),
        Kind::MaasIPPool => {
            name_prefix(object);
            cluster_label(object);
        }
        Kind::MaasDataTemplate => cluster_label(object),
        _ => {}
    }
}

/// `controlPlaneEndpoint.port` is 6443 when a host is given without a port.
fn endpoint_port(spec: Option<&mut Value>) {
    let Some(endpoint) = spec
        .and_then(|s| s.get_mut("controlPlaneEndpoint"))
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    if !endpoint.contains_key("port") {
        endpoint.insert("port".into(), Value::from(DEFAULT_API_SERVER_PORT));
    }
}

/// A MaasIPPool's `spec.namePrefix` is its own name when not given.
fn name_prefix(object: &mut Value) {
    let Some(name) = non_empty(object, "/metadata/name") else {
        // `generateName` without a name yet: the schema then asks for namePrefix.
        return;
    };
    if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
        spec.entry("namePrefix").or_insert(Value::String(name));
    }
}

/// The `cluster.x-k8s.io/cluster-name` label follows `spec.clusterName`, so `clusterctl move`
/// and label selectors find the object with its cluster.
fn cluster_label(object: &mut Value) {
    let Some(cluster) = non_empty(object, "/spec/clusterName") else {
        return;
    };
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let labels = metadata
        .entry("labels")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(labels) = labels.as_object_mut() {
        labels
            .entry(LABEL_CLUSTER_NAME)
            .or_insert(Value::String(cluster));
    }
}

/// The string at `pointer`, unless absent or empty: an empty one is the same as none here.
fn non_empty(object: &Value, pointer: &str) -> Option<String> {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn endpoint_port_defaults_only_when_missing() {
        let mut c = json!({"metadata": {"name": "c"}, "spec": {"dnsDomain": "maas", "controlPlaneEndpoint": {"host": "api"}}});
        apply(Kind::MaasCluster, &mut c);
        assert_eq!(c["spec"]["controlPlaneEndpoint"]["port"], 6443);
        let mut c = json!({"spec": {"controlPlaneEndpoint": {"host": "api", "port": 443}}});
        apply(Kind::MaasCluster, &mut c);
        assert_eq!(c["spec"]["controlPlaneEndpoint"]["port"], 443);
        let mut t = json!({"spec": {"template": {"spec": {"controlPlaneEndpoint": {"host": ""}}}}});
        apply(Kind::MaasClusterTemplate, &mut t);
        assert_eq!(
            t["spec"]["template"]["spec"]["controlPlaneEndpoint"]["port"],
            6443
        );
        let mut no_endpoint = json!({"spec": {"dnsDomain": "maas"}});
        apply(Kind::MaasCluster, &mut no_endpoint);
        assert_eq!(no_endpoint, json!({"spec": {"dnsDomain": "maas"}}));
    }

    #[test]
    fn pools_get_a_name_prefix_and_a_cluster_label() {
        let mut p =
            json!({"metadata": {"name": "workers"}, "spec": {"clusterName": "c1", "pools": []}});
        apply(Kind::MaasIPPool, &mut p);
        assert_eq!(p["spec"]["namePrefix"], "workers");
        assert_eq!(p["metadata"]["labels"][LABEL_CLUSTER_NAME], "c1");

        let mut kept = json!({"metadata": {"name": "w", "labels": {LABEL_CLUSTER_NAME: "other"}}, "spec": {"namePrefix": "x", "clusterName": "c1"}});
        let before = kept.clone();
        apply(Kind::MaasIPPool, &mut kept);
        assert_eq!(kept, before, "values someone wrote are never changed");

        let mut generated = json!({"metadata": {"generateName": "w-"}, "spec": {}});
        apply(Kind::MaasIPPool, &mut generated);
        assert_eq!(generated["spec"].get("namePrefix"), None);
    }

    #[test]
    fn kinds_without_defaults_are_untouched() {
        let mut m = json!({"metadata": {"name": "m"}, "spec": {"clusterName": "c", "image": "x"}});
        let before = m.clone();
        apply(Kind::MaasMachine, &mut m);
        assert_eq!(m, before);
    }
}
