//! The addresses of a data claim: one CAPI `IPAddressClaim` per pool the template uses, named
//! `<data claim>-<pool>` so a crash or a second replica can only ever make the same one, owned
//! by the data claim and labelled with it. Any IPAM provider may serve them (MaasIPPool is
//! ours); the served `IPAddress` gives address, prefix and gateway, and for a MaasIPPool the
//! pool gives the DNS servers (CAPI `IPAddress` has none).

use capmaas_runtime::error::{Failed, failed};
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;

use capmaas_api::capi::is_capi_owner;
use capmaas_api::capi_ipam::{
    IPAddress, IPAddressClaim, IPAddressClaimSpec, IPPoolReference, MAAS_IP_POOL_KIND,
};
use capmaas_api::common::PoolReference;
use capmaas_api::conditions as cond;
use capmaas_api::ipam_preallocation::ANNOTATION_MACHINE;
use capmaas_api::{MaasDataClaim, MaasIPPool, MaasMachine, keys};
use capmaas_runtime::controller::finalizer;
use capmaas_runtime::status::now;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};

use crate::claim::decide::AddressState;
use crate::claim::handover::holds_for as handover_holds;
use crate::claim::owned::made_for;
use crate::context::Ctx;
use crate::error::Result;
use crate::hold::decide::predecessor;
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

/// Whether `ip_claim` asks `pool` for an address.
fn of_pool(ip_claim: &IPAddressClaim, pool: &PoolReference) -> bool {
    let p = &ip_claim.spec.pool_ref;
    p.name == pool.name && p.kind == pool.kind && p.api_group == pool.api_group
}

/// The IPAddressClaim of `claim` for `pool`: the one of its name, else one it took over from
/// the host's previous machine (`claim::handover`), which keeps its earlier name.
fn own_ip_claim(
    ctx: &Ctx,
    claim: &MaasDataClaim,
    ns: &str,
    pool: &PoolReference,
) -> Option<Arc<IPAddressClaim>> {
    let key = ObjectRef::new(&ip_claim_name(&claim.name_any(), pool)).within(ns);
    ctx.ip_claims.get(&key).or_else(|| {
        ctx.ip_claims.state().into_iter().find(|c| {
            c.namespace().as_deref() == Some(ns) && made_for(c.as_ref(), claim) && of_pool(c, pool)
        })
    })
}

/// What a pool without an IPAddressClaim of this claim waits for: a hold of the host to take
/// over, the host's previous data claim, or nothing (a new claim is made).
fn without_claim(ctx: &Ctx, claim: &MaasDataClaim, pool: &PoolReference) -> AddressState {
    let ip_claims = ctx.ip_claims.state();
    let pools = [pool.clone()];
    let candidates: Vec<&IPAddressClaim> = ip_claims.iter().map(AsRef::as_ref).collect();
    let holds = handover_holds(claim, &pools, &candidates);
    if let Some(hold) = holds.values().next() {
        return AddressState::Held(hold.name_any());
    }
    let claims = ctx.claims.state();
    match predecessor(claims.iter().map(AsRef::as_ref), claim, now().0) {
        Some(previous) => AddressState::AwaitingHandover(previous.name_any()),
        None => AddressState::Missing,
    }
}

/// Where the address of each pool stands, from the stores.
pub fn observe(
    ctx: &Ctx,
    claim: &MaasDataClaim,
    ns: &str,
    pools: &BTreeSet<PoolReference>,
) -> BTreeMap<PoolReference, AddressState> {
    pools
        .iter()
        .map(|pool| {
            let state = match own_ip_claim(ctx, claim, ns, pool) {
                None => without_claim(ctx, claim, pool),
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

/// The Cluster API Machine of the data claim: the owner of the MaasMachine that owns the
/// claim (read from the API server; a claim made by hand has none).
pub async fn machine_of(ctx: &Ctx, claim: &MaasDataClaim, ns: &str) -> Result<Option<String>> {
    let Some(owner) = claim
        .owner_references()
        .iter()
        .find(|o| o.kind == MaasMachine::kind(&()))
    else {
        return Ok(None);
    };
    let maas_machine = Api::<MaasMachine>::namespaced(ctx.base.client.clone(), ns)
        .get_opt(&owner.name)
        .await
        .map_err(failed("read MaasMachine"))?;
    Ok(maas_machine.and_then(|mm| {
        mm.owner_references()
            .iter()
            .find(|o| is_capi_owner(o, "Machine"))
            .map(|o| o.name.clone())
    }))
}

fn new_ip_claim(
    claim: &MaasDataClaim,
    pool: &PoolReference,
    machine: Option<&str>,
) -> Result<IPAddressClaim> {
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
        // `spec.preAllocations` of a MaasIPPool may be keyed by the Machine's name.
        annotations: machine
            .map(|m| BTreeMap::from([(ANNOTATION_MACHINE.to_owned(), m.to_owned())])),
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

/// Creates the IPAddressClaims of `missing` pools, annotated with the claim's Machine; one
/// that exists already is fine.
pub async fn create(
    ctx: &Ctx,
    claim: &MaasDataClaim,
    ns: &str,
    missing: &[PoolReference],
) -> Result<()> {
    let api: Api<IPAddressClaim> = Api::namespaced(ctx.base.client.clone(), ns);
    let machine = machine_of(ctx, claim, ns).await?;
    for pool in missing {
        match api
            .create(
                &PostParams::default(),
                &new_ip_claim(claim, pool, machine.as_deref())?,
            )
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(failed("create IPAddressClaim")(e).into()),
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "addresses_tests.rs"]
mod tests;
