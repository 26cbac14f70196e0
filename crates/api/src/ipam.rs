//! `MaasIPPool`: an address pool served by data-controller through the CAPI
//! IPAM contract (`IPAddressClaim` -> `IPAddress`).

// `KubeSchema` copies each struct, `pub` included, into a function body to build
// its schema; rustc then reports the copy as an unreachable `pub` item.
#![allow(unreachable_pub)]

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::kind::{provider_kind, provider_status};

provider_kind! {
    /// Address ranges and allocation policy of a pool.
    #[derive(KubeSchema)]
    #[kube(
        kind = "MaasIPPool",
        namespaced,
        status = "MaasIPPoolStatus",
        doc = "MaasIPPool is an IPAM pool (ranges or subnets, gateway, DNS servers, exclusions, pre-allocations) answering CAPI IPAddressClaims that reference it.",
        shortname = "maasippool",
        printcolumn(
            name = "Prefix",
            type_ = "string",
            json_path = ".spec.namePrefix",
            description = "Name prefix of IPAddress objects"
        ),
        printcolumn(
            name = "Strategy",
            type_ = "string",
            json_path = ".spec.allocationStrategy",
            description = "Allocation strategy"
        ),
        printcolumn(
            name = "InUse",
            type_ = "integer",
            json_path = ".status.addressesInUse",
            description = "Allocated addresses"
        ),
        printcolumn(
            name = "Free",
            type_ = "integer",
            json_path = ".status.addressesFree",
            description = "Free addresses"
        )
    )]
    pub struct MaasIPPoolSpec {
        /// Address ranges, tried in order.
        #[schemars(length(min = 1, max = 32))]
        pub pools: Vec<IpPoolRange>,
        /// Default prefix length for ranges without their own.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(range(min = 0, max = 128))]
        pub prefix: Option<i32>,
        /// Default gateway for ranges without their own.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(length(max = 64))]
        #[x_kube(validation = Rule::new("isIP(self)").message("spec.gateway must be an IP address"))]
        pub gateway: Option<String>,
        /// Default DNS servers for ranges without their own.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(length(max = 8), inner(length(max = 64)))]
        #[x_kube(validation = Rule::new("self.all(a, isIP(a))").message("spec.dnsServers must contain only IP addresses"))]
        pub dns_servers: Option<Vec<String>>,
        /// Addresses never handed out: an IP, a range `first-last` or a CIDR.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(length(max = 64), inner(length(max = 129)))]
        #[x_kube(validation = Rule::new("self.all(e, isIP(e) || isCIDR(e) || (e.split('-').size() == 2 && isIP(e.split('-')[0]) && isIP(e.split('-')[1])))")
            .message("spec.exclusions entries must be an IP address, a range first-last or a CIDR"))]
        pub exclusions: Option<Vec<String>>,
        /// Fixed addresses: key → address. A key is the name of an IPAddressClaim, or the name
        /// of the Cluster API Machine a claim is for (the claim's annotation
        /// `maas.cluster.x-k8s.io/machine`, which data-controller sets on the claims it makes).
        /// When a claim matches both ways, its own name's entry wins. Keys must be object names
        /// (webhook-server).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(extend("maxProperties" = 256, "additionalProperties" = {"type": "string", "maxLength": 64}))]
        #[x_kube(validation = Rule::new("self.all(k, isIP(self[k]))").message("spec.preAllocations values must be IP addresses"))]
        pub pre_allocations: Option<BTreeMap<String, String>>,
        /// Prefix of the names of IPAddress objects. Immutable. Default (webhook-server): the
        /// pool's own `metadata.name`.
        #[schemars(length(min = 1, max = 63), pattern(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"))]
        #[x_kube(validation = Rule::new("self == oldSelf").message("spec.namePrefix is immutable").reason(Reason::FieldValueForbidden))]
        pub name_prefix: String,
        /// Cluster owning the pool (the pool is deleted with it and paused with it). Default
        /// (webhook-server): the `cluster.x-k8s.io/cluster-name` label is set to this value when
        /// absent, so `clusterctl move` and label selectors find the pool with its cluster.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(length(max = 63))]
        pub cluster_name: Option<String>,
        /// How the next address is chosen. Immutable.
        #[serde(default)]
        #[x_kube(validation = Rule::new("self == oldSelf").message("spec.allocationStrategy is immutable").reason(Reason::FieldValueForbidden))]
        pub allocation_strategy: AllocationStrategy,
        /// CIDR of the MAAS subnet the pool's addresses live in (e.g. `10.20.0.0/16`). When set,
        /// maas-client reserves each of the pool's ranges in MAAS as a `reserved` IP range
        /// (comment `capmaas MaasIPPool <namespace>/<name>`), so MAAS never hands those addresses
        /// to other machines, keeps them in sync with the pool and removes them with it; the
        /// outcome is the `MAASRangesReserved` condition. Unset: MAAS is not told about the pool.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(length(max = 64))]
        #[x_kube(validation = Rule::new("isCIDR(self)").message("spec.maasSubnet must be a CIDR such as 10.20.0.0/16"))]
        pub maas_subnet: Option<String>,
    }
}

/// How the next free address is chosen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum AllocationStrategy {
    /// Lowest free address first.
    #[default]
    Sequential,
    /// A random free address.
    Random,
}

/// One address range: `start`-`end`, or a whole `subnet`, or both (the range inside the subnet).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.subnet) || (has(self.start) && has(self.end))")
    .message("spec.pools[] entries must set subnet, or both start and end")
    .reason(Reason::FieldValueRequired))]
pub struct IpPoolRange {
    /// First address of the range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    #[x_kube(validation = Rule::new("isIP(self)").message("spec.pools[].start must be an IP address"))]
    pub start: Option<String>,
    /// Last address of the range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    #[x_kube(validation = Rule::new("isIP(self)").message("spec.pools[].end must be an IP address"))]
    pub end: Option<String>,
    /// Subnet in CIDR notation; network, gateway and broadcast addresses are never handed out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    #[x_kube(validation = Rule::new("isCIDR(self)").message("spec.pools[].subnet must be a CIDR such as 10.0.0.0/24"))]
    pub subnet: Option<String>,
    /// Prefix length of addresses from this range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 128))]
    pub prefix: Option<i32>,
    /// Gateway of addresses from this range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    #[x_kube(validation = Rule::new("isIP(self)").message("spec.pools[].gateway must be an IP address"))]
    pub gateway: Option<String>,
    /// DNS servers of addresses from this range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 8), inner(length(max = 64)))]
    #[x_kube(validation = Rule::new("self.all(a, isIP(a))").message("spec.pools[].dnsServers must contain only IP addresses"))]
    pub dns_servers: Option<Vec<String>>,
}

provider_status! {
    /// Observed state of a MaasIPPool, written by data-controller.
    pub struct MaasIPPoolStatus {
        /// Addresses currently allocated (including pre-allocations in use).
        pub addresses_in_use: Option<i64>,
        /// Addresses still free (saturates at the int64 maximum for huge IPv6 ranges).
        pub addresses_free: Option<i64>,
        /// Last time the status changed.
        pub last_updated: Option<Time>,
        /// Generation of the spec last acted upon.
        pub observed_generation: Option<i64>,
    }
    /// `Ready`, `PoolValid`, `AddressesInPool`, `Paused` (data-controller); `MAASRangesReserved` (maas-client).
    conditions
}
