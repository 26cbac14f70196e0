//! LXD VMs (`spec.lxd.enabled`) against a real API server, with hand-written MaasHosts standing
//! in for maas-client: an LXD machine asks for its VM in a VM host's `spec.vms`, two machines
//! of one Cluster spread over two VM hosts, the composed VM's MaasHost is claimed with a
//! deployment request, and deletion withdraws the request (after the release, or at once for a
//! VM never claimed).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use capmaas_api::conditions as cond;
use capmaas_api::lxd::VmRequest;
use capmaas_api::{MaasHost, keys};
use capmaas_testenv::{TestEnv, eventually};
use common::*;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

/// A deployed VM host with 8 free cores, 16 GiB and 500 GiB, as maas-client reports one.
async fn create_vm_host(client: &Client, ns: &str, name: &str) {
    let api: Api<MaasHost> = Api::namespaced(client.clone(), ns);
    api.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasHost",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"systemID": format!("sys-{name}")}
        }))
        .unwrap(),
    )
    .await
    .unwrap();
    let vm_host = json!({
        "id": 1, "name": name, "zone": "az1", "pool": "default",
        "cores": {"total": 8, "used": 0},
        "memoryMiB": {"total": 16384, "used": 0},
        "storageGiB": {"total": 500, "used": 0}
    });
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "hostname": name, "zone": "az1", "pool": "default", "cpuCount": 16,
            "memoryMiB": 65536, "provisioningState": "Deployed", "maasStatusName": "Deployed",
            "observedGeneration": 1, "vmHost": vm_host
        }})),
    )
    .await
    .unwrap();
}

/// The composed VM's MaasHost as maas-client imports it: named by system id, labelled with the
/// VM host and the hostname, `Available` once commissioned.
async fn create_vm(client: &Client, ns: &str, system_id: &str, vm_host: &str, hostname: &str) {
    let api: Api<MaasHost> = Api::namespaced(client.clone(), ns);
    api.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasHost",
            "metadata": {"name": system_id, "namespace": ns, "labels": {
                keys::LABEL_COMPOSED_ON: vm_host, keys::LABEL_VM_HOSTNAME: hostname
            }},
            "spec": {"systemID": system_id}
        }))
        .unwrap(),
    )
    .await
    .unwrap();
    api.patch_status(
        system_id,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "hostname": hostname, "zone": "az1", "pool": "default", "cpuCount": 2,
            "memoryMiB": 4096, "provisioningState": "Available", "maasStatusName": "Ready",
            "observedGeneration": 1, "vmHostId": 1
        }})),
    )
    .await
    .unwrap();
}

/// `(VM host, entry)` of machine `name`'s VM request, if any.
async fn entry_of(client: &Client, ns: &str, name: &str) -> Option<(String, VmRequest)> {
    hosts(client, ns).await.into_iter().find_map(|h| {
        let host = h.metadata.name.clone()?;
        h.spec
            .vms
            .into_iter()
            .flatten()
            .find(|e| e.consumer.name == name)
            .map(|e| (host, e))
    })
}

async fn until_requested(client: &Client, ns: &str, name: &str) -> (String, VmRequest) {
    eventually(
        &format!("{name}'s VM request"),
        Duration::from_secs(30),
        || async { entry_of(client, ns, name).await },
    )
    .await
}

