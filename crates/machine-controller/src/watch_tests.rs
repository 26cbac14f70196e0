use super::*;
use crate::test_support::{claimed, cluster, deleting, host, maas_machine, machine};
use capmaas_api::machine::MaasMachineStatus;
use capmaas_runtime::controller::filled_store;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

fn store_with(objects: Vec<MaasMachine>) -> Store<MaasMachine> {
    filled_store(objects)
}

fn no_inventories() -> Store<MaasInventory> {
    inventories(Vec::new())
}

fn inventories(objects: Vec<MaasInventory>) -> Store<MaasInventory> {
    filled_store(objects)
}

fn host_associated(mut mm: MaasMachine, status: &str, reason: &str) -> MaasMachine {
    mm.status = Some(MaasMachineStatus {
        conditions: Some(vec![Condition {
            type_: cond::HOST_ASSOCIATED.into(),
            status: status.into(),
            reason: reason.into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: capmaas_runtime::status::now(),
        }]),
        ..MaasMachineStatus::default()
    });
    mm
}

fn in_namespace(mut mm: MaasMachine, ns: &str) -> MaasMachine {
    mm.metadata.namespace = Some(ns.into());
    mm
}

fn labelled(mut mm: MaasMachine, cluster: &str) -> MaasMachine {
    mm.labels_mut()
        .insert(keys::LABEL_CLUSTER_NAME.into(), cluster.into());
    mm
}

fn refs(names: &[&str]) -> Vec<ObjectRef<MaasMachine>> {
    names
        .iter()
        .map(|n| ObjectRef::new(n).within("ns"))
        .collect()
}

fn sorted(mut v: Vec<ObjectRef<MaasMachine>>) -> Vec<ObjectRef<MaasMachine>> {
    v.sort_by(|a, b| a.name.cmp(&b.name));
    v
}

#[test]
fn a_claimed_host_wakes_its_consumer_only() {
    let waiting = host_associated(maas_machine("w"), "False", reasons::NO_HOST_AVAILABLE);
    let store = store_with(vec![waiting]);
    let owner = maas_machine("m1");
    let h = claimed(host("h1", Some(ProvisioningState::Available)), &owner);
    assert_eq!(map_host(&store, &no_inventories(), &h), refs(&["m1"]));
    let mut foreign = host("h2", Some(ProvisioningState::Available));
    foreign.spec.consumer_ref = claimed(host("x", None), &owner)
        .spec
        .consumer_ref
        .map(|mut c| {
            c.kind = "Other".into();
            c
        });
    assert!(
        map_host(&store, &no_inventories(), &foreign).is_empty(),
        "not a MaasMachine"
    );
}

#[test]
fn a_free_available_host_wakes_the_machines_waiting_for_one() {
    let store = store_with(vec![
        host_associated(maas_machine("none"), "False", reasons::NO_HOST_AVAILABLE),
        host_associated(
            maas_machine("zone"),
            "False",
            reasons::NO_CAPACITY_IN_FAILURE_DOMAIN,
        ),
        host_associated(maas_machine("has-one"), "True", "HostAssociated"),
        maas_machine("no-condition"),
        deleting(host_associated(
            maas_machine("deleting"),
            "False",
            reasons::NO_HOST_AVAILABLE,
        )),
        in_namespace(
            host_associated(
                maas_machine("elsewhere"),
                "False",
                reasons::NO_HOST_AVAILABLE,
            ),
            "other",
        ),
    ]);
    let free = host("h1", Some(ProvisioningState::Available));
    assert_eq!(
        sorted(map_host(&store, &no_inventories(), &free)),
        refs(&["none", "zone"])
    );
    for state in [None, Some(ProvisioningState::Deployed)] {
        assert!(
            map_host(&store, &no_inventories(), &host("h2", state)).is_empty(),
            "{state:?}"
        );
    }
    let mut no_namespace = free;
    no_namespace.metadata.namespace = None;
    assert!(map_host(&store, &no_inventories(), &no_namespace).is_empty());
}

