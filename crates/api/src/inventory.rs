//! `MaasInventory`: imports the MAAS machines of one resource pool as MaasHosts.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::kind::{provider_kind, provider_status};

provider_kind! {
    /// Which MAAS machines to import into this namespace.
    #[derive(JsonSchema)]
    #[kube(
        kind = "MaasInventory",
        plural = "maasinventories",
        namespaced,
        status = "MaasInventoryStatus",
        doc = "MaasInventory imports the MAAS machines of one resource pool (optionally only some zones or tags) into its namespace as MaasHosts, one list call per sync.",
        shortname = "maasinv",
        printcolumn(
            name = "Pool",
            type_ = "string",
            json_path = ".spec.resourcePool",
            description = "MAAS resource pool"
        ),
        printcolumn(
            name = "Hosts",
            type_ = "integer",
            json_path = ".status.hostCount",
            description = "Imported hosts"
        ),
        printcolumn(
            name = "Available",
            type_ = "integer",
            json_path = ".status.available",
            description = "Hosts free to claim"
        ),
        printcolumn(
            name = "Consumed",
            type_ = "integer",
            json_path = ".status.consumed",
            description = "Hosts claimed by machines"
        ),
        printcolumn(
            name = "Missing",
            type_ = "integer",
            json_path = ".status.missing",
            description = "Hosts gone from MAAS",
            priority = 1
        ),
        printcolumn(
            name = "LastChange",
            type_ = "date",
            json_path = ".status.lastSyncTime",
            description = "Last sync that changed the status"
        )
    )]
    pub struct MaasInventorySpec {
        /// MAAS resource pool to import.
        #[schemars(length(min = 1, max = 256))]
        pub resource_pool: String,
        /// Only import machines of these zones (all zones when empty).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(length(max = 32), inner(length(min = 1, max = 256)))]
        pub zones: Option<Vec<String>>,
        /// Only import machines carrying all these tags.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(length(max = 32), inner(length(min = 1, max = 256)))]
        pub tags: Option<Vec<String>>,
        /// Seconds between two MAAS syncs.
        #[serde(default = "default_sync_interval_seconds")]
        #[schemars(range(min = 10, max = 86_400))]
        pub sync_interval_seconds: i32,
        /// Extra labels put on every imported MaasHost.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(extend("maxProperties" = 32))]
        pub host_labels: Option<BTreeMap<String, String>>,
        /// Other namespaces whose MaasMachines may claim this inventory's hosts (the inventory's
        /// own namespace always may). Absent: only the own namespace. The deployment's Secrets
        /// stay in the claimer's namespace.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub claim_namespaces: Option<ClaimNamespaces>,
    }
}

/// Namespaces admitted to claim an inventory's hosts: a namespace is admitted when it is
/// listed in `names` or its whole name matches `nameMatches`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClaimNamespaces {
    /// Namespaces admitted by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256), inner(length(min = 1, max = 63)))]
    pub names: Option<Vec<String>>,
    /// Regular expression (Rust `regex` syntax, anchored at both ends) a namespace's whole
    /// name must match; `.*` admits every namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub name_matches: Option<String>,
}

impl ClaimNamespaces {
    /// Every namespace.
    pub fn all() -> Self {
        Self {
            names: None,
            name_matches: Some(".*".to_owned()),
        }
    }

    /// The compiled `nameMatches`, anchored at both ends (`None` when absent).
    pub fn name_pattern(&self) -> Result<Option<regex::Regex>, regex::Error> {
        self.name_matches
            .as_deref()
            .map(|pattern| regex::Regex::new(&format!("^(?:{pattern})$")))
            .transpose()
    }
}

impl MaasInventory {
    /// Whether MaasMachines of `namespace` may claim this inventory's hosts. An invalid
    /// `nameMatches` (the webhook refuses one) admits nobody through it.
    pub fn admits(&self, namespace: &str) -> bool {
        self.admission().admits(namespace)
    }

