//! A cluster whose MaasCluster has `spec.lxdConfig.enabled` (CAPMAAS's LXD host cluster): every
//! server, control plane and workers, is deployed with MAAS's `register_vmhost`, so MAAS installs
//! LXD and registers it as a VM host itself; the MAAS key never leaves maas-client (CAPMAAS
//! copies it into the workload cluster for an initializer DaemonSet to do the same). Each
//! MaasHost then shows its VM host (`status.vmHost`: MAAS's id, cores, memory and storage, and
//! the machines composed on it). When the cluster is deleted while an operator's VM runs on one
//! of them, that server is not released under it (`VMHostInUse`) until the VM is gone; then every
//! server is released and MAAS removes their VM hosts with them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeSet;

use capmaas_e2e::{ClusterSpec, Harness, HarnessConfig, wait_for};
use common::{
    LONG, ONE_AT_A_TIME, POLL, capi, declare, in_use, list_infra, sim_counts, wait_running,
};
use kube::api::DeleteParams;
use maas_api_client::ComposeRequest;
use maas_sim::{NodeStatus, VmHostEventKind};
use serde_json::{Value, json};

/// Servers of the LXD host cluster (1 control plane, 2 workers).
const HOSTS: usize = 3;

/// The `status.vmHost` of every MaasHost of `ns` that has one, by system id.
async fn imported_vm_hosts(h: &Harness, ns: &str) -> Vec<(String, Value)> {
    list_infra(h, ns, "MaasHost")
        .await
        .into_iter()
        .filter(|host| host.data["status"]["vmHost"].is_object())
        .map(|host| {
            (
                host.data["spec"]["systemID"].as_str().unwrap().to_owned(),
                host.data["status"]["vmHost"].clone(),
            )
        })
        .collect()
}

#[tokio::test]
async fn an_lxd_host_clusters_servers_become_vm_hosts_registered_by_maas_itself() {
    let _one = ONE_AT_A_TIME.lock().await;
    let mut h = Harness::start(HarnessConfig {
        machines: HOSTS + 1,
        ..HarnessConfig::default()
    })
    .await
    .unwrap();
    let ns = h.management.create_namespace("lxd-hosts").await.unwrap();
    let mut spec = ClusterSpec::story(&ns);
    spec.control_plane = 1;
    spec.workers = 2;
    spec.lxd_hosts = true;
    declare(&h, &spec).await;
    let machines = wait_running(&mut h, &ns, HOSTS).await;
    assert_eq!(machines.len(), HOSTS);

    // MAAS registered each deployed server as an LXD VM host, once.
    let sim = h.sim.state();
    let deployed: BTreeSet<String> = list_infra(&h, &ns, "MaasMachine")
        .await
        .iter()
        .map(|mm| mm.data["spec"]["systemID"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(deployed.len(), HOSTS);
    let registered: Vec<String> = sim
        .vm_host_events()
        .into_iter()
        .filter(|e| e.kind == VmHostEventKind::Registered)
        .filter_map(|e| e.system_id)
        .collect();
    assert_eq!(
        registered.iter().cloned().collect::<BTreeSet<_>>(),
        deployed,
        "every server registered as a VM host"
    );
    assert_eq!(registered.len(), HOSTS, "each registered once");
    let vm_hosts = sim.vm_hosts();
    assert!(vm_hosts.iter().all(|v| v.kind == "lxd"), "{vm_hosts:?}");

    // Each MaasHost shows its VM host as MAAS has it.
    wait_for("every MaasHost showing its VM host", LONG, POLL, || async {
        let imported = imported_vm_hosts(&h, &ns).await;
        Ok((imported.len() == HOSTS).then_some(imported))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", h.logs(30)));
    for (system_id, shown) in imported_vm_hosts(&h, &ns).await {
        let maas = vm_hosts
            .iter()
            .find(|v| v.host_system_id.as_deref() == Some(system_id.as_str()))
            .unwrap_or_else(|| panic!("no VM host on {system_id}: {vm_hosts:?}"));
        assert_eq!(shown["id"].as_u64(), Some(maas.id), "{shown}");
        assert_eq!(shown["name"], maas.name.as_str(), "{shown}");
        assert_eq!(
            shown["cores"]["total"].as_u64(),
            Some(u64::from(maas.cores))
        );
        assert_eq!(shown["memoryMiB"]["total"].as_u64(), Some(maas.memory));
        assert_eq!(shown["cores"]["used"].as_u64(), Some(0));
    }

    // An operator composes a VM on one of the VM hosts, outside this provider; the gateway
    // sees it on its next inventory sync.
    let busy = &vm_hosts[0];
    let busy_server = busy.host_system_id.clone().unwrap();
    let vm = common::sim_client(&h.sim)
        .compose(
            i64::try_from(busy.id).unwrap(),
            &ComposeRequest {
                hostname: Some("operator-vm".into()),
                cores: Some(1),
                memory_mib: Some(1024),
                storage_gb: Some(10),
                ..ComposeRequest::default()
            },
        )
        .await
        .unwrap();
    wait_for(
        "the VM host showing the operator's VM",
        LONG,
        POLL,
        || async {
            let imported = imported_vm_hosts(&h, &ns).await;
            Ok(imported
                .iter()
                .any(|(id, shown)| *id == busy_server && shown["machines"] == json!([vm.as_str()]))
                .then_some(()))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", h.logs(30)));

    // Deleting the cluster: every other server is released; the VM host running the VM waits
    // (MAAS would release it only by force, deleting the VM) and says so.
    capi(&h, &ns, "Cluster")
        .await
        .delete("story", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(
        "the other servers released, the busy VM host waiting",
        LONG,
        POLL,
        || async {
            let waiting = list_infra(&h, &ns, "MaasHost")
                .await
                .into_iter()
                .any(|host| {
                    host.data["spec"]["systemID"] == busy_server.as_str()
                        && host.data["status"]["conditions"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .any(|c| c["type"] == "Provisioned" && c["reason"] == "VMHostInUse")
                });
            Ok((waiting && in_use(&h) == 1).then_some(()))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}: {:?}\n{}", sim_counts(&h), h.logs(30)));
    let server = sim
        .machines()
        .into_iter()
        .find(|m| m.system_id == busy_server)
        .unwrap();
    assert_eq!(
        server.status,
        NodeStatus::Deployed,
        "not released under its VM"
    );
    assert!(
        sim.machines().iter().any(|m| m.system_id == vm),
        "the VM is intact"
    );

    // The operator deletes the VM (`maas $PROFILE machine delete`; the simulator's control API
    // stands in): the VM host is released, and MAAS removes every VM host with its server.
    sim.remove_machine(&vm).unwrap();
    wait_for(
        "every server released and no VM host left",
        LONG,
        POLL,
        || async {
            let machines_left = common::list_capi(&h, &ns, "Machine").await.len();
            Ok((in_use(&h) == 0 && machines_left == 0 && sim.vm_hosts().is_empty()).then_some(()))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}: {:?}\n{}", sim_counts(&h), h.logs(30)));
    let deleted = sim
        .vm_host_events()
        .into_iter()
        .filter(|e| e.kind == VmHostEventKind::Deleted)
        .count();
    assert_eq!(deleted, HOSTS);
    h.ensure_running().unwrap();
}
