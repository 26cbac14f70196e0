//! `MaasMachine` and `MaasMachineTemplate`: the InfraMachine of the CAPI contract.

// `KubeSchema` copies each struct, `pub` included, into a function body to build
// its schema; rustc then reports the copy as an unreachable `pub` item.
#![allow(unreachable_pub)]

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{
    HostReference, HostSelector, Initialization, LocalObjectReference, MachineAddress,
    ReleasePolicy, SecretKeyReference, TemplateMetadata,
};
use crate::kind::{provider_kind, provider_status};
use crate::lxd::MachineLxdConfig;

provider_kind! {
    /// Desired state of a MaasMachine (CAPMAAS-compatible fields keep their JSON names).
    #[derive(KubeSchema)]
    #[kube(
        kind = "MaasMachine",
        namespaced,
        status = "MaasMachineStatus",
        doc = "MaasMachine is one Cluster API machine backed by a MAAS server (a MaasHost) that is allocated, imaged with the bootstrap data and watched.",
        shortname = "maasm",
        printcolumn(
            name = "Cluster",
            type_ = "string",
            json_path = r".metadata.labels.cluster\.x-k8s\.io/cluster-name",
            description = "Cluster to which this MaasMachine belongs"
        ),
        printcolumn(
            name = "Host",
            type_ = "string",
            json_path = ".status.hostRef.name",
            description = "MaasHost backing this machine"
        ),
        printcolumn(
            name = "SystemID",
            type_ = "string",
            json_path = ".spec.systemID",
            description = "MAAS system id"
        ),
        printcolumn(
            name = "ProviderID",
            type_ = "string",
            json_path = ".spec.providerID",
            description = "Provider ID of the workload Node"
        ),
        printcolumn(
            name = "State",
            type_ = "string",
            json_path = ".status.machineState",
            description = "MAAS status name",
            priority = 1
        ),
        printcolumn(
            name = "Ready",
            type_ = "boolean",
            json_path = ".status.ready",
            description = "Machine is provisioned"
        )
    )]
    #[x_kube(validation = Rule::new("!has(oldSelf.providerID) || oldSelf.providerID == '' || (has(self.providerID) && self.providerID == oldSelf.providerID)")
        .message("spec.providerID is immutable once set")
        .field_path(".providerID")
        .reason(Reason::FieldValueForbidden))]
    #[x_kube(validation = Rule::new("!(has(self.lxd) && has(self.lxd.enabled) && self.lxd.enabled && has(self.deployInMemory) && self.deployInMemory)")
        .message("spec.lxd.enabled and spec.deployInMemory cannot both be true: MAAS composes and registers VMs only for a deployment to disk")
        .field_path(".lxd.enabled"))]
    pub struct MaasMachineSpec {
        /// MAAS zone to place the machine in; a hard constraint when set.
        /// CAPI's `Machine.spec.failureDomain` wins when both are set.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(length(max = 256))]
        pub failure_domain: Option<String>,
        /// MAAS system id of the allocated machine, written by the controller.
        #[serde(default, rename = "systemID", skip_serializing_if = "Option::is_none")]
        #[schemars(length(max = 64))]
        pub system_id: Option<String>,
        /// MAAS system id of the VM host an LXD machine (`lxd.enabled`) is composed on
        /// (CAPMAAS field).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(length(min = 1, max = 64))]
        pub parent: Option<String>,
        /// `maas:///<zone>/<system_id>`, written by the controller. Immutable once set.
        #[serde(
            default,
            rename = "providerID",
            skip_serializing_if = "Option::is_none"
        )]
        #[schemars(length(max = 512))]
        pub provider_id: Option<String>,
        /// MAAS resource pool the host must belong to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(length(max = 256))]
        pub resource_pool: Option<String>,
        /// Minimum number of CPU cores. Immutable.
        #[serde(rename = "minCPU")]
        #[schemars(range(min = 0))]
        #[x_kube(validation = Rule::new("self == oldSelf").message("spec.minCPU is immutable").reason(Reason::FieldValueForbidden))]
        pub min_cpu: i32,
        /// Minimum memory in MB. Immutable.
        #[schemars(range(min = 0))]
        #[x_kube(validation = Rule::new("self == oldSelf").message("spec.minMemory is immutable").reason(Reason::FieldValueForbidden))]
        pub min_memory: i32,
        /// Minimum total storage in GB (hosts with less are not chosen).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(range(min = 0))]
        pub min_disk_size: Option<i32>,
        /// MAAS tags the host must carry (all of them).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(length(max = 32), inner(length(min = 1, max = 256)))]
        pub tags: Option<Vec<String>>,
        /// Image to deploy: `osystem/series` (e.g. `ubuntu/jammy`) or a custom image name. Immutable.
        #[schemars(length(min = 1, max = 256))]
        #[x_kube(validation = Rule::new("self == oldSelf").message("spec.image is immutable").reason(Reason::FieldValueForbidden))]
        pub image: String,
        /// Deploy to memory instead of disk (MAAS `ephemeral_deploy`).
        #[serde(default)]
        pub deploy_in_memory: bool,
        /// A deployed server MAAS shows powered off is powered on again. Absent or `true`: the
        /// default, as CAPMAAS does. `false`: a server powered off (for maintenance, by MAAS
        /// or by hand) stays off. An edit applies to the claimed host at once.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub keep_powered_on: Option<bool>,
        /// Hardware-enablement kernel MAAS deploys with (MAAS `hwe_kernel`), e.g. `hwe-22.04`,
        /// `ga-22.04` or `hwe-22.04-lowlatency`. Absent: MAAS's default kernel for the image.
        /// Frozen once a host is claimed (read at the deployment).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(length(min = 1, max = 64))]
        pub hwe_kernel: Option<String>,
        /// Only hosts whose labels match are chosen.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub host_selector: Option<HostSelector>,
        /// MaasDataTemplate rendering per-machine metadata and network data.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub data_template: Option<LocalObjectReference>,
        /// Disk erasure and force flag used when the machine is released. Absent: no erase is asked
        /// for, and MAAS's own erase-on-release setting decides. An edit takes effect at the release
        /// (it is recorded on the MAAS machine while deployed).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub release_policy: Option<ReleasePolicy>,
        /// User data Secret to deploy instead of the Machine's bootstrap data.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub user_data: Option<SecretKeyReference>,
        /// Make the machine an LXD VM composed on a VM host instead of a bare-metal server
        /// (CAPMAAS field); not with `deployInMemory`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub lxd: Option<MachineLxdConfig>,
    }
}

