use super::*;
use crate::cache::tests::machine;
use capmaas_api::keys;

fn host(id: &str, consumed: bool, missing: bool, labels: BTreeMap<String, String>) -> ExistingHost {
    ExistingHost {
        name: id.to_owned(),
        system_id: id.to_owned(),
        labels,
        consumed,
        missing,
        reserved: false,
        allocated: false,
        composed: false,
        version: version(id),
    }
}

fn version(id: &str) -> ObjectVersion {
    ObjectVersion {
        uid: Some(format!("uid-{id}")),
        resource_version: Some("7".into()),
    }
}

/// The plan of a listing of whole machines, as the controller makes it ([`Listed::new`]).
fn plan_inventory_sync(
    inventory: &str,
    machines: &[Machine],
    undecoded: &Undecoded,
    existing: &[ExistingHost],
    changed: &BTreeSet<String>,
    extra_labels: Option<&BTreeMap<String, String>>,
) -> Vec<HostAction> {
    let listed = listed(inventory, machines, extra_labels);
    super::plan_inventory_sync(&listed, undecoded, existing, changed, extra_labels)
}

/// The counts of a listing of whole machines, for inventory `inv` without extra labels.
fn inventory_counts(
    machines: &[Machine],
    undecoded: &Undecoded,
    existing: &[ExistingHost],
) -> InventoryCounts {
    super::inventory_counts(&listed("inv", machines, None), undecoded, existing)
}

fn listed(
    inventory: &str,
    machines: &[Machine],
    extra_labels: Option<&BTreeMap<String, String>>,
) -> Vec<Listed> {
    machines
        .iter()
        .map(|m| Listed::new(m, inventory, extra_labels))
        .collect()
}

fn none() -> Undecoded {
    Undecoded::default()
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
    let actions = plan_inventory_sync("inv", &machines, &none(), &existing, &BTreeSet::new(), None);
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
    let actions = plan_inventory_sync("inv", &[new], &none(), &existing, &changed, None);
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
        &none(),
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
    let actions = plan_inventory_sync("inv", &[], &none(), &existing, &BTreeSet::new(), None);
    assert_eq!(
        actions,
        vec![
            HostAction::Verify {
                name: "gone-used".into()
            },
            HostAction::Delete {
                name: "gone-free".into(),
                version: version("gone-free"),
            },
        ]
    );
    // It came back: refresh clears the missing mark.
    let back = machine("gone-used-marked", 6);
    let labels = mapping::host_labels(&back, "inv", None);
    let existing = [host("gone-used-marked", true, true, labels)];
    let actions = plan_inventory_sync("inv", &[back], &none(), &existing, &BTreeSet::new(), None);
    assert_eq!(
        actions,
        vec![HostAction::Refresh {
            name: "gone-used-marked".into()
        }]
    );
}

#[test]
fn an_empty_listing_marks_no_consumed_host_missing() {
    // One empty (or narrowed) answer: consumed hosts are only verified by system id, never
    // counted missing from the list alone.
    let deployed = machine("used", 6);
    let labels = mapping::host_labels(&deployed, "inv", None);
    let existing = [host("used", true, false, labels)];
    let actions = plan_inventory_sync("inv", &[], &none(), &existing, &BTreeSet::new(), None);
    assert_eq!(
        actions,
        vec![HostAction::Verify {
            name: "used".into()
        }]
    );
    let counts = inventory_counts(&[], &none(), &existing);
    assert_eq!((counts.hosts, counts.missing, counts.consumed), (1, 0, 1));
}

#[test]
fn invalid_names_are_skipped() {
    let actions = plan_inventory_sync(
        "inv",
        &[machine("Bad_ID", 4)],
        &none(),
        &[],
        &BTreeSet::new(),
        None,
    );
    assert!(actions.is_empty());
}

/// MAAS lists 100 machines, one of which (`m042`) does not decode.
fn listing_with_one_malformed() -> maas_api_client::MachineList {
    let elements: Vec<serde_json::Value> = (0..100)
        .map(|i| {
            let id = format!("m{i:03}");
            let mut m = serde_json::to_value(machine(&id, 4)).unwrap();
            if i == 42 {
                m["cpu_count"] = serde_json::json!("eight");
            }
            m
        })
        .collect();
    serde_json::from_value(serde_json::Value::Array(elements)).unwrap()
}