    /// The inventory's admission rule with `nameMatches` compiled once, for callers that ask
    /// about many namespaces.
    pub fn admission(&self) -> Admission<'_> {
        let claim = self.spec.claim_namespaces.as_ref();
        Admission {
            own: self.metadata.namespace.as_deref(),
            names: claim.and_then(|c| c.names.as_deref()).unwrap_or_default(),
            pattern: claim.and_then(|c| c.name_pattern().ok().flatten()),
        }
    }
}

/// Which namespaces may claim an inventory's hosts ([`MaasInventory::admission`]).
#[derive(Debug, Clone)]
pub struct Admission<'a> {
    own: Option<&'a str>,
    names: &'a [String],
    pattern: Option<regex::Regex>,
}

impl Admission<'_> {
    /// Whether MaasMachines of `namespace` may claim the inventory's hosts.
    pub fn admits(&self, namespace: &str) -> bool {
        self.own == Some(namespace)
            || self.names.iter().any(|n| n == namespace)
            || self
                .pattern
                .as_ref()
                .is_some_and(|re| re.is_match(namespace))
    }
}

fn default_sync_interval_seconds() -> i32 {
    30
}

provider_status! {
    /// Observed state of a MaasInventory, written by maas-client.
    pub struct MaasInventoryStatus {
        /// Number of MaasHosts owned by this inventory.
        pub host_count: Option<i32>,
        /// Hosts free to claim.
        pub available: Option<i32>,
        /// Hosts claimed by a consumer.
        pub consumed: Option<i32>,
        /// Hosts being allocated or deployed.
        pub provisioning: Option<i32>,
        /// Number of the inventory's MAAS machines in MAAS status `Deployed`, whoever deployed them;
        /// counted by maas-client at its last successful sync.
        pub deployed: Option<i32>,
        /// Hosts gone from MAAS.
        pub missing: Option<i32>,
        /// Hosts failed or broken in MAAS.
        pub failed: Option<i32>,
        /// Time of the last successful sync that changed this status (counts, conditions, observed
        /// generation). A sync that finds nothing new writes nothing, so this is not a heartbeat: a
        /// failing sync sets `Synced=False` at once.
        pub last_sync_time: Option<Time>,
        /// Generation of the spec last synced.
        pub observed_generation: Option<i64>,
    }
    /// Conditions written by maas-client: `Synced`, `Ready` and `MAASConnectionSecure`. `Synced`
    /// is False (reason `MaasUnavailable`) when the last MAAS sync failed and `Ready` follows it;
    /// `MAASConnectionSecure` is False when MAAS is reached over plain http, without affecting
    /// `Ready`.
    conditions
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inventory(claim: Option<ClaimNamespaces>) -> MaasInventory {
        let mut inv = MaasInventory::new(
            "pool-a",
            MaasInventorySpec {
                resource_pool: "a".into(),
                zones: None,
                tags: None,
                sync_interval_seconds: 30,
                host_labels: None,
                claim_namespaces: claim,
            },
        );
        inv.metadata.namespace = Some("capmaas-system".into());
        inv
    }

    #[test]
    fn own_namespace_only_by_default() {
        let inv = inventory(None);
        assert!(inv.admits("capmaas-system"));
        assert!(!inv.admits("team-a"));
    }

    #[test]
    fn names_and_anchored_pattern() {
        let inv = inventory(Some(ClaimNamespaces {
            names: Some(vec!["ops".into()]),
            name_matches: Some("team-[a-z]+".into()),
        }));
        assert!(inv.admits("ops"));
        assert!(inv.admits("team-a"));
        assert!(!inv.admits("xteam-a"), "anchored at the start");
        assert!(!inv.admits("team-a1"), "anchored at the end");
        assert!(!inv.admits("default"));
    }

    #[test]
    fn all_admits_every_namespace_and_a_bad_pattern_none() {
        assert!(inventory(Some(ClaimNamespaces::all())).admits("anything"));
        let bad = inventory(Some(ClaimNamespaces {
            names: None,
            name_matches: Some("(".into()),
        }));
        assert!(!bad.admits("anything"));
    }
}
