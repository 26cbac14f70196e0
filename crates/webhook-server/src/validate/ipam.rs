//! MaasIPPool: a pool data-controller can serve, and no address handed out twice.
//!
//! The pool is read by the code data-controller serves it with ([`PoolLayout`] from
//! `capmaas_api::ipam_layout`), so what is admitted here is what the controller accepts, and a
//! layout error becomes a field error worded as the API server words them. On top of that come
//! rules the controller tolerates but a person almost certainly did not mean (a start/end range
//! around its gateway, an exclusion that excludes nothing, a range outside `spec.maasSubnet`),
//! and the overlaps with other pools, which no reconcile of a single pool can see.
//!
//! Updates that leave `spec` alone are not checked: a pool admitted before these rules (or
//! while this server was down) must still take finalizer and label changes, or its deletion
//! would hang.

use capmaas_api::MaasIPPool;
use capmaas_api::ipam_layout::{Family, LayoutError, LayoutFault, PoolLayout, to_u128};
use capmaas_api::ipam_net::parse_net;
use capmaas_api::ipam_preallocation::key_problem;
use ipnet::IpNet;

use super::{Lookups, Operation, Request, deleting_for_move, key_of};
use crate::field::{FieldPath, Verdict};

/// MaasIPPool: a servable layout, no gateway inside a start/end range, exclusions inside the
/// ranges, ranges inside `spec.maasSubnet`, no overlap with other pools; a warning when a pool
/// with addresses in use is deleted.
pub(crate) fn maas_ip_pool(req: &Request<'_, MaasIPPool>, lookups: &dyn Lookups) -> Verdict {
    match (req.operation, req.object) {
        (Operation::Delete, _) => deletion(req),
        (Operation::Update, Some(pool)) if req.old.is_some_and(|old| old.spec == pool.spec) => {
            Verdict::ok()
        }
        (Operation::Create | Operation::Update, Some(pool)) => admission(req, pool, lookups),
        (Operation::Create | Operation::Update, None) => Verdict::ok(),
    }
}

/// One range of a pool as numbers, with its index in `spec.pools`.
#[derive(Clone, Copy, Debug)]
struct Span {
    first: u128,
    last: u128,
    index: usize,
}

/// The ranges of `layout` sorted by address; they never overlap (the layout rejects that).
fn spans(layout: &PoolLayout) -> Vec<Span> {
    let mut spans: Vec<Span> = layout
        .ranges()
        .iter()
        .enumerate()
        .map(|(index, r)| Span {
            first: to_u128(r.first),
            last: to_u128(r.last),
            index,
        })
        .collect();
    spans.sort_unstable_by_key(|s| s.first);
    spans
}

fn admission(req: &Request<'_, MaasIPPool>, pool: &MaasIPPool, lookups: &dyn Lookups) -> Verdict {
    let mut v = Verdict::ok();
    let layout = match PoolLayout::from_spec(&pool.spec) {
        Ok(layout) => layout,
        Err(e) => {
            // The other rules need the ranges; the first fault is enough to act on.
            layout_error(&mut v, &e);
            return v;
        }
    };
    let mine = spans(&layout);
    pre_allocation_keys(pool, &mut v);
    gateways(pool, &layout, &mut v);
    exclusions(pool, &layout, &mine, &mut v);
    let maas_subnet = maas_subnet(pool, &layout, &mut v);
    other_pools(req, &layout, &mine, maas_subnet, lookups, &mut v);
    v
}

/// A [`LayoutError`] as the API server would word it: the value is shown by the error type,
/// so the layout's message loses its leading copy of it.
fn layout_error(v: &mut Verdict, e: &LayoutError) {
    let path = FieldPath::root(&e.field);
    let detail = |value: &str| {
        [value.to_owned(), format!("{value:?}")]
            .iter()
            .find_map(|shown| e.message.strip_prefix(shown.as_str()))
            .map_or(e.message.as_str(), str::trim_start)
            .to_owned()
    };
    match &e.fault {
        LayoutFault::Invalid(value) => v.invalid(&path, value, detail(value)),
        LayoutFault::Duplicate(value) => v.duplicate(&path, value, detail(value)),
        LayoutFault::Required => v.required(&path, e.message.as_str()),
    }
}

