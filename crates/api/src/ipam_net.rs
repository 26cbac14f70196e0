//! Address arithmetic and parsing for MaasIPPool layouts: address families, addresses as
//! numbers, inclusive intervals, IP/CIDR parsing, and [`LayoutError`] (a field and what is
//! wrong with it). Pure; shared by data-controller (which serves pools) and the admission
//! webhook (which validates them), so both read a pool the same way.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use ipnet::IpNet;

use crate::ipam::IpPoolRange;
use crate::ipam::MaasIPPoolSpec;

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

    /// `IPv4` or `IPv6`, for messages.
    pub fn name(self) -> &'static str {
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

/// The kind of a [`LayoutError`], in the terms of the API server's field errors, so that an
/// admission webhook can answer `Invalid value: "10.0.0.5": ...` without re-reading the spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LayoutFault {
    /// The field's value (as written) is not acceptable.
    Invalid(String),
    /// The field must be set.
    Required,
    /// The field's value (as written) is already taken by another entry.
    Duplicate(String),
}

/// Why a pool spec cannot be served, naming the field (`spec.pools[1].end`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct LayoutError {
    /// JSON path of the field at fault, e.g. `spec.pools[1].end`.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
    /// Whether the value is invalid, missing or a duplicate, with the value.
    pub fault: LayoutFault,
}

impl LayoutError {
    /// `field` holds `value`, which is not acceptable (`message` says why).
    pub fn invalid(
        field: impl Into<String>,
        value: impl fmt::Display,
        message: impl Into<String>,
    ) -> Self {
        Self::with(field, LayoutFault::Invalid(value.to_string()), message)
    }

    /// `field` must be set.
    pub fn required(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::with(field, LayoutFault::Required, message)
    }

    /// `field` repeats `value`, which another entry already has.
    pub fn duplicate(
        field: impl Into<String>,
        value: impl fmt::Display,
        message: impl Into<String>,
    ) -> Self {
        Self::with(field, LayoutFault::Duplicate(value.to_string()), message)
    }

    fn with(field: impl Into<String>, fault: LayoutFault, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
            fault,
        }
    }
}

/// Whether a network of `prefix` in `family` has a network (and, for IPv4, broadcast) address
/// that must not be handed out: networks of one or two addresses (/31, /32, /127, /128) use all.
pub fn has_reserved_ends(family: Family, prefix: u8) -> bool {
    family.bits() - prefix >= 2
}

/// The host bits of a network of `prefix` in `family`, as a mask.
pub fn host_mask(family: Family, prefix: u8) -> u128 {
    let host_bits = u32::from(family.bits() - prefix);
    if host_bits >= 128 {
        u128::MAX
    } else {
        (1u128 << host_bits) - 1
    }
}

/// `text` as an address, or an error on `field`.
pub fn parse_ip(field: &str, text: &str) -> Result<IpAddr, LayoutError> {
    IpAddr::from_str(text)
        .map_err(|_| LayoutError::invalid(field, text, format!("{text:?} is not an IP address")))
}

/// `text` as a network (host bits cleared: `10.0.0.5/24` is `10.0.0.0/24`), or an error on
/// `field`.
pub fn parse_net(field: &str, text: &str) -> Result<IpNet, LayoutError> {
    IpNet::from_str(text).map(|n| n.trunc()).map_err(|_| {
        LayoutError::invalid(
            field,
            text,
            format!("{text:?} is not a CIDR such as 10.0.0.0/24"),
        )
    })
}

/// One `spec.exclusions` entry — an address, `first-last` (spaces allowed) or a CIDR — as its
/// first and last address, or an error on `field`.
pub fn parse_exclusion(field: &str, text: &str) -> Result<(IpAddr, IpAddr), LayoutError> {
    if text.contains('/') {
        let net = parse_net(field, text)?;
        return Ok((net.network(), net.broadcast()));
    }
    let Some((a, b)) = text.split_once('-') else {
        let ip = parse_ip(field, text)?;
        return Ok((ip, ip));
    };
    let (a, b) = (parse_ip(field, a.trim())?, parse_ip(field, b.trim())?);
    if Family::of(a) != Family::of(b) {
        return Err(LayoutError::invalid(
            field,
            text,
            format!("{a} and {b} are of different families"),
        ));
    }
    if to_u128(a) > to_u128(b) {
        return Err(LayoutError::invalid(
            field,
            text,
            format!("{b} is before {a}"),
        ));
    }
    Ok((a, b))
}

/// Inclusive intervals sorted and merged.
pub fn merge(mut intervals: Vec<(u128, u128)>) -> Vec<(u128, u128)> {
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
pub fn subtract(start: u128, end: u128, removed: &[(u128, u128)]) -> Vec<(u128, u128)> {
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

/// A list of DNS servers (`field[j]` names a bad entry); none when the list is unset.
pub fn parse_dns(field: &str, list: Option<&[String]>) -> Result<Vec<IpAddr>, LayoutError> {
    list.unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(j, t)| parse_ip(&format!("{field}[{j}]"), t))
        .collect()
}

/// The prefix of `spec.pools[i]`: its own (which must agree with its subnet), else its
/// subnet's, else `spec.prefix`; valid for `family`.
pub fn resolve_prefix(
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
                LayoutError::invalid(
                    field,
                    p,
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
                Err(LayoutError::invalid(
                    format!("spec.pools[{i}].prefix"),
                    p,
                    format!("{p} contradicts subnet {net}"),
                ))
            }
        }
        (Some(p), None) => checked(format!("spec.pools[{i}].prefix"), p),
        (None, Some(net)) => Ok(net.prefix_len()),
        (None, None) => match spec.prefix {
            Some(p) => checked("spec.prefix".to_owned(), p),
            None => Err(LayoutError::required(
                format!("spec.pools[{i}].prefix"),
                format!(
                    "no prefix length: set spec.pools[{i}].prefix, spec.pools[{i}].subnet or spec.prefix"
                ),
            )),
        },
    }
}
