//! Types shared by several kinds: references, addresses, template metadata.
//!
//! Every string carries a `maxLength` and every list a `maxItems`: the API
//! server estimates the cost of CEL rules from these bounds and rejects a CRD
//! whose rules could be too expensive on unbounded input.

// `KubeSchema` copies each struct, `pub` included, into a function body to build
// its schema; rustc then reports the copy as an unreachable `pub` item.
#![allow(unreachable_pub)]

use std::collections::BTreeMap;

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// API group of every kind in this crate.
pub const GROUP: &str = "infrastructure.cluster.x-k8s.io";
/// API version of every kind in this crate.
pub const VERSION: &str = "v1beta1";
/// `apiVersion` value of every kind in this crate.
pub const API_VERSION: &str = "infrastructure.cluster.x-k8s.io/v1beta1";

/// Reference to an object of a known kind in the same namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LocalObjectReference {
    /// Name of the referenced object.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

impl LocalObjectReference {
    /// Reference by name.
    pub fn new(name: impl Into<String>) -> Self {
        Self { name: name.into() }
    }
}

/// Reference to one key of a Secret in the same namespace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SecretKeyReference {
    /// Name of the Secret.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Key inside the Secret; `value` as in CAPI bootstrap Secrets.
    #[serde(default = "default_secret_key")]
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
}

fn default_secret_key() -> String {
    crate::keys::BOOTSTRAP_SECRET_KEY.to_owned()
}

impl SecretKeyReference {
    /// Reference to the `value` key of a Secret.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            key: default_secret_key(),
        }
    }
}

/// Reference to a MaasHost, which may sit in another namespace than the referrer when an
/// inventory admits claims from other namespaces (`MaasInventory.spec.claimNamespaces`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HostReference {
    /// Name of the MaasHost.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Namespace of the MaasHost; absent means the referrer's own namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub namespace: Option<String>,
}

impl HostReference {
    /// Reference to the host `name` in `host_namespace`, as seen from an object in
    /// `own_namespace` (the namespace is written only when it differs).
    pub fn new(name: impl Into<String>, host_namespace: &str, own_namespace: &str) -> Self {
        Self {
            name: name.into(),
            namespace: (host_namespace != own_namespace).then(|| host_namespace.to_owned()),
        }
    }

    /// The host's namespace, given the referrer's.
    pub fn namespace_or<'a>(&'a self, own_namespace: &'a str) -> &'a str {
        self.namespace.as_deref().unwrap_or(own_namespace)
    }
}

/// Reference to an object of any kind, pinned to one incarnation by UID (a re-created object
/// with the same name is a different owner). In the referrer's namespace unless `namespace`
/// says otherwise.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConsumerReference {
    /// API version of the consumer, e.g. `infrastructure.cluster.x-k8s.io/v1beta1`.
    #[schemars(length(min = 1, max = 317))]
    pub api_version: String,
    /// Kind of the consumer, e.g. `MaasMachine`.
    #[schemars(length(min = 1, max = 63))]
    pub kind: String,
    /// Name of the consumer.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// UID of the consumer.
    #[schemars(length(min = 1, max = 64))]
    pub uid: String,
    /// Namespace of the consumer when it is not the host's (a claim through an inventory's
    /// `spec.claimNamespaces`). The Secrets of `spec.provisioning` are read there too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub namespace: Option<String>,
}

impl ConsumerReference {
    /// The consumer's namespace, given the host's.
    pub fn namespace_or<'a>(&'a self, host_namespace: &'a str) -> &'a str {
        self.namespace.as_deref().unwrap_or(host_namespace)
    }
}

/// Reference to an address pool: a `MaasIPPool` or any CAPI IPAM pool kind.
#[derive(
    Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct PoolReference {
    /// Name of the pool in the same namespace.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// API group of the pool kind.
    #[serde(default = "default_pool_api_group")]
    #[schemars(length(max = 253))]
    pub api_group: String,
    /// Kind of the pool.
    #[serde(default = "default_pool_kind")]
    #[schemars(length(min = 1, max = 63))]
    pub kind: String,
}

/// Also the default of `MetaDataFromPool`, which names a pool by the same three fields.
pub(crate) fn default_pool_api_group() -> String {
    crate::common::GROUP.to_owned()
}

/// Also the default of `MetaDataFromPool`, which names a pool by the same three fields.
pub(crate) fn default_pool_kind() -> String {
    "MaasIPPool".to_owned()
}