/// A start/end range around its gateway: the allocator would skip the gateway, but bounds that
/// take it in are almost always a typo. A `subnet` range contains its gateway by nature.
fn gateways(pool: &MaasIPPool, layout: &PoolLayout, v: &mut Verdict) {
    let pools = FieldPath::root("spec").child("pools");
    for (i, (range, info)) in pool.spec.pools.iter().zip(layout.ranges()).enumerate() {
        if range.start.is_none() || range.end.is_none() {
            continue;
        }
        let Some(gateway) = info.gateway else {
            continue;
        };
        let g = to_u128(gateway);
        if to_u128(info.first) <= g && g <= to_u128(info.last) {
            let source = if range.gateway.is_some() {
                format!("spec.pools[{i}].gateway")
            } else {
                "spec.gateway".to_owned()
            };
            v.invalid(
                &pools.index(i),
                info.span(),
                format!(
                    "contains the gateway {gateway} ({source}); start the range after the \
                     gateway or end it before"
                ),
            );
        }
    }
}

/// A `spec.preAllocations` key names an IPAddressClaim or a Machine; one that is no object
/// name can match neither, and the address it holds would never be handed out.
fn pre_allocation_keys(pool: &MaasIPPool, v: &mut Verdict) {
    let path = FieldPath::root("spec").child("preAllocations");
    for key in pool.spec.pre_allocations.iter().flat_map(|p| p.keys()) {
        if let Some(why) = key_problem(key) {
            v.invalid(&path.key(key), key, why);
        }
    }
}

/// An exclusion that touches no range excludes nothing: a stale entry or a typo.
fn exclusions(pool: &MaasIPPool, layout: &PoolLayout, mine: &[Span], v: &mut Verdict) {
    let path = FieldPath::root("spec").child("exclusions");
    let written = pool.spec.exclusions.as_deref().unwrap_or_default();
    for (k, &(lo, hi)) in layout.exclusions().iter().enumerate() {
        let below = mine.partition_point(|s| s.first <= hi);
        let touches = below > 0 && mine[below - 1].last >= lo;
        if !touches {
            v.invalid(
                &path.index(k),
                written.get(k).map_or("", String::as_str),
                "outside every range of spec.pools; it excludes nothing",
            );
        }
    }
}

/// maas-client reserves each range in the MAAS subnet `spec.maasSubnet`; MAAS refuses a range
/// outside it. Returns the subnet for the cross-pool rule.
fn maas_subnet(pool: &MaasIPPool, layout: &PoolLayout, v: &mut Verdict) -> Option<IpNet> {
    let text = pool.spec.maas_subnet.as_deref()?;
    let net = match parse_net("spec.maasSubnet", text) {
        Ok(net) => net,
        Err(e) => {
            layout_error(v, &e);
            return None;
        }
    };
    let same_family = Family::of(net.network()) == layout.family();
    let (lo, hi) = (to_u128(net.network()), to_u128(net.broadcast()));
    let pools = FieldPath::root("spec").child("pools");
    for (i, r) in layout.ranges().iter().enumerate() {
        if !(same_family && lo <= to_u128(r.first) && to_u128(r.last) <= hi) {
            v.invalid(
                &pools.index(i),
                r.span(),
                format!("outside spec.maasSubnet {net}, so MAAS cannot reserve it for this pool"),
            );
        }
    }
    Some(net)
}

