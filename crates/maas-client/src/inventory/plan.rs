//! What one inventory sync does to the MaasHosts, decided without I/O.
//!
//! Policy for a machine that vanished from the inventory's MAAS listing (deleted in MAAS, or
//! moved out of the pool, zones or tags): a consumed host is kept and marked missing (its
//! consumer decides); an unconsumed host is deleted, since nothing refers to it and it is
//! re-imported if the machine comes back.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use maas_api_client::{Machine, MachineStatus};

use crate::mapping;

/// The existing MaasHost as the plan sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExistingHost {
    /// Object name.
    pub name: String,
    /// `spec.systemID`.
    pub system_id: String,
    /// Current labels.
    pub labels: BTreeMap<String, String>,
    /// `spec.consumerRef` is set.
    pub consumed: bool,
    /// `status.missing` is true.
    pub missing: bool,
}

/// One action on a MaasHost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostAction {
    /// Create the host (server-side apply of name, labels and `spec.systemID`).
    Create {
        /// Object name (the system id).
        name: String,
        /// MAAS system id.
        system_id: String,
        /// Labels to own.
        labels: BTreeMap<String, String>,
    },
    /// Apply changed labels.
    Relabel {
        /// Object name.
        name: String,
        /// Labels to own.
        labels: BTreeMap<String, String>,
    },
    /// The machine changed in MAAS: refresh the host's status.
    Refresh {
        /// Object name.
        name: String,
    },
    /// The machine vanished but the host is consumed: keep it, report it missing.
    MarkMissing {
        /// Object name.
        name: String,
    },
    /// The machine vanished and nothing consumes the host: delete it.
    Delete {
        /// Object name.
        name: String,
    },
}

/// Decides the host actions of one sync.
///
/// `machines` is the inventory's MAAS listing, `existing` its current hosts, `changed` the
/// system ids whose MAAS view changed since the previous sync, `extra_labels` the inventory's
/// `spec.hostLabels`. Machines whose system id cannot be an object name are skipped.
pub fn plan_inventory_sync(
    inventory: &str,
    machines: &[Machine],
    existing: &[ExistingHost],
    changed: &BTreeSet<String>,
    extra_labels: Option<&BTreeMap<String, String>>,
) -> Vec<HostAction> {
    let by_system_id: HashMap<&str, &ExistingHost> =
        existing.iter().map(|h| (h.system_id.as_str(), h)).collect();
    let mut actions = Vec::new();
    for machine in machines {
        let labels = mapping::host_labels(machine, inventory, extra_labels);
        match by_system_id.get(machine.system_id.as_str()) {
            None if mapping::valid_object_name(&machine.system_id) => {
                actions.push(HostAction::Create {
                    name: machine.system_id.clone(),
                    system_id: machine.system_id.clone(),
                    labels,
                });
            }
            None => {}
            Some(host) => {
                if !labels_match(&host.labels, &labels, extra_labels) {
                    actions.push(HostAction::Relabel {
                        name: host.name.clone(),
                        labels,
                    });
                }
                if changed.contains(&machine.system_id) || host.missing {
                    actions.push(HostAction::Refresh {
                        name: host.name.clone(),
                    });
                }
            }
        }
    }
    let listed: HashSet<&str> = machines.iter().map(|m| m.system_id.as_str()).collect();
    for host in existing {
        if listed.contains(host.system_id.as_str()) {
            continue;
        }
        if host.consumed {
            if !host.missing {
                actions.push(HostAction::MarkMissing {
                    name: host.name.clone(),
                });
            }
        } else {
            actions.push(HostAction::Delete {
                name: host.name.clone(),
            });
        }
    }
    actions
}

/// Whether the labels we own are exactly `wanted`: every wanted label present with its
/// value, and no stale label of ours (tags, zone, pool, arch) left over.
fn labels_match(
    current: &BTreeMap<String, String>,
    wanted: &BTreeMap<String, String>,
    extra: Option<&BTreeMap<String, String>>,
) -> bool {
    let ours = |key: &str| {
        key.starts_with(capmaas_api::keys::LABEL_HOST_TAG_PREFIX)
            || [
                capmaas_api::keys::LABEL_HOST_ZONE,
                capmaas_api::keys::LABEL_HOST_POOL,
                capmaas_api::keys::LABEL_HOST_ARCH,
                capmaas_api::keys::LABEL_HOST_INVENTORY,
            ]
            .contains(&key)
            || extra.is_some_and(|e| e.contains_key(key))
    };
    wanted.iter().all(|(k, v)| current.get(k) == Some(v))
        && current
            .keys()
            .filter(|k| ours(k))
            .all(|k| wanted.contains_key(k))
}

/// Host counts for the inventory status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InventoryCounts {
    /// Hosts after the sync (listed machines plus kept missing hosts).
    pub hosts: i32,
    /// Ready in MAAS and not consumed.
    pub available: i32,
    /// Hosts with a consumer.
    pub consumed: i32,
    /// Allocated or deploying.
    pub provisioning: i32,
    /// Deployed.
    pub deployed: i32,
    /// Kept although gone from MAAS.
    pub missing: i32,
    /// Failed or broken in MAAS.
    pub failed: i32,
}

fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// Counts hosts by state from the listing and the hosts (missing = consumed hosts whose
/// machine is not listed).
pub fn inventory_counts(machines: &[Machine], existing: &[ExistingHost]) -> InventoryCounts {
    let listed: HashSet<&str> = machines.iter().map(|m| m.system_id.as_str()).collect();
    let consumed: HashSet<&str> = existing
        .iter()
        .filter(|h| h.consumed)
        .map(|h| h.system_id.as_str())
        .collect();
    let importable = machines
        .iter()
        .filter(|m| mapping::valid_object_name(&m.system_id))
        .count();
    let missing = existing
        .iter()
        .filter(|h| h.consumed && !listed.contains(h.system_id.as_str()))
        .count();
    let status_count =
        |f: &dyn Fn(MachineStatus) -> bool| count(machines.iter().filter(|m| f(m.status)).count());
    InventoryCounts {
        hosts: count(importable + missing),
        available: count(
            machines
                .iter()
                .filter(|m| {
                    m.status == MachineStatus::Ready && !consumed.contains(m.system_id.as_str())
                })
                .count(),
        ),
        consumed: count(consumed.len()),
        provisioning: status_count(&|s| {
            matches!(s, MachineStatus::Allocated | MachineStatus::Deploying)
        }),
        deployed: status_count(&|s| s == MachineStatus::Deployed),
        missing: count(missing),
        failed: status_count(&MachineStatus::is_failure),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::tests::machine;
    use capmaas_api::keys;

    fn host(
        id: &str,
        consumed: bool,
        missing: bool,
        labels: BTreeMap<String, String>,
    ) -> ExistingHost {
        ExistingHost {
            name: id.to_owned(),
            system_id: id.to_owned(),
            labels,
            consumed,
            missing,
        }
    }

    fn tagged(id: &str, tags: &[&str]) -> Machine {
        let mut m = machine(id, 4);
        m.tag_names = tags.iter().map(|t| (*t).to_owned()).collect();
        m
    }

    #[test]
    fn creates_new_hosts_and_leaves_unchanged_ones() {
        let machines = [tagged("a", &["gpu"]), tagged("b", &[])];
        let labels_b = mapping::host_labels(&machines[1], "inv", None);
        let existing = [host("b", false, false, labels_b)];
        let actions = plan_inventory_sync("inv", &machines, &existing, &BTreeSet::new(), None);
        assert_eq!(actions.len(), 1);
        let HostAction::Create { name, labels, .. } = &actions[0] else {
            panic!("{actions:?}")
        };
        assert_eq!(name, "a");
        assert_eq!(
            labels
                .get("tag.maas.cluster.x-k8s.io/gpu")
                .map(String::as_str),
            Some("true")
        );
    }

    #[test]
    fn relabels_on_tag_changes_and_refreshes_changed_machines() {
        let old = tagged("a", &["gpu", "old"]);
        let new = tagged("a", &["gpu", "new"]);
        let existing = [host(
            "a",
            false,
            false,
            mapping::host_labels(&old, "inv", None),
        )];
        let changed = BTreeSet::from(["a".to_owned()]);
        let actions = plan_inventory_sync("inv", &[new], &existing, &changed, None);
        assert!(matches!(&actions[0], HostAction::Relabel { labels, .. }
            if labels.contains_key("tag.maas.cluster.x-k8s.io/new")
            && !labels.contains_key("tag.maas.cluster.x-k8s.io/old")));
        assert_eq!(actions[1], HostAction::Refresh { name: "a".into() });

        // A label owned by someone else is not ours to remove.
        let mut labels = mapping::host_labels(&tagged("a", &[]), "inv", None);
        labels.insert("team".into(), "x".into());
        let existing = [host("a", false, false, labels)];
        let actions = plan_inventory_sync(
            "inv",
            &[tagged("a", &[])],
            &existing,
            &BTreeSet::new(),
            None,
        );
        assert!(actions.is_empty(), "{actions:?}");
    }

    #[test]
    fn vanished_machines_are_kept_while_consumed() {
        let existing = [
            host("gone-used", true, false, BTreeMap::new()),
            host("gone-free", false, false, BTreeMap::new()),
            host("gone-used-marked", true, true, BTreeMap::new()),
        ];
        let actions = plan_inventory_sync("inv", &[], &existing, &BTreeSet::new(), None);
        assert_eq!(
            actions,
            vec![
                HostAction::MarkMissing {
                    name: "gone-used".into()
                },
                HostAction::Delete {
                    name: "gone-free".into()
                },
            ]
        );
        // It came back: refresh clears the missing mark.
        let back = machine("gone-used-marked", 6);
        let labels = mapping::host_labels(&back, "inv", None);
        let existing = [host("gone-used-marked", true, true, labels)];
        let actions = plan_inventory_sync("inv", &[back], &existing, &BTreeSet::new(), None);
        assert_eq!(
            actions,
            vec![HostAction::Refresh {
                name: "gone-used-marked".into()
            }]
        );
    }

    #[test]
    fn invalid_names_are_skipped() {
        let actions =
            plan_inventory_sync("inv", &[machine("Bad_ID", 4)], &[], &BTreeSet::new(), None);
        assert!(actions.is_empty());
    }

    #[test]
    fn counts_by_state() {
        let machines = [
            machine("a", 4),
            machine("b", 4),
            machine("c", 6),
            machine("d", 11),
            machine("e", 9),
        ];
        let existing = [
            host("b", true, false, BTreeMap::new()),
            host("c", true, false, BTreeMap::new()),
            host("z", true, true, BTreeMap::new()),
        ];
        let counts = inventory_counts(&machines, &existing);
        assert_eq!(
            counts,
            InventoryCounts {
                hosts: 6,
                available: 1,
                consumed: 3,
                provisioning: 1,
                deployed: 1,
                missing: 1,
                failed: 1
            }
        );
        assert_eq!(
            keys::LABEL_HOST_INVENTORY,
            "maas.cluster.x-k8s.io/inventory"
        );
    }
}