provider_status! {
    /// Observed state of a MaasMachine.
    pub struct MaasMachineStatus {
        /// v1beta1 contract signal, set together with `initialization.provisioned`.
        pub ready: Option<bool>,
        /// v1beta2 contract provisioning signal.
        pub initialization: Option<Initialization>,
        /// The MaasHost claimed for this machine.
        pub host_ref: Option<HostReference>,
        /// MAAS system id of the claimed host.
        #[serde(rename = "systemID")]
        pub system_id: Option<String>,
        /// MAAS `status_name` of the machine (CAPMAAS field).
        pub machine_state: Option<String>,
        /// Whether MAAS reports the machine powered on (CAPMAAS field).
        pub machine_powered: Option<bool>,
        /// MAAS hostname of the machine.
        pub hostname: Option<String>,
        /// Control plane only: the machine's addresses are in the cluster DNS record (CAPMAAS field).
        pub dns_attached: Option<bool>,
        /// Addresses copied by CAPI to the Machine.
        #[schemars(length(max = 64))]
        pub addresses: Option<Vec<MachineAddress>>,
        /// MAAS zone the machine was deployed in.
        pub failure_domain: Option<String>,
    }
    /// `Ready`, `Paused`, `HostAssociated`, `DataReady`, `MachineDeployed`, `DNSAttached`.
    conditions
}

