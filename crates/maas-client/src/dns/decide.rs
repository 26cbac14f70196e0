//! The pure decisions of the MaasDNSRecord reconciler: who holds an FQDN, what to do in MAAS,
//! the finalizer step.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::time::Duration;

use capmaas_api::MaasDNSRecord;
use kube::ResourceExt;
use maas_api_client::DnsResource;

use crate::error::{Error, Result};
use crate::ownership::{Deletion, Proofs};

/// What to do with the MAAS resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DnsAction {
    /// Create it with the addresses.
    Create,
    /// Replace its addresses (they differ).
    Update {
        /// MAAS id.
        id: i64,
    },
    /// It already holds exactly the addresses.
    None {
        /// MAAS id.
        id: i64,
    },
    /// A resource of this name exists and is not ours: leave it alone.
    Foreign {
        /// MAAS id.
        id: i64,
    },
    /// The record may adopt a resource of its name, but MAAS holds several (live, sorted):
    /// nothing tells which one the cluster resolves through, so none is touched.
    Ambiguous {
        /// MAAS ids.
        ids: Vec<i64>,
    },
}

/// What status says this record owns in MAAS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Owned {
    /// The id recorded in status.
    pub id: Option<i64>,
    /// A create was sent and its answer not recorded.
    pub creating: bool,
}

impl Owned {
    /// From the record's status, else (status lost in a `clusterctl move`) from its signed
    /// annotation ([`crate::ownership`]).
    pub fn of(record: &MaasDNSRecord, proofs: &Proofs) -> Self {
        let status = record.status.as_ref();
        let creating = status.and_then(|s| s.creating) == Some(true);
        let id = match status.and_then(|s| s.dns_resource_id) {
            Some(id) => Some(id),
            // A create whose answer was lost is found by name, not by a proof.
            None if creating => None,
            None => proofs.proven_dns_resource(record),
        };
        Self { id, creating }
    }
}

/// Retry of a record whose FQDN another record holds (it takes over once that one is gone).
pub(super) const CONFLICT_RETRY: Duration = Duration::from_secs(30);

/// `namespace/name` of the MaasDNSRecord that holds `record`'s FQDN, when it is another one:
/// the oldest record naming that FQDN (creation time, then namespace/name), so every replica
/// and every restart picks the same one.
pub fn fqdn_holder<'a>(
    record: &MaasDNSRecord,
    records: impl IntoIterator<Item = &'a MaasDNSRecord>,
) -> Option<String> {
    let fqdn = record.spec.fqdn();
    let rank = |r: &MaasDNSRecord| {
        (
            r.metadata.creation_timestamp.as_ref().map(|t| t.0),
            r.namespace().unwrap_or_default(),
            r.name_any(),
        )
    };
    let mine = rank(record);
    let holder = records
        .into_iter()
        .filter(|r| r.spec.fqdn() == fqdn && r.uid() != record.uid())
        .map(rank)
        .filter(|theirs| *theirs < mine)
        .min()?;
    Some(format!("{}/{}", holder.1, holder.2))
}

/// Parses the wanted addresses as a set; a malformed one is an invalid spec.
pub fn wanted_addresses(spec: Option<&[String]>) -> Result<BTreeSet<IpAddr>> {
    spec.unwrap_or_default()
        .iter()
        .map(|a| {
            a.trim()
                .parse()
                .map_err(|_| Error::InvalidSpec(format!("{a:?} is not an IP address")))
        })
        .collect()
}

/// Whether this pass may take over an existing resource: the spec asks to
/// (`spec.adoptExisting`) and the record holds nothing in MAAS yet. Once the adopted id is in
/// status the resource is the record's like one it created.
pub fn adopting(owned: Owned, adopt_existing: bool) -> bool {
    adopt_existing && owned.id.is_none() && !owned.creating
}

/// Decides from the resources MAAS lists for the FQDN and what status says is ours;
/// `adopt_existing` is the record's `spec.adoptExisting`.
pub fn plan_dns(
    existing: &[DnsResource],
    wanted: &BTreeSet<IpAddr>,
    owned: Owned,
    adopt_existing: bool,
) -> DnsAction {
    let live: Vec<&DnsResource> = existing.iter().filter(|r| r.id >= 0).collect();
    let mine = match owned.id {
        Some(id) => live.iter().find(|r| r.id == id),
        // The create's answer was lost: the resource it made is ours.
        None if owned.creating => live.first(),
        None if adopting(owned, adopt_existing) && live.len() > 1 => {
            let mut ids: Vec<i64> = live.iter().map(|r| r.id).collect();
            ids.sort_unstable();
            return DnsAction::Ambiguous { ids };
        }
        None if adopting(owned, adopt_existing) => live.first(),
        None => None,
    };
    match (mine, live.first()) {
        (Some(r), _) => {
            let current: BTreeSet<IpAddr> = r.ips().into_iter().collect();
            if &current == wanted {
                DnsAction::None { id: r.id }
            } else {
                DnsAction::Update { id: r.id }
            }
        }
        (None, Some(other)) => DnsAction::Foreign { id: other.id },
        (None, None) => DnsAction::Create,
    }
}

