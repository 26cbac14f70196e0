use super::*;
use capmaas_api::capi::Cluster;
use capmaas_api::host::MaasHostStatus;
use capmaas_api::lxd::{ComposedVm, MachineLxdConfig, VmHostResource};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::choose::{Exclusion, HostRequest, rank_hosts};
use crate::decide::{Observed, Step, decide, is_released};
use crate::test_support::{claimed, cluster, deleting, host, maas_machine, machine};

fn lxd_machine(name: &str) -> MaasMachine {
    let mut mm = maas_machine(name);
    mm.spec.lxd = Some(MachineLxdConfig {
        enabled: true,
        vm_config: None,
    });
    mm
}

fn capi_machine(name: &str) -> Machine {
    let mut m = machine(name, Some("boot"));
    m.metadata.uid = Some(format!("{name}-0123456789"));
    m
}

fn resource(total: i64, used: i64) -> VmHostResource {
    VmHostResource { total, used }
}

/// A deployed VM host `name` in zone `az1`, pool `default`, with `cores` cores and `memory`
/// MiB free, 500 GiB storage.
fn vm_host(name: &str, cores: i64, memory: i64) -> MaasHost {
    let mut h = host(name, Some(ProvisioningState::Deployed));
    let status = h.status.get_or_insert_with(MaasHostStatus::default);
    status.vm_host = Some(HostVmHost {
        id: 1,
        name: name.into(),
        zone: Some("az1".into()),
        pool: Some("default".into()),
        cores: resource(cores + 2, 2),
        memory_mib: resource(memory + 1024, 1024),
        storage_gib: resource(500, 0),
        machines: None,
    });
    h
}

fn with_entry(
    mut h: MaasHost,
    mm: &MaasMachine,
    hostname: &str,
    cores: i32,
    memory: i64,
) -> MaasHost {
    let entry = VmRequest {
        hostname: hostname.into(),
        cores,
        memory_mib: memory,
        disk_gb: 10,
        storage_pool: None,
        consumer: consumer_ref(mm, "ns").unwrap(),
    };
    h.spec.vms.get_or_insert_with(Vec::new).push(entry);
    h
}

fn request(cores: i64, memory: i64) -> VmHostRequest {
    VmHostRequest {
        cores,
        memory_mib: memory,
        disk_gb: 60,
        ..VmHostRequest::default()
    }
}

fn names(r: &VmHostRanking<'_>) -> Vec<String> {
    r.candidates.iter().map(|h| h.name_any()).collect()
}

#[test]
fn the_hostname_is_capmaas_s_made_a_dns_label() {
    assert_eq!(vm_hostname("cp-0", "abcdef-123"), "vm-cp-0-abcde");
    assert_eq!(
        vm_hostname("My.Machine_1", "ABCDE"),
        "vm-my-machine-1-abcde"
    );
    let long = vm_hostname(&"x".repeat(100), "12345678");
    assert_eq!(long.len(), 63);
    assert!(long.ends_with("-12345"));
    // Truncation never leaves a '-' before the suffix's own.
    let name = format!("{}-abc", "y".repeat(54));
    let h = vm_hostname(&name, "12345");
    assert!(!h.contains("--"), "{h}");
    assert!(capmaas_api::keys::is_label_segment(&h));
    assert_eq!(vm_hostname("m", ""), "vm-m");
    assert_eq!(vm_hostname("m", "a-b"), "vm-m-a-b");
    assert_eq!(
        vm_hostname("m", "uid"),
        vm_hostname("m", "uid"),
        "deterministic"
    );
}

#[test]
fn the_request_takes_cpu_memory_and_the_larger_disk() {
    let mut mm = lxd_machine("m");
    mm.spec.min_disk_size = Some(80);
    let m = capi_machine("m");
    let entry = vm_request(&mm, &m, "ns").unwrap();
    assert_eq!(entry.hostname, "vm-m-m-012");
    assert_eq!(
        (entry.cores, entry.memory_mib, entry.disk_gb),
        (2, 4096, 80)
    );
    assert_eq!(entry.consumer.uid, "uid-m");
    assert_eq!(entry.consumer.namespace, None);
    mm.spec.lxd = Some(MachineLxdConfig {
        enabled: true,
        vm_config: Some(VmConfig {
            disk_size: 100,
            storage_pool: Some("fast".into()),
            ..VmConfig::default()
        }),
    });
    let entry = vm_request(&mm, &m, "other").unwrap();
    assert_eq!(entry.disk_gb, 100);
    assert_eq!(entry.storage_pool.as_deref(), Some("fast"));
    assert_eq!(
        entry.consumer.namespace.as_deref(),
        Some("ns"),
        "host elsewhere"
    );
    let mut no_disk = lxd_machine("m");
    no_disk.spec.min_disk_size = None;
    assert_eq!(
        vm_request(&no_disk, &m, "ns").unwrap().disk_gb,
        60,
        "default"
    );
}

