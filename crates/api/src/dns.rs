//! `MaasDNSRecord`: one MAAS DNS resource (A/AAAA records), created by
//! cluster-controller for the control-plane endpoint and synced by maas-client.

// `KubeSchema` copies each struct, `pub` included, into a function body to build
// its schema; rustc then reports the copy as an unreachable `pub` item.
#![allow(unreachable_pub)]

use kube::KubeSchema;

use crate::kind::{provider_kind, provider_status};

provider_kind! {
    /// Desired DNS record.
    #[derive(KubeSchema)]
    #[kube(
        kind = "MaasDNSRecord",
        namespaced,
        status = "MaasDNSRecordStatus",
        doc = "MaasDNSRecord is one MAAS DNS resource <name>.<domain> with A/AAAA records for the given addresses. The record is deleted from MAAS when the object is deleted.",
        shortname = "maasdns",
        printcolumn(
            name = "Name",
            type_ = "string",
            json_path = ".spec.name",
            description = "Host part of the FQDN"
        ),
        printcolumn(
            name = "Domain",
            type_ = "string",
            json_path = ".spec.domain",
            description = "MAAS DNS domain"
        ),
        printcolumn(
            name = "Addresses",
            type_ = "string",
            json_path = ".spec.addresses",
            description = "Published addresses"
        ),
        printcolumn(
            name = "Ready",
            type_ = "boolean",
            json_path = ".status.ready",
            description = "MAAS holds the requested addresses"
        )
    )]
    // Creation is the one moment the admission policy checks who writes a record, so the claim
    // to take over a MAAS resource must not be added or dropped later.
    #[x_kube(validation = Rule::new("has(self.adoptExisting) == has(oldSelf.adoptExisting) && (!has(self.adoptExisting) || self.adoptExisting == oldSelf.adoptExisting)")
        .message("spec.adoptExisting is immutable")
        .field_path(".adoptExisting")
        .reason(Reason::FieldValueForbidden))]
    // Only CAPMAAS's generated shape may take over a resource: any other name stays as safe
    // from adoption as before the field existed.
    #[x_kube(validation = Rule::new("!has(self.adoptExisting) || !self.adoptExisting || self.name.matches('-[0-9a-f]{6}$')")
        .message("spec.adoptExisting is only for a name CAPMAAS generated: <cluster>-<6 hex digits>")
        .field_path(".adoptExisting"))]
    pub struct MaasDNSRecordSpec {
        /// Host part of the FQDN (a DNS label). Immutable: a new name is a new record.
        #[schemars(length(min = 1, max = 63), pattern(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"))]
        #[x_kube(validation = Rule::new("self == oldSelf").message("spec.name is immutable").reason(Reason::FieldValueForbidden))]
        pub name: String,
        /// MAAS DNS domain, e.g. `maas`. Immutable.
        #[schemars(length(min = 1, max = 253))]
        #[x_kube(validation = Rule::new("self == oldSelf").message("spec.domain is immutable").reason(Reason::FieldValueForbidden))]
        pub domain: String,
        /// IPv4/IPv6 addresses of the record. An empty list keeps the record
        /// without addresses (used before the first control-plane machine exists).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(length(max = 32), inner(length(max = 64)))]
        #[x_kube(validation = Rule::new("self.all(a, isIP(a))").message("spec.addresses must contain only IP addresses"))]
        pub addresses: Option<Vec<String>>,
        /// TTL in seconds; MAAS default when unset.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(range(min = 1, max = 604_800))]
        pub ttl: Option<i32>,
        /// A MAAS DNS resource of this FQDN that no record holds is this record's: set by
        /// cluster-controller for the name CAPMAAS generated (`<cluster>-<6 hex>.<domain>`) so a
        /// cluster switched from CAPMAAS keeps its endpoint record. maas-client takes it over
        /// only when MAAS has exactly one resource of the FQDN, records its id, and from then on
        /// updates it and deletes it with the record, as if it had created it. Without it, a
        /// resource this record did not create is never touched. Immutable; only for names of
        /// that shape.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub adopt_existing: Option<bool>,
    }
}

impl MaasDNSRecordSpec {
    /// Fully qualified name of the record.
    pub fn fqdn(&self) -> String {
        format!("{}.{}", self.name, self.domain.trim_end_matches('.'))
    }

    /// Whether the record takes over an existing MAAS resource of its FQDN
    /// (`spec.adoptExisting`).
    pub fn adopts_existing(&self) -> bool {
        self.adopt_existing == Some(true)
    }
}

provider_status! {
    /// Observed state of a MaasDNSRecord, written by maas-client.
    pub struct MaasDNSRecordStatus {
        /// Id of the MAAS DNS resource.
        #[serde(rename = "dnsResourceID")]
        pub dns_resource_id: Option<i64>,
        /// maas-client asked MAAS to create the resource and has not recorded its id yet; a
        /// resource of this name found meanwhile is this record's (its create answer was lost).
        /// Without it (and without `dnsResourceID`), a resource of this name belongs to someone
        /// else and is never taken over.
        pub creating: Option<bool>,
        /// Addresses MAAS currently holds for the record.
        #[schemars(length(max = 64))]
        pub observed_addresses: Option<Vec<String>>,
        /// MAAS holds exactly the requested addresses.
        pub ready: Option<bool>,
        /// Generation of the spec last synced.
        pub observed_generation: Option<i64>,
    }
    /// Conditions written by maas-client: `DNSRecordSynced` and `Ready`, which follows it.
    /// `DNSRecordSynced` is True when MAAS holds exactly the requested addresses, and False when it
    /// holds others or the name is not this record's to publish (the reason says which).
    conditions
}

/// The MAAS DNS domains an installation may publish names in (maas-client's
/// `--dns-domains`): names compared without case and without a trailing dot; an empty list
/// allows every domain the MAAS key writes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllowedDomains(Vec<String>);

fn normalized(domain: &str) -> String {
    domain.trim().trim_end_matches('.').to_ascii_lowercase()
}

impl AllowedDomains {
    /// The domains of a comma-separated list (`maas, example.com`); blanks are dropped.
    pub fn parse(list: &str) -> Self {
        let mut domains: Vec<String> = list
            .split(',')
            .map(normalized)
            .filter(|d| !d.is_empty())
            .collect();
        domains.sort();
        domains.dedup();
        Self(domains)
    }

    /// Whether a record may be published in `domain`.
    pub fn allows(&self, domain: &str) -> bool {
        self.0.is_empty() || self.0.contains(&normalized(domain))
    }

    /// Whether every domain is allowed (no list was given).
    pub fn is_any(&self) -> bool {
        self.0.is_empty()
    }

    /// The list, for messages: `maas, example.com`.
    pub fn describe(&self) -> String {
        self.0.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fqdn_joins_name_and_domain() {
        let spec = MaasDNSRecordSpec {
            name: "prod".into(),
            domain: "maas.".into(),
            addresses: None,
            ttl: None,
            adopt_existing: None,
        };
        assert_eq!(spec.fqdn(), "prod.maas");
        assert!(!spec.adopts_existing());
    }

    #[test]
    fn allowed_domains_ignore_case_blanks_and_a_trailing_dot() {
        let any = AllowedDomains::parse(" , ");
        assert!(any.is_any() && any.allows("anything.example"));
        let some = AllowedDomains::parse("maas, Example.com.,maas");
        assert!(!some.is_any());
        assert_eq!(some.describe(), "example.com, maas");
        assert!(some.allows("MAAS."));
        assert!(some.allows("example.com"));
        assert!(!some.allows("corp.example.com"));
        assert!(!some.allows("evil"));
    }
}