#[test]
fn a_machine_wakes_the_maas_machine_it_references() {
    assert_eq!(map_machine(&machine("m1", None)), refs(&["m1"]).pop());
    let mut other_kind = machine("m1", None);
    other_kind.spec.infrastructure_ref.kind = "DockerMachine".into();
    assert_eq!(map_machine(&other_kind), None);
    let mut other_group = machine("m1", None);
    other_group.spec.infrastructure_ref.api_group = "example.com".into();
    assert_eq!(map_machine(&other_group), None);
}

#[test]
fn a_cluster_wakes_its_labelled_machines() {
    let store = store_with(vec![
        labelled(maas_machine("a"), "c"),
        labelled(maas_machine("b"), "c"),
        labelled(maas_machine("other-cluster"), "d"),
        maas_machine("unlabelled"),
        in_namespace(labelled(maas_machine("elsewhere"), "c"), "other"),
    ]);
    assert_eq!(
        sorted(map_cluster(&store, &cluster(true, false))),
        refs(&["a", "b"])
    );
}

#[test]
fn a_free_host_wakes_the_machine_that_names_its_system_id_whatever_its_state() {
    let mut moved = maas_machine("moved");
    moved.spec.system_id = Some("sys-h1".into());
    let store = store_with(vec![moved, maas_machine("other")]);
    let deployed = host("h1", Some(ProvisioningState::Deployed));
    assert_eq!(
        map_host(&store, &no_inventories(), &deployed),
        refs(&["moved"])
    );
    assert!(
        map_host(
            &store,
            &no_inventories(),
            &host("h2", Some(ProvisioningState::Deployed))
        )
        .is_empty()
    );
}

#[test]
fn status_rewrites_wake_nobody() {
    // A MaasMachine: its status (written by the reconcile itself) does not count.
    let mm = maas_machine("m");
    let mut rewritten = host_associated(mm.clone(), "True", "Claimed");
    rewritten.metadata.resource_version = Some("99".into());
    assert_eq!(maas_machine_change(&mm), maas_machine_change(&rewritten));
    assert_ne!(
        maas_machine_change(&mm),
        maas_machine_change(&deleting(mm.clone()))
    );
    assert_ne!(
        maas_machine_change(&mm),
        maas_machine_change(&labelled(mm.clone(), "c"))
    );

    // A Machine: only its spec (generation), its Node link and its deletion.
    let m = machine("m", None);
    let mut touched = m.clone();
    touched.metadata.resource_version = Some("7".into());
    assert_eq!(machine_change(&m), machine_change(&touched));
    let mut respecced = m.clone();
    respecced.metadata.generation = Some(m.metadata.generation.unwrap_or(0) + 1);
    assert_ne!(machine_change(&m), machine_change(&respecced));
    let mut linked = m.clone();
    linked.status = Some(capmaas_api::capi::MachineStatus {
        node_ref: Some(capmaas_api::capi::NodeReference { name: "n".into() }),
    });
    assert_ne!(machine_change(&m), machine_change(&linked));

    // A Cluster: pause and infrastructure readiness only.
    let c = cluster(false, false);
    let mut touched = c.clone();
    touched.metadata.resource_version = Some("8".into());
    assert_eq!(cluster_change(&c), cluster_change(&touched));
    assert_ne!(cluster_change(&c), cluster_change(&cluster(true, false)));
    assert_ne!(cluster_change(&c), cluster_change(&cluster(false, true)));
}

#[test]
fn provisioning_reconciles_join_the_trace_later_ones_link_to_it() {
    let mm = maas_machine("m");
    assert_eq!(trace_relation(&mm), Relation::Child);
    let mut ready = mm.clone();
    ready.status = Some(MaasMachineStatus {
        ready: Some(true),
        ..MaasMachineStatus::default()
    });
    assert_eq!(trace_relation(&ready), Relation::Link);
    assert_eq!(trace_relation(&deleting(mm)), Relation::Link);
}