#[test]
fn free_counts_entries_not_composed_yet() {
    let other = lxd_machine("o");
    let h = with_entry(vm_host("a", 8, 8192), &other, "vm-o", 4, 4096);
    let v = h.status.as_ref().unwrap().vm_host.clone().unwrap();
    assert_eq!(free(&h, &v).cores, 4);
    assert_eq!(free(&h, &v).memory_mib, 4096);
    assert_eq!(free(&h, &v).storage_gib, 490);
    // Composed (system id recorded): MAAS's `used` counts it, the entry no more.
    let mut composed = h.clone();
    composed.status.as_mut().unwrap().composed_vms = Some(vec![ComposedVm {
        hostname: "vm-o".into(),
        system_id: Some("s1".into()),
    }]);
    assert_eq!(free(&composed, &v).cores, 8);
    // In flight (no system id): still counted as pending.
    composed.status.as_mut().unwrap().composed_vms = Some(vec![ComposedVm {
        hostname: "vm-o".into(),
        system_id: None,
    }]);
    assert_eq!(free(&composed, &v).cores, 4);
}

#[test]
fn vm_hosts_are_filtered_by_state_parent_pool_zone_and_resources() {
    use VmHostExclusion as X;
    let mut deleting_host = vm_host("deleting", 8, 8192);
    deleting_host.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::now()));
    let deploying = {
        let mut h = vm_host("deploying", 8, 8192);
        h.status.as_mut().unwrap().provisioning_state = Some(ProvisioningState::Deploying);
        h
    };
    let mut unhealthy = vm_host("unhealthy", 8, 8192);
    unhealthy
        .annotations_mut()
        .insert(keys::ANNOTATION_HOST_UNHEALTHY.into(), "x".into());
    let mut missing = vm_host("missing", 8, 8192);
    missing.status.as_mut().unwrap().missing = Some(true);
    let mut other_pool = vm_host("other-pool", 8, 8192);
    if let Some(v) = other_pool.status.as_mut().unwrap().vm_host.as_mut() {
        v.pool = Some("gpu".into());
    }
    let mut other_zone = vm_host("other-zone", 8, 8192);
    if let Some(v) = other_zone.status.as_mut().unwrap().vm_host.as_mut() {
        v.zone = Some("az2".into());
    }
    let few_cores = vm_host("few-cores", 1, 8192);
    let little_memory = vm_host("little-memory", 8, 1024);
    let full = with_entry(vm_host("full", 8, 8192), &lxd_machine("o"), "vm-o", 8, 1);
    let bare = host("bare-metal", Some(ProvisioningState::Available));
    let fits = vm_host("fits", 8, 8192);
    let hosts = vec![
        deleting_host,
        deploying,
        unhealthy,
        missing,
        other_pool,
        other_zone,
        few_cores,
        little_memory,
        full,
        bare,
        fits,
    ];
    let req = VmHostRequest {
        resource_pool: Some("default".into()),
        failure_domain: Some("az1".into()),
        ..request(2, 4096)
    };
    let r = rank_vm_hosts(&req, &hosts);
    assert_eq!(names(&r), ["fits"]);
    for (x, n) in [
        (X::Deleting, 1),
        (X::NotDeployed, 1),
        (X::Unhealthy, 1),
        (X::Missing, 1),
        (X::ResourcePool, 1),
        (X::FailureDomain, 1),
        (X::Cores, 2),
        (X::Memory, 1),
    ] {
        assert_eq!(r.excluded.get(&x), Some(&n), "{x:?}");
    }
    assert_eq!(
        r.excluded.values().sum::<usize>(),
        9,
        "bare metal is no VM host"
    );
    let message = no_vm_host_explanation(
        &request(64, 4096),
        &rank_vm_hosts(&request(64, 4096), &hosts),
    );
    assert!(message.contains("lack 64 free cores"), "{message}");
    assert!(
        no_vm_host_explanation(&req, &rank_vm_hosts(&req, &[])).contains("no VM host"),
        "none at all"
    );
    // Parent: only the host with that system id.
    let parent = VmHostRequest {
        parent: Some("sys-b".into()),
        ..request(1, 1)
    };
    let pair = [vm_host("a", 8, 8192), vm_host("b", 8, 8192)];
    let r = rank_vm_hosts(&parent, &pair);
    assert_eq!(names(&r), ["b"]);
    assert_eq!(r.excluded.get(&X::Parent), Some(&1));
    let message = no_vm_host_explanation(
        &VmHostRequest {
            parent: Some("sys-x".into()),
            ..request(1, 1)
        },
        &rank_vm_hosts(
            &VmHostRequest {
                parent: Some("sys-x".into()),
                ..request(1, 1)
            },
            &pair,
        ),
    );
    assert!(message.contains("not spec.parent sys-x"), "{message}");
}

