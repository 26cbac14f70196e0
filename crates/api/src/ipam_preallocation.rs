//! Which `spec.preAllocations` entry of a MaasIPPool an `IPAddressClaim` gets.
//!
//! A key is either the name of the `IPAddressClaim` or the name of the Cluster API `Machine`
//! the claim is made for. A claim names its Machine with the annotation
//! [`ANNOTATION_MACHINE`]; data-controller puts it on every claim it makes for a
//! MaasDataClaim (the MaasMachine's owner Machine). When both a claim-name key and a
//! Machine-name key match, the **claim-name key wins**: it is the more specific one, and it is
//! what pools written before Machine keys existed mean.
//!
//! Used by data-controller's allocator and by the admission webhook, which refuses a key that
//! can name neither (it must be a DNS-1123 subdomain, as object names are).

use std::net::IpAddr;

use crate::ipam_layout::PoolLayout;
use crate::names::dns_subdomain_problem;

/// Annotation of an `IPAddressClaim` naming the Cluster API Machine it is for (same
/// namespace). data-controller sets it on the claims it makes; `spec.preAllocations` of a
/// MaasIPPool may be keyed by this name.
pub const ANNOTATION_MACHINE: &str = "maas.cluster.x-k8s.io/machine";

/// What a pre-allocation key matched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatchedBy {
    /// The key is the IPAddressClaim's name.
    ClaimName,
    /// The key is the name of the claim's Machine ([`ANNOTATION_MACHINE`]).
    MachineName,
}

/// The pre-allocation a claim gets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreAllocated {
    /// The address.
    pub address: IpAddr,
    /// The `spec.preAllocations` key that matched.
    pub key: String,
    /// Whether the key is the claim's name or its Machine's.
    pub by: MatchedBy,
}

impl PreAllocated {
    /// `spec.preAllocations[<key>] (the Machine's name)`: for messages.
    pub fn describe(&self) -> String {
        let what = match self.by {
            MatchedBy::ClaimName => "the IPAddressClaim's name",
            MatchedBy::MachineName => "the Machine's name",
        };
        format!("spec.preAllocations[{}] ({what})", self.key)
    }
}

/// The pre-allocation of the claim named `claim`, made for the Machine `machine` (when known):
/// the claim-name key first, else the Machine-name key.
pub fn pre_allocation_for(
    layout: &PoolLayout,
    claim: &str,
    machine: Option<&str>,
) -> Option<PreAllocated> {
    let found = |key: &str, by| {
        layout.pre_allocation(key).map(|address| PreAllocated {
            address,
            key: key.to_owned(),
            by,
        })
    };
    found(claim, MatchedBy::ClaimName)
        .or_else(|| machine.and_then(|m| found(m, MatchedBy::MachineName)))
}

/// Why `key` can never match a claim or a Machine (it is not an object name), or `None`.
pub fn key_problem(key: &str) -> Option<String> {
    dns_subdomain_problem(key)
        .map(|why| format!("a key must be the name of an IPAddressClaim or of a Machine: {why}"))
}

#[cfg(test)]
#[path = "ipam_preallocation_tests.rs"]
mod tests;
