//! A MaasIPPool's address layout, built once per pool spec: its ranges with their prefix,
//! gateway and DNS servers, and the allocatable segments left after exclusions.
//!
//! Pure: [`PoolLayout::from_spec`] reads a [`MaasIPPoolSpec`] and either returns the layout or
//! a [`LayoutError`] naming the field at fault (`spec.pools[1].end: ...`). It lives in the API
//! crate so that data-controller (which serves pools) and the admission webhook (which rejects
//! what the controller could not serve) read a pool the same way. Addresses are
//! handled as `u128` (an IPv4 address is its `u32` value), so IPv4 and IPv6 share one
//! arithmetic; a pool holds one address family.
//!
//! Never handed out by the allocator: the network address of each range's network (and the
//! broadcast address for IPv4) when the network has more than two addresses, each range's
//! gateway, every `spec.exclusions` entry, and the `spec.preAllocations` addresses (those go to
//! their named claim only).

use std::collections::BTreeMap;
use std::net::IpAddr;

use ipnet::IpNet;

use crate::ipam::IpPoolRange;
use crate::ipam::MaasIPPoolSpec;
pub use crate::ipam_net::{Family, LayoutError, LayoutFault, from_u128, to_u128};
use crate::ipam_net::{
    has_reserved_ends, host_mask, merge, parse_dns, parse_exclusion, parse_ip, parse_net,
    resolve_prefix, subtract,
};

/// One `spec.pools[]` entry, resolved: bounds, and the prefix, gateway and DNS servers of its
/// addresses (its own, else the pool's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangeInfo {
    /// First address of the range.
    pub first: IpAddr,
    /// Last address of the range.
    pub last: IpAddr,
    /// Prefix length of the range's network.
    pub prefix: u8,
    /// Gateway of the range's network, if any.
    pub gateway: Option<IpAddr>,
    /// DNS servers for addresses of the range (may be empty).
    pub dns_servers: Vec<IpAddr>,
}

impl RangeInfo {
    /// `first-last`, the range as messages show it.
    pub fn span(&self) -> String {
        format!("{}-{}", self.first, self.last)
    }
}

/// Allocatable addresses `start..=end` of `spec.pools[range]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// First address (as a number).
    pub start: u128,
    /// Last address (as a number), inclusive.
    pub end: u128,
    /// Index of the `spec.pools[]` entry.
    pub range: usize,
}

impl Segment {
    /// Number of addresses (saturating at `u128::MAX`).
    pub fn len(&self) -> u128 {
        (self.end - self.start).saturating_add(1)
    }

    /// Always false: a segment holds at least one address.
    pub fn is_empty(&self) -> bool {
        false
    }
}

/// Prefix, gateway and DNS servers of one address of a pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddressInfo<'a> {
    /// Prefix length.
    pub prefix: u8,
    /// Gateway, if the range has one.
    pub gateway: Option<IpAddr>,
    /// DNS servers (may be empty).
    pub dns_servers: &'a [IpAddr],
}

/// The resolved layout of a MaasIPPool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolLayout {
    family: Family,
    ranges: Vec<RangeInfo>,
    /// Allocatable segments in pool order: ranges in spec order, each range's pieces ascending.
    segments: Vec<Segment>,
    /// The same segments sorted by address, for membership tests.
    sorted: Vec<(u128, u128)>,
    positions: u128,
    pre_allocations: BTreeMap<String, IpAddr>,
    /// `spec.exclusions` as inclusive intervals, in spec order.
    exclusions: Vec<(u128, u128)>,
    default_dns: Vec<IpAddr>,
}

impl PoolLayout {
    /// Resolves `spec`, or names the first field that makes it unusable.
    pub fn from_spec(spec: &MaasIPPoolSpec) -> Result<Self, LayoutError> {
        Builder::default().build(spec)
    }

    /// The pool's address family.
    pub fn family(&self) -> Family {
        self.family
    }