#[test]
fn vm_hosts_rank_by_cluster_spread_then_free_memory_then_name() {
    let sibling = lxd_machine("sibling");
    let stranger = lxd_machine("stranger");
    let roomy_with_sibling = with_entry(vm_host("a-roomy", 16, 65536), &sibling, "vm-s", 1, 1);
    let small = vm_host("b-small", 16, 16384);
    let small_twin = vm_host("c-small", 16, 16384);
    let with_stranger = with_entry(vm_host("d-stranger", 16, 32768), &stranger, "vm-x", 1, 1);
    let hosts = [roomy_with_sibling, small, small_twin, with_stranger];
    let mut req = request(2, 4096);
    req.cluster_members = BTreeSet::from(["uid-sibling".to_owned()]);
    let r = rank_vm_hosts(&req, &hosts);
    assert_eq!(names(&r), ["d-stranger", "b-small", "c-small", "a-roomy"]);
    // Same answer whatever the order hosts come in.
    let reversed: Vec<&MaasHost> = hosts.iter().rev().collect();
    assert_eq!(names(&rank_vm_hosts(&req, reversed)), names(&r));
    // Without siblings: most free memory first (the stranger's entry takes 1 MiB).
    req.cluster_members.clear();
    assert_eq!(
        names(&rank_vm_hosts(&req, &hosts)),
        ["a-roomy", "d-stranger", "b-small", "c-small"]
    );
}

#[test]
fn the_bare_metal_choice_never_takes_a_composed_vm() {
    let mut labelled = host("vm-labelled", Some(ProvisioningState::Available));
    labelled
        .labels_mut()
        .insert(keys::LABEL_COMPOSED_ON.into(), "vmhost".into());
    let mut with_id = host("vm-with-id", Some(ProvisioningState::Available));
    with_id.status.as_mut().unwrap().vm_host_id = Some(3);
    let bare = host("bare", Some(ProvisioningState::Available));
    let mut bare_fit = bare.clone();
    bare_fit.status.as_mut().unwrap().cpu_count = Some(8);
    bare_fit.status.as_mut().unwrap().memory_mib = Some(8192);
    for h in [&mut labelled, &mut with_id] {
        let s = h.status.as_mut().unwrap();
        (s.cpu_count, s.memory_mib) = (Some(8), Some(8192));
    }
    let hosts = [labelled, with_id, bare_fit];
    let req = HostRequest {
        min_cpu: 2,
        min_memory_mib: 4096,
        ..HostRequest::default()
    };
    let r = rank_hosts(&req, &hosts, jiff::Timestamp::now());
    let chosen: Vec<String> = r.candidates.iter().map(|h| h.name_any()).collect();
    assert_eq!(chosen, ["bare"]);
    assert_eq!(r.excluded.get(&Exclusion::ComposedVm), Some(&2));
    assert!(!Exclusion::ComposedVm.is_constraint());
}

#[test]
fn a_released_composed_vm_is_missing_and_counts_as_released() {
    let mut vm = host("vm", Some(ProvisioningState::Missing));
    vm.labels_mut()
        .insert(keys::LABEL_COMPOSED_ON.into(), "vmhost".into());
    // Even when the gateway's last status predates the release request: MAAS deleted it.
    vm.metadata.generation = Some(2);
    assert!(is_released(&vm));
    let mut bare = vm.clone();
    bare.labels_mut().clear();
    assert!(!is_released(&bare));
}

fn vm_of(vm_host: &MaasHost, hostname: &str, state: ProvisioningState) -> MaasHost {
    let mut vm = host("sys-vm", Some(state));
    vm.labels_mut()
        .insert(keys::LABEL_COMPOSED_ON.into(), vm_host.name_any());
    vm.labels_mut()
        .insert(keys::LABEL_VM_HOSTNAME.into(), hostname.into());
    vm.status.as_mut().unwrap().vm_host_id = Some(1);
    vm
}

struct World {
    mm: MaasMachine,
    machine: Machine,
    cluster: Cluster,
}

impl World {
    fn new(mm: MaasMachine) -> Self {
        Self {
            mm,
            machine: capi_machine("m"),
            cluster: cluster(true, false),
        }
    }

