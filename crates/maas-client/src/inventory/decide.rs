//! What one inventory sync does to the MaasHosts, decided without I/O.
//!
//! Policy for a machine that vanished from the inventory's MAAS listing (deleted in MAAS, or
//! moved out of the pool, zones or tags, or a wrong or empty answer): a filtered list cannot
//! tell, so the plan never marks a host missing. A consumed host is kept and its controller
//! woken ([`HostAction::Verify`]): it reads the machine by system id, and only a 404 makes the
//! host missing; a machine that exists but left the filter stays managed by system id (and
//! is reported so). So is a host that holds a node-reuse reservation or still records an
//! allocation, or is the host of a composed VM whose machine is not known missing
//! ([`ExistingHost::held`]: a VM's host is made by the composition for a VM host's `spec.vms`,
//! and an inventory whose filter does not list the VM must not take it away; once missing and
//! unclaimed it goes as any other). Any other host is deleted, since nothing refers to it
//! and it is re-imported if the machine comes back; the delete carries the uid and
//! resourceVersion the decision was made from ([`HostAction::Delete`]), so a host claimed in
//! between is never deleted (the API server answers 409 and the next sync decides again).
//!
//! Policy for a machine MAAS listed but that does not decode ([`Undecoded`]): it is present,
//! state unknown. Its host is neither deleted nor verified nor refreshed by the sync, and the
//! sync reports it ([`skipped_message`]). When a skipped element has no readable system id,
//! any unlisted host may be it, so that sync deletes and verifies no host.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;

use maas_api_client::{Machine, MachineStatus, SkippedMachine};

use crate::mapping;

/// A machine of the inventory's listing as the plan sees it: what it decides from, taken from
/// the machine before the machine moves into the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// MAAS system id.
    pub system_id: String,
    /// MAAS status, for the counts.
    pub status: MachineStatus,
    /// The labels the host should carry ([`mapping::host_labels`]).
    pub labels: BTreeMap<String, String>,
}

impl Listed {
    /// The plan's view of `machine`, listed for inventory `inventory` with the inventory's
    /// `spec.hostLabels` `extra_labels`.
    pub fn new(
        machine: &Machine,
        inventory: &str,
        extra_labels: Option<&BTreeMap<String, String>>,
    ) -> Self {
        Self {
            system_id: machine.system_id.clone(),
            status: machine.status,
            labels: mapping::host_labels(machine, inventory, extra_labels),
        }
    }
}

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
    /// `spec.reservation` is set (node reuse: the host waits for its owner's next machine).
    pub reserved: bool,
    /// `status.allocation` records an allocation not yet released.
    pub allocated: bool,
    /// The host of a VM composed for a VM host's `spec.vms` (label
    /// [`capmaas_api::keys::LABEL_COMPOSED_ON`]): the composition made it and deletes it.
    pub composed: bool,
    /// The object the plan saw: the preconditions of a delete.
    pub version: ObjectVersion,
}

impl ExistingHost {
    /// Whether something still refers to the host (a consumer, a node-reuse reservation, an
    /// allocation recorded in its status, or the composition of its VM while the VM exists):
    /// it is kept, and verified, never deleted.
    pub fn held(&self) -> bool {
        self.consumed || self.reserved || self.allocated || (self.composed && !self.missing)
    }
}

/// Identity and version of the object a decision was made from (`metadata.uid`,
/// `metadata.resourceVersion`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectVersion {
    /// `metadata.uid`.
    pub uid: Option<String>,
    /// `metadata.resourceVersion`.
    pub resource_version: Option<String>,
}

/// The machines of a listing that did not decode: present in MAAS, state unknown.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Undecoded {
    /// System ids read from the elements that did not decode.
    pub system_ids: BTreeSet<String>,
    /// Elements without a readable system id: any unlisted host may be one of them.
    pub unidentified: usize,
}

impl Undecoded {
    /// From the listing's skipped elements.
    pub fn from_skipped(skipped: &[SkippedMachine]) -> Self {
        let mut undecoded = Self::default();
        for s in skipped {
            match &s.system_id {
                Some(id) => {
                    undecoded.system_ids.insert(id.clone());
                }
                None => undecoded.unidentified += 1,
            }
        }
        undecoded
    }

    /// Whether every element of the listing decoded.
    pub fn is_empty(&self) -> bool {
        self.system_ids.is_empty() && self.unidentified == 0
    }

    /// Whether the machine of an unlisted host may be one that did not decode (so the host
    /// is kept as it is).
    pub fn may_hold(&self, system_id: &str) -> bool {
        self.unidentified > 0 || self.system_ids.contains(system_id)
    }
}

/// Most skipped machines named in one report; the rest are counted.
const MAX_REPORTED: usize = 5;

/// The report of machines a sync skipped (Warning Event note and `Synced` message), `None`
/// when every machine decoded. Names each machine's system id (or position) and its cut
/// decode error, at most [`MAX_REPORTED`] of them.
pub fn skipped_message(skipped: &[SkippedMachine]) -> Option<String> {
    let (first, rest) = match skipped.len() {
        0 => return None,
        n => skipped.split_at(n.min(MAX_REPORTED)),
    };
    let mut message = format!(
        "{} MAAS machine(s) skipped, their answer does not decode (hosts kept as they are): ",
        skipped.len()
    );
    let named: Vec<String> = first.iter().map(ToString::to_string).collect();
    message.push_str(&named.join("; "));
    if !rest.is_empty() {
        let _ = write!(message, "; and {} more", rest.len());
    }
    Some(message)
}