provider_kind! {
    /// Template for MaasMachines created by MachineDeployments and control planes.
    #[derive(KubeSchema)]
    #[kube(
        kind = "MaasMachineTemplate",
        namespaced,
        status = "MaasMachineTemplateStatus",
        doc = "MaasMachineTemplate holds a MaasMachine spec for MachineDeployments and control planes. spec.template is immutable: create a new template to change it.",
        shortname = "maasmt",
        printcolumn(
            name = "Image",
            type_ = "string",
            json_path = ".spec.template.spec.image",
            description = "Image to deploy"
        ),
        printcolumn(
            name = "MinCPU",
            type_ = "integer",
            json_path = ".spec.template.spec.minCPU",
            description = "Minimum CPU cores"
        ),
        printcolumn(
            name = "MinMemory",
            type_ = "integer",
            json_path = ".spec.template.spec.minMemory",
            description = "Minimum memory (MB)"
        ),
        printcolumn(
            name = "NodeReuse",
            type_ = "boolean",
            json_path = ".spec.nodeReuse",
            description = "Re-use hosts during rollouts"
        )
    )]
    pub struct MaasMachineTemplateSpec {
        /// The MaasMachine to create. Immutable: webhook-server refuses a change, except in the dry
        /// runs of ClusterClass's topology controller, which rotates to a new template instead
        /// (a CEL rule cannot tell those apart).
        pub template: MaasMachineTemplateResource,
        /// Keep the host of a deleted machine reserved for the next machine of
        /// the same owner (MachineDeployment or control plane), so a rollout
        /// re-images the same servers. Needs a scale-down-first rollout strategy.
        #[serde(default)]
        pub node_reuse: bool,
        /// How long a node-reuse reservation lasts before the host is free again.
        #[serde(
            default = "default_node_reuse_ttl_seconds",
            rename = "nodeReuseTTLSeconds"
        )]
        #[schemars(range(min = 60, max = 604_800))]
        pub node_reuse_ttl_seconds: i32,
    }
}

/// Default reservation lifetime: long enough for a slow re-image, short
/// enough that a cancelled rollout does not strand servers for a day.
fn default_node_reuse_ttl_seconds() -> i32 {
    3600
}

/// Metadata and spec of a templated MaasMachine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MaasMachineTemplateResource {
    /// Labels and annotations for the created MaasMachine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateMetadata>,
    /// Spec of the created MaasMachine.
    pub spec: MaasMachineSpec,
}

provider_status! {
    /// Observed state of a MaasMachineTemplate, written by machine-controller: the shape of a node
    /// made from it, which the cluster autoscaler reads to scale a MachineDeployment up from zero.
    pub struct MaasMachineTemplateStatus {
        /// Resources of a node made from this template, as a Node's `status.capacity`: `cpu`
        /// (cores), `memory` and, when MAAS reports storage, `ephemeral-storage`, as quantity
        /// strings ("8", "16Gi"). From the smallest MaasHost that fits the template among those its
        /// machines may claim, whether free or not; absent when none fits (condition
        /// `CapacityKnown` says why).
        #[schemars(schema_with = "capacity_schema")]
        pub capacity: Option<BTreeMap<String, Quantity>>,
        /// Architecture and operating system of that node (its `kubernetes.io/arch` and
        /// `kubernetes.io/os` labels); absent when no host fits.
        pub node_info: Option<TemplateNodeInfo>,
    }
    /// `CapacityKnown`: True (`SmallestFittingHost`, the message names the host) while
    /// `capacity` is set, False (`NoHostFits`, the message counts what kept hosts out) otherwise.
    conditions
}

