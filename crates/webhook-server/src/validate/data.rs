//! MaasDataTemplate, MaasDataClaim and MaasData: what the schema and CEL cannot see.
//!
//! - A template is admitted only if data-controller can render it: its structure passes the
//!   renderer's own checks (`capmaas_api::data_checks`, one implementation for both), and every
//!   pool reference names a pool kind someone serves. A MaasIPPool that does not exist yet is
//!   only a warning: GitOps tools apply objects in any order, and the claims wait for the pool.
//! - A claim's host is fixed once set: the rendered data (MACs, hostname) belong to it.
//! - A MaasData is named `<template>-<index>`: the name is the lock that keeps two claims
//!   from taking one index.

use std::collections::BTreeSet;

use capmaas_api::capi_ipam::MAAS_IP_POOL_KIND;
use capmaas_api::common::PoolReference;
use capmaas_api::data::MaasDataTemplateSpec;
use capmaas_api::data_checks::{TemplateIssue, TemplateProblem, maas_data_name, template_issues};
use capmaas_api::data_network::Route;
use capmaas_api::{GROUP, MaasData, MaasDataClaim, MaasDataTemplate};

use super::{Lookups, Operation, Request};
use crate::field::{FieldPath, Verdict};

/// MaasDataTemplate: renderable structure, served pool kinds, pools that exist.
pub(crate) fn maas_data_template(
    req: &Request<'_, MaasDataTemplate>,
    lookups: &dyn Lookups,
) -> Verdict {
    let mut v = Verdict::ok();
    let Some(template) = req.object else {
        return v;
    };
    let spec = &template.spec;
    let uses = pool_uses(spec);
    // metaData and networkData are immutable (CEL), so an update carries the data judged at
    // create. Judging it again could only refuse the update, and with it the removal of a
    // finalizer from a template admitted before these rules existed.
    let judged_before = req.operation == Operation::Update
        && req.old.is_some_and(|old| {
            old.spec.meta_data == spec.meta_data && old.spec.network_data == spec.network_data
        });
    if !judged_before {
        for issue in template_issues(spec) {
            structure(issue, &mut v);
        }
        for pool_use in &uses {
            pool_kind(pool_use, &mut v);
        }
    }
    missing_pools(&uses, req.namespace, lookups, &mut v);
    v
}

/// MaasDataClaim: `spec.hostRef` may be set once, then never changed or removed.
pub(crate) fn maas_data_claim(req: &Request<'_, MaasDataClaim>) -> Verdict {
    let mut v = Verdict::ok();
    let (Operation::Update, Some(claim), Some(old)) = (req.operation, req.object, req.old) else {
        return v;
    };
    let Some(was) = &old.spec.host_ref else {
        return v;
    };
    let why = "the rendered data (MACs, hostname) belong to that host; delete the claim to \
               render for another";
    let path = FieldPath::root("spec").child("hostRef");
    match &claim.spec.host_ref {
        Some(now) if now == was => {}
        Some(_) => v.forbidden(
            &path,
            format!(
                "may not change once set (it names MaasHost {:?}): {why}",
                was.name
            ),
        ),
        None => v.forbidden(
            &path,
            format!(
                "may not be removed once set (it names MaasHost {:?}): {why}",
                was.name
            ),
        ),
    }
    v
}

/// MaasData: created as `<spec.template.name>-<spec.index>`.
pub(crate) fn maas_data(req: &Request<'_, MaasData>) -> Verdict {
    let mut v = Verdict::ok();
    let (Operation::Create, Some(data)) = (req.operation, req.object) else {
        return v;
    };
    let name = data
        .metadata
        .name
        .as_deref()
        .filter(|n| !n.is_empty())
        .unwrap_or(req.name);
    let expected = maas_data_name(&data.spec.template.name, data.spec.index);
    if name != expected {
        v.invalid(
            &FieldPath::root("metadata").child("name"),
            name,
            format!(
                "must be {expected:?} (<spec.template.name>-<spec.index>): the name is what makes \
                 an index unique per template, as the API server refuses a second object of one \
                 name"
            ),
        );
    }
    v
}

/// A structural issue in the API server's words. The shared checks name the field as a path
/// already written in this notation, so it is taken whole.
fn structure(issue: TemplateIssue, v: &mut Verdict) {
    let path = FieldPath::root(&issue.field);
    match issue.problem {
        TemplateProblem::UnknownLink { id, expected } => v.invalid(
            &path,
            id,
            format!("no {expected} with this id in spec.networkData.links"),
        ),
        TemplateProblem::BondMember { id, bond } => v.invalid(
            &path,
            id,
            format!("a member of bond {bond:?}: put VLANs and addresses on the bond"),
        ),
        TemplateProblem::FamilyMismatch { value, family } => v.invalid(
            &path,
            value,
            format!("must be an {family} address or network, as the network it belongs to"),
        ),
        TemplateProblem::DuplicateId { id, first } => {
            v.duplicate(&path, id, format!("already the id of {first}"));
        }
        TemplateProblem::DuplicateMember { id, first } => v.duplicate(
            &path,
            id,
            format!("already a member of the bond at {first}; a link joins one bond once"),
        ),
        TemplateProblem::DuplicateVlan {
            vlan_id,
            parent,
            first,
        } => v.duplicate(
            &path,
            vlan_id,
            format!("VLAN {vlan_id} on {parent:?} is already defined by {first}"),
        ),
        // The shared check names the item, as the renderer always did; the key is what repeats.
        TemplateProblem::DuplicateKey { key, first } => v.duplicate(
            &path.child("key"),
            key,
            format!("already the key of {first}; keys are unique across all metaData lists"),
        ),
    }
}

