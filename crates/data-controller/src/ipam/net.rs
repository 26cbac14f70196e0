//! Address arithmetic and parsing for the IPAM provider: address families, addresses as
//! numbers, inclusive intervals, IP/CIDR parsing, and [`LayoutError`] (a field and what is
//! wrong with it). Pure.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use capmaas_api::MaasIPPoolSpec;
use capmaas_api::ipam::IpPoolRange;
use ipnet::IpNet;

/// An address family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

impl Family {
    /// The family of `ip`.
    pub fn of(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(_) => Self::V4,
            IpAddr::V6(_) => Self::V6,
        }
    }

    /// Address length in bits.
    pub fn bits(self) -> u8 {
        match self {
            Self::V4 => 32,
            Self::V6 => 128,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::V4 => "IPv4",
            Self::V6 => "IPv6",
        }
    }
}

/// `ip` as a number (an IPv4 address is its 32-bit value).
pub fn to_u128(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

/// The address of `family` numbered `value` (IPv4 values saturate at 255.255.255.255).
pub fn from_u128(family: Family, value: u128) -> IpAddr {
    match family {
        Family::V4 => IpAddr::V4(Ipv4Addr::from(u32::try_from(value).unwrap_or(u32::MAX))),
        Family::V6 => IpAddr::V6(Ipv6Addr::from(value)),
    }
}

/// Why a pool spec cannot be served, naming the field (`spec.pools[1].end`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct LayoutError {
    /// JSON path of the field at fault, e.g. `spec.pools[1].end`.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl LayoutError {
    pub(crate) fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Whether a network of `prefix` in `family` has a network (and, for IPv4, broadcast) address
/// that must not be handed out: networks of one or two addresses (/31, /32, /127, /128) use all.
pub(crate) fn has_reserved_ends(family: Family, prefix: u8) -> bool {
    family.bits() - prefix >= 2
}

pub(crate) fn host_mask(family: Family, prefix: u8) -> u128 {
    let host_bits = u32::from(family.bits() - prefix);
    if host_bits >= 128 {
        u128::MAX
    } else {
        (1u128 << host_bits) - 1
    }
}

pub(crate) fn parse_ip(field: &str, text: &str) -> Result<IpAddr, LayoutError> {
    IpAddr::from_str(text)
        .map_err(|_| LayoutError::new(field, format!("{text:?} is not an IP address")))
}

pub(crate) fn parse_net(field: &str, text: &str) -> Result<IpNet, LayoutError> {
    IpNet::from_str(text)
        .map(|n| n.trunc())
        .map_err(|_| LayoutError::new(field, format!("{text:?} is not a CIDR such as 10.0.0.0/24")))
}

/// Inclusive intervals sorted and merged.
pub(crate) fn merge(mut intervals: Vec<(u128, u128)>) -> Vec<(u128, u128)> {
    intervals.sort_unstable();
    let mut out: Vec<(u128, u128)> = Vec::with_capacity(intervals.len());
    for (s, e) in intervals {
        match out.last_mut() {
            Some(last) if s <= last.1.saturating_add(1) => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// `start..=end` without the (sorted, merged) `removed` intervals.
pub(crate) fn subtract(start: u128, end: u128, removed: &[(u128, u128)]) -> Vec<(u128, u128)> {
    let mut out = Vec::new();
    let mut cursor = Some(start);
    for &(s, e) in removed {
        let Some(c) = cursor else { break };
        if e < c {
            continue;
        }
        if s > end {
            break;
        }
        if s > c {
            out.push((c, s - 1));
        }
        cursor = e.checked_add(1).filter(|&n| n <= end);
    }
    if let Some(c) = cursor {
        out.push((c, end));
    }
    out
}

pub(crate) fn parse_dns(field: &str, list: Option<&[String]>) -> Result<Vec<IpAddr>, LayoutError> {
    list.unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(j, t)| parse_ip(&format!("{field}[{j}]"), t))
        .collect()
}

/// The prefix of `spec.pools[i]`: its own (which must agree with its subnet), else its
/// subnet's, else `spec.prefix`; valid for `family`.
pub(crate) fn resolve_prefix(
    spec: &MaasIPPoolSpec,
    i: usize,
    range: &IpPoolRange,
    subnet: Option<IpNet>,
    family: Family,
) -> Result<u8, LayoutError> {
    let checked = |field: String, p: i32| {
        u8::try_from(p)
            .ok()
            .filter(|&p| p <= family.bits())
            .ok_or_else(|| {
                LayoutError::new(
                    field,
                    format!(
                        "{p} is not a valid {} prefix length (0-{})",
                        family.name(),
                        family.bits()
                    ),
                )
            })
    };
    match (range.prefix, subnet) {
        (Some(p), Some(net)) => {
            let p = checked(format!("spec.pools[{i}].prefix"), p)?;
            if p == net.prefix_len() {
                Ok(p)
            } else {
                Err(LayoutError::new(
                    format!("spec.pools[{i}].prefix"),
                    format!("{p} contradicts subnet {net}"),
                ))
            }
        }
        (Some(p), None) => checked(format!("spec.pools[{i}].prefix"), p),
        (None, Some(net)) => Ok(net.prefix_len()),
        (None, None) => match spec.prefix {
            Some(p) => checked("spec.prefix".to_owned(), p),
            None => Err(LayoutError::new(
                format!("spec.pools[{i}].prefix"),
                format!(
                    "no prefix length: set spec.pools[{i}].prefix, spec.pools[{i}].subnet or spec.prefix"
                ),
            )),
        },
    }
}
