//! Read-only mirrors of the Cluster API core kinds the controllers read (`cluster.x-k8s.io/v1beta2`).
//!
//! Small serde structs of our own instead of generated bindings for all of CAPI: only the fields
//! some controller needs are modelled, every one optional or defaulted, and unknown fields are
//! ignored on read, so decoding keeps working as CAPI adds fields. CAPI core owns and installs
//! these kinds; we never write them, so their schemas are disabled and [`crate::crd::all_crds`]
//! does not include them.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde::{Deserialize, Serialize};

use crate::kind::mirror_kind;

/// A mirror of a CAPI core kind, in the version the controllers read.
macro_rules! capi_kind {
    ($($item:tt)*) => {
        mirror_kind! {
            #[kube(group = "cluster.x-k8s.io", version = "v1beta2")]
            $($item)*
        }
    };
}

/// API group of the CAPI core kinds.
pub const CAPI_GROUP: &str = "cluster.x-k8s.io";
/// API version of the CAPI core kinds we read.
pub const CAPI_API_VERSION: &str = "cluster.x-k8s.io/v1beta2";
/// Kind of the CAPI Cluster.
pub const CLUSTER_KIND: &str = "Cluster";

capi_kind! {
    /// `Cluster.spec`: what the infrastructure controllers read.
    #[kube(kind = "Cluster", status = "ClusterStatus")]
    pub struct ClusterSpec {
        /// Pauses reconciliation of the Cluster and everything belonging to it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub paused: Option<bool>,
        /// The cluster's InfraCluster (our MaasCluster).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub infrastructure_ref: Option<ContractObjectReference>,
        /// An endpoint the user set on the Cluster itself; respected when present.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub control_plane_endpoint: Option<ClusterEndpoint>,
        /// The control-plane provider's object; its kind tells a hosted control plane (which
        /// serves the endpoint itself) from control-plane machines.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub control_plane_ref: Option<ContractObjectReference>,
        /// Cluster network settings (only the API server port is read).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub cluster_network: Option<ClusterNetwork>,
    }
}

/// `Cluster.status`, only the provisioning signal.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatus {
    /// Initialization progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization: Option<ClusterInitialization>,
}

/// `Cluster.status.initialization`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterInitialization {
    /// The InfraCluster reported `provisioned`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_provisioned: Option<bool>,
}

/// v1beta2 `ContractVersionedObjectReference`: a provider object reference without version.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContractObjectReference {
    /// API group, e.g. `infrastructure.cluster.x-k8s.io`.
    #[serde(default)]
    pub api_group: String,
    /// Kind, e.g. `MaasCluster`.
    #[serde(default)]
    pub kind: String,
    /// Name, in the referrer's namespace.
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

capi_kind! {
    /// `Machine.spec`: what an infrastructure machine provider needs.
    #[kube(kind = "Machine", status = "MachineStatus")]
    pub struct MachineSpec {
        /// Name of the owning Cluster.
        #[serde(default)]
        pub cluster_name: String,
        /// Bootstrap configuration.
        #[serde(default)]
        pub bootstrap: MachineBootstrap,
        /// The Machine's InfraMachine (our MaasMachine).
        #[serde(default)]
        pub infrastructure_ref: ContractObjectReference,
        /// Failure domain (MAAS zone) CAPI chose for the Machine.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub failure_domain: Option<String>,
    }
}

/// `Machine.spec.bootstrap`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineBootstrap {
    /// Secret whose key `value` holds the bootstrap data, once the bootstrap provider wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_secret_name: Option<String>,
}

/// `Machine.status`, only the Node link.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineStatus {
    /// Set by CAPI once a Node with the Machine's providerID exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_ref: Option<NodeReference>,
}

/// `Machine.status.nodeRef`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeReference {
    /// Node name.
    #[serde(default)]
    pub name: String,
}

capi_kind! {
    /// `MachineSet.spec`, only the machine template's infrastructure reference.
    #[kube(kind = "MachineSet")]
    pub struct MachineSetSpec {
        /// Name of the owning Cluster.
        #[serde(default)]
        pub cluster_name: String,
        /// Template of the Machines.
        #[serde(default)]
        pub template: MachineTemplate,
    }
}

capi_kind! {
    /// `MachineDeployment.spec`, only the machine template's infrastructure reference.
    #[kube(kind = "MachineDeployment")]
    pub struct MachineDeploymentSpec {
        /// Name of the owning Cluster.
        #[serde(default)]
        pub cluster_name: String,
        /// Template of the Machines.
        #[serde(default)]
        pub template: MachineTemplate,
    }
}