/// One pool reference of the template: the path of the object holding its `name`,
/// `apiGroup` and `kind`, and whether DNS servers are read from it.
#[derive(Debug)]
struct PoolUse {
    path: FieldPath,
    pool: PoolReference,
    dns: bool,
}

/// Every pool reference, in document order.
fn pool_uses(spec: &MaasDataTemplateSpec) -> Vec<PoolUse> {
    let mut uses = Vec::new();
    if let Some(meta) = &spec.meta_data {
        let path = FieldPath::root("spec").child("metaData");
        let lists = [
            ("ipAddressesFromPool", &meta.ip_addresses_from_pool, false),
            ("prefixesFromPool", &meta.prefixes_from_pool, false),
            ("gatewaysFromPool", &meta.gateways_from_pool, false),
            ("dnsServersFromPool", &meta.dns_servers_from_pool, true),
        ];
        for (list, items, dns) in lists {
            for (i, item) in items.iter().flatten().enumerate() {
                let path = path.child(list).index(i);
                uses.push(PoolUse {
                    path,
                    pool: item.pool(),
                    dns,
                });
            }
        }
    }
    let Some(net) = &spec.network_data else {
        return uses;
    };
    let path = FieldPath::root("spec").child("networkData");
    if let Some(networks) = &net.networks {
        let path = path.child("networks");
        for (list, items) in [("ipv4", &networks.ipv4), ("ipv6", &networks.ipv6)] {
            for (i, network) in items.iter().flatten().enumerate() {
                let path = path.child(list).index(i);
                uses.push(PoolUse {
                    path: path.child("ipAddressFromPool"),
                    pool: network.ip_address_from_pool.clone(),
                    dns: false,
                });
                route_uses(&path, network.routes.as_deref(), &mut uses);
            }
        }
        let dhcp = [
            ("ipv4DHCP", &networks.ipv4_dhcp),
            ("ipv6DHCP", &networks.ipv6_dhcp),
        ];
        for (list, items) in dhcp {
            for (i, network) in items.iter().flatten().enumerate() {
                let path = path.child(list).index(i);
                route_uses(&path, network.routes.as_deref(), &mut uses);
            }
        }
    }
    if let Some(pool) = net.services.as_ref().and_then(|s| s.dns_from_pool.as_ref()) {
        uses.push(PoolUse {
            path: path.child("services").child("dnsFromPool"),
            pool: pool.clone(),
            dns: true,
        });
    }
    uses
}

fn route_uses(network: &FieldPath, routes: Option<&[Route]>, uses: &mut Vec<PoolUse>) {
    for (i, route) in routes.unwrap_or_default().iter().enumerate() {
        if let Some(pool) = &route.gateway_from_pool {
            uses.push(PoolUse {
                path: network.child("routes").index(i).child("gatewayFromPool"),
                pool: pool.clone(),
                dns: false,
            });
        }
    }
}

fn is_maas_ip_pool(pool: &PoolReference) -> bool {
    pool.api_group == GROUP && pool.kind == MAAS_IP_POOL_KIND
}

/// A pool kind someone serves. data-controller claims an address from any other group's pool
/// through the CAPI IPAM contract (an `IPAddressClaim` with that `poolRef`), but a CAPI
/// `IPAddress` carries no DNS servers: those come only from a MaasIPPool's spec.
fn pool_kind(pool_use: &PoolUse, v: &mut Verdict) {
    let pool = &pool_use.pool;
    if pool.api_group.is_empty() {
        v.invalid(
            &pool_use.path.child("apiGroup"),
            "",
            format!(
                "the core API group serves no IP pools: use {GROUP} for a MaasIPPool, or the \
                 group of another IPAM provider's pool kind"
            ),
        );
    } else if pool.api_group == GROUP && pool.kind != MAAS_IP_POOL_KIND {
        v.not_supported(
            &pool_use.path.child("kind"),
            &pool.kind,
            "this provider serves MaasIPPool; other IPAM providers' pools are referenced with \
             their own apiGroup",
        );
    } else if pool_use.dns && !is_maas_ip_pool(pool) {
        v.not_supported(
            &pool_use.path.child("kind"),
            &pool.kind,
            format!(
                "DNS servers come only from a MaasIPPool (apiGroup {GROUP}): the IPAddress \
                 another IPAM provider hands out carries none, so rendering would fail"
            ),
        );
    }
}

/// A warning per MaasIPPool missing from the namespace, at the first field naming it.
fn missing_pools(uses: &[PoolUse], namespace: &str, lookups: &dyn Lookups, v: &mut Verdict) {
    let wanted: Vec<&PoolUse> = uses.iter().filter(|u| is_maas_ip_pool(&u.pool)).collect();
    if wanted.is_empty() {
        return;
    }
    let existing: BTreeSet<String> = lookups
        .ip_pools()
        .iter()
        .filter(|p| p.metadata.namespace.as_deref() == Some(namespace))
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    // (pool name, first field naming it, how many other fields name it), in document order.
    let mut missing: Vec<(&str, &FieldPath, usize)> = Vec::new();
    for pool_use in wanted {
        let name = pool_use.pool.name.as_str();
        if existing.contains(name) {
            continue;
        }
        match missing.iter_mut().find(|(n, _, _)| *n == name) {
            Some((_, _, others)) => *others += 1,
            None => missing.push((name, &pool_use.path, 0)),
        }
    }
    for (name, path, others) in missing {
        let also = match others {
            0 => String::new(),
            1 => " (1 other field names it too)".to_owned(),
            n => format!(" ({n} other fields name it too)"),
        };
        v.warn(
            &path.child("name"),
            format!(
                "MaasIPPool {name:?} does not exist in namespace {namespace:?}{also}; the data \
                 claims of this template wait until it does"
            ),
        );
    }
}

#[cfg(test)]
#[path = "data_tests.rs"]
mod tests;