    /// The resolved `spec.pools[]`, in spec order.
    pub fn ranges(&self) -> &[RangeInfo] {
        &self.ranges
    }

    /// Allocatable segments in allocation order.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// Number of allocatable addresses (pre-allocations excluded), saturating.
    pub fn positions(&self) -> u128 {
        self.positions
    }

    /// The address pre-allocated to the claim named `claim`.
    pub fn pre_allocation(&self, claim: &str) -> Option<IpAddr> {
        self.pre_allocations.get(claim).copied()
    }

    /// Every pre-allocation, claim name → address.
    pub fn pre_allocations(&self) -> &BTreeMap<String, IpAddr> {
        &self.pre_allocations
    }

    /// `spec.exclusions` as inclusive intervals of numbers, in spec order (entry `k` is
    /// `spec.exclusions[k]`), whether or not they touch a range.
    pub fn exclusions(&self) -> &[(u128, u128)] {
        &self.exclusions
    }

    /// Whether the allocator may hand out `addr` (inside a segment).
    pub fn is_allocatable(&self, addr: IpAddr) -> bool {
        Family::of(addr) == self.family && self.is_allocatable_value(to_u128(addr))
    }

    /// [`is_allocatable`](Self::is_allocatable) for a number of this pool's family.
    pub fn is_allocatable_value(&self, value: u128) -> bool {
        let i = self.sorted.partition_point(|&(start, _)| start <= value);
        i > 0 && self.sorted[i - 1].1 >= value
    }

    /// The first range (in spec order) holding `addr`.
    pub fn range_of(&self, addr: IpAddr) -> Option<&RangeInfo> {
        if Family::of(addr) != self.family {
            return None;
        }
        let v = to_u128(addr);
        self.ranges
            .iter()
            .find(|r| to_u128(r.first) <= v && v <= to_u128(r.last))
    }

    /// Prefix, gateway and DNS servers of `addr`, when it lies in one of the ranges.
    pub fn address_info(&self, addr: IpAddr) -> Option<AddressInfo<'_>> {
        self.range_of(addr).map(|r| AddressInfo {
            prefix: r.prefix,
            gateway: r.gateway,
            dns_servers: &r.dns_servers,
        })
    }
}

/// DNS servers for `addr` from `layout`: its range's own, else the pool's `spec.dnsServers`
/// (also for an address outside every range). CAPI's `IPAddress` has no DNS field, so the data
/// renderer reads them here.
pub fn dns_servers_for(layout: &PoolLayout, addr: IpAddr) -> &[IpAddr] {
    layout
        .range_of(addr)
        .map_or(layout.default_dns.as_slice(), |r| r.dns_servers.as_slice())
}

/// A range being resolved, with the addresses never handed out inside it.
struct Resolved {
    info: RangeInfo,
    first: u128,
    last: u128,
    /// Network, broadcast and gateway addresses inside the range, with why.
    reserved: Vec<(u128, &'static str)>,
}

#[derive(Default)]
struct Builder {
    family: Option<(Family, String)>,
}

impl Builder {
    /// Records the pool's family from the first address seen; later ones must match.
    fn check_family(&mut self, field: &str, value: &str, ip: IpAddr) -> Result<(), LayoutError> {
        let family = Family::of(ip);
        match &self.family {
            None => {
                self.family = Some((family, field.to_owned()));
                Ok(())
            }
            Some((f, _)) if *f == family => Ok(()),
            Some((f, first)) => Err(LayoutError::invalid(
                field,
                value,
                format!(
                    "{ip} is {}, but this pool is {} ({first}); a pool holds one address family",
                    family.name(),
                    f.name()
                ),
            )),
        }
    }

    fn family(&self) -> Family {
        self.family.as_ref().map_or(Family::V4, |(f, _)| *f)
    }