#[tokio::test]
async fn lxd_machines_request_spread_claim_and_withdraw_their_vms() {
    let env = TestEnv::without_controller_manager().await.unwrap();
    let client = env.client();
    let ns = env.create_namespace("mc-vms").await.unwrap();
    create_cluster(&client, &ns, true, false).await;
    create_vm_host(&client, &ns, "vh-a").await;
    create_vm_host(&client, &ns, "vh-b").await;
    // A bare-metal host is no VM host: an LXD machine never takes it.
    create_host(&client, &ns, "bare", "az1", 16, 65536).await;
    let _controller = start_controller(&env, Some(&ns), 4).await;
    let lxd = json!({"lxd": {"enabled": true, "vmConfig": {"diskSize": 20}}});

    let first = create_machine_pair(&client, &ns, "cp-0", Some("b"), None, lxd.clone()).await;
    let (first_host, first_entry) = until_requested(&client, &ns, "cp-0").await;
    assert_eq!(first_entry.cores, 2);
    assert_eq!(first_entry.memory_mib, 4096);
    assert_eq!(first_entry.disk_gb, 20);
    assert_eq!(
        first_entry.consumer.uid,
        first.metadata.uid.clone().unwrap()
    );
    assert!(
        first_entry.hostname.starts_with("vm-cp-0-"),
        "{first_entry:?}"
    );
    create_machine_pair(&client, &ns, "cp-1", Some("b"), None, lxd.clone()).await;
    let (second_host, second_entry) = until_requested(&client, &ns, "cp-1").await;
    assert_ne!(
        first_host, second_host,
        "a Cluster's VMs spread over VM hosts"
    );
    assert_eq!(holder(&client, &ns, "bare").await, None);

    // Waiting for the composition: the condition names the VM host.
    let waiting = eventually("cp-1 waits for its VM", Duration::from_secs(30), || async {
        get_mm(&client, &ns, "cp-1").await.filter(|m| {
            condition(m, cond::MACHINE_DEPLOYED).is_some_and(|c| c.reason == "WaitingForVM")
        })
    })
    .await;
    let message = &condition(&waiting, cond::MACHINE_DEPLOYED).unwrap().message;
    assert!(message.contains(&second_host), "{message}");
    assert!(message.contains(&second_entry.hostname), "{message}");

    // maas-client composed cp-0's VM: it is claimed, with the deployment request.
    create_vm(&client, &ns, "sys-vm0", &first_host, &first_entry.hostname).await;
    until_held_by(&client, &ns, "sys-vm0", "cp-0", "cp-0 claims its VM").await;
    let vm = eventually(
        "the deployment request",
        Duration::from_secs(30),
        || async {
            Some(host(&client, &ns, "sys-vm0").await).filter(|h| h.spec.provisioning.is_some())
        },
    )
    .await;
    assert_eq!(vm.spec.provisioning.unwrap().register_vm_host, None);
    let mm = get_mm(&client, &ns, "cp-0").await.unwrap();
    assert_eq!(mm.status.unwrap().host_ref.unwrap().name, "sys-vm0");

    // Deleting cp-0: the deployment request goes; MAAS deletes the VM on release (its host
    // missing); then the claim and the entry go, and the machine.
    Api::<capmaas_api::MaasMachine>::namespaced(client.clone(), &ns)
        .delete("cp-0", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the release request", Duration::from_secs(30), || async {
        let h = host(&client, &ns, "sys-vm0").await;
        h.spec.provisioning.is_none().then_some(())
    })
    .await;
    assert!(
        entry_of(&client, &ns, "cp-0").await.is_some(),
        "kept while the VM is held"
    );
    Api::<MaasHost>::namespaced(client.clone(), &ns)
        .patch_status(
            "sys-vm0",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"provisioningState": "Missing", "missing": true}})),
        )
        .await
        .unwrap();
    eventually("cp-0 gone", Duration::from_secs(30), || async {
        get_mm(&client, &ns, "cp-0").await.is_none().then_some(())
    })
    .await;
    assert!(entry_of(&client, &ns, "cp-0").await.is_none());
    assert_eq!(holder(&client, &ns, "sys-vm0").await, None);

    // cp-1 never claimed its VM: its entry goes at once.
    delete_mm(&client, &ns, "cp-1").await;
    assert!(entry_of(&client, &ns, "cp-1").await.is_none());
    for name in ["cp-0", "cp-1"] {
        assert!(!events(&client, &ns, name, "VMRequested").await.is_empty());
    }
}
