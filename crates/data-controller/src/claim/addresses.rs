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
use kube::api::{Api, ObjectMeta, PostParams};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};

use crate::claim::decide::AddressState;
use crate::claim::owned::{list_made_for, made_for};
use crate::context::Ctx;
use crate::error::Result;
use crate::ipam::layout::{PoolLayout, dns_servers_for};
use crate::render::AllocatedAddress;
use crate::writes;

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
        let in_use = keys::FINALIZER_ADDRESS_IN_USE;
        if ip_claim.metadata.deletion_timestamp.is_none()
            && made_for::<IPAddressClaim>(&ip_claim, claim)
            && !finalizer::has(ip_claim.as_ref(), in_use)
        {
            writes::add_finalizer(&ctx.base, &api, ip_claim.as_ref(), in_use).await?;
        }
    }
    Ok(())
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
    let made = list_made_for(&api, claim, "list IPAddressClaims of the data claim").await?;
    for ip_claim in &made {
        writes::delete_same(&api, ip_claim, "delete IPAddressClaim").await?;
        // The server is released (the data claim is let go only then): the address may go.
        let in_use = keys::FINALIZER_ADDRESS_IN_USE;
        if finalizer::has(ip_claim, in_use) {
            writes::remove_finalizer(&ctx.base, &api, ip_claim, in_use).await?;
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "addresses_tests.rs"]
mod tests;
