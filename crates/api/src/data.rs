//! `MaasDataTemplate`, `MaasDataClaim` and `MaasData`: per-machine metadata
//! and network data, rendered by data-controller (Metal3 data-template model).

// `KubeSchema` copies each struct, `pub` included, into a function body to build
// its schema; rustc then reports the copy as an unreachable `pub` item.
#![allow(unreachable_pub)]

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{HostReference, LocalObjectReference};
use crate::data_meta::MetaData;
use crate::data_network::NetworkData;
use crate::kind::{provider_kind, provider_status};

provider_kind! {
    /// What to render for each machine using this template.
    #[derive(KubeSchema)]
    #[kube(
        kind = "MaasDataTemplate",
        namespaced,
        status = "MaasDataTemplateStatus",
        doc = "MaasDataTemplate describes the metadata and network data rendered for each machine (indexes, static addresses from pools, links by MAC). metaData and networkData are immutable: create a new template to change them.",
        shortname = "maasdt",
        printcolumn(
            name = "Cluster",
            type_ = "string",
            json_path = ".spec.clusterName",
            description = "Cluster using the template"
        ),
        printcolumn(
            name = "Indexes",
            type_ = "integer",
            json_path = ".status.allocatedIndexes",
            description = "Allocated indexes"
        ),
        printcolumn(
            name = "LastUpdated",
            type_ = "date",
            json_path = ".status.lastUpdated",
            description = "Last status update"
        )
    )]
    #[x_kube(validation = Rule::new("has(self.metaData) == has(oldSelf.metaData) && (!has(self.metaData) || self.metaData == oldSelf.metaData)")
        .message("spec.metaData is immutable")
        .field_path(".metaData")
        .reason(Reason::FieldValueForbidden))]
    #[x_kube(validation = Rule::new("has(self.networkData) == has(oldSelf.networkData) && (!has(self.networkData) || self.networkData == oldSelf.networkData)")
        .message("spec.networkData is immutable")
        .field_path(".networkData")
        .reason(Reason::FieldValueForbidden))]
    pub struct MaasDataTemplateSpec {
        /// Cluster using this template (informational; the template is moved by
        /// `clusterctl move` through its CRD label, not an owner chain). Default (webhook-server):
        /// the `cluster.x-k8s.io/cluster-name` label is set to this value when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(length(max = 63))]
        pub cluster_name: Option<String>,
        /// Metadata items rendered into the `metaData` Secret. Immutable.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub meta_data: Option<MetaData>,
        /// Network configuration rendered into the `networkData` Secret. Immutable.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub network_data: Option<NetworkData>,
    }
}

provider_status! {
    /// Observed state of a MaasDataTemplate, written by data-controller.
    pub struct MaasDataTemplateStatus {
        /// Index given to each claim, rebuilt from the MaasData objects.
        #[schemars(length(max = 1024), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
        pub indexes: Option<Vec<IndexAllocation>>,
        /// Number of allocated indexes.
        pub allocated_indexes: Option<i32>,
        /// Last time the status changed.
        pub last_updated: Option<Time>,
    }
    /// Conditions written by data-controller; only `Ready`. It is False with reason `InUse` while
    /// the deletion of the template waits for MaasData that still use it.
    conditions
}

/// Index allocated to one claim.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct IndexAllocation {
    /// Name of the MaasDataClaim.
    pub name: String,
    /// Index the claim holds in this template, copied from its MaasData's `spec.index`.
    /// data-controller gives each new claim the lowest free index, starting at 0.
    pub index: i32,
}

provider_kind! {
    /// A machine's request for rendered data.
    #[derive(KubeSchema)]
    #[kube(
        kind = "MaasDataClaim",
        namespaced,
        status = "MaasDataClaimStatus",
        doc = "MaasDataClaim asks data-controller to render a MaasDataTemplate for one machine; created by machine-controller and released only after the host is released.",
        shortname = "maasdc",
        printcolumn(
            name = "Template",
            type_ = "string",
            json_path = ".spec.template.name",
            description = "MaasDataTemplate"
        ),
        printcolumn(
            name = "Host",
            type_ = "string",
            json_path = ".spec.hostRef.name",
            description = "MaasHost the data is for"
        ),
        printcolumn(
            name = "Data",
            type_ = "string",
            json_path = ".status.renderedData.name",
            description = "Rendered MaasData"
        )
    )]
    pub struct MaasDataClaimSpec {
        /// The MaasDataTemplate to render. Immutable.
        #[x_kube(validation = Rule::new("self == oldSelf").message("spec.template is immutable").reason(Reason::FieldValueForbidden))]
        pub template: LocalObjectReference,
        /// The MaasHost whose interfaces and labels feed the rendering.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub host_ref: Option<HostReference>,
    }
}

provider_status! {
    /// Observed state of a MaasDataClaim, written by data-controller.
    pub struct MaasDataClaimStatus {
        /// The MaasData holding the rendered Secrets.
        pub rendered_data: Option<LocalObjectReference>,
        /// Why rendering failed, if it did.
        pub error_message: Option<String>,
    }
    /// Conditions written by data-controller: `AddressesAllocated` (an address from every pool
    /// the template uses is allocated), `DataReady` (the Secrets are rendered), `Ready`, which
    /// summarizes both, and `Paused`: `True` while the claim or its Cluster is paused, `False`
    /// (`NotPaused`) once it is reconciled again.
    conditions
}

provider_kind! {
    /// Rendered data of one claim.
    #[derive(KubeSchema)]
    #[kube(
        kind = "MaasData",
        // flect (CAPI's CRD naming) keeps "data" as its own plural: maasdata.infrastructure.cluster.x-k8s.io.
        plural = "maasdata",
        namespaced,
        status = "MaasDataStatus",
        doc = "MaasData records the index and the rendered metadata/network-data Secrets of one MaasDataClaim.",
        shortname = "maasd",
        printcolumn(name = "Template", type_ = "string", json_path = ".spec.template.name", description = "MaasDataTemplate"),
        printcolumn(name = "Index", type_ = "integer", json_path = ".spec.index", description = "Index in the template"),
        printcolumn(name = "Claim", type_ = "string", json_path = ".spec.claim.name", description = "MaasDataClaim"),
        printcolumn(name = "Ready", type_ = "boolean", json_path = ".status.ready", description = "Secrets rendered")
    )]
    pub struct MaasDataSpec {
        /// Index of the claim in the template. Immutable.
        #[schemars(range(min = 0))]
        #[x_kube(validation = Rule::new("self == oldSelf").message("spec.index is immutable").reason(Reason::FieldValueForbidden))]
        pub index: i32,
        /// The MaasDataTemplate. Immutable.
        #[x_kube(validation = Rule::new("self == oldSelf").message("spec.template is immutable").reason(Reason::FieldValueForbidden))]
        pub template: LocalObjectReference,
        /// The MaasDataClaim. Immutable.
        #[x_kube(validation = Rule::new("self == oldSelf").message("spec.claim is immutable").reason(Reason::FieldValueForbidden))]
        pub claim: LocalObjectReference,
        /// Secret holding the rendered metadata (key `metaData`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub meta_data: Option<LocalObjectReference>,
        /// Secret holding the rendered network data (key `networkData`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub network_data: Option<LocalObjectReference>,
    }
}

/// Observed state of a MaasData, written by data-controller.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MaasDataStatus {
    /// The Secrets are rendered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// Why rendering failed, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    /// The hostname the rendered metadata names (`local-hostname` or `hostname`), which
    /// machine-controller asks MAAS to set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub hostname: Option<String>,
}