/// Overlaps with every other pool. In one namespace two pools would compete for the same
/// addresses; across namespaces a shared MAAS subnet proves it too, otherwise a warning says
/// so. This judges from a cache: the address lock (data-controller) is what keeps two pools
/// created at the same moment from handing out one address twice.
fn other_pools(
    req: &Request<'_, MaasIPPool>,
    layout: &PoolLayout,
    mine: &[Span],
    maas_subnet: Option<IpNet>,
    lookups: &dyn Lookups,
    v: &mut Verdict,
) {
    let pools = FieldPath::root("spec").child("pools");
    for other in lookups.ip_pools() {
        let meta = &other.metadata;
        let same_namespace = meta.namespace.as_deref() == Some(req.namespace);
        if same_namespace && meta.name.as_deref() == Some(req.name) {
            continue;
        }
        // A pool the controller cannot serve hands out nothing.
        let Ok(theirs) = PoolLayout::from_spec(&other.spec) else {
            continue;
        };
        if theirs.family() != layout.family() {
            continue;
        }
        let pairs = overlapping(mine, &spans(&theirs));
        if pairs.is_empty() {
            continue;
        }
        let shared_subnet = maas_subnet.filter(|net| {
            other
                .spec
                .maas_subnet
                .as_deref()
                .and_then(|t| parse_net("", t).ok())
                == Some(*net)
        });
        let deleting = if meta.deletion_timestamp.is_some() {
            " (being deleted, but holding its addresses until they are released)"
        } else {
            ""
        };
        let key = key_of(meta);
        for (i, j) in pairs {
            let (own, their) = (layout.ranges()[i].span(), theirs.ranges()[j].span());
            let overlap =
                format!("overlaps spec.pools[{j}] ({their}) of MaasIPPool {key}{deleting}");
            if same_namespace {
                v.invalid(
                    &pools.index(i),
                    own,
                    format!("{overlap}; the two pools would hand out the same addresses twice"),
                );
            } else if let Some(net) = shared_subnet {
                v.invalid(
                    &pools.index(i),
                    own,
                    format!(
                        "{overlap}, and both pools reserve from MAAS subnet {net} \
                         (spec.maasSubnet); the two pools would hand out the same addresses \
                         twice"
                    ),
                );
            } else {
                v.warn(
                    &pools.index(i),
                    format!(
                        "{own} {overlap} in another namespace; the two pools share these \
                         addresses (each goes to whichever claim takes its MaasIPAddressLock \
                         first), so either may run out early"
                    ),
                );
            }
        }
    }
}

/// For each range of `mine` that meets a range of `theirs`, the first such pair of
/// `spec.pools` indexes. Both lists are sorted and free of inner overlaps, so one merge-like
/// walk finds them all.
fn overlapping(mine: &[Span], theirs: &[Span]) -> Vec<(usize, usize)> {
    let mut pairs: Vec<(usize, usize)> = Vec::new();
    let (mut a, mut b) = (0, 0);
    while let (Some(m), Some(t)) = (mine.get(a), theirs.get(b)) {
        if m.first <= t.last && t.first <= m.last && pairs.last().is_none_or(|p| p.0 != m.index) {
            pairs.push((m.index, t.index));
        }
        // The range that ends first cannot meet anything further on the other side.
        if m.last < t.last {
            a += 1;
        } else {
            b += 1;
        }
    }
    pairs
}

/// Deleting a pool is never refused; when addresses are in use, say what the IPAM provider's
/// finalizer will do.
fn deletion(req: &Request<'_, MaasIPPool>) -> Verdict {
    let mut v = Verdict::ok();
    let Some(old) = req.old else {
        return v;
    };
    if deleting_for_move(&old.metadata) {
        return v;
    }
    let in_use = old
        .status
        .as_ref()
        .and_then(|s| s.addresses_in_use)
        .unwrap_or(0);
    if in_use > 0 {
        let counted = if in_use == 1 {
            "1 address of this pool is in use".to_owned()
        } else {
            format!("{in_use} addresses of this pool are in use")
        };
        v.warn(
            &FieldPath::root("status").child("addressesInUse"),
            format!(
                "{counted}; the pool stays Terminating until the IPAddressClaims holding them \
                 are deleted and release their IPAddresses (the machines keep their addresses \
                 until then), and no new claim gets an address from it"
            ),
        );
    }
    v
}

#[cfg(test)]
#[path = "ipam_tests.rs"]
mod tests;
