//! Which holds to look at again when a host or a data claim changes. Pure mappers over the
//! IPAddressClaim store.

use capmaas_api::capi_ipam::IPAddressClaim;
use capmaas_api::{MaasDataClaim, MaasHost};
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::hold::decide::{Hold, host_of};

fn holds_of(
    ip_claims: &Store<IPAddressClaim>,
    host_ns: &str,
    host: &str,
) -> Vec<ObjectRef<IPAddressClaim>> {
    ip_claims
        .state()
        .iter()
        .filter(|c| Hold::of(c).is_some_and(|h| h.host_namespace == host_ns && h.host == host))
        .map(|c| ObjectRef::from_obj(c.as_ref()))
        .collect()
}

/// The holds kept for a host (it was claimed, reserved, released or deleted).
pub fn map_host(
    ip_claims: &Store<IPAddressClaim>,
    host: &MaasHost,
) -> Vec<ObjectRef<IPAddressClaim>> {
    match host.namespace() {
        Some(ns) => holds_of(ip_claims, &ns, &host.name_any()),
        None => Vec::new(),
    }
}

/// The holds of a data claim's host (the next machine's claim appeared or was rendered).
pub fn map_claim(
    ip_claims: &Store<IPAddressClaim>,
    claim: &MaasDataClaim,
) -> Vec<ObjectRef<IPAddressClaim>> {
    match host_of(claim) {
        Some((ns, host)) => holds_of(ip_claims, &ns, &host),
        None => Vec::new(),
    }
}