/// The MAAS resources among `existing` that deleting `owned`'s record may delete.
pub fn deletable(existing: &[DnsResource], owned: Owned) -> Vec<i64> {
    existing
        .iter()
        .filter(|r| r.id >= 0 && (owned.id == Some(r.id) || (owned.id.is_none() && owned.creating)))
        .map(|r| r.id)
        .collect()
}

/// Whether the status proves MAAS holds the wanted set for this generation (no call needed).
pub fn in_sync(record: &MaasDNSRecord, wanted: &BTreeSet<IpAddr>) -> bool {
    let Some(status) = record.status.as_ref() else {
        return false;
    };
    let observed: Option<BTreeSet<IpAddr>> = status
        .observed_addresses
        .as_ref()
        .map(|a| a.iter().filter_map(|s| s.parse().ok()).collect());
    status.ready == Some(true)
        && status.dns_resource_id.is_some()
        && status.observed_generation == record.metadata.generation
        && observed.as_ref() == Some(wanted)
}

/// What the finalizer asks for, given whether the record is being deleted and carries ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinalizerStep {
    /// Add the finalizer, then apply in the same reconcile.
    AddThenApply,
    /// Create or update the MAAS resource.
    Apply,
    /// Delete the MAAS resource, then remove the finalizer.
    CleanupThenRemove,
    /// Deleted by `clusterctl move`: remove the finalizer and leave the MAAS resource to the
    /// record's copy in the target cluster.
    RemoveOnly,
    /// Deleted and not ours (any more): nothing to do.
    Nothing,
}

