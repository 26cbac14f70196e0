//! Mirrors of the Cluster API IPAM kinds (`ipam.cluster.x-k8s.io/v1beta2`): `IPAddressClaim`
//! and `IPAddress`.
//!
//! CAPI core owns and installs these CRDs; pools are provider kinds (ours is
//! [`MaasIPPool`](crate::MaasIPPool)). A consumer creates an `IPAddressClaim` whose
//! `spec.poolRef` names a pool; the provider of that pool kind (data-controller for
//! `MaasIPPool`) creates an `IPAddress` and points the claim's `status.addressRef` at it.
//!
//! Like [`crate::capi`], these are small serde structs of our own: unknown fields are ignored on
//! read, and the fields data-controller writes (the whole `IPAddress` spec, the claim's
//! `status.addressRef` and its `Ready` condition) serialize exactly as the CRD expects
//! (`prefix` an integer, `gateway` left out when unset). Schemas are disabled and
//! [`crate::crd::all_crds`] does not include them.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use serde::{Deserialize, Serialize};

use crate::kind::mirror_kind;

/// A mirror of a CAPI IPAM kind, in the storage version, which data-controller reads and writes.
macro_rules! ipam_kind {
    ($($item:tt)*) => {
        mirror_kind! {
            #[kube(group = "ipam.cluster.x-k8s.io", version = "v1beta2", derive = "PartialEq")]
            $($item)*
        }
    };
}

/// API group of the CAPI IPAM kinds.
pub const IPAM_GROUP: &str = "ipam.cluster.x-k8s.io";
/// API version of the CAPI IPAM kinds we read and write (the storage version).
pub const IPAM_API_VERSION: &str = "ipam.cluster.x-k8s.io/v1beta2";
/// Kind of our pool, as it appears in a `poolRef`.
pub const MAAS_IP_POOL_KIND: &str = "MaasIPPool";

ipam_kind! {
    /// `IPAddressClaim.spec`: a request for one address from a pool.
    #[kube(kind = "IPAddressClaim", status = "IPAddressClaimStatus")]
    pub struct IPAddressClaimSpec {
        /// The pool to allocate from (required, immutable).
        #[serde(default)]
        pub pool_ref: IPPoolReference,
        /// Name of the Cluster the claim belongs to (newer CAPI releases; also the
        /// `cluster.x-k8s.io/cluster-name` label).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub cluster_name: Option<String>,
    }
}

/// `IPAddressClaim.status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IPAddressClaimStatus {
    /// The `IPAddress` created for this claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address_ref: Option<IPAddressReference>,
    /// Conditions; the IPAM provider owns `Ready`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
}

ipam_kind! {
    /// `IPAddress.spec`: an allocated address, bound to one claim. Immutable (CAPI's webhook).
    #[kube(kind = "IPAddress")]
    pub struct IPAddressSpec {
        /// The claim this address fulfils (required).
        #[serde(default)]
        pub claim_ref: IPAddressClaimReference,
        /// The pool the address comes from (required).
        #[serde(default)]
        pub pool_ref: IPPoolReference,
        /// The address, e.g. `10.0.0.5` or `fd00::5` (required).
        #[serde(default)]
        pub address: String,
        /// Prefix length of the network the address belongs to (required, 0..=128).
        #[serde(default)]
        pub prefix: i32,
        /// Gateway of that network, when the pool has one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub gateway: Option<String>,
    }
}

/// `poolRef` of claims and addresses: an object reference without version.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IPPoolReference {
    /// API group of the pool kind, e.g. `infrastructure.cluster.x-k8s.io`.
    #[serde(default)]
    pub api_group: String,
    /// Pool kind, e.g. `MaasIPPool`.
    #[serde(default)]
    pub kind: String,
    /// Pool name, in the claim's namespace.
    #[serde(default)]
    pub name: String,
}

impl IPPoolReference {
    /// A reference to the `MaasIPPool` `name`.
    pub fn maas_ip_pool(name: &str) -> Self {
        Self {
            api_group: crate::common::GROUP.to_owned(),
            kind: MAAS_IP_POOL_KIND.to_owned(),
            name: name.to_owned(),
        }
    }

    /// Whether this references a `MaasIPPool` (group `infrastructure.cluster.x-k8s.io`) by a
    /// non-empty name.
    pub fn is_maas_ip_pool(&self) -> bool {
        self.api_group == crate::common::GROUP
            && self.kind == MAAS_IP_POOL_KIND
            && !self.name.is_empty()
    }
}

