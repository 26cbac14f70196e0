//! The addresses of a data claim: one CAPI `IPAddressClaim` per pool the template uses, named
//! `<data claim>-<pool>` so a crash or a second replica can only ever make the same one, owned
//! by the data claim and labelled with it. Any IPAM provider may serve them (MaasIPPool is
//! ours); the served `IPAddress` gives address, prefix and gateway, and for a MaasIPPool the
//! pool gives the DNS servers (CAPI `IPAddress` has none).

use capmaas_runtime::error::{Failed, failed};
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use capmaas_api::capi_ipam::{
    IPAddress, IPAddressClaim, IPAddressClaimSpec, IPPoolReference, MAAS_IP_POOL_KIND,
};
use capmaas_api::common::PoolReference;
use capmaas_api::conditions as cond;
use capmaas_api::{MaasDataClaim, MaasIPPool, keys};
use capmaas_runtime::controller::finalizer;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams, Preconditions};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};

use crate::claim::decide::AddressState;
use crate::context::Ctx;
use crate::error::Result;
use crate::ipam::layout::{PoolLayout, dns_servers_for};
use crate::render::AllocatedAddress;

/// Name of the IPAddressClaim of `claim` for `pool` (the pool kind is named too unless it is
/// a MaasIPPool, so two kinds' pools of one name do not collide).
pub fn ip_claim_name(claim: &str, pool: &PoolReference) -> String {
    if pool.kind == MAAS_IP_POOL_KIND {
        format!("{claim}-{}", pool.name)
    } else {
        format!("{claim}-{}-{}", pool.kind.to_lowercase(), pool.name)
    }
}

/// Why an IPAddressClaim is not served yet: its Ready condition's message, if any.
fn pending_reason(claim: &IPAddressClaim) -> String {
    claim
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| {
            c.iter()
                .find(|c| c.type_ == cond::READY && c.status == "False")
        })
        .map(|c| {
            if c.message.is_empty() {
                c.reason.clone()
            } else {
                format!("{}: {}", c.reason, c.message)
            }
        })
        .unwrap_or_default()
}

/// The address an IPAddress describes; `None` when it does not parse (reported as pending).
pub fn allocated(address: &IPAddress, pool: Option<&MaasIPPool>) -> Option<AllocatedAddress> {
    let ip: IpAddr = address.spec.address.parse().ok()?;
    let prefix = u8::try_from(address.spec.prefix).ok()?;
    let gateway = address
        .spec
        .gateway
        .as_deref()
        .filter(|g| !g.is_empty())
        .and_then(|g| g.parse().ok());
    let dns_servers = pool
        .and_then(|p| PoolLayout::from_spec(&p.spec).ok())
        .map(|layout| dns_servers_for(&layout, ip).to_vec())
        .unwrap_or_default();
    Some(AllocatedAddress {
        address: ip,
        prefix,
        gateway,
        dns_servers,
    })
}

/// Where the address of each pool stands, from the stores.
pub fn observe(
    ctx: &Ctx,
    claim: &MaasDataClaim,
    ns: &str,
    pools: &BTreeSet<PoolReference>,
) -> BTreeMap<PoolReference, AddressState> {
    let name = claim.name_any();
    pools
        .iter()
        .map(|pool| {
            let key = ObjectRef::new(&ip_claim_name(&name, pool)).within(ns);
            let state = match ctx.ip_claims.get(&key) {
                None => AddressState::Missing,
                Some(ip_claim) => match ip_claim.address_ref() {
                    None => AddressState::Pending(pending_reason(&ip_claim)),
                    Some(address) => {
                        // Only an address made for this very claim: a name the claim still
                        // shows while the address was released and handed to another claim
                        // must never reach a server.
                        let served = ctx
                            .ip_addresses
                            .get(&ObjectRef::new(address).within(ns))
                            .filter(|a| a.spec.claim_ref.name == ip_claim.name_any());
                        let maas_pool = (pool.kind == MAAS_IP_POOL_KIND)
                            .then(|| ctx.pools.get(&ObjectRef::new(&pool.name).within(ns)))
                            .flatten();
                        match served.and_then(|a| allocated(&a, maas_pool.as_deref())) {
                            Some(a) => AddressState::Bound(a),
                            None => AddressState::Pending(format!(
                                "IPAddress {address} is not readable yet"
                            )),
                        }
                    }
                },
            };
            (pool.clone(), state)
        })
        .collect()
}

fn new_ip_claim(claim: &MaasDataClaim, pool: &PoolReference) -> Result<IPAddressClaim> {
    let name = ip_claim_name(&claim.name_any(), pool);
    let owner = claim
        .controller_owner_ref(&())
        .ok_or(Failed::missing("uid"))?;
    let cluster = claim.labels().get(keys::LABEL_CLUSTER_NAME).cloned();
    let mut labels = BTreeMap::from([(keys::LABEL_DATA_CLAIM.to_owned(), claim.name_any())]);
    if let Some(cluster) = &cluster {
        labels.insert(keys::LABEL_CLUSTER_NAME.to_owned(), cluster.clone());
    }
    let mut ip_claim = IPAddressClaim::new(
        &name,
        IPAddressClaimSpec {
            pool_ref: IPPoolReference {
                api_group: pool.api_group.clone(),
                kind: pool.kind.clone(),
                name: pool.name.clone(),
            },
            cluster_name: cluster,
        },
    );
    ip_claim.metadata = ObjectMeta {
        name: Some(name),
        labels: Some(labels),
        owner_references: Some(vec![owner]),
        finalizers: Some(vec![keys::FINALIZER_ADDRESS_IN_USE.to_owned()]),
        ..ObjectMeta::default()
    };
    Ok(ip_claim)
}