/// The finalizer step for a record going as `deletion` says, with (or without) our finalizer.
pub fn finalizer_step(deletion: Deletion, has_finalizer: bool) -> FinalizerStep {
    match (deletion, has_finalizer) {
        (Deletion::No, false) => FinalizerStep::AddThenApply,
        (Deletion::No, true) => FinalizerStep::Apply,
        (Deletion::Moving, true) => FinalizerStep::RemoveOnly,
        (Deletion::Deleting, true) => FinalizerStep::CleanupThenRemove,
        (_, false) => FinalizerStep::Nothing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(id: i64, ips: &[&str]) -> DnsResource {
        serde_json::from_value(serde_json::json!({
            "id": id,
            "fqdn": "api.maas",
            "ip_addresses": ips.iter().map(|ip| serde_json::json!({"ip": ip})).collect::<Vec<_>>(),
        }))
        .unwrap()
    }

    const OURS: Owned = Owned {
        id: Some(4),
        creating: false,
    };

    #[test]
    fn updates_only_when_the_set_changes() {
        let wanted = wanted_addresses(Some(&["10.0.0.2".into(), "10.0.0.1".into()])).unwrap();
        assert_eq!(
            plan_dns(&[], &wanted, Owned::default(), false),
            DnsAction::Create
        );
        assert_eq!(
            plan_dns(&[resource(-1, &[])], &wanted, Owned::default(), false),
            DnsAction::Create
        );
        assert_eq!(
            plan_dns(
                &[resource(4, &["10.0.0.1", "10.0.0.2"])],
                &wanted,
                OURS,
                false
            ),
            DnsAction::None { id: 4 },
            "order does not matter"
        );
        assert_eq!(
            plan_dns(&[resource(4, &["10.0.0.1"])], &wanted, OURS, false),
            DnsAction::Update { id: 4 }
        );
        assert_eq!(
            plan_dns(&[], &wanted, OURS, false),
            DnsAction::Create,
            "deleted in MAAS: made again"
        );
        assert!(wanted_addresses(Some(&["nope".into()])).is_err());
        assert!(wanted_addresses(None).unwrap().is_empty());
    }

    #[test]
    fn resources_not_ours_are_never_taken_over_or_deleted() {
        let wanted = wanted_addresses(Some(&["10.0.0.1".into()])).unwrap();
        let by_hand = [resource(7, &["192.0.2.1"])];
        assert_eq!(
            plan_dns(&by_hand, &wanted, Owned::default(), false),
            DnsAction::Foreign { id: 7 }
        );
        assert_eq!(
            plan_dns(&by_hand, &wanted, OURS, false),
            DnsAction::Foreign { id: 7 }
        );
        assert!(deletable(&by_hand, Owned::default()).is_empty());
        assert!(deletable(&by_hand, OURS).is_empty());
        let lost_answer = Owned {
            id: None,
            creating: true,
        };
        assert_eq!(
            plan_dns(&by_hand, &wanted, lost_answer, false),
            DnsAction::Update { id: 7 },
            "a create whose answer was lost made it"
        );
        assert_eq!(deletable(&by_hand, lost_answer), [7]);
        assert_eq!(deletable(&[resource(4, &[])], OURS), [4]);
    }

    #[test]
    fn adopts_the_one_resource_of_its_name_and_never_guesses() {
        let wanted = wanted_addresses(Some(&["10.0.0.1".into()])).unwrap();
        let none = Owned::default();
        let capmaas = [resource(7, &["10.0.0.1"])];
        assert_eq!(
            plan_dns(&capmaas, &wanted, none, true),
            DnsAction::None { id: 7 },
            "same addresses: adopted as it is"
        );
        let stale = [resource(-1, &[]), resource(7, &["192.0.2.1", "192.0.2.2"])];
        assert_eq!(
            plan_dns(&stale, &wanted, none, true),
            DnsAction::Update { id: 7 },
            "other addresses: adopted and updated"
        );
        assert_eq!(plan_dns(&[], &wanted, none, true), DnsAction::Create);
        let two = [resource(9, &["10.0.0.1"]), resource(7, &["10.0.0.1"])];
        assert_eq!(
            plan_dns(&two, &wanted, none, true),
            DnsAction::Ambiguous { ids: vec![7, 9] }
        );
        assert!(
            deletable(&two, none).is_empty(),
            "nothing adopted, nothing deleted"
        );
        assert_eq!(
            plan_dns(&capmaas, &wanted, none, false),
            DnsAction::Foreign { id: 7 },
            "without the flag, as before"
        );
        assert_eq!(
            plan_dns(&[resource(8, &[])], &wanted, OURS, true),
            DnsAction::Foreign { id: 8 },
            "a record that holds one resource adopts no other"
        );
        // Once recorded, the adopted resource is the record's like one it created.
        let adopted = Owned {
            id: Some(7),
            creating: false,
        };
        assert!(adopting(none, true));
        assert!(!adopting(adopted, true) && !adopting(none, false));
        assert_eq!(deletable(&capmaas, adopted), [7]);
        let lost_answer = Owned {
            id: None,
            creating: true,
        };
        assert!(
            !adopting(lost_answer, true),
            "its own create, not an adoption"
        );
    }

    fn record(namespace: &str, name: &str, created: i64) -> MaasDNSRecord {
        let mut r = MaasDNSRecord::new(
            name,
            capmaas_api::MaasDNSRecordSpec {
                name: "prod".into(),
                domain: "maas".into(),
                addresses: None,
                ttl: None,
                adopt_existing: None,
            },
        );
        r.metadata.namespace = Some(namespace.into());
        r.metadata.uid = Some(format!("{namespace}-{name}"));
        r.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            jiff::Timestamp::from_second(created).unwrap(),
        ));
        r
    }

    #[test]
    fn the_oldest_record_holds_an_fqdn() {
        let a = record("team-a", "prod", 100);
        let b = record("team-b", "prod", 200);
        let mut other = record("team-c", "prod", 50);
        other.spec.name = "other".into();
        let all = [a.clone(), b.clone(), other];
        assert_eq!(fqdn_holder(&a, &all), None);
        assert_eq!(fqdn_holder(&b, &all).as_deref(), Some("team-a/prod"));
        let same_time = record("team-0", "prod", 200);
        assert_eq!(
            fqdn_holder(&b, [&same_time]).as_deref(),
            Some("team-0/prod"),
            "ties go by namespace/name"
        );
        assert_eq!(fqdn_holder(&b, []), None, "alone, it holds its name");
    }

    #[test]
    fn finalizer_is_added_then_applied_and_removed_after_cleanup() {
        use Deletion::{Deleting, Moving, No};
        assert_eq!(finalizer_step(No, false), FinalizerStep::AddThenApply);
        assert_eq!(finalizer_step(No, true), FinalizerStep::Apply);
        assert_eq!(
            finalizer_step(Deleting, true),
            FinalizerStep::CleanupThenRemove
        );
        assert_eq!(finalizer_step(Deleting, false), FinalizerStep::Nothing);
        // Moved by clusterctl: the copy in the target cluster keeps the MAAS resource.
        assert_eq!(finalizer_step(Moving, true), FinalizerStep::RemoveOnly);
        assert_eq!(finalizer_step(Moving, false), FinalizerStep::Nothing);
    }
}