/// The report of listed machines not imported because another MaasHost (in this or another
/// namespace) holds them, `None` when there are none. Names at most [`MAX_REPORTED`].
pub fn imported_elsewhere_message(elsewhere: &[(String, String)]) -> Option<String> {
    if elsewhere.is_empty() {
        return None;
    }
    let named: Vec<String> = elsewhere
        .iter()
        .take(MAX_REPORTED)
        .map(|(system_id, holder)| format!("{system_id} (MaasHost {holder})"))
        .collect();
    let mut message = format!(
        "{} MAAS machine(s) not imported, another MaasHost already holds them: {}",
        elsewhere.len(),
        named.join("; ")
    );
    if elsewhere.len() > MAX_REPORTED {
        let _ = write!(message, "; and {} more", elsewhere.len() - MAX_REPORTED);
    }
    Some(message)
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
        /// `spec.systemID`, applied again with the labels.
        system_id: String,
        /// Labels to own.
        labels: BTreeMap<String, String>,
    },
    /// The machine changed in MAAS: refresh the host's status.
    Refresh {
        /// Object name.
        name: String,
    },
    /// The machine is not in the listing but the host is consumed: keep it and wake its
    /// controller, which reads the machine by system id (a 404 alone makes it missing).
    Verify {
        /// Object name.
        name: String,
    },
    /// The machine vanished and nothing holds the host: delete it, only if it is still the
    /// object the plan saw (a claim in between changes its resourceVersion).
    Delete {
        /// Object name.
        name: String,
        /// Preconditions of the delete.
        version: ObjectVersion,
    },
}

/// Decides the host actions of one sync.
///
/// `machines` is the inventory's MAAS listing ([`Listed`]), `undecoded` the machines of that
/// listing that did not decode, `existing` its current hosts, `changed` the system ids whose
/// MAAS view changed since the previous sync, `extra_labels` the inventory's
/// `spec.hostLabels`. Machines whose system id cannot be an object name are skipped.
///
/// Linear in the machines and hosts (one hash lookup each way): it runs every interval over
/// thousands of them.
pub fn plan_inventory_sync(
    machines: &[Listed],
    undecoded: &Undecoded,
    existing: &[ExistingHost],
    changed: &BTreeSet<String>,
    extra_labels: Option<&BTreeMap<String, String>>,
) -> Vec<HostAction> {
    let by_system_id: HashMap<&str, &ExistingHost> =
        existing.iter().map(|h| (h.system_id.as_str(), h)).collect();
    let mut actions = Vec::new();
    for machine in machines {
        match by_system_id.get(machine.system_id.as_str()) {
            None if mapping::valid_object_name(&machine.system_id) => {
                actions.push(HostAction::Create {
                    name: machine.system_id.clone(),
                    system_id: machine.system_id.clone(),
                    labels: machine.labels.clone(),
                });
            }
            None => {}
            Some(host) => {
                if !labels_match(&host.labels, &machine.labels, extra_labels) {
                    actions.push(HostAction::Relabel {
                        name: host.name.clone(),
                        system_id: host.system_id.clone(),
                        labels: machine.labels.clone(),
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
        // Listed, or maybe listed but not decoded: present, nothing to conclude.
        if listed.contains(host.system_id.as_str()) || undecoded.may_hold(&host.system_id) {
            continue;
        }
        if host.held() {
            if !host.missing {
                actions.push(HostAction::Verify {
                    name: host.name.clone(),
                });
            }
        } else {
            actions.push(HostAction::Delete {
                name: host.name.clone(),
                version: host.version.clone(),
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
    /// Hosts after the sync (listed machines plus kept missing and undecoded hosts).
    pub hosts: i32,
    /// Ready in MAAS and not consumed.
    pub available: i32,
    /// Hosts with a consumer.
    pub consumed: i32,
    /// Allocated or deploying.
    pub provisioning: i32,
    /// Deployed.
    pub deployed: i32,
    /// Kept although gone from MAAS (confirmed by a direct read, never from a list).
    pub missing: i32,
    /// Failed or broken in MAAS.
    pub failed: i32,
}

fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// Counts hosts by state from the listing and the hosts (missing = held hosts whose
/// machine is not listed and that their controller found gone, by a 404 for the system id; a
/// host whose machine may be `undecoded` is kept but counted in no state).
pub fn inventory_counts(
    machines: &[Listed],
    undecoded: &Undecoded,
    existing: &[ExistingHost],
) -> InventoryCounts {
    let listed: HashSet<&str> = machines.iter().map(|m| m.system_id.as_str()).collect();
    let unlisted = || {
        existing
            .iter()
            .filter(|h| !listed.contains(h.system_id.as_str()))
    };
    let consumed: HashSet<&str> = existing
        .iter()
        .filter(|h| h.consumed)
        .map(|h| h.system_id.as_str())
        .collect();
    let importable = machines
        .iter()
        .filter(|m| mapping::valid_object_name(&m.system_id))
        .count();
    let kept: Vec<&ExistingHost> = unlisted()
        .filter(|h| h.held() && !undecoded.may_hold(&h.system_id))
        .collect();
    let missing = kept.iter().filter(|h| h.missing).count();
    let kept_undecoded = unlisted()
        .filter(|h| undecoded.may_hold(&h.system_id))
        .count();
    let status_count =
        |f: &dyn Fn(MachineStatus) -> bool| count(machines.iter().filter(|m| f(m.status)).count());
    InventoryCounts {
        hosts: count(importable + kept.len() + kept_undecoded),
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
#[path = "decide_tests.rs"]
mod tests;
