//! Every CustomResourceDefinition of the provider, with the labels CAPI and
//! clusterctl read.

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use kube::CustomResourceExt;

use crate::cluster::{MaasCluster, MaasClusterTemplate};
use crate::data::{MaasData, MaasDataClaim, MaasDataTemplate};
use crate::dns::MaasDNSRecord;
use crate::error::Error;
use crate::host::MaasHost;
use crate::inventory::MaasInventory;
use crate::ipam::MaasIPPool;
use crate::ipam_lock::MaasIPAddressLock;
use crate::machine::{MaasMachine, MaasMachineTemplate};
use crate::remediation::{MaasRemediation, MaasRemediationTemplate};

/// Contract label: this provider implements CAPI contract v1beta2 with API version v1beta1.
pub const CONTRACT_LABEL: &str = "cluster.x-k8s.io/v1beta2";
/// Value of [`CONTRACT_LABEL`]: the CRD versions implementing the contract.
pub const CONTRACT_LABEL_VALUE: &str = "v1beta1";
/// Label making `clusterctl move` discover the kind.
pub const CLUSTERCTL_LABEL: &str = "clusterctl.cluster.x-k8s.io";
/// Label making `clusterctl move` move every object of the kind, owned by a
/// Cluster or not.
pub const CLUSTERCTL_MOVE_LABEL: &str = "clusterctl.cluster.x-k8s.io/move";

/// Kinds that are not reachable through an owner chain from a Cluster but
/// belong to the cluster's configuration, so `clusterctl move` must carry
/// them explicitly. MaasHost is deliberately absent: hosts mirror MAAS and
/// are re-imported by the target's MaasInventory; moving them would copy
/// stale status and claims.
pub const MOVED_KINDS: [&str; 3] = ["MaasDataTemplate", "MaasIPPool", "MaasInventory"];

/// Every CRD of the provider with labels applied, in a stable order.
pub fn all_crds() -> Vec<CustomResourceDefinition> {
    let mut crds = vec![
        MaasCluster::crd(),
        MaasClusterTemplate::crd(),
        MaasMachine::crd(),
        MaasMachineTemplate::crd(),
        MaasInventory::crd(),
        MaasHost::crd(),
        MaasDNSRecord::crd(),
        MaasDataTemplate::crd(),
        MaasDataClaim::crd(),
        MaasData::crd(),
        MaasIPPool::crd(),
        MaasIPAddressLock::crd(),
        MaasRemediation::crd(),
        MaasRemediationTemplate::crd(),
    ];
    for crd in &mut crds {
        apply_labels(crd);
        if TEMPLATES_JUDGED_WHOLE.contains(&crd.spec.names.kind.as_str()) {
            drop_transition_rules_under_template(crd);
        }
    }
    crds
}

/// Templates a ClusterClass references. Their `spec.template` is immutable as a whole, judged by
/// webhook-server, which lets the topology controller's server-side-apply dry runs through (it
/// learns from them whether to rotate to a new template). The transition rules (`oldSelf`) of
/// the embedded MaasCluster/MaasMachine spec would refuse those dry runs, so the templates' copy
/// of that schema carries none; every other rule stays.
const TEMPLATES_JUDGED_WHOLE: [&str; 2] = ["MaasClusterTemplate", "MaasMachineTemplate"];

fn drop_transition_rules_under_template(crd: &mut CustomResourceDefinition) {
    for version in &mut crd.spec.versions {
        let Some(template) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
            .and_then(|s| s.properties.as_mut())
            .and_then(|p| p.get_mut("spec"))
            .and_then(|s| s.properties.as_mut())
            .and_then(|p| p.get_mut("template"))
        else {
            continue;
        };
        drop_transition_rules(template);
    }
}

fn drop_transition_rules(schema: &mut JSONSchemaProps) {
    if let Some(rules) = &mut schema.x_kubernetes_validations {
        rules.retain(|r| !r.rule.contains("oldSelf"));
        if rules.is_empty() {
            schema.x_kubernetes_validations = None;
        }
    }
    for child in schema.properties.iter_mut().flat_map(|p| p.values_mut()) {
        drop_transition_rules(child);
    }
    if let Some(JSONSchemaPropsOrArray::Schema(items)) = &mut schema.items {
        drop_transition_rules(items);
    }
    if let Some(JSONSchemaPropsOrBool::Schema(values)) = &mut schema.additional_properties {
        drop_transition_rules(values);
    }
}

/// Labels every CRD carries; `clusterctl.cluster.x-k8s.io/move` only on [`MOVED_KINDS`].
pub fn labels_for_kind(kind: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::from([
        (CONTRACT_LABEL.to_owned(), CONTRACT_LABEL_VALUE.to_owned()),
        (CLUSTERCTL_LABEL.to_owned(), String::new()),
        (
            crate::keys::LABEL_PROVIDER.to_owned(),
            crate::keys::PROVIDER_LABEL_VALUE.to_owned(),
        ),
    ]);
    if MOVED_KINDS.contains(&kind) {
        labels.insert(CLUSTERCTL_MOVE_LABEL.to_owned(), String::new());
    }
    labels
}

fn apply_labels(crd: &mut CustomResourceDefinition) {
    let labels = labels_for_kind(&crd.spec.names.kind);
    crd.metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .extend(labels);
}

/// File name controller-gen would use: `<group>_<plural>.yaml`.
pub fn crd_file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}_{}.yaml", crd.spec.group, crd.spec.names.plural)
}

/// The CRD as a YAML document, ready for `kubectl apply -f`.
pub fn render_yaml(crd: &CustomResourceDefinition) -> Result<String, Error> {
    let name = crd.metadata.name.clone().unwrap_or_default();
    let body = serde_saphyr::to_string(crd).map_err(|source| Error::Yaml { name, source })?;
    Ok(format!(
        "# Generated by `cargo run -p capmaas-api --bin crdgen` (just crds). Do not edit.\n---\n{body}"
    ))
}

/// The openAPIV3Schema of the first (only) version of a CRD, as JSON.
pub fn schema_json(crd: &CustomResourceDefinition) -> Result<serde_json::Value, Error> {
    let name = crd.metadata.name.clone().unwrap_or_default();
    let schema = crd
        .spec
        .versions
        .first()
        .and_then(|v| v.schema.as_ref())
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .ok_or_else(|| Error::MissingSchema { name: name.clone() })?;
    serde_json::to_value(schema).map_err(|source| Error::Json {
        what: format!("schema of {name}"),
        source,
    })
}
