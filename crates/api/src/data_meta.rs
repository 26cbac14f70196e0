//! `metaData` section of a MaasDataTemplate: the per-machine key/value map
//! rendered into the metadata Secret.
//!
//! Every list is a list-map keyed by `key`, so the API server rejects two
//! entries with the same key inside one list.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::PoolReference;

/// Metadata items; a key may be given once across all kinds (a duplicate is a rendering error).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetaData {
    /// Literal key/value pairs, rendered as they are written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["key"]))]
    pub strings: Option<Vec<MetaDataString>>,
    /// Names of related objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["key"]))]
    pub object_names: Option<Vec<MetaDataObjectName>>,
    /// The namespace of the machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["key"]))]
    pub namespaces: Option<Vec<MetaDataNamespace>>,
    /// Values derived from the claim's index: `prefix + (offset + index * step) + suffix`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["key"]))]
    pub indexes: Option<Vec<MetaDataIndex>>,
    /// Address allocated from a pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["key"]))]
    pub ip_addresses_from_pool: Option<Vec<MetaDataFromPool>>,
    /// Prefix length of the address allocated from a pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["key"]))]
    pub prefixes_from_pool: Option<Vec<MetaDataFromPool>>,
    /// Gateway of the address allocated from a pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["key"]))]
    pub gateways_from_pool: Option<Vec<MetaDataFromPool>>,
    /// DNS servers of a pool, comma separated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["key"]))]
    pub dns_servers_from_pool: Option<Vec<MetaDataFromPool>>,
    /// MAC address of a host interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["key"]))]
    pub from_host_interfaces: Option<Vec<MetaDataFromHostInterface>>,
    /// Value of a label of a related object (a missing label is a rendering error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["key"]))]
    pub from_labels: Option<Vec<MetaDataFromLabel>>,
    /// Value of an annotation of a related object (a missing annotation is a rendering error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["key"]))]
    pub from_annotations: Option<Vec<MetaDataFromAnnotation>>,
}

/// A literal metadata value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MetaDataString {
    /// Key the value is rendered under in the metaData mapping. Keys are unique across all metaData
    /// lists; `local-hostname` or `hostname` also sets the machine's MAAS hostname.
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
    /// Value rendered for the key, always as a string: the YAML quotes it where a YAML 1.1
    /// reader such as cloud-init would read another type.
    #[schemars(length(max = 1024))]
    pub value: String,
}

/// Object whose name, labels or annotations a metadata item reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DataObject {
    /// The CAPI Machine.
    Machine,
    /// The MaasMachine.
    #[serde(rename = "maasmachine")]
    MaasMachine,
    /// The MaasHost.
    #[serde(rename = "maashost")]
    MaasHost,
}

/// The name of a related object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MetaDataObjectName {
    /// Key the object's name is rendered under in the metaData mapping. Keys are unique across all
    /// metaData lists; `local-hostname` or `hostname` also sets the machine's MAAS hostname.
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
    /// Object whose name is rendered: `machine` (the CAPI Machine), `maasmachine` or `maashost`.
    pub object: DataObject,
}

/// The namespace of the machine.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MetaDataNamespace {
    /// Key the machine's namespace is rendered under in the metaData mapping. Keys are unique
    /// across all metaData lists; `local-hostname` or `hostname` also sets the machine's MAAS
    /// hostname.
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
}

/// A value derived from the claim's index.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MetaDataIndex {
    /// Key the computed value is rendered under in the metaData mapping. Keys are unique across all
    /// metaData lists; `local-hostname` or `hostname` also sets the machine's MAAS hostname.
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
    /// Added to the scaled index.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub offset: i32,
    /// Multiplies the index.
    #[serde(default = "default_step")]
    #[schemars(range(min = 1))]
    pub step: i32,
    /// Text before the number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub prefix: Option<String>,
    /// Text after the number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub suffix: Option<String>,
}

fn default_step() -> i32 {
    1
}

/// A value taken from a pool allocation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetaDataFromPool {
    /// Key the value taken from the claim's address in the pool is rendered under in the metaData
    /// mapping. Keys are unique across all metaData lists; `local-hostname` or `hostname` also sets
    /// the machine's MAAS hostname.
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
    /// Name of the pool.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// API group of the pool kind.
    #[serde(default = "crate::common::default_pool_api_group")]
    #[schemars(length(max = 253))]
    pub api_group: String,
    /// Kind of the pool.
    #[serde(default = "crate::common::default_pool_kind")]
    #[schemars(length(min = 1, max = 63))]
    pub kind: String,
}

impl MetaDataFromPool {
    /// The pool this item reads from.
    pub fn pool(&self) -> PoolReference {
        PoolReference {
            name: self.name.clone(),
            api_group: self.api_group.clone(),
            kind: self.kind.clone(),
        }
    }
}

/// The MAC address of a host interface.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MetaDataFromHostInterface {
    /// Key the interface's MAC address (lower case, colon separated) is rendered under in the
    /// metaData mapping. Keys are unique across all metaData lists; `local-hostname` or `hostname`
    /// also sets the machine's MAAS hostname.
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
    /// Interface name as MAAS reports it, e.g. `eno1`.
    #[schemars(length(min = 1, max = 64))]
    pub interface: String,
}

/// The value of a label of a related object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MetaDataFromLabel {
    /// Key the label's value is rendered under in the metaData mapping. Keys are unique across all
    /// metaData lists; `local-hostname` or `hostname` also sets the machine's MAAS hostname.
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
    /// Object whose label is read: `machine` (the CAPI Machine), `maasmachine` or `maashost`.
    pub object: DataObject,
    /// Key of the label to read, e.g. `cluster.x-k8s.io/cluster-name`; rendering fails while the
    /// object lacks the label.
    #[schemars(length(min = 1, max = 317))]
    pub label: String,
}

/// The value of an annotation of a related object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MetaDataFromAnnotation {
    /// Key the annotation's value is rendered under in the metaData mapping. Keys are unique across
    /// all metaData lists; `local-hostname` or `hostname` also sets the machine's MAAS hostname.
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
    /// Object whose annotation is read: `machine` (the CAPI Machine), `maasmachine` or `maashost`.
    pub object: DataObject,
    /// Key of the annotation to read, e.g. `example.com/asset-tag`; rendering fails while the
    /// object lacks the annotation.
    #[schemars(length(min = 1, max = 317))]
    pub annotation: String,
}
