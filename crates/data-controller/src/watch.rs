//! Which MaasDataClaims to reconcile when a related object changes. Pure mappers over the
//! reflector stores.

use capmaas_api::capi_ipam::IPAddressClaim;
use capmaas_api::{MaasData, MaasDataClaim, MaasDataTemplate, MaasHost, keys};
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};

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
    let ns = template.namespace();
    let name = template.name_any();
    claims
        .state()
        .iter()
        .filter(|c| c.namespace() == ns && c.spec.template.name == name)
        .map(|c| ObjectRef::from_obj(c.as_ref()))
        .collect()
}

/// The claims rendering for a host that are not rendered yet (a rendered claim never changes,
/// so host status churn costs nothing).
pub fn map_host(claims: &Store<MaasDataClaim>, host: &MaasHost) -> Vec<ObjectRef<MaasDataClaim>> {
    let ns = host.namespace();
    let name = host.name_any();
    claims
        .state()
        .iter()
        .filter(|c| {
            c.namespace() == ns
                && c.spec.host_ref.as_ref().is_some_and(|h| h.name == name)
                && crate::decide::recorded_data(c).is_none()
        })
        .map(|c| ObjectRef::from_obj(c.as_ref()))
        .collect()
}
