//! The few Cluster API core fields this controller reads (`cluster.x-k8s.io/v1beta2`).
//!
//! Small serde structs of our own instead of generated bindings for all of CAPI: unknown
//! fields are ignored on read, so these keep working as CAPI adds fields. Schemas are
//! disabled because we never install these CRDs; CAPI does.

// The derive generates the `Cluster`, `Machine` and `MachineSet` kinds with public fields.
#![allow(unreachable_pub)]

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::CustomResource;
use serde::{Deserialize, Serialize};

/// API group of the CAPI core kinds.
pub const CAPI_GROUP: &str = "cluster.x-k8s.io";
/// API version of the CAPI core kinds we read.
pub const CAPI_API_VERSION: &str = "cluster.x-k8s.io/v1beta2";

/// `Cluster.spec`, only what an infrastructure machine provider needs.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta2",
    kind = "Cluster",
    namespaced,
    status = "ClusterStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSpec {
    /// Pauses every controller acting on the cluster's objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    /// The cluster's InfraCluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_ref: Option<ContractReference>,
}

/// `Cluster.status`, only the provisioning signal.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatus {
    /// Initialization progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization: Option<ClusterInitialization>,
}

/// `Cluster.status.initialization`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterInitialization {
    /// The InfraCluster reported `provisioned`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_provisioned: Option<bool>,
}

/// `ContractVersionedObjectReference`: a provider object reference without version.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContractReference {
    /// API group of the referenced kind.
    #[serde(default)]
    pub api_group: String,
    /// Kind.
    #[serde(default)]
    pub kind: String,
    /// Name in the same namespace.
    #[serde(default)]
    pub name: String,
}

/// `Machine.spec`, only what an infrastructure machine provider needs.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta2",
    kind = "Machine",
    namespaced,
    status = "MachineStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct MachineSpec {
    /// Name of the owning Cluster.
    #[serde(default)]
    pub cluster_name: String,
    /// Bootstrap configuration.
    #[serde(default)]
    pub bootstrap: MachineBootstrap,
    /// The Machine's InfraMachine (our MaasMachine).
    #[serde(default)]
    pub infrastructure_ref: ContractReference,
    /// Failure domain (MAAS zone) CAPI chose for the Machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_domain: Option<String>,
}

/// `Machine.spec.bootstrap`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineBootstrap {
    /// Secret whose key `value` holds the bootstrap data, once the bootstrap provider wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_secret_name: Option<String>,
}

/// `Machine.status`, only the Node link.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineStatus {
    /// Set by CAPI once a Node with the Machine's providerID exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_ref: Option<NodeReference>,
}

/// `Machine.status.nodeRef`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeReference {
    /// Node name.
    #[serde(default)]
    pub name: String,
}

/// `MachineSet.spec`, only the machine template's infrastructure reference.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta2",
    kind = "MachineSet",
    namespaced,
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct MachineSetSpec {
    /// Name of the owning Cluster.
    #[serde(default)]
    pub cluster_name: String,
    /// Template of the Machines.
    #[serde(default)]
    pub template: MachineTemplate,
}

/// `MachineDeployment.spec`, only the machine template's infrastructure reference.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta2",
    kind = "MachineDeployment",
    namespaced,
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct MachineDeploymentSpec {
    /// Name of the owning Cluster.
    #[serde(default)]
    pub cluster_name: String,
    /// Template of the Machines.
    #[serde(default)]
    pub template: MachineTemplate,
}

/// `MachineSet.spec.template`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MachineTemplate {
    /// Machine spec of the template.
    #[serde(default)]
    pub spec: MachineSpec,
}

impl Cluster {
    /// `spec.paused` (v1beta2 `*bool`).
    pub fn is_paused(&self) -> bool {
        self.spec.paused.unwrap_or(false)
    }

    /// `status.initialization.infrastructureProvisioned`.
    pub fn infrastructure_provisioned(&self) -> bool {
        self.status
            .as_ref()
            .and_then(|s| s.initialization.as_ref())
            .and_then(|i| i.infrastructure_provisioned)
            .unwrap_or(false)
    }
}

/// Whether an owner reference points at a CAPI core kind (any version of the group).
pub fn is_capi_owner(owner: &OwnerReference, kind: &str) -> bool {
    owner.kind == kind && api_group(&owner.api_version) == CAPI_GROUP
}

/// The group part of an `apiVersion` (`""` for the core group).
pub fn api_group(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(group, _)| group)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_the_fields_we_need_and_ignores_the_rest() {
        let machine: Machine = serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": {"name": "m", "namespace": "ns"},
            "spec": {
                "clusterName": "c",
                "bootstrap": {"dataSecretName": "m-bootstrap", "configRef": {"kind": "X"}},
                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "MaasMachine", "name": "mm"},
                "failureDomain": "az1",
                "version": "v1.33.0"
            },
            "status": {"nodeRef": {"name": "node-1"}, "phase": "Running"}
        }))
        .unwrap();
        assert_eq!(
            machine.spec.bootstrap.data_secret_name.as_deref(),
            Some("m-bootstrap")
        );
        assert_eq!(machine.spec.infrastructure_ref.name, "mm");
        assert_eq!(machine.spec.failure_domain.as_deref(), Some("az1"));
        assert_eq!(machine.status.unwrap().node_ref.unwrap().name, "node-1");

        let cluster: Cluster = serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "metadata": {"name": "c"},
            "spec": {"paused": true},
            "status": {"initialization": {"infrastructureProvisioned": true}}
        }))
        .unwrap();
        assert!(cluster.is_paused());
        assert!(cluster.infrastructure_provisioned());
        let bare: Cluster = serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "metadata": {"name": "c"}, "spec": {}
        }))
        .unwrap();
        assert!(!bare.is_paused());
        assert!(!bare.infrastructure_provisioned());
    }

    #[test]
    fn owner_group_ignores_version() {
        let owner = OwnerReference {
            api_version: "cluster.x-k8s.io/v1beta1".into(),
            kind: "Machine".into(),
            ..OwnerReference::default()
        };
        assert!(is_capi_owner(&owner, "Machine"));
        assert!(!is_capi_owner(&owner, "MachineSet"));
        assert_eq!(api_group("v1"), "");
        assert_eq!(api_group("apps/v1"), "apps");
    }
}