    fn build(mut self, spec: &MaasIPPoolSpec) -> Result<PoolLayout, LayoutError> {
        if spec.pools.is_empty() {
            return Err(LayoutError::required(
                "spec.pools",
                "at least one range is required",
            ));
        }
        let default_dns = parse_dns("spec.dnsServers", spec.dns_servers.as_deref())?;
        let mut resolved = Vec::with_capacity(spec.pools.len());
        for (i, range) in spec.pools.iter().enumerate() {
            resolved.push(self.resolve_range(spec, i, range, &default_dns)?);
        }
        check_overlaps(&resolved)?;
        let family = self.family();
        let exclusions = self.exclusions(spec)?;
        let pre_allocations = self.pre_allocations(spec, &resolved, &exclusions)?;
        let pre_points: Vec<(u128, u128)> = pre_allocations
            .values()
            .map(|&ip| (to_u128(ip), to_u128(ip)))
            .collect();
        let mut segments = Vec::new();
        for (i, r) in resolved.iter().enumerate() {
            let mut removed: Vec<(u128, u128)> = r.reserved.iter().map(|&(v, _)| (v, v)).collect();
            removed.extend(
                exclusions
                    .iter()
                    .filter(|x| x.1 >= r.first && x.0 <= r.last)
                    .map(|x| (x.0, x.1)),
            );
            removed.extend(pre_points.iter().copied());
            let removed = merge(removed);
            segments.extend(
                subtract(r.first, r.last, &removed)
                    .into_iter()
                    .map(|(start, end)| Segment {
                        start,
                        end,
                        range: i,
                    }),
            );
        }
        let positions = segments
            .iter()
            .fold(0u128, |acc, s| acc.saturating_add(s.len()));
        let mut sorted: Vec<(u128, u128)> = segments.iter().map(|s| (s.start, s.end)).collect();
        sorted.sort_unstable();
        Ok(PoolLayout {
            family,
            ranges: resolved.into_iter().map(|r| r.info).collect(),
            segments,
            sorted,
            positions,
            pre_allocations,
            exclusions: exclusions.iter().map(|x| (x.0, x.1)).collect(),
            default_dns,
        })
    }

