//! `MaasCluster` and `MaasClusterTemplate`: the InfraCluster of the CAPI contract.

// `KubeSchema` copies each struct, `pub` included, into a function body to build
// its schema; rustc then reports the copy as an unreachable `pub` item.
#![allow(unreachable_pub)]

use std::collections::BTreeMap;

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{Initialization, TemplateMetadata};
use crate::kind::{provider_kind, provider_status};
use crate::lxd::LxdConfig;

/// Annotation on a MaasCluster saying whether its control plane is hosted (runs outside the
/// cluster's machines, e.g. Kamaji or k0smotron): `"true"` or `"false"`, overriding what
/// cluster-controller concludes from the Cluster's `controlPlaneRef` kind. Hosted: the
/// control-plane provider sets `spec.controlPlaneEndpoint`; cluster-controller never does.
pub const ANNOTATION_HOSTED_CONTROL_PLANE: &str = "maas.cluster.x-k8s.io/hosted-control-plane";

provider_kind! {
    /// Desired state of a MaasCluster (CAPMAAS-compatible fields keep their JSON names).
    #[derive(KubeSchema)]
    #[kube(
        kind = "MaasCluster",
        namespaced,
        status = "MaasClusterStatus",
        doc = "MaasCluster is the infrastructure of one Cluster API cluster on MAAS: control-plane endpoint, DNS record and failure domains (MAAS zones).",
        shortname = "maasc",
        printcolumn(
            name = "Cluster",
            type_ = "string",
            json_path = r".metadata.labels.cluster\.x-k8s\.io/cluster-name",
            description = "Cluster to which this MaasCluster belongs"
        ),
        printcolumn(
            name = "Endpoint",
            type_ = "string",
            json_path = ".spec.controlPlaneEndpoint.host",
            description = "Control-plane endpoint host"
        ),
        printcolumn(
            name = "Port",
            type_ = "integer",
            json_path = ".spec.controlPlaneEndpoint.port",
            description = "Control-plane endpoint port",
            priority = 1
        ),
        printcolumn(
            name = "DNSName",
            type_ = "string",
            json_path = ".status.network.dnsName",
            description = "DNS name of the API server record"
        ),
        printcolumn(
            name = "Provisioned",
            type_ = "boolean",
            json_path = ".status.initialization.provisioned",
            description = "Infrastructure provisioned"
        ),
        printcolumn(
            name = "Ready",
            type_ = "string",
            json_path = ".status.conditions[?(@.type==\"Ready\")].status",
            description = "Ready condition"
        )
    )]
    #[x_kube(validation = Rule::new("!has(oldSelf.controlPlaneEndpoint) || oldSelf.controlPlaneEndpoint.host == '' || (has(self.controlPlaneEndpoint) && self.controlPlaneEndpoint == oldSelf.controlPlaneEndpoint)")
        .message("spec.controlPlaneEndpoint is immutable once its host is set")
        .field_path(".controlPlaneEndpoint")
        .reason(Reason::FieldValueForbidden))]
    pub struct MaasClusterSpec {
        /// MAAS DNS domain of the API server record, e.g. `maas`. Immutable.
        #[schemars(length(min = 1, max = 253))]
        #[x_kube(validation = Rule::new("self == oldSelf").message("spec.dnsDomain is immutable").reason(Reason::FieldValueForbidden))]
        pub dns_domain: String,
        /// Control-plane endpoint. When unset, cluster-controller copies the Cluster's
        /// `spec.controlPlaneEndpoint`, or else publishes `<cluster>.<dnsDomain>` through a
        /// MaasDNSRecord and fills it in. With a hosted control plane (the Cluster's
        /// `controlPlaneRef` kind is KamajiControlPlane, K0smotronControlPlane,
        /// HostedControlPlane or one of `--hosted-control-plane-kinds`, or annotation
        /// `maas.cluster.x-k8s.io/hosted-control-plane: "true"`) it writes nothing: the
        /// control-plane provider sets it, here or on the Cluster, once after creation, and the
        /// cluster is provisioned when it is there. Immutable once its host is set.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub control_plane_endpoint: Option<ApiEndpoint>,
        /// MAAS zones published as failure domains (all eligible for control-plane machines).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(length(max = 64), inner(length(min = 1, max = 256)))]
        pub failure_domains: Option<Vec<String>>,
        /// How the control-plane DNS record is built.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub dns_record: Option<DnsRecordOptions>,
        /// LXD VM hosts made of the cluster's machines (CAPMAAS field): maas-client deploys
        /// them with MAAS's `register_vmhost=true`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub lxd_config: Option<LxdConfig>,
    }
}

/// Host and port of the API server.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ApiEndpoint {
    /// DNS name or IP address; empty until it is settled (by cluster-controller, or by the
    /// provider of a hosted control plane).
    #[schemars(length(max = 512))]
    pub host: String,
    /// TCP port. Default (webhook-server): 6443 when a host is given without a port.
    #[schemars(range(min = 1, max = 65535))]
    pub port: i32,
}

