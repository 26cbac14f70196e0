//! Typed MAAS objects.
//!
//! Every type ignores unknown fields and defaults absent ones, so a newer MAAS does not break
//! decoding; a field with the wrong type is a decode error, never a panic.

/// Serializes enums of MAAS strings (the known values plus `Other` for any later one) as the
/// wire string their `as_str` gives, so a value read from MAAS is written back unchanged.
macro_rules! serialize_as_str {
    ($($ty:ty),+ $(,)?) => {$(
        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }
    )+};
}

mod dns;
mod inventory;
mod list;
mod machine;
mod network;
mod status;
mod vm_host;

pub use dns::{DnsIpAddress, DnsResource, Domain, ResourceRecord};
pub use inventory::{BootResource, CurrentUser, ResourcePool, Tag, TagUpdateResult, Version, Zone};
pub use list::{MAX_SKIP_ERROR, MAX_SKIPPED_SYSTEM_ID, MachineList, SkippedMachine};
pub use machine::{DefaultGateway, DefaultGateways, Machine, PowerStateReport};
pub use network::{Interface, InterfaceParams, IpRange, IpRangeType, Link, LinkMode, Subnet, Vlan};
pub use status::{MachineStatus, PowerState};
pub use vm_host::{ComposedMachine, NodeRef, PodRef, VmHost, VmHostResources, VmHostStoragePool};

use serde::{Deserialize, Deserializer};

/// Decodes `null` as the type's default (MAAS sends `null` for many unset strings and lists).
pub(crate) fn null_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Decodes an optional IP address; `null` and `""` mean none, anything else must parse.
pub(crate) fn optional_ip<'de, D>(deserializer: D) -> Result<Option<std::net::IpAddr>, D::Error>
where
    D: Deserializer<'de>,
{
    match Option::<String>::deserialize(deserializer)? {
        None => Ok(None),
        Some(s) if s.trim().is_empty() => Ok(None),
        Some(s) => s.trim().parse().map(Some).map_err(serde::de::Error::custom),
    }
}

/// Decodes a list of IP addresses, skipping `null` entries and empty strings.
pub(crate) fn ip_list<'de, D>(deserializer: D) -> Result<Vec<std::net::IpAddr>, D::Error>
where
    D: Deserializer<'de>,
{
    let raw: Option<Vec<Option<String>>> = Option::deserialize(deserializer)?;
    raw.unwrap_or_default()
        .into_iter()
        .flatten()
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().parse().map_err(serde::de::Error::custom))
        .collect()
}

#[cfg(test)]
mod fuzz_tests;