/// The condition of a MaasMachineTemplate's status and its reasons.
pub mod template_conditions {
    /// `status.capacity` and `status.nodeInfo` describe a MaasHost that fits the template.
    pub const CAPACITY_KNOWN: &str = "CapacityKnown";
    /// True: the shape is the smallest MaasHost that fits (named in the message).
    pub const SMALLEST_FITTING_HOST: &str = "SmallestFittingHost";
    /// False: no MaasHost the template's machines may claim fits it; capacity is absent.
    pub const NO_HOST_FITS: &str = "NoHostFits";
}

/// `status.nodeInfo` of a MaasMachineTemplate: the fields of a Node's `status.nodeInfo` the
/// cluster autoscaler reads (as strings only) for the node it imagines.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateNodeInfo {
    /// Kubernetes (Go) architecture name: `amd64`, `arm64`, `ppc64le`, `s390x`, ... (MAAS's
    /// `amd64/generic` is `amd64`, its `ppc64el` is `ppc64le`). Absent when MAAS reports none the
    /// controller knows; the autoscaler then assumes its default (amd64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 32))]
    pub architecture: Option<String>,
    /// Operating system: `linux`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 32))]
    pub operating_system: Option<String>,
}

/// A Kubernetes quantity (`resource.Quantity`'s grammar).
pub const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// `status.capacity`: resource name → quantity, a string only (never the integer a ResourceList
/// schema also allows): the autoscaler reads the map as strings and ignores all of it otherwise.
fn capacity_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "nullable": true,
        "maxProperties": 16,
        "additionalProperties": {
            "type": "string",
            "maxLength": 64,
            "pattern": QUANTITY_PATTERN,
        },
    })
}

/// The providerID of a MaasMachine on the MAAS machine `system_id` in `zone`:
/// `maas:///<zone>/<system_id>`, CAPMAAS's format (an empty zone gives `maas:////<id>`, as
/// CAPMAAS writes it). The workload Node carries the same value, so it never changes once set.
pub fn provider_id(zone: Option<&str>, system_id: &str) -> String {
    format!("maas:///{}/{system_id}", zone.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::provider_id;

    #[test]
    fn template_status_accepts_null_and_writes_quantity_strings() {
        let manifest = serde_json::json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasMachineTemplate",
            "metadata": {"name": "t"},
            "spec": {"template": {"spec": {"minCPU": 2, "minMemory": 4096, "image": "ubuntu/jammy"}}},
            "status": null
        });
        let mut template: super::MaasMachineTemplate = serde_json::from_value(manifest).unwrap();
        assert_eq!(template.status, None);
        template.status = Some(super::MaasMachineTemplateStatus {
            capacity: Some(
                [("cpu", "8"), ("memory", "16Gi")]
                    .map(|(k, v)| (k.to_owned(), super::Quantity(v.to_owned())))
                    .into(),
            ),
            node_info: Some(super::TemplateNodeInfo {
                architecture: Some("amd64".into()),
                operating_system: Some("linux".into()),
            }),
            conditions: None,
        });
        assert_eq!(
            serde_json::to_value(&template).unwrap()["status"],
            serde_json::json!({
                "capacity": {"cpu": "8", "memory": "16Gi"},
                "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux"}
            })
        );
    }

    #[test]
    fn capacity_values_follow_the_quantity_grammar() {
        let quantity = regex::Regex::new(super::QUANTITY_PATTERN).unwrap();
        for good in ["8", "16Gi", "1536Mi", "500Gi", "1.5", "100m", "1e3", "+2Ki"] {
            assert!(quantity.is_match(good), "{good}");
        }
        for bad in ["", "8 cores", "16GB", "Gi", "-"] {
            assert!(!quantity.is_match(bad), "{bad}");
        }
    }

    #[test]
    fn provider_id_format_matches_capmaas() {
        assert_eq!(provider_id(Some("az1"), "4y3h7a"), "maas:///az1/4y3h7a");
        assert_eq!(provider_id(None, "4y3h7a"), "maas:////4y3h7a");
    }
}
