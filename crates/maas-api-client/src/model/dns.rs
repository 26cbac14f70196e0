//! DNS resources and domains.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::{null_default, optional_ip};

/// A DNS domain.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Domain {
    /// Id (the default domain is usually 0).
    pub id: i64,
    /// Name, e.g. `maas`.
    #[serde(deserialize_with = "null_default")]
    pub name: String,
    /// Default TTL.
    pub ttl: Option<u32>,
    /// Whether MAAS is authoritative.
    pub authoritative: bool,
    /// Whether this is the default domain.
    pub is_default: bool,
    /// Number of records.
    pub resource_record_count: Option<u64>,
    /// API path.
    #[serde(deserialize_with = "null_default")]
    pub resource_uri: String,
}

/// An address attached to a DNS resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DnsIpAddress {
    /// The address.
    #[serde(default, deserialize_with = "optional_ip")]
    pub ip: Option<IpAddr>,
    /// Allocation type number.
    #[serde(default)]
    pub alloc_type: Option<i64>,
    /// Allocation type label, e.g. `User reserved`.
    #[serde(default)]
    pub alloc_type_name: Option<String>,
}

/// A non-address record (CNAME, TXT, ...) of a DNS resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceRecord {
    /// Id, when MAAS reports one.
    #[serde(default)]
    pub id: Option<i64>,
    /// Record type.
    #[serde(default, deserialize_with = "null_default")]
    pub rrtype: String,
    /// Record data.
    #[serde(default, deserialize_with = "null_default")]
    pub rrdata: String,
    /// TTL.
    #[serde(default)]
    pub ttl: Option<u32>,
}

/// A DNS resource (a name with addresses and records).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DnsResource {
    /// Id (`-1` for implicit node records listed with `all=true`).
    pub id: i64,
    /// Fully qualified name.
    #[serde(default, deserialize_with = "null_default")]
    pub fqdn: String,
    /// TTL of the address records.
    #[serde(default)]
    pub address_ttl: Option<u32>,
    /// Addresses.
    #[serde(default, deserialize_with = "null_default")]
    pub ip_addresses: Vec<DnsIpAddress>,
    /// Other records.
    #[serde(default, deserialize_with = "null_default")]
    pub resource_records: Vec<ResourceRecord>,
    /// API path.
    #[serde(default, deserialize_with = "null_default")]
    pub resource_uri: String,
}

impl DnsResource {
    /// The addresses as IPs.
    pub fn ips(&self) -> Vec<IpAddr> {
        self.ip_addresses.iter().filter_map(|a| a.ip).collect()
    }
}