#[test]
fn a_malformed_machine_is_reported_and_its_host_kept_while_99_sync() {
    let listing = listing_with_one_malformed();
    assert_eq!(listing.machines.len(), 99);
    let undecoded = Undecoded::from_skipped(&listing.skipped);
    assert_eq!(undecoded.system_ids, BTreeSet::from(["m042".to_owned()]));

    // First sync: 99 hosts created, none for the machine that does not decode.
    let actions = plan_inventory_sync(
        "inv",
        &listing.machines,
        &undecoded,
        &[],
        &BTreeSet::new(),
        None,
    );
    assert_eq!(actions.len(), 99);
    assert!(
        actions
            .iter()
            .all(|a| matches!(a, HostAction::Create { .. }))
    );
    assert!(
        actions
            .iter()
            .all(|a| !matches!(a, HostAction::Create { name, .. } if name == "m042"))
    );

    // Its host exists from an earlier sync, consumed or not: neither marked missing nor
    // deleted; the 99 others are in sync (nothing to do).
    for consumed in [false, true] {
        let existing: Vec<ExistingHost> = (0..100)
            .map(|i| {
                let id = format!("m{i:03}");
                let labels = mapping::host_labels(&machine(&id, 4), "inv", None);
                host(&id, consumed && i == 42, false, labels)
            })
            .collect();
        let changed = BTreeSet::from(["m042".to_owned()]);
        let actions = plan_inventory_sync(
            "inv",
            &listing.machines,
            &undecoded,
            &existing,
            &changed,
            None,
        );
        assert!(actions.is_empty(), "{actions:?}");
        let counts = inventory_counts(&listing.machines, &undecoded, &existing);
        assert_eq!((counts.hosts, counts.missing), (100, 0));
        assert_eq!(counts.consumed, i32::from(consumed));
        // Without the skipped id, the same listing would remove or mark the host.
        let actions =
            plan_inventory_sync("inv", &listing.machines, &none(), &existing, &changed, None);
        let name = "m042".to_owned();
        let expected = if consumed {
            HostAction::Verify { name }
        } else {
            HostAction::Delete {
                version: version(&name),
                name,
            }
        };
        assert_eq!(actions, vec![expected]);
    }

    let message = skipped_message(&listing.skipped).unwrap();
    assert!(
        message.starts_with("1 MAAS machine(s) skipped"),
        "{message}"
    );
    assert!(message.contains("machine m042 (element 42): "), "{message}");
    assert!(message.contains("expected u32"), "{message}");
    assert_eq!(skipped_message(&[]), None);
}