    fn resolve_range(
        &mut self,
        spec: &MaasIPPoolSpec,
        i: usize,
        range: &IpPoolRange,
        default_dns: &[IpAddr],
    ) -> Result<Resolved, LayoutError> {
        let at = |name: &str| format!("spec.pools[{i}].{name}");
        let start = range
            .start
            .as_deref()
            .map(|t| parse_ip(&at("start"), t))
            .transpose()?;
        let end = range
            .end
            .as_deref()
            .map(|t| parse_ip(&at("end"), t))
            .transpose()?;
        let subnet = range
            .subnet
            .as_deref()
            .map(|t| parse_net(&at("subnet"), t))
            .transpose()?;
        if let (Some(ip), Some(text)) = (start, range.start.as_deref()) {
            self.check_family(&at("start"), text, ip)?;
        }
        if let (Some(ip), Some(text)) = (end, range.end.as_deref()) {
            self.check_family(&at("end"), text, ip)?;
        }
        if let (Some(net), Some(text)) = (subnet, range.subnet.as_deref()) {
            self.check_family(&at("subnet"), text, net.network())?;
        }
        let family = self.family();
        let (first, last) = match (subnet, start, end) {
            (Some(net), start, end) => {
                let (lo, hi) = (to_u128(net.network()), to_u128(net.broadcast()));
                for (name, ip) in [("start", start), ("end", end)] {
                    if let Some(ip) = ip
                        && !net.contains(&ip)
                    {
                        return Err(LayoutError::invalid(
                            at(name),
                            ip,
                            format!("{ip} is outside subnet {net}"),
                        ));
                    }
                }
                (start.map_or(lo, to_u128), end.map_or(hi, to_u128))
            }
            (None, Some(s), Some(e)) => (to_u128(s), to_u128(e)),
            (None, None, _) => {
                return Err(LayoutError::required(
                    at("start"),
                    "required when subnet is not set",
                ));
            }
            (None, Some(_), None) => {
                return Err(LayoutError::required(
                    at("end"),
                    "required when subnet is not set",
                ));
            }
        };
        if first > last {
            let (field, value) = if end.is_some() {
                ("end", last)
            } else {
                ("start", first)
            };
            return Err(LayoutError::invalid(
                at(field),
                from_u128(family, value),
                format!(
                    "{} is before start {}",
                    from_u128(family, last),
                    from_u128(family, first)
                ),
            ));
        }
        let prefix = resolve_prefix(spec, i, range, subnet, family)?;
        let mask = host_mask(family, prefix);
        let (net_start, net_end) = (first & !mask, (first & !mask) | mask);
        let network = IpNet::new(from_u128(family, net_start), prefix).map_err(|_| {
            LayoutError::invalid(
                at("prefix"),
                prefix,
                format!("{prefix} is not a valid prefix"),
            )
        })?;
        if last > net_end {
            return Err(LayoutError::invalid(
                at("end"),
                from_u128(family, last),
                format!(
                    "{} is outside {network}, the network of start with prefix {prefix}",
                    from_u128(family, last)
                ),
            ));
        }
        let field = if range.subnet.is_some() {
            "subnet"
        } else {
            "start"
        };
        if prefix == 0 {
            return Err(LayoutError::invalid(
                at(field),
                network,
                format!("{network} is every address; give the network the servers are on"),
            ));
        }
        if let Some((block, what)) = unservable_block(family, first, last) {
            return Err(LayoutError::invalid(
                at(field),
                from_u128(family, first),
                format!(
                    "{} takes in {block} ({what}), which no server can be given",
                    span_text(family, first, last)
                ),
            ));
        }
        let (gateway, gateway_field) = match (range.gateway.as_deref(), spec.gateway.as_deref()) {
            (Some(g), _) => (Some(g), at("gateway")),
            (None, Some(g)) => (Some(g), "spec.gateway".to_owned()),
            (None, None) => (None, String::new()),
        };
        let gateway = gateway.map(|g| parse_ip(&gateway_field, g)).transpose()?;
        if let Some(g) = gateway {
            if Family::of(g) != family {
                return Err(LayoutError::invalid(
                    &gateway_field,
                    g,
                    format!(
                        "{g} is {}, but spec.pools[{i}] is {}",
                        Family::of(g).name(),
                        family.name()
                    ),
                ));
            }
            if !network.contains(&g) {
                return Err(LayoutError::invalid(
                    &gateway_field,
                    g,
                    format!("{g} is outside {network}, the network of spec.pools[{i}]"),
                ));
            }
        }
        let dns_servers = match range.dns_servers.as_deref() {
            Some(servers) => parse_dns(&at("dnsServers"), Some(servers))?,
            None => default_dns.to_vec(),
        };
        let mut reserved = Vec::new();
        if has_reserved_ends(family, prefix) {
            reserved.push((net_start, "the network address"));
            if family == Family::V4 {
                reserved.push((net_end, "the broadcast address"));
            }
        }
        if let Some(g) = gateway {
            reserved.push((to_u128(g), "the gateway"));
        }
        reserved.retain(|&(v, _)| first <= v && v <= last);
        Ok(Resolved {
            info: RangeInfo {
                first: from_u128(family, first),
                last: from_u128(family, last),
                prefix,
                gateway,
                dns_servers,
            },
            first,
            last,
            reserved,
        })
    }

    /// `spec.exclusions` as inclusive intervals, with their index.
    fn exclusions(
        &mut self,
        spec: &MaasIPPoolSpec,
    ) -> Result<Vec<(u128, u128, usize)>, LayoutError> {
        let mut out = Vec::new();
        for (k, text) in spec.exclusions.iter().flatten().enumerate() {
            let field = format!("spec.exclusions[{k}]");
            let (lo, hi) = parse_exclusion(&field, text)?;
            self.check_family(&field, text, lo)?;
            out.push((to_u128(lo), to_u128(hi), k));
        }
        Ok(out)
    }