#[test]
fn a_host_of_an_open_inventory_wakes_waiting_machines_of_admitted_namespaces() {
    let waiting = |name: &str, ns: &str| {
        in_namespace(
            host_associated(maas_machine(name), "False", reasons::NO_HOST_AVAILABLE),
            ns,
        )
    };
    let store = store_with(vec![waiting("a", "team-a"), waiting("b", "team-b")]);
    let mut inv = MaasInventory::new(
        "shared",
        capmaas_api::MaasInventorySpec {
            resource_pool: "p".into(),
            zones: None,
            tags: None,
            sync_interval_seconds: 30,
            host_labels: None,
            claim_namespaces: Some(capmaas_api::inventory::ClaimNamespaces {
                names: Some(vec!["team-a".into()]),
                name_matches: None,
            }),
        },
    );
    inv.metadata.namespace = Some("sys".into());
    let mut free = host("h1", Some(ProvisioningState::Available));
    free.metadata.namespace = Some("sys".into());
    free.labels_mut()
        .insert(keys::LABEL_HOST_INVENTORY.into(), "shared".into());
    assert_eq!(
        map_host(&store, &inventories(vec![inv]), &free),
        vec![ObjectRef::new("a").within("team-a")]
    );
    assert!(
        map_host(&store, &no_inventories(), &free).is_empty(),
        "its inventory unknown: nobody else may claim it"
    );
    let mut claimed_across = free;
    claimed_across.spec.consumer_ref = claimed(host("x", None), &maas_machine("m9"))
        .spec
        .consumer_ref
        .map(|mut c| {
            c.namespace = Some("team-a".into());
            c
        });
    assert_eq!(
        map_host(&store, &no_inventories(), &claimed_across),
        vec![ObjectRef::new("m9").within("team-a")]
    );
}

#[test]
fn vm_hosts_and_composed_vms_wake_the_lxd_machines_waiting_for_a_vm() {
    let lxd = |name: &str| {
        let mut mm = maas_machine(name);
        mm.spec.lxd = Some(capmaas_api::lxd::MachineLxdConfig {
            enabled: true,
            vm_config: None,
        });
        mm
    };
    let mut holding = lxd("holding");
    holding.status = Some(MaasMachineStatus {
        host_ref: Some(capmaas_api::common::HostReference::new("vm-x", "ns", "ns")),
        ..MaasMachineStatus::default()
    });
    let requester = lxd("requester");
    let store = store_with(vec![
        lxd("waiting"),
        holding,
        deleting(lxd("leaving")),
        maas_machine("bare"),
        requester.clone(),
    ]);
    // A VM host claimed by its own machine wakes it, the machines its entries name, and the
    // LXD machines without a host.
    let mut vm_host = claimed(
        host("vh", Some(ProvisioningState::Deployed)),
        &maas_machine("owner"),
    );
    if let Some(s) = vm_host.status.as_mut() {
        s.vm_host = Some(capmaas_api::lxd::HostVmHost::default());
    }
    vm_host.spec.vms = Some(vec![capmaas_api::lxd::VmRequest {
        hostname: "vm-requester".into(),
        cores: 1,
        memory_mib: 1,
        disk_gb: 1,
        storage_pool: None,
        consumer: crate::status::consumer_ref(&requester, "ns").unwrap(),
    }]);
    let woken = sorted(map_host(&store, &no_inventories(), &vm_host));
    assert_eq!(
        woken,
        sorted(refs(&["requester", "owner", "waiting", "requester"]))
    );
    // A composed VM's host (not Available yet): the LXD machines without a host only.
    let mut vm = host("sys-vm", Some(ProvisioningState::Unavailable));
    vm.labels_mut()
        .insert(keys::LABEL_COMPOSED_ON.into(), "vh".into());
    assert_eq!(
        sorted(map_host(&store, &no_inventories(), &vm)),
        sorted(refs(&["requester", "waiting"]))
    );
}