/// `IPAddress.spec.claimRef`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IPAddressClaimReference {
    /// Claim name, in the address's namespace.
    #[serde(default)]
    pub name: String,
}

/// `IPAddressClaim.status.addressRef`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IPAddressReference {
    /// Address name, in the claim's namespace.
    #[serde(default)]
    pub name: String,
}

impl IPAddressClaim {
    /// The Cluster the claim belongs to: `spec.clusterName`, else the
    /// `cluster.x-k8s.io/cluster-name` label.
    pub fn cluster_name(&self) -> Option<&str> {
        self.spec
            .cluster_name
            .as_deref()
            .or_else(|| {
                self.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(crate::keys::LABEL_CLUSTER_NAME))
                    .map(String::as_str)
            })
            .filter(|n| !n.is_empty())
    }

    /// `status.addressRef.name`, when set.
    pub fn address_ref(&self) -> Option<&str> {
        self.status
            .as_ref()
            .and_then(|s| s.address_ref.as_ref())
            .map(|r| r.name.as_str())
            .filter(|n| !n.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::Resource;
    use serde_json::json;

    #[test]
    fn decodes_a_real_claim_and_ignores_the_rest() {
        let claim: IPAddressClaim = serde_json::from_value(json!({
            "apiVersion": "ipam.cluster.x-k8s.io/v1beta2",
            "kind": "IPAddressClaim",
            "metadata": {
                "name": "m-0-eth0", "namespace": "team",
                "labels": {"cluster.x-k8s.io/cluster-name": "prod"},
                "finalizers": ["consumer.example.com/in-use"]
            },
            "spec": {
                "clusterName": "prod",
                "poolRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "MaasIPPool", "name": "pool"},
                "futureField": 1
            },
            "status": {
                "addressRef": {"name": "pool-10-0-0-5"},
                "conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "",
                                "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                "deprecated": {"v1beta1": {"conditions": []}}
            }
        }))
        .unwrap();
        assert!(claim.spec.pool_ref.is_maas_ip_pool());
        assert_eq!(claim.cluster_name(), Some("prod"));
        assert_eq!(claim.address_ref(), Some("pool-10-0-0-5"));
        assert_eq!(IPAddressClaim::api_version(&()), IPAM_API_VERSION);

        let bare: IPAddressClaim = serde_json::from_value(json!({
            "apiVersion": IPAM_API_VERSION, "kind": "IPAddressClaim",
            "metadata": {"name": "c", "labels": {"cluster.x-k8s.io/cluster-name": "lab"}},
            "spec": {"poolRef": {"apiGroup": "ipam.metal3.io", "kind": "IPPool", "name": "p"}}
        }))
        .unwrap();
        assert!(!bare.spec.pool_ref.is_maas_ip_pool());
        assert_eq!(bare.cluster_name(), Some("lab"), "label when spec has none");
        assert_eq!(bare.address_ref(), None);
    }

    #[test]
    fn an_address_serializes_as_the_crd_expects() {
        let mut address = IPAddress::new(
            "pool-10-0-0-5",
            IPAddressSpec {
                claim_ref: IPAddressClaimReference { name: "c".into() },
                pool_ref: IPPoolReference::maas_ip_pool("pool"),
                address: "10.0.0.5".into(),
                prefix: 24,
                gateway: None,
            },
        );
        let value = serde_json::to_value(&address).unwrap();
        assert_eq!(value["apiVersion"], IPAM_API_VERSION);
        assert_eq!(value["kind"], "IPAddress");
        assert_eq!(
            value["spec"],
            json!({
                "claimRef": {"name": "c"},
                "poolRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "MaasIPPool", "name": "pool"},
                "address": "10.0.0.5",
                "prefix": 24
            })
        );
        address.spec.gateway = Some("10.0.0.1".into());
        let value = serde_json::to_value(&address).unwrap();
        assert_eq!(value["spec"]["gateway"], "10.0.0.1");
        let back: IPAddress = serde_json::from_value(value).unwrap();
        assert_eq!(back, address);
    }

    #[test]
    fn claim_status_leaves_out_what_is_unset() {
        let status = IPAddressClaimStatus {
            address_ref: Some(IPAddressReference { name: "a".into() }),
            conditions: None,
        };
        assert_eq!(
            serde_json::to_value(&status).unwrap(),
            json!({"addressRef": {"name": "a"}})
        );
        assert_eq!(
            serde_json::to_value(IPAddressClaimStatus::default()).unwrap(),
            json!({})
        );
    }
}
