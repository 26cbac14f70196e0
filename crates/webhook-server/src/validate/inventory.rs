//! MaasInventory: one MAAS machine must never be imported twice.
//!
//! Two inventories import overlapping machines when they name the same resource pool and their
//! zone filters can both match one machine (either lists no zones, or the lists share one). Tag
//! filters never separate two inventories: one machine can carry both tags. maas-client's
//! per-machine binding already makes a double import impossible at run time; rejecting the
//! second inventory here tells the person who wrote it instead of leaving hosts silently
//! unimported.

use std::collections::BTreeSet;

use capmaas_api::MaasInventory;
use capmaas_api::inventory::ClaimNamespaces;
use capmaas_api::keys::{
    LABEL_HOST_ARCH, LABEL_HOST_INVENTORY, LABEL_HOST_POOL, LABEL_HOST_TAG_PREFIX, LABEL_HOST_ZONE,
};
use capmaas_api::names::dns_label_problem;

use super::selector::{label_map, unique};
use super::{Lookups, Request, key_of};
use crate::field::{FieldPath, Verdict};

/// Below this, every inventory sync is a MAAS list call every few seconds.
const LOW_SYNC_INTERVAL_SECONDS: i32 = 30;

/// MaasInventory: filter syntax, labels that do not shadow the gateway's, no double import.
pub(crate) fn maas_inventory(req: &Request<'_, MaasInventory>, lookups: &dyn Lookups) -> Verdict {
    let mut v = Verdict::ok();
    let Some(inventory) = req.object else {
        return v;
    };
    let spec = FieldPath::root("spec");
    if let Some(zones) = &inventory.spec.zones {
        unique(zones, &spec.child("zones"), &mut v);
    }
    if let Some(tags) = &inventory.spec.tags {
        unique(tags, &spec.child("tags"), &mut v);
    }
    if let Some(labels) = &inventory.spec.host_labels {
        let path = spec.child("hostLabels");
        label_map(labels, &path, &mut v);
        for key in labels.keys().filter(|k| reserved_label(k)) {
            v.invalid(
                &path.key(key),
                key,
                "this label is set by maas-client from MAAS (zone, pool, architecture, tags, \
                 inventory) and cannot be overridden",
            );
        }
    }
    if let Some(claim) = &inventory.spec.claim_namespaces {
        claim_namespaces(claim, &spec.child("claimNamespaces"), &mut v);
    }
    if inventory.spec.sync_interval_seconds < LOW_SYNC_INTERVAL_SECONDS {
        v.warn(
            &spec.child("syncIntervalSeconds"),
            format!(
                "a full MAAS list every {}s loads the MAAS region; machine changes are also \
                 seen between syncs",
                inventory.spec.sync_interval_seconds
            ),
        );
    }
    for other in lookups.inventories() {
        let same = other.metadata.namespace.as_deref() == Some(req.namespace)
            && other.metadata.name.as_deref() == Some(req.name);
        if same || other.metadata.deletion_timestamp.is_some() {
            continue;
        }
        if overlaps(inventory, &other) {
            v.invalid(
                &spec.child("resourcePool"),
                &inventory.spec.resource_pool,
                format!(
                    "MAAS resource pool {:?}{} is already imported by MaasInventory {}; one MAAS \
                     machine must never be imported into two places (give both inventories \
                     disjoint spec.zones, or import the pool once)",
                    other.spec.resource_pool,
                    zones_note(&other),
                    key_of(&other.metadata),
                ),
            );
        }
    }
    v
}

fn claim_namespaces(claim: &ClaimNamespaces, path: &FieldPath, v: &mut Verdict) {
    if let Some(names) = &claim.names {
        let names_path = path.child("names");
        unique(names, &names_path, v);
        for (i, name) in names.iter().enumerate() {
            if let Some(problem) = dns_label_problem(name) {
                v.invalid(&names_path.index(i), name, problem);
            }
        }
    }
    if let (Some(pattern), Err(e)) = (&claim.name_matches, claim.name_pattern()) {
        v.invalid(
            &path.child("nameMatches"),
            pattern,
            format!("not a regular expression: {e}"),
        );
    }
}

fn reserved_label(key: &str) -> bool {
    [
        LABEL_HOST_ZONE,
        LABEL_HOST_POOL,
        LABEL_HOST_ARCH,
        LABEL_HOST_INVENTORY,
    ]
    .contains(&key)
        || key.starts_with(LABEL_HOST_TAG_PREFIX)
}

