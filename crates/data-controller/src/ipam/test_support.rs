//! Builders shared by the unit tests of the IPAM modules.

use capmaas_api::MaasIPPoolSpec;
use capmaas_api::ipam::{AllocationStrategy, IpPoolRange};

pub(crate) fn range(start: &str, end: &str) -> IpPoolRange {
    IpPoolRange {
        start: Some(start.into()),
        end: Some(end.into()),
        ..IpPoolRange::default()
    }
}

pub(crate) fn subnet(cidr: &str) -> IpPoolRange {
    IpPoolRange {
        subnet: Some(cidr.into()),
        ..IpPoolRange::default()
    }
}

pub(crate) fn spec(pools: Vec<IpPoolRange>) -> MaasIPPoolSpec {
    MaasIPPoolSpec {
        pools,
        prefix: None,
        gateway: None,
        dns_servers: None,
        exclusions: None,
        pre_allocations: None,
        name_prefix: "pool".into(),
        cluster_name: None,
        allocation_strategy: AllocationStrategy::Sequential,
        maas_subnet: None,
    }
}

/// An `IPAddress` of MaasIPPool `pool` in namespace `ns` for claim `claim` (owned by the claim
/// with UID `claim_uid`).
pub(crate) fn address(
    ns: &str,
    name: &str,
    pool: &str,
    claim: &str,
    ip: &str,
    claim_uid: &str,
) -> capmaas_api::capi_ipam::IPAddress {
    use capmaas_api::capi_ipam::{
        IPAddress, IPAddressClaimReference, IPAddressSpec, IPPoolReference,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    let mut a = IPAddress::new(
        name,
        IPAddressSpec {
            claim_ref: IPAddressClaimReference { name: claim.into() },
            pool_ref: IPPoolReference::maas_ip_pool(pool),
            address: ip.into(),
            prefix: 24,
            gateway: None,
        },
    );
    a.metadata.namespace = Some(ns.into());
    a.metadata.uid = Some(format!("uid-{name}"));
    a.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "ipam.cluster.x-k8s.io/v1beta2".into(),
        kind: "IPAddressClaim".into(),
        name: claim.into(),
        uid: claim_uid.into(),
        controller: Some(true),
        ..OwnerReference::default()
    }]);
    a
}

/// A MaasIPPool `name` in `ns` with `spec`, UID `uid-<name>` and generation 1.
pub(crate) fn pool(ns: &str, name: &str, spec: MaasIPPoolSpec) -> capmaas_api::MaasIPPool {
    let mut p = capmaas_api::MaasIPPool::new(name, spec);
    p.metadata.namespace = Some(ns.into());
    p.metadata.uid = Some(format!("uid-{name}"));
    p.metadata.generation = Some(1);
    p
}

/// An `IPAddressClaim` `name` in `ns` for MaasIPPool `pool`, UID `uid-<name>`.
pub(crate) fn claim(ns: &str, name: &str, pool: &str) -> capmaas_api::capi_ipam::IPAddressClaim {
    use capmaas_api::capi_ipam::{IPAddressClaim, IPAddressClaimSpec, IPPoolReference};
    let mut c = IPAddressClaim::new(
        name,
        IPAddressClaimSpec {
            pool_ref: IPPoolReference::maas_ip_pool(pool),
            cluster_name: None,
        },
    );
    c.metadata.namespace = Some(ns.into());
    c.metadata.uid = Some(format!("uid-{name}"));
    c.metadata.generation = Some(1);
    c
}
