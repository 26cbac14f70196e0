//! DNS resources and domains.

use std::net::IpAddr;

use crate::calls::{collection, numbered_item};
use crate::error::MaasError;
use crate::form::Params;
use crate::model::{DnsResource, Domain};
use crate::transport::{Call, MaasClient};

/// Filters for `GET /dnsresources/`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DnsResourceFilter {
    /// Fully qualified name.
    pub fqdn: Option<String>,
    /// Domain name or id.
    pub domain: Option<String>,
    /// Host part.
    pub name: Option<String>,
    /// Record type (MAAS upper-cases it).
    pub rrtype: Option<String>,
    /// Include implicit node records (listed with id -1).
    pub all: bool,
}

impl DnsResourceFilter {
    /// Filters by FQDN.
    pub fn fqdn(fqdn: impl Into<String>) -> Self {
        Self {
            fqdn: Some(fqdn.into()),
            ..Self::default()
        }
    }

    /// The query parameters.
    pub fn to_params(&self) -> Params {
        let mut params = Params::new();
        params
            .push_opt("fqdn", self.fqdn.as_ref())
            .push_opt("domain", self.domain.as_ref())
            .push_opt("name", self.name.as_ref())
            .push_opt("rrtype", self.rrtype.as_ref())
            .push_flag("all", self.all);
        params
    }
}

/// Fields of a DNS resource to create or update (admin only).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DnsResourceSpec {
    /// Fully qualified name (the domain must exist).
    pub fqdn: String,
    /// Addresses; sent space-separated (MAAS does not split on commas). Empty clears them
    /// on update.
    pub ip_addresses: Vec<IpAddr>,
    /// TTL of the address records.
    pub address_ttl: Option<u32>,
}

impl DnsResourceSpec {
    /// The form parameters.
    pub fn to_params(&self) -> Params {
        let ips = self
            .ip_addresses
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(" ");
        let mut params = Params::new();
        params
            .push("fqdn", self.fqdn.clone())
            .push("ip_addresses", ips)
            .push_opt("address_ttl", self.address_ttl);
        params
    }
}

/// Fields of a new domain (admin only).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DomainSpec {
    /// Name.
    pub name: String,
    /// Whether MAAS is authoritative.
    pub authoritative: Option<bool>,
    /// Default TTL.
    pub ttl: Option<u32>,
}

fn dns_resource_path(id: i64) -> Vec<String> {
    numbered_item("dnsresources", id)
}

impl MaasClient {
    /// `GET /dnsresources/` with filters.
    pub async fn list_dns_resources(
        &self,
        filter: &DnsResourceFilter,
    ) -> Result<Vec<DnsResource>, MaasError> {
        let call =
            Call::get("dnsresources.list", collection("dnsresources")).params(filter.to_params());
        self.json(call).await
    }

    /// `GET /dnsresources/{id}/`.
    pub async fn get_dns_resource(&self, id: i64) -> Result<DnsResource, MaasError> {
        self.get_json("dnsresources.get", dns_resource_path(id))
            .await
    }

    /// `POST /dnsresources/` (admin). Not retried; after an ambiguous failure, list by FQDN.
    pub async fn create_dns_resource(
        &self,
        spec: &DnsResourceSpec,
    ) -> Result<DnsResource, MaasError> {
        self.create("dnsresources.create", "dnsresources", spec.to_params())
            .await
    }

    /// `PUT /dnsresources/{id}/` (admin). Idempotent, retried.
    pub async fn update_dns_resource(
        &self,
        id: i64,
        spec: &DnsResourceSpec,
    ) -> Result<DnsResource, MaasError> {
        self.put_json(
            "dnsresources.update",
            dns_resource_path(id),
            spec.to_params(),
        )
        .await
    }

    /// `DELETE /dnsresources/{id}/` (admin). Retried; a [`MaasError::NotFound`] after a retry
    /// means an earlier attempt already deleted it, so callers treat NotFound as done.
    pub async fn delete_dns_resource(&self, id: i64) -> Result<(), MaasError> {
        self.delete_item("dnsresources.delete", dns_resource_path(id))
            .await
    }

    /// `GET /domains/`.
    pub async fn list_domains(&self) -> Result<Vec<Domain>, MaasError> {
        self.get_json("domains.list", collection("domains")).await
    }

    /// `POST /domains/` (admin). Not retried.
    pub async fn create_domain(&self, spec: &DomainSpec) -> Result<Domain, MaasError> {
        let mut params = Params::new();
        params
            .push("name", spec.name.clone())
            .push_bool("authoritative", spec.authoritative)
            .push_opt("ttl", spec.ttl);
        self.create("domains.create", "domains", params).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_sends_space_separated_addresses() {
        let spec = DnsResourceSpec {
            fqdn: "api.c1.maas".into(),
            ip_addresses: vec!["10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap()],
            address_ttl: Some(30),
        };
        assert_eq!(
            spec.to_params().encode(),
            "fqdn=api.c1.maas&ip_addresses=10.0.0.1+10.0.0.2&address_ttl=30"
        );
        let empty = DnsResourceSpec {
            fqdn: "x.maas".into(),
            ..DnsResourceSpec::default()
        };
        assert_eq!(empty.to_params().encode(), "fqdn=x.maas&ip_addresses=");
    }

    #[test]
    fn filter_params() {
        assert_eq!(
            DnsResourceFilter::fqdn("a.maas").to_params().encode(),
            "fqdn=a.maas"
        );
        let all = DnsResourceFilter {
            all: true,
            rrtype: Some("A".into()),
            ..DnsResourceFilter::default()
        };
        assert_eq!(all.to_params().encode(), "rrtype=A&all=true");
    }
}
