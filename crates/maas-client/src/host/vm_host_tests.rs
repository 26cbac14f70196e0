use super::*;
use capmaas_runtime::conditions::{ConditionStatus, NewCondition, set_condition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use std::time::Instant;

fn t(s: i64) -> Time {
    Time(jiff::Timestamp::from_second(s).unwrap())
}

fn vm_host(id: i64, on: &str) -> maas_api_client::VmHost {
    serde_json::from_value(serde_json::json!({
        "id": id, "name": format!("lxd{id}"), "host": {"system_id": on},
        "total": {"cores": 4, "memory": 8192, "local_storage": 2_147_483_648_u64},
        "used": {"cores": 1, "memory": 1024, "local_storage": 0},
    }))
    .unwrap()
}

#[test]
fn status_fields_come_from_the_cache_and_keep_the_last_view_while_unknown() {
    let cache = MachineCache::new();
    let host_machine = crate::cache::tests::machine("m1", 6);
    let mut vm = crate::cache::tests::machine("vm1", 4);
    vm.pod = Some(maas_api_client::PodRef {
        id: 7,
        ..Default::default()
    });
    let previous = MaasHostStatus {
        vm_host: Some(HostVmHost {
            id: 1,
            ..Default::default()
        }),
        ..Default::default()
    };
    // No listing yet: what the host showed stays.
    let (kept, id) = status_fields(&cache, Some(&host_machine), Some(&previous));
    assert_eq!((kept.map(|h| h.id), id), (Some(1), None));
    cache.observe(vm.clone(), Instant::now());
    cache.vm_hosts.sync(vec![vm_host(7, "m1")], Instant::now());
    let (shown, _) = status_fields(&cache, Some(&host_machine), Some(&previous));
    let shown = shown.unwrap();
    assert_eq!((shown.id, shown.storage_gib.total), (7, 2));
    assert_eq!(shown.machines, Some(vec!["vm1".to_owned()]));
    assert_eq!(status_fields(&cache, Some(&vm), None), (None, Some(7)));
    // Listed without a VM host on it: none.
    cache.vm_hosts.sync(vec![], Instant::now());
    assert_eq!(
        status_fields(&cache, Some(&host_machine), Some(&previous)).0,
        None
    );
    // Machine gone: the last view stays.
    assert_eq!(
        status_fields(&cache, None, Some(&previous)).0,
        previous.vm_host
    );
}

#[test]
fn a_vm_host_counts_its_vms_whether_an_inventory_lists_them_or_only_maas_counts_them() {
    let cache = MachineCache::new();
    let host_machine = crate::cache::tests::machine("m1", 6);
    let previous = MaasHostStatus {
        vm_host: Some(HostVmHost {
            id: 7,
            machines: Some(vec!["vm0".into()]),
            ..Default::default()
        }),
        ..Default::default()
    };
    // Not listed since a restart: what the host last reported.
    assert_eq!(guests(&cache, &host_machine, Some(&previous)), ["vm0"]);
    // MAAS counts 1 core and 1024 MiB used, but no inventory lists the VM.
    cache.vm_hosts.sync(vec![vm_host(7, "m1")], Instant::now());
    let unseen = guests(&cache, &host_machine, Some(&previous));
    assert_eq!(unseen.len(), 1);
    assert!(unseen[0].contains("1 core(s) and 1024 MiB"), "{unseen:?}");
    // Listed: by system id.
    let mut vm = crate::cache::tests::machine("vm1", 4);
    vm.pod = Some(maas_api_client::PodRef {
        id: 7,
        ..Default::default()
    });
    cache.observe(vm, Instant::now());
    assert_eq!(guests(&cache, &host_machine, Some(&previous)), ["vm1"]);
    // Nothing used, nothing listed: free to release.
    let mut idle = vm_host(8, "m2");
    idle.used = maas_api_client::VmHostResources::default();
    cache.vm_hosts.sync(vec![idle], Instant::now());
    let other = crate::cache::tests::machine("m2", 6);
    assert!(guests(&cache, &other, None).is_empty());
}

#[test]
fn refusals_are_classified_and_remembered_per_generation() {
    let unsupported_error = MaasError::VmHostsUnsupported {
        message: "Unknown API endpoint".into(),
    };
    let Some(Error::VmHostRefused { reason, message }) = refusal_of(&unsupported_error) else {
        panic!()
    };
    assert_eq!(reason, REASON_VM_HOSTS_UNSUPPORTED);
    assert!(
        message.contains("no VM hosts") && message.contains("lxdConfig"),
        "{message}"
    );
    let forbidden = MaasError::Forbidden {
        message: String::new(),
    };
    let Some(Error::VmHostRefused { reason, message }) = refusal_of(&forbidden) else {
        panic!()
    };
    assert_eq!(reason, REASON_VM_HOST_NOT_ADMIN);
    assert!(message.contains("admin rights"), "{message}");
    assert!(refusal_of(&MaasError::Timeout).is_none());

    let mut host = MaasHost::new(
        "h",
        serde_json::from_value(serde_json::json!({"systemID": "m1"})).unwrap(),
    );
    host.metadata.generation = Some(2);
    assert!(remembered(&host, 100).is_none());
    let mut conditions = Vec::new();
    set_condition(
        &mut conditions,
        NewCondition::new(cond::PROVISIONED, ConditionStatus::False, reason)
            .message(message.clone())
            .observed_generation(Some(2)),
        &t(100),
    );
    host.status = Some(MaasHostStatus {
        conditions: Some(conditions),
        ..Default::default()
    });
    assert!(reported(&host, reason, &message));
    assert!(!reported(&host, REASON_VM_HOSTS_UNSUPPORTED, &message));
    assert!(matches!(
        remembered(&host, 200),
        Some(Error::VmHostRefused { reason: r, .. }) if r == REASON_VM_HOST_NOT_ADMIN
    ));
    let later = 100 + i64::try_from(REFUSAL_RETRY.as_secs()).unwrap();
    assert!(
        remembered(&host, later).is_none(),
        "tried again after a while"
    );
    host.metadata.generation = Some(3);
    assert!(
        remembered(&host, 200).is_none(),
        "a new spec is tried at once"
    );
}