#[test]
fn an_unidentified_malformed_machine_keeps_every_unlisted_host() {
    let skipped = |id: Option<&str>| SkippedMachine {
        index: 0,
        system_id: id.map(ToOwned::to_owned),
        error: "invalid type".into(),
    };
    let existing = [
        host("gone-used", true, false, BTreeMap::new()),
        host("gone-free", false, false, BTreeMap::new()),
    ];
    let undecoded = Undecoded::from_skipped(&[skipped(None)]);
    assert!(undecoded.may_hold("anything"));
    let actions = plan_inventory_sync("inv", &[], &undecoded, &existing, &BTreeSet::new(), None);
    assert!(actions.is_empty(), "{actions:?}");
    let counts = inventory_counts(&[], &undecoded, &existing);
    assert_eq!((counts.hosts, counts.missing), (2, 0));
    // An identified one only protects its own host.
    let undecoded = Undecoded::from_skipped(&[skipped(Some("gone-free"))]);
    let actions = plan_inventory_sync("inv", &[], &undecoded, &existing, &BTreeSet::new(), None);
    assert_eq!(
        actions,
        vec![HostAction::Verify {
            name: "gone-used".into()
        }]
    );
    assert!(Undecoded::from_skipped(&[]).is_empty());

    // Many: five named, the rest counted.
    let many: Vec<SkippedMachine> = (0..8)
        .map(|i| SkippedMachine {
            index: i,
            system_id: Some(format!("s{i}")),
            error: "e".into(),
        })
        .collect();
    let message = skipped_message(&many).unwrap();
    assert!(message.starts_with("8 MAAS machine(s)"), "{message}");
    assert!(message.contains("machine s4 ") && !message.contains("machine s5 "));
    assert!(message.ends_with("; and 3 more"), "{message}");
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
    let counts = inventory_counts(&machines, &none(), &existing);
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

#[test]
fn reserved_or_allocated_hosts_are_kept_and_deletes_carry_preconditions() {
    let mut reserved = host("reserved", false, false, BTreeMap::new());
    reserved.reserved = true;
    let mut allocated = host("allocated", false, false, BTreeMap::new());
    allocated.allocated = true;
    let mut allocated_missing = host("allocated-missing", false, true, BTreeMap::new());
    allocated_missing.allocated = true;
    let free = host("free", false, false, BTreeMap::new());
    assert!(reserved.held() && allocated.held() && !free.held());
    let existing = [reserved, allocated, allocated_missing, free];
    let actions = plan_inventory_sync("inv", &[], &none(), &existing, &BTreeSet::new(), None);
    assert_eq!(
        actions,
        vec![
            HostAction::Verify {
                name: "reserved".into()
            },
            HostAction::Verify {
                name: "allocated".into()
            },
            // The exact object the decision was made from: uid and resourceVersion.
            HostAction::Delete {
                name: "free".into(),
                version: ObjectVersion {
                    uid: Some("uid-free".into()),
                    resource_version: Some("7".into()),
                },
            },
        ]
    );
    // Kept hosts are counted, the one confirmed gone as missing; none is consumed.
    let counts = inventory_counts(&[], &none(), &existing);
    assert_eq!((counts.hosts, counts.missing, counts.consumed), (3, 1, 0));
}

#[test]
fn an_idle_sync_of_thousands_of_machines_plans_nothing() {
    // The steady state of a large installation: every machine listed, its host labelled, no
    // MAAS change: no action at all (no API call, no host woken).
    let machines: Vec<Machine> = (0..5_000)
        .map(|i| tagged(&format!("m{i:04}"), &["rack-1"]))
        .collect();
    let existing: Vec<ExistingHost> = machines
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let mut h = host(
                &m.system_id,
                i % 3 == 0,
                false,
                mapping::host_labels(m, "inv", None),
            );
            h.allocated = i % 3 == 0;
            h
        })
        .collect();
    let actions = plan_inventory_sync("inv", &machines, &none(), &existing, &BTreeSet::new(), None);
    assert!(actions.is_empty(), "{:?}", &actions[..actions.len().min(3)]);
    let counts = inventory_counts(&machines, &none(), &existing);
    assert_eq!((counts.hosts, counts.consumed), (5_000, 1_667));
}

#[test]
fn a_relabel_carries_the_system_id() {
    let old = tagged("a", &["old"]);
    let mut existing = host(
        "host-a",
        false,
        false,
        mapping::host_labels(&old, "inv", None),
    );
    existing.system_id = "a".into();
    let actions = plan_inventory_sync(
        "inv",
        &[tagged("a", &["new"])],
        &none(),
        &[existing],
        &BTreeSet::new(),
        None,
    );
    assert!(
        matches!(&actions[..], [HostAction::Relabel { name, system_id, .. }]
            if name == "host-a" && system_id == "a"),
        "{actions:?}"
    );
}

#[test]
fn a_composed_vm_host_is_held_until_missing() {
    let mut composed = host("vm1", false, false, BTreeMap::new());
    composed.composed = true;
    let mut gone = host("vm2", false, true, BTreeMap::new());
    gone.composed = true;
    let mut claimed_gone = host("vm3", true, true, BTreeMap::new());
    claimed_gone.composed = true;
    assert!(composed.held() && !gone.held() && claimed_gone.held());
    // The inventory's filter does not list the VMs: the live one is verified, never deleted;
    // the missing unclaimed one goes as any other host; the claimed one waits for its owner.
    let existing = [composed, gone, claimed_gone];
    let actions = plan_inventory_sync("inv", &[], &none(), &existing, &BTreeSet::new(), None);
    assert_eq!(
        actions,
        vec![
            HostAction::Verify { name: "vm1".into() },
            HostAction::Delete {
                name: "vm2".into(),
                version: version("vm2"),
            },
        ]
    );
}