    fn step(
        &self,
        host: Option<&MaasHost>,
        vm_host: Option<&MaasHost>,
        vm: Option<&MaasHost>,
    ) -> Step {
        decide(&Observed {
            maas_machine: &self.mm,
            machine: Some(&self.machine),
            cluster: Some(&self.cluster),
            host,
            data_claim: None,
            data: None,
            system_host: None,
            vm_host,
            vm,
        })
    }
}

#[test]
fn an_lxd_machine_requests_waits_for_and_claims_its_vm() {
    let w = World::new(lxd_machine("m"));
    assert_eq!(w.step(None, None, None), Step::RequestVm);
    let vh = with_entry(vm_host("vh", 8, 8192), &w.mm, "vm-m-m-012", 2, 4096);
    let Step::WaitForVm { message } = w.step(None, Some(&vh), None) else {
        panic!("waits for the composition");
    };
    assert_eq!(
        message,
        "waiting for VM vm-m-m-012 to be composed on VM host vh"
    );
    // maas-client's refusal naming the hostname is carried over; one naming another is not.
    let mut refused = vh.clone();
    let refusal = |hostname: &str| Condition {
        type_: VMS_COMPOSED.into(),
        status: "False".into(),
        reason: "ComposeRefused".into(),
        message: format!("{hostname}: not enough memory"),
        last_transition_time: Time(jiff::Timestamp::now()),
        observed_generation: None,
    };
    refused.status.as_mut().unwrap().conditions = Some(vec![refusal("vm-m-m-012")]);
    let Step::WaitForVm { message } = w.step(None, Some(&refused), None) else {
        panic!("waits");
    };
    assert!(
        message.ends_with("vm-m-m-012: not enough memory (ComposeRefused)"),
        "{message}"
    );
    refused.status.as_mut().unwrap().conditions = Some(vec![refusal("vm-other")]);
    let Step::WaitForVm { message } = w.step(None, Some(&refused), None) else {
        panic!("waits");
    };
    assert!(!message.contains("ComposeRefused"));
    // Composed, commissioning: wait; Available: claim; claimed by someone else: wait.
    let commissioning = vm_of(&vh, "vm-m-m-012", ProvisioningState::Unavailable);
    let Step::WaitForVm { message } = w.step(None, Some(&vh), Some(&commissioning)) else {
        panic!("waits for commissioning");
    };
    assert!(message.contains("(Unavailable)"), "{message}");
    let ready = vm_of(&vh, "vm-m-m-012", ProvisioningState::Available);
    assert_eq!(w.step(None, Some(&vh), Some(&ready)), Step::ClaimVm);
    let taken = claimed(ready.clone(), &lxd_machine("thief"));
    assert!(matches!(
        w.step(None, Some(&vh), Some(&taken)),
        Step::WaitForVm { .. }
    ));
    // Claimed: the ordinary flow (record the host, request the deployment).
    let mine = claimed(ready, &w.mm);
    assert_eq!(w.step(Some(&mine), Some(&vh), None), Step::RecordHost);
    assert!(vm_claim_fits(
        &vm_of(&vh, "vm-m-m-012", ProvisioningState::Available),
        "vh",
        "vm-m-m-012"
    ));
    assert!(!vm_claim_fits(
        &vm_of(&vh, "vm-m-m-012", ProvisioningState::Available),
        "vh",
        "vm-other"
    ));
}

#[test]
fn deleting_withdraws_the_request_only_once_no_host_is_held() {
    let w = World::new(deleting(lxd_machine("m")));
    let vh = with_entry(vm_host("vh", 8, 8192), &w.mm, "vm-m-m-012", 2, 4096);
    let mut vm = claimed(vm_of(&vh, "vm-m-m-012", ProvisioningState::Deployed), &w.mm);
    vm.spec.provisioning =
        serde_json::from_value(serde_json::json!({"image": "ubuntu/jammy"})).ok();
    assert_eq!(w.step(Some(&vm), Some(&vh), None), Step::ClearProvisioning);
    vm.spec.provisioning = None;
    assert!(matches!(
        w.step(Some(&vm), Some(&vh), None),
        Step::WaitForRelease { .. }
    ));
    // MAAS deleted the VM on release: its host is missing.
    vm.status.as_mut().unwrap().provisioning_state = Some(ProvisioningState::Missing);
    assert_eq!(w.step(Some(&vm), Some(&vh), None), Step::ReleaseHost);
    assert_eq!(w.step(None, Some(&vh), None), Step::RemoveVmRequest);
    assert_eq!(w.step(None, None, None), Step::RemoveFinalizer);
    // The entry identifies its machine by UID and namespace.
    assert!(entry_of(&vh, &w.mm).is_some());
    assert!(entry_of(&vh, &lxd_machine("other")).is_none());
}
