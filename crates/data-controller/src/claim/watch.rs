//! Which MaasDataClaims to reconcile when a related object changes. Pure mappers over the
//! reflector stores.

use capmaas_api::capi_ipam::IPAddressClaim;
use capmaas_api::{MaasData, MaasDataClaim, MaasDataTemplate, MaasHost, keys};
use capmaas_runtime::trace_context::Relation;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};

use crate::lookup::namespace_mates;

/// The claim a MaasData was made for.
pub fn map_data(data: &MaasData) -> Option<ObjectRef<MaasDataClaim>> {
    Some(ObjectRef::new(&data.spec.claim.name).within(&data.namespace()?))
}

/// The data claim an IPAddressClaim was made for (its label).
pub fn map_ip_claim(claim: &IPAddressClaim) -> Option<ObjectRef<MaasDataClaim>> {
    let owner = claim.labels().get(keys::LABEL_DATA_CLAIM)?;
    Some(ObjectRef::new(owner).within(&claim.namespace()?))
}

/// The claims of a template (it appeared, or changed).
pub fn map_template(
    claims: &Store<MaasDataClaim>,
    template: &MaasDataTemplate,
) -> Vec<ObjectRef<MaasDataClaim>> {
    namespace_mates(claims, template, |c, name| c.spec.template.name == name)
}

/// The claims rendering for a host that are not rendered yet (a rendered claim never changes,
/// so host status churn costs nothing).
pub fn map_host(claims: &Store<MaasDataClaim>, host: &MaasHost) -> Vec<ObjectRef<MaasDataClaim>> {
    let Some(ns) = host.namespace() else {
        return Vec::new();
    };
    let name = host.name_any();
    claims
        .state()
        .iter()
        .filter(|c| {
            let claim_ns = c.namespace().unwrap_or_default();
            c.spec
                .host_ref
                .as_ref()
                .is_some_and(|h| h.name == name && h.namespace_or(&claim_ns) == ns)
                && crate::claim::decide::recorded_data(c).is_none()
        })
        .map(|c| ObjectRef::from_obj(c.as_ref()))
        .collect()
}

/// Whether a reconcile of `claim` is part of the trace machine-controller recorded when it
/// created the claim (that machine's provisioning): until its data is rendered. Later
/// reconciles (template or address changes, resyncs) link to it.
pub fn trace_relation(claim: &MaasDataClaim) -> Relation {
    let rendered = claim
        .status
        .as_ref()
        .is_some_and(|s| s.rendered_data.is_some());
    if rendered || claim.meta().deletion_timestamp.is_some() {
        Relation::Link
    } else {
        Relation::Child
    }
}

#[cfg(test)]
#[path = "watch_tests.rs"]
mod tests;