fn overlaps(a: &MaasInventory, b: &MaasInventory) -> bool {
    if a.spec.resource_pool != b.spec.resource_pool {
        return false;
    }
    let zones = |i: &MaasInventory| -> BTreeSet<String> {
        i.spec.zones.iter().flatten().cloned().collect()
    };
    let (za, zb) = (zones(a), zones(b));
    za.is_empty() || zb.is_empty() || !za.is_disjoint(&zb)
}

fn zones_note(inventory: &MaasInventory) -> String {
    match inventory.spec.zones.as_deref() {
        None | Some([]) => " (all zones)".into(),
        Some(zones) => format!(" (zones {})", zones.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::sync::Arc;

    use super::*;
    use crate::validate::StaticLookups;

    fn inventory(ns: &str, name: &str, pool: &str, zones: &[&str]) -> MaasInventory {
        let mut spec = serde_json::json!({"resourcePool": pool, "syncIntervalSeconds": 60});
        if !zones.is_empty() {
            spec["zones"] = serde_json::json!(zones);
        }
        let mut i = MaasInventory::new(name, serde_json::from_value(spec).unwrap());
        i.metadata.namespace = Some(ns.into());
        i
    }

    fn check(new: &MaasInventory, others: Vec<MaasInventory>) -> Verdict {
        let lookups = StaticLookups {
            inventories: others.into_iter().map(Arc::new).collect(),
            ..StaticLookups::default()
        };
        let req = Request::create(
            new.metadata.namespace.as_deref().unwrap(),
            new.metadata.name.as_deref().unwrap(),
            new,
        );
        maas_inventory(&req, &lookups)
    }

    #[test]
    fn a_pool_imported_elsewhere_is_rejected_unless_zones_are_disjoint() {
        let existing = inventory("team-a", "inv", "prod", &["z1", "z2"]);
        let v = check(
            &inventory("team-b", "inv", "prod", &[]),
            vec![existing.clone()],
        );
        assert_eq!(v.errors.len(), 1);
        let text = v.errors[0].to_string();
        assert!(text.starts_with(r#"spec.resourcePool: Invalid value: "prod": MAAS resource pool "prod" (zones z1, z2) is already imported by MaasInventory team-a/inv"#), "{text}");
        assert!(
            check(
                &inventory("team-b", "inv", "prod", &["z2"]),
                vec![existing.clone()]
            )
            .errors
            .len()
                == 1
        );
        assert!(
            check(
                &inventory("team-b", "inv", "prod", &["z3"]),
                vec![existing.clone()]
            )
            .allowed()
        );
        assert!(check(&inventory("team-b", "inv", "dev", &[]), vec![existing]).allowed());
    }

    #[test]
    fn claim_namespaces_are_namespace_names_and_a_regular_expression() {
        let mut i = inventory("ns", "inv", "prod", &[]);
        i.spec.claim_namespaces = Some(ClaimNamespaces {
            names: Some(vec!["team-a".into(), "Team_B".into(), "team-a".into()]),
            name_matches: Some("team-(".into()),
        });
        let v = check(&i, Vec::new());
        let paths: Vec<&str> = v.errors.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "spec.claimNamespaces.names[2]",
                "spec.claimNamespaces.names[1]",
                "spec.claimNamespaces.nameMatches"
            ],
            "{:?}",
            v.errors
        );
        assert!(v.errors[2].to_string().contains("not a regular expression"));
        i.spec.claim_namespaces = Some(ClaimNamespaces::all());
        assert!(check(&i, Vec::new()).allowed());
    }

    #[test]
    fn an_inventory_is_not_compared_with_itself() {
        let existing = inventory("team-a", "inv", "prod", &[]);
        assert!(check(&existing.clone(), vec![existing]).allowed());
    }

    #[test]
    fn host_labels_may_not_shadow_the_gateways() {
        let mut i = inventory("ns", "inv", "prod", &[]);
        i.spec.host_labels = Some(
            [
                ("maas.cluster.x-k8s.io/zone", "x"),
                ("tag.maas.cluster.x-k8s.io/gpu", ""),
                ("team", "a"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        );
        i.spec.sync_interval_seconds = 15;
        let v = check(&i, vec![]);
        let paths: Vec<&str> = v.errors.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "spec.hostLabels[maas.cluster.x-k8s.io/zone]",
                "spec.hostLabels[tag.maas.cluster.x-k8s.io/gpu]"
            ]
        );
        assert!(v.warnings[0].starts_with("spec.syncIntervalSeconds: "));
    }
}