/// Puts the in-use finalizer on this data claim's IPAddressClaims that lack it (made by an
/// earlier version), as the caches show them; one write per claim, once.
pub async fn protect(
    ctx: &Ctx,
    claim: &MaasDataClaim,
    ns: &str,
    pools: &BTreeSet<PoolReference>,
) -> Result<()> {
    let api: Api<IPAddressClaim> = Api::namespaced(ctx.base.client.clone(), ns);
    let name = claim.name_any();
    for pool in pools {
        let key = ObjectRef::new(&ip_claim_name(&name, pool)).within(ns);
        let Some(ip_claim) = ctx.ip_claims.get(&key) else {
            continue;
        };
        if ip_claim.metadata.deletion_timestamp.is_none()
            && made_for(&ip_claim, claim)
            && !finalizer::has(ip_claim.as_ref(), keys::FINALIZER_ADDRESS_IN_USE)
        {
            finalizer::add(
                &api,
                ip_claim.as_ref(),
                keys::FINALIZER_ADDRESS_IN_USE,
                &ctx.base.field_manager,
            )
            .await
            .map_err(failed("updating the finalizer"))?;
        }
    }
    Ok(())
}

/// Whether `ip_claim` was made for this incarnation of `claim` (owner UID).
fn made_for(ip_claim: &IPAddressClaim, claim: &MaasDataClaim) -> bool {
    let uid = claim.uid();
    ip_claim
        .owner_references()
        .iter()
        .any(|o| o.kind == MaasDataClaim::kind(&()) && Some(&o.uid) == uid.as_ref())
}

/// Creates the IPAddressClaims of `missing` pools; one that exists already is fine.
pub async fn create(
    ctx: &Ctx,
    claim: &MaasDataClaim,
    ns: &str,
    missing: &[PoolReference],
) -> Result<()> {
    let api: Api<IPAddressClaim> = Api::namespaced(ctx.base.client.clone(), ns);
    for pool in missing {
        match api
            .create(&PostParams::default(), &new_ip_claim(claim, pool)?)
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(failed("create IPAddressClaim")(e).into()),
        }
    }
    Ok(())
}

/// Deletes every IPAddressClaim made for this data claim (found by label on the API server).
pub async fn delete_all(ctx: &Ctx, claim: &MaasDataClaim, ns: &str) -> Result<()> {
    let api: Api<IPAddressClaim> = Api::namespaced(ctx.base.client.clone(), ns);
    let mine =
        ListParams::default().labels(&format!("{}={}", keys::LABEL_DATA_CLAIM, claim.name_any()));
    let made = api
        .list(&mine)
        .await
        .map_err(failed("list IPAddressClaims of the data claim"))?;
    for ip_claim in made.items.iter().filter(|c| made_for(c, claim)) {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: ip_claim.uid(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match api.delete(&ip_claim.name_any(), &params).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if matches!(e.code, 404 | 409) => {}
            Err(e) => return Err(failed("delete IPAddressClaim")(e).into()),
        }
        // The server is released (the data claim is let go only then): the address may go.
        if finalizer::has(ip_claim, keys::FINALIZER_ADDRESS_IN_USE) {
            finalizer::remove(
                &api,
                ip_claim,
                keys::FINALIZER_ADDRESS_IN_USE,
                &ctx.base.field_manager,
            )
            .await
            .map_err(failed("updating the finalizer"))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use capmaas_api::capi_ipam::IPAddressSpec;

    use super::*;

    fn pool(kind: &str, name: &str) -> PoolReference {
        PoolReference {
            name: name.into(),
            api_group: "x".into(),
            kind: kind.into(),
        }
    }

    #[test]
    fn claim_names_are_deterministic_and_kinds_do_not_collide() {
        assert_eq!(ip_claim_name("m1", &pool("MaasIPPool", "prov")), "m1-prov");
        assert_eq!(
            ip_claim_name("m1", &pool("InClusterIPPool", "prov")),
            "m1-inclusterippool-prov"
        );
    }

    #[test]
    fn a_served_address_is_read_and_a_malformed_one_is_not() {
        let mut a = IPAddress::new(
            "p-10-0-0-5",
            IPAddressSpec {
                address: "10.0.0.5".into(),
                prefix: 24,
                gateway: Some("10.0.0.1".into()),
                ..IPAddressSpec::default()
            },
        );
        let got = allocated(&a, None).unwrap();
        assert_eq!(got.address.to_string(), "10.0.0.5");
        assert_eq!(
            (got.prefix, got.gateway.map(|g| g.to_string())),
            (24, Some("10.0.0.1".into()))
        );
        a.spec.address = "not-an-ip".into();
        assert!(allocated(&a, None).is_none());
        a.spec.address = "10.0.0.5".into();
        a.spec.prefix = -1;
        assert!(allocated(&a, None).is_none());
    }
}