/// `MachineSet.spec.template` and `MachineDeployment.spec.template`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MachineTemplate {
    /// Machine spec of the template.
    #[serde(default)]
    pub spec: MachineSpec,
}

impl Cluster {
    /// `spec.paused` (v1beta2 `*bool`, unset means not paused).
    pub fn is_paused(&self) -> bool {
        self.spec.paused.unwrap_or(false)
    }

    /// `status.initialization.infrastructureProvisioned` (unset means not yet).
    pub fn infrastructure_provisioned(&self) -> bool {
        self.status
            .as_ref()
            .and_then(|s| s.initialization.as_ref())
            .and_then(|i| i.infrastructure_provisioned)
            .unwrap_or(false)
    }

    /// Name of the MaasCluster this Cluster references, if its infrastructure is a MaasCluster.
    pub fn maas_cluster_name(&self) -> Option<&str> {
        self.spec
            .infrastructure_ref
            .as_ref()
            .filter(|r| r.kind == "MaasCluster" && r.api_group == crate::common::GROUP)
            .map(|r| r.name.as_str())
            .filter(|n| !n.is_empty())
    }
}

/// Whether an owner reference points at the CAPI core kind `kind` (any version of the group).
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
    fn decodes_a_real_cluster_and_ignores_the_rest() {
        let cluster: Cluster = serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2",
            "kind": "Cluster",
            "metadata": {"name": "prod", "namespace": "team", "uid": "1b4e", "generation": 3},
            "spec": {
                "paused": true,
                "clusterNetwork": {
                    "apiServerPort": 7443,
                    "pods": {"cidrBlocks": ["192.168.0.0/16"]},
                    "services": {"cidrBlocks": ["10.128.0.0/12"]}
                },
                "controlPlaneEndpoint": {"host": "prod.maas", "port": 6443},
                "controlPlaneRef": {
                    "apiGroup": "controlplane.cluster.x-k8s.io",
                    "kind": "KubeadmControlPlane",
                    "name": "prod-cp"
                },
                "infrastructureRef": {
                    "apiGroup": "infrastructure.cluster.x-k8s.io",
                    "kind": "MaasCluster",
                    "name": "prod-maas"
                },
                "topology": {"classRef": {"name": "maas"}, "version": "v1.33.0"}
            },
            "status": {
                "phase": "Provisioned",
                "initialization": {"infrastructureProvisioned": true, "controlPlaneInitialized": true},
                "conditions": [{"type": "Available", "status": "True"}]
            }
        }))
        .unwrap();
        assert!(cluster.is_paused());
        assert!(cluster.infrastructure_provisioned());
        assert_eq!(cluster.maas_cluster_name(), Some("prod-maas"));
        assert_eq!(
            cluster.spec.control_plane_endpoint,
            Some(ClusterEndpoint {
                host: Some("prod.maas".into()),
                port: Some(6443)
            })
        );
        assert_eq!(
            cluster.spec.cluster_network.unwrap().api_server_port,
            Some(7443)
        );
    }

    #[test]
    fn a_bare_cluster_is_running_and_not_provisioned() {
        let bare: Cluster = serde_json::from_value(json!({
            "apiVersion": CAPI_API_VERSION, "kind": CLUSTER_KIND,
            "metadata": {"name": "c"}, "spec": {}
        }))
        .unwrap();
        assert!(!bare.is_paused());
        assert!(!bare.infrastructure_provisioned());
        assert_eq!(bare.maas_cluster_name(), None);

        let mut cluster = Cluster::new("c", ClusterSpec::default());
        cluster.spec.paused = Some(false);
        cluster.status = Some(ClusterStatus {
            initialization: Some(ClusterInitialization::default()),
        });
        assert!(!cluster.is_paused());
        assert!(!cluster.infrastructure_provisioned());
        // Written objects carry no status and no unset fields.
        assert_eq!(
            serde_json::to_value(Cluster::new("c", ClusterSpec::default())).unwrap()["spec"],
            json!({})
        );
        assert!(
            serde_json::to_value(Cluster::new("c", ClusterSpec::default()))
                .unwrap()
                .get("status")
                .is_none()
        );
    }

    #[test]
    fn only_a_named_maas_cluster_is_ours() {
        let with_ref = |api_group: &str, kind: &str, name: &str| {
            Cluster::new(
                "c",
                ClusterSpec {
                    infrastructure_ref: Some(ContractObjectReference {
                        api_group: api_group.into(),
                        kind: kind.into(),
                        name: name.into(),
                    }),
                    ..ClusterSpec::default()
                },
            )
        };
        let ours = with_ref(crate::common::GROUP, "MaasCluster", "c-maas");
        assert_eq!(ours.maas_cluster_name(), Some("c-maas"));
        let metal3 = with_ref(crate::common::GROUP, "Metal3Cluster", "c");
        assert_eq!(metal3.maas_cluster_name(), None);
        let other_group = with_ref("example.com", "MaasCluster", "c");
        assert_eq!(other_group.maas_cluster_name(), None);
        assert_eq!(
            with_ref(crate::common::GROUP, "MaasCluster", "").maas_cluster_name(),
            None
        );
    }

    #[test]
    fn decodes_a_real_machine_and_ignores_the_rest() {
        let machine: Machine = serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2",
            "kind": "Machine",
            "metadata": {
                "name": "prod-md-0-x7k2p",
                "namespace": "team",
                "labels": {"cluster.x-k8s.io/cluster-name": "prod"},
                "ownerReferences": [{
                    "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineSet",
                    "name": "prod-md-0-abc", "uid": "9f1c", "controller": true
                }]
            },
            "spec": {
                "clusterName": "prod",
                "bootstrap": {
                    "configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": "k"},
                    "dataSecretName": "prod-md-0-x7k2p-bootstrap"
                },
                "infrastructureRef": {
                    "apiGroup": "infrastructure.cluster.x-k8s.io",
                    "kind": "MaasMachine",
                    "name": "prod-md-0-x7k2p"
                },
                "failureDomain": "az1",
                "version": "v1.33.0",
                "providerID": "maas:///az1/abc123"
            },
            "status": {
                "phase": "Running",
                "nodeRef": {"name": "node-1"},
                "addresses": [{"type": "InternalIP", "address": "10.0.0.5"}]
            }
        }))
        .unwrap();
        assert_eq!(machine.spec.cluster_name, "prod");
        assert_eq!(
            machine.spec.bootstrap.data_secret_name.as_deref(),
            Some("prod-md-0-x7k2p-bootstrap")
        );
        assert_eq!(machine.spec.infrastructure_ref.kind, "MaasMachine");
        assert_eq!(machine.spec.infrastructure_ref.name, "prod-md-0-x7k2p");
        assert_eq!(machine.spec.failure_domain.as_deref(), Some("az1"));
        assert_eq!(machine.status.unwrap().node_ref.unwrap().name, "node-1");

        let pending: Machine = serde_json::from_value(json!({
            "apiVersion": CAPI_API_VERSION, "kind": "Machine",
            "metadata": {"name": "m"}, "spec": {"clusterName": "prod"}
        }))
        .unwrap();
        assert_eq!(pending.spec.bootstrap, MachineBootstrap::default());
        assert_eq!(pending.spec.infrastructure_ref.name, "");
        assert!(pending.status.is_none());
    }

    #[test]
    fn decodes_machine_set_and_deployment_templates() {
        let template = json!({"spec": {
            "clusterName": "prod",
            "infrastructureRef": {"apiGroup": crate::common::GROUP, "kind": "MaasMachineTemplate", "name": "workers"}
        }});
        let set: MachineSet = serde_json::from_value(json!({
            "apiVersion": CAPI_API_VERSION, "kind": "MachineSet",
            "metadata": {"name": "s"},
            "spec": {"clusterName": "prod", "replicas": 3, "template": template}
        }))
        .unwrap();
        let deployment: MachineDeployment = serde_json::from_value(json!({
            "apiVersion": CAPI_API_VERSION, "kind": "MachineDeployment",
            "metadata": {"name": "d"},
            "spec": {"clusterName": "prod", "template": template}
        }))
        .unwrap();
        assert_eq!(set.spec.template.spec.infrastructure_ref.name, "workers");
        assert_eq!(set.spec.template, deployment.spec.template);
    }

    #[test]
    fn capi_owners_match_any_version_of_the_group() {
        let owner = |api_version: &str, kind: &str| OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            ..OwnerReference::default()
        };
        assert!(is_capi_owner(
            &owner("cluster.x-k8s.io/v1beta1", "Machine"),
            "Machine"
        ));
        assert!(is_capi_owner(
            &owner(CAPI_API_VERSION, "MachineSet"),
            "MachineSet"
        ));
        assert!(!is_capi_owner(
            &owner(CAPI_API_VERSION, "Machine"),
            "MachineSet"
        ));
        assert!(!is_capi_owner(
            &owner("apps/v1", "MachineSet"),
            "MachineSet"
        ));
        assert!(!is_capi_owner(&owner("v1", "Machine"), "Machine"));
        assert_eq!(api_group("v1"), "");
        assert_eq!(api_group("apps/v1"), "apps");
        assert_eq!(api_group(CAPI_API_VERSION), CAPI_GROUP);
    }
}