/// Options of the control-plane DNS record.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct DnsRecordOptions {
    /// Only addresses inside this CIDR go into the record (servers with
    /// several NICs would otherwise publish their PXE address too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    #[x_kube(validation = Rule::new("isCIDR(self)").message("spec.dnsRecord.publishedAddressSubnet must be a CIDR such as 10.0.0.0/24"))]
    pub published_address_subnet: Option<String>,
    /// Only addresses inside one of these CIDRs go into the record: at most one per family,
    /// so that a dual-stack cluster publishes an IPv4 and an IPv6 network (A and AAAA).
    /// When set (non-empty), it replaces `publishedAddressSubnet`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2), inner(length(max = 64)))]
    #[x_kube(validation = Rule::new("self.all(c, isCIDR(c))").message("spec.dnsRecord.publishedAddressSubnets must hold CIDRs such as 10.0.0.0/24 or fd00::/64"))]
    #[x_kube(validation = Rule::new("self.size() < 2 || self[0].contains(':') != self[1].contains(':')").message("spec.dnsRecord.publishedAddressSubnets holds at most one CIDR per family (one IPv4, one IPv6)"))]
    pub published_address_subnets: Option<Vec<String>>,
    /// TTL of the record in seconds; MAAS default when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 604_800))]
    pub ttl: Option<i32>,
}

provider_status! {
    /// Observed state of a MaasCluster.
    pub struct MaasClusterStatus {
        /// v1beta1 contract signal, set together with `initialization.provisioned`.
        pub ready: Option<bool>,
        /// v1beta2 contract provisioning signal.
        pub initialization: Option<Initialization>,
        /// Network facts of the cluster.
        pub network: Option<ClusterNetworkStatus>,
        /// Failure domains (v1beta2 list shape) copied by CAPI to the Cluster.
        #[schemars(length(max = 64), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
        pub failure_domains: Option<Vec<FailureDomain>>,
    }
    /// `Ready`, `Paused`, `LoadBalancerReady`, `APIServerAvailable`.
    conditions
}

/// Network facts of a MaasCluster.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterNetworkStatus {
    /// FQDN of the API server record: `<cluster>.<dnsDomain>`, or CAPMAAS's
    /// `<cluster>-<6 hex>.<dnsDomain>` on a cluster CAPMAAS provisioned (kept, and served).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns_name: Option<String>,
}

/// One failure domain (a MAAS zone).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailureDomain {
    /// Name of the MAAS zone this failure domain stands for, copied from `spec.failureDomains`.
    /// machine-controller puts a Machine of this failure domain on a MaasHost of this zone.
    #[schemars(length(min = 1, max = 256))]
    pub name: String,
    /// Whether control-plane machines may be placed here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<bool>,
    /// Free-form key/value attributes of the failure domain, copied by CAPI with it to the
    /// Cluster. cluster-controller sets none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attributes: Option<BTreeMap<String, String>>,
}

provider_kind! {
    /// Template for MaasClusters created by ClusterClass.
    #[derive(KubeSchema)]
    #[kube(
        kind = "MaasClusterTemplate",
        namespaced,
        doc = "MaasClusterTemplate holds a MaasCluster spec for ClusterClass. Immutable: create a new template to change it.",
        shortname = "maasct",
        printcolumn(
            name = "DNSDomain",
            type_ = "string",
            json_path = ".spec.template.spec.dnsDomain",
            description = "MAAS DNS domain"
        )
    )]
    pub struct MaasClusterTemplateSpec {
        /// The MaasCluster to create. Immutable: webhook-server refuses a change, except in the dry
        /// runs of ClusterClass's topology controller, which rotates to a new template instead
        /// (a CEL rule cannot tell those apart).
        pub template: MaasClusterTemplateResource,
    }
}

/// Metadata and spec of a templated MaasCluster.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MaasClusterTemplateResource {
    /// Labels and annotations for the created MaasCluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateMetadata>,
    /// Spec of the created MaasCluster.
    pub spec: MaasClusterSpec,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use kube::CustomResourceExt;
    use kube::core::cel::Validator;
    use serde_json::{Value, json};

    use super::MaasCluster;

    fn cluster(spec: &Value) -> Value {
        json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
            "kind": "MaasCluster",
            "metadata": {"name": "prod", "namespace": "ns"},
            "spec": spec
        })
    }

    /// A hosted control plane's provider sets the endpoint after creation, once: absent or empty
    /// → set is allowed; a second change or a removal is refused, naming the field.
    #[test]
    fn the_endpoint_is_settable_once_after_creation() {
        let schema = crate::crd::schema_json(&MaasCluster::crd()).unwrap();
        let validator = Validator::new();
        let absent = cluster(&json!({"dnsDomain": "maas"}));
        let empty = cluster(
            &json!({"dnsDomain": "maas", "controlPlaneEndpoint": {"host": "", "port": 6443}}),
        );
        let set = cluster(
            &json!({"dnsDomain": "maas", "controlPlaneEndpoint": {"host": "10.0.0.9", "port": 6443}}),
        );
        let other = cluster(
            &json!({"dnsDomain": "maas", "controlPlaneEndpoint": {"host": "10.0.0.10", "port": 6443}}),
        );
        let other_port = cluster(
            &json!({"dnsDomain": "maas", "controlPlaneEndpoint": {"host": "10.0.0.9", "port": 443}}),
        );
        assert!(validator.validate(&schema, &absent, None).is_ok());
        assert!(validator.validate(&schema, &set, Some(&absent)).is_ok());
        assert!(validator.validate(&schema, &set, Some(&empty)).is_ok());
        assert!(validator.validate(&schema, &set, Some(&set)).is_ok());
        for (changed, what) in [
            (&other, "host"),
            (&other_port, "port"),
            (&absent, "removal"),
        ] {
            let errors = validator
                .validate(&schema, changed, Some(&set))
                .expect_err(what);
            assert!(
                errors
                    .iter()
                    .any(|e| e.field_path == "spec.controlPlaneEndpoint"
                        && e.message
                            == "spec.controlPlaneEndpoint is immutable once its host is set"),
                "{what}: {errors}"
            );
        }
    }
}
