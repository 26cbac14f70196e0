//! The few Cluster API core fields this controller reads, as small serde types.
//!
//! Only what the cluster-controller needs is modelled; every other field of the CAPI objects is
//! ignored on read and never written (CAPI core owns those objects).

use kube::CustomResource;
use serde::{Deserialize, Serialize};

/// API group of Cluster API core.
pub const CAPI_GROUP: &str = "cluster.x-k8s.io";
/// Kind of the CAPI Cluster.
pub const CLUSTER_KIND: &str = "Cluster";

/// The fields of `cluster.x-k8s.io/v1beta2` `Cluster.spec` read here.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta2",
    kind = "Cluster",
    namespaced,
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSpec {
    /// Pauses reconciliation of the Cluster and everything belonging to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    /// The InfraCluster of this Cluster (our MaasCluster).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_ref: Option<ContractObjectReference>,
    /// An endpoint the user set on the Cluster itself; respected when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_endpoint: Option<ClusterEndpoint>,
    /// Cluster network settings (only the API server port is read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_network: Option<ClusterNetwork>,
}

/// v1beta2 `ContractVersionedObjectReference`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContractObjectReference {
    /// API group, e.g. `infrastructure.cluster.x-k8s.io`.
    #[serde(default)]
    pub api_group: String,
    /// Kind, e.g. `MaasCluster`.
    #[serde(default)]
    pub kind: String,
    /// Name, in the Cluster's namespace.
    #[serde(default)]
    pub name: String,
}

/// `Cluster.spec.controlPlaneEndpoint`; both fields are optional in v1beta2.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterEndpoint {
    /// Host name or address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
}

/// `Cluster.spec.clusterNetwork`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterNetwork {
    /// Port the API server listens on (default 6443).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_server_port: Option<i32>,
}

impl Cluster {
    /// Whether `spec.paused` is set.
    pub fn is_paused(&self) -> bool {
        self.spec.paused == Some(true)
    }

    /// Name of the MaasCluster this Cluster references, if its infrastructure is a MaasCluster.
    pub fn maas_cluster_name(&self) -> Option<&str> {
        self.spec
            .infrastructure_ref
            .as_ref()
            .filter(|r| r.kind == "MaasCluster" && r.api_group == capmaas_api::GROUP)
            .map(|r| r.name.as_str())
            .filter(|n| !n.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_v1beta2_cluster_and_ignores_the_rest() {
        let cluster: Cluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2",
            "kind": "Cluster",
            "metadata": {"name": "prod", "namespace": "team"},
            "spec": {
                "paused": true,
                "infrastructureRef": {
                    "apiGroup": "infrastructure.cluster.x-k8s.io",
                    "kind": "MaasCluster",
                    "name": "prod-maas"
                },
                "clusterNetwork": {"apiServerPort": 7443, "pods": {"cidrBlocks": ["10.0.0.0/8"]}},
                "topology": {"classRef": {"name": "x"}}
            },
            "status": {"phase": "Provisioned"}
        }))
        .unwrap();
        assert!(cluster.is_paused());
        assert_eq!(cluster.maas_cluster_name(), Some("prod-maas"));
        assert_eq!(
            cluster.spec.cluster_network.unwrap().api_server_port,
            Some(7443)
        );
    }

    #[test]
    fn other_infrastructure_is_not_ours() {
        let mut cluster = Cluster::new("c", ClusterSpec::default());
        assert_eq!(cluster.maas_cluster_name(), None);
        cluster.spec.infrastructure_ref = Some(ContractObjectReference {
            api_group: "infrastructure.cluster.x-k8s.io".into(),
            kind: "Metal3Cluster".into(),
            name: "c".into(),
        });
        assert_eq!(cluster.maas_cluster_name(), None);
        assert!(!cluster.is_paused());
    }
}