    fn pre_allocations(
        &mut self,
        spec: &MaasIPPoolSpec,
        ranges: &[Resolved],
        exclusions: &[(u128, u128, usize)],
    ) -> Result<BTreeMap<String, IpAddr>, LayoutError> {
        let mut out = BTreeMap::new();
        let mut by_address: BTreeMap<u128, &str> = BTreeMap::new();
        for (claim, text) in spec.pre_allocations.iter().flatten() {
            let field = format!("spec.preAllocations[{claim}]");
            let ip = parse_ip(&field, text)?;
            self.check_family(&field, text, ip)?;
            let v = to_u128(ip);
            let Some((i, range)) = ranges
                .iter()
                .enumerate()
                .find(|(_, r)| r.first <= v && v <= r.last)
            else {
                return Err(LayoutError::invalid(
                    &field,
                    text,
                    format!("{ip} is outside every range of spec.pools"),
                ));
            };
            if let Some((_, why)) = range.reserved.iter().find(|(r, _)| *r == v) {
                return Err(LayoutError::invalid(
                    &field,
                    text,
                    format!("{ip} is {why} of spec.pools[{i}]"),
                ));
            }
            if let Some(x) = exclusions.iter().find(|x| x.0 <= v && v <= x.1) {
                return Err(LayoutError::invalid(
                    &field,
                    text,
                    format!("{ip} is excluded by spec.exclusions[{}]", x.2),
                ));
            }
            if let Some(other) = by_address.insert(v, claim) {
                return Err(LayoutError::duplicate(
                    &field,
                    text,
                    format!("{ip} is also pre-allocated to {other}"),
                ));
            }
            out.insert(claim.clone(), ip);
        }
        Ok(out)
    }
}

/// Special-purpose blocks no server's interface can carry: the unspecified network, loopback,
/// link-local and multicast (RFC 6890). A range that takes in any of them is a mistake (the
/// allocator would hand out `::1` from `::/0`).
const UNSERVABLE_V4: [(&str, &str); 4] = [
    ("0.0.0.0/8", "the unspecified network"),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local"),
    ("224.0.0.0/4", "multicast"),
];
const UNSERVABLE_V6: [(&str, &str); 4] = [
    ("::/128", "the unspecified address"),
    ("::1/128", "loopback"),
    ("fe80::/10", "link-local"),
    ("ff00::/8", "multicast"),
];

/// The first special-purpose block `[first, last]` overlaps, with what it is.
fn unservable_block(family: Family, first: u128, last: u128) -> Option<(IpNet, &'static str)> {
    let blocks = match family {
        Family::V4 => UNSERVABLE_V4,
        Family::V6 => UNSERVABLE_V6,
    };
    blocks.iter().find_map(|(text, what)| {
        let block: IpNet = text.parse().ok()?;
        let (lo, hi) = (to_u128(block.network()), to_u128(block.broadcast()));
        (first <= hi && lo <= last).then_some((block, *what))
    })
}

fn span_text(family: Family, first: u128, last: u128) -> String {
    if first == last {
        from_u128(family, first).to_string()
    } else {
        format!("{}-{}", from_u128(family, first), from_u128(family, last))
    }
}

fn check_overlaps(ranges: &[Resolved]) -> Result<(), LayoutError> {
    let mut order: Vec<usize> = (0..ranges.len()).collect();
    order.sort_by_key(|&i| (ranges[i].first, i));
    for pair in order.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        if ranges[b].first <= ranges[a].last {
            let (earlier, later) = (a.min(b), a.max(b));
            return Err(LayoutError::invalid(
                format!("spec.pools[{later}]"),
                ranges[later].info.span(),
                format!("overlaps spec.pools[{earlier}]"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "ipam_layout_tests.rs"]
mod tests;