impl PoolReference {
    /// Reference to a `MaasIPPool`.
    pub fn maas_ip_pool(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            api_group: default_pool_api_group(),
            kind: default_pool_kind(),
        }
    }
}

/// Labels and annotations copied onto objects created from a template.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TemplateMetadata {
    /// Labels to put on the created object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxProperties" = 64))]
    pub labels: Option<BTreeMap<String, String>>,
    /// Annotations to put on the created object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxProperties" = 64))]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// v1beta2 contract: provisioning signal read by CAPI.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Initialization {
    /// True once the infrastructure is provisioned; never reset afterwards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioned: Option<bool>,
}

/// Kind of a machine address (CAPI `MachineAddressType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum MachineAddressType {
    /// Host name of the machine.
    Hostname,
    /// Address reachable from outside the cluster network.
    #[serde(rename = "ExternalIP")]
    ExternalIp,
    /// Address reachable inside the cluster network.
    #[serde(rename = "InternalIP")]
    InternalIp,
    /// DNS name reachable from outside the cluster network.
    #[serde(rename = "ExternalDNS")]
    ExternalDns,
    /// DNS name reachable inside the cluster network.
    #[serde(rename = "InternalDNS")]
    InternalDns,
}

/// One address of a machine (CAPI `MachineAddress`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MachineAddress {
    /// Kind of the address.
    #[serde(rename = "type")]
    pub type_: MachineAddressType,
    /// The address or name.
    #[schemars(length(min = 1, max = 256))]
    pub address: String,
}

/// How MAAS wipes the disks when a machine is released.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum EraseMode {
    /// No erase asked for (the default): MAAS decides by its own setting "Erase nodes' disks
    /// prior to releasing" (`enable_disk_erasing_on_release`, with its secure/quick choice).
    /// With that setting off the disks keep their data (node reuse; fastest).
    #[default]
    None,
    /// Quick erase: wipe the start and end of each disk.
    Quick,
    /// Secure erase where the disk supports it, else a full erase.
    Secure,
    /// Full erase: overwrite every disk completely (slow).
    Full,
}

/// What happens to the MAAS machine when it is released. It may be edited at any time before
/// the release starts: the edited policy is recorded on the MAAS machine and used.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ReleasePolicy {
    /// Disk erasure on release. `None` (the default) asks for none, and MAAS then erases only
    /// when its own "Erase nodes' disks prior to releasing" setting is on.
    #[serde(default)]
    pub erase: EraseMode,
    /// Force the release even when MAAS reports the machine busy.
    #[serde(default)]
    pub force: bool,
}

/// A label-selector requirement on MaasHost labels.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[x_kube(validation = Rule::new("self.operator in ['Exists', 'DoesNotExist'] || (has(self.values) && size(self.values) > 0)")
    .message("spec.hostSelector.matchExpressions[].values must not be empty when operator is In or NotIn")
    .field_path(".values")
    .reason(Reason::FieldValueRequired))]
#[x_kube(validation = Rule::new("self.operator in ['In', 'NotIn'] || !has(self.values) || size(self.values) == 0")
    .message("spec.hostSelector.matchExpressions[].values must be empty when operator is Exists or DoesNotExist")
    .field_path(".values")
    .reason(Reason::FieldValueForbidden))]
pub struct HostSelectorRequirement {
    /// Label key, e.g. `maas.cluster.x-k8s.io/zone`.
    #[schemars(length(min = 1, max = 317))]
    pub key: String,
    /// How the key relates to the values.
    pub operator: SelectorOperator,
    /// Values for `In` and `NotIn`; must be empty for `Exists` and `DoesNotExist`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64), inner(length(max = 63)))]
    pub values: Option<Vec<String>>,
}

/// Operator of a [`HostSelectorRequirement`] (case-sensitive, as in Kubernetes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum SelectorOperator {
    /// The label value is one of `values`.
    In,
    /// The label value is none of `values` (or the label is absent).
    NotIn,
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
}

/// Chooses MaasHosts by their labels (zone, pool, arch, one label per MAAS tag, ...).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostSelector {
    /// Labels the host must carry with exactly these values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxProperties" = 32))]
    pub match_labels: Option<BTreeMap<String, String>>,
    /// Requirements the host labels must all satisfy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16))]
    pub match_expressions: Option<Vec<HostSelectorRequirement>>,
}
