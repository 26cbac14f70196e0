//! A cluster whose MaasCluster has `spec.lxdConfig.enabled` (CAPMAAS's LXD host cluster): every
//! server, control plane and workers, is deployed with MAAS's `register_vmhost`, so MAAS installs
//! LXD and registers it as a VM host itself; the MAAS key never leaves maas-client (CAPMAAS
//! copies it into the workload cluster for an initializer DaemonSet to do the same). Each
//! MaasHost then shows its VM host (`status.vmHost`: MAAS's id, cores, memory and storage, and
//! the machines composed on it).
//!
//! A second cluster puts its control plane on LXD VMs there (`spec.lxd.enabled`, CAPMAAS's hosted
//! control-plane pattern): each VM is composed once, spread over the VM hosts, deployed, and
//! deleted with its machine when the control plane scales down. A node-reuse upgrade of the host
//! cluster's workers while the VMs run releases no server under them: its re-imaging waits
//! (`VMHostInUse`) with the VMs untouched, and goes on once the VM cluster is deleted. Deleting
//! the host cluster then releases every server, MAAS removes their VM hosts, and no VM is left.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeSet;

use capmaas_e2e::{ClusterSpec, Harness, HarnessConfig, wait_for};
use common::{
    LONG, ONE_AT_A_TIME, POLL, capi, declare, in_use, list_infra, sim_counts, wait_running,
};
use kube::ResourceExt;
use kube::api::DeleteParams;
use maas_sim::{NodeStatus, VmHostEventKind};
use serde_json::Value;

/// Servers of the LXD host cluster (1 control plane, 2 workers); the simulator has one more.
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
async fn an_lxd_host_cluster_serves_vms_to_a_second_clusters_control_plane() {
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
    spec.node_reuse = true;
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

    // A second cluster whose control plane runs on LXD VMs composed on those VM hosts.
    let mut vms = ClusterSpec::story(&ns);
    vms.name = "vms".into();
    vms.zones = Vec::new();
    vms.control_plane = 2;
    vms.workers = 0;
    vms.lxd_control_plane = true;
    declare(&h, &vms).await;
    wait_running(&mut h, &ns, HOSTS + 2).await;
    let placed = vm_placement(&h, &ns, "vms").await;
    assert_eq!(placed.len(), 2, "{placed:?}");
    assert_eq!(composes(&h), 2, "each VM composed once");
    assert_distinct_vm_hosts(&placed);
    assert_eq!(
        sim_counts(&h).get(&NodeStatus::Ready).copied().unwrap_or(0),
        1,
        "the spare server is not taken by a VM's machine"
    );

    // Scaled up: the third VM goes to the VM host that has none of this cluster's VMs yet.
    vms.control_plane = 3;
    declare(&h, &vms).await;
    wait_running(&mut h, &ns, HOSTS + 3).await;
    let placed = vm_placement(&h, &ns, "vms").await;
    assert_eq!(placed.len(), 3, "{placed:?}");
    assert_eq!(composes(&h), 3, "each VM composed once");
    assert_distinct_vm_hosts(&placed);

    // Scaled down: the VM of the deleted machine is deleted in MAAS with its release.
    let (gone_vm, _) = placed["vms-control-plane-2"].clone();
    capi(&h, &ns, "Machine")
        .await
        .delete("vms-control-plane-2", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(
        "the removed machine's VM gone from MAAS",
        LONG,
        POLL,
        || async {
            let left = sim.machines().iter().any(|m| m.system_id == gone_vm);
            let machines = common::list_capi(&h, &ns, "Machine").await.len();
            Ok((!left && machines == HOSTS + 2 && vm_requests(&h, &ns).await == 2).then_some(()))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}: {:?}\n{}", sim_counts(&h), h.logs(30)));

    // The host cluster's workers are upgraded with node reuse (each server released and
    // re-imaged) while the VMs run: a worker under VMs is not released under them. Its release
    // waits (`VMHostInUse`), the VMs stay deployed and powered, and the rollout waits with it.
    let vm_ids: Vec<String> = placed
        .values()
        .filter(|(id, _)| *id != gone_vm)
        .map(|(id, _)| id.clone())
        .collect();
    let under_vms: BTreeSet<String> = sim
        .vm_hosts()
        .into_iter()
        .filter(|v| !v.machines.is_empty())
        .filter_map(|v| v.host_system_id)
        .collect();
    assert_eq!(under_vms.len(), 2, "two servers run the two VMs");
    let power_ons: Vec<u64> = vm_ids
        .iter()
        .map(|id| sim.machine(id).unwrap().power_on_count)
        .collect();
    for object in [
        spec.worker_template(UPGRADE),
        spec.machine_deployment(UPGRADE),
    ] {
        h.apply(&object).await.unwrap();
    }
    wait_for(
        "a worker under VMs waiting to be re-imaged",
        LONG,
        POLL,
        || async {
            let waiting: Vec<String> = list_infra(&h, &ns, "MaasHost")
                .await
                .into_iter()
                .filter(vm_host_in_use)
                .map(|host| host.data["spec"]["systemID"].as_str().unwrap().to_owned())
                .collect();
            Ok((waiting.len() == 1).then_some(waiting))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}: {:?}\n{}", sim_counts(&h), h.logs(30)));
    for (id, power_ons) in vm_ids.iter().zip(power_ons) {
        let vm = sim.machine(id).unwrap();
        assert_eq!(vm.status, NodeStatus::Deployed, "{id}: not taken down");
        assert_eq!(vm.power_state, maas_sim::PowerState::On, "{id}");
        assert_eq!(vm.power_on_count, power_ons, "{id}: not power-cycled");
    }
    for server in &under_vms {
        let server = sim.machine(server).unwrap();
        assert_eq!(
            server.status,
            NodeStatus::Deployed,
            "not released under its VMs"
        );
        assert!(
            !server.distro_series.contains("noble"),
            "not re-imaged under its VMs"
        );
    }

    // The VM cluster is deleted: its VMs are released (MAAS deletes them), and the upgrade goes
    // on, re-imaging the same two workers.
    capi(&h, &ns, "Cluster")
        .await
        .delete("vms", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(
        "the VMs gone and both workers re-imaged",
        LONG,
        POLL,
        || async {
            let noble = sim
                .machines()
                .iter()
                .filter(|m| m.status == NodeStatus::Deployed && m.distro_series.contains("noble"))
                .count();
            let running = common::running_machines(&h, &ns).await.len();
            let vms_left = vm_ids.iter().any(|id| sim.machine(id).is_some());
            Ok((!vms_left && noble == 2 && running == HOSTS).then_some(()))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}: {:?}\n{}", sim_counts(&h), h.logs(30)));

    // Deleting the host cluster: every server released, MAAS removes their VM hosts, and no
    // VM, composed MaasHost or VM request is left.
    capi(&h, &ns, "Cluster")
        .await
        .delete("story", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(
        "every server released, no VM and no VM host left",
        LONG,
        POLL,
        || async {
            let machines_left = common::list_capi(&h, &ns, "Machine").await.len();
            let composed_hosts = list_infra(&h, &ns, "MaasHost")
                .await
                .into_iter()
                .filter(|host| host.labels().contains_key(COMPOSED_ON))
                .count();
            Ok((in_use(&h) == 0
                && machines_left == 0
                && sim.vm_hosts().is_empty()
                && sim.machines().len() == HOSTS + 1
                && composed_hosts == 0
                && vm_requests(&h, &ns).await == 0)
                .then_some(()))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}: {:?}\n{}", sim_counts(&h), h.logs(30)));
    assert_eq!(composes(&h), 3, "no VM composed twice");
    // Each server's VM host went with its release: the two re-imaged workers' twice (they
    // were registered again when redeployed), the control plane's once.
    let deleted = sim
        .vm_host_events()
        .into_iter()
        .filter(|e| e.kind == VmHostEventKind::Deleted)
        .count();
    assert_eq!(deleted, HOSTS + 2);
    h.ensure_running().unwrap();
}

const COMPOSED_ON: &str = "maas.cluster.x-k8s.io/composed-on";

/// The host cluster workers' image after the upgrade.
const UPGRADE: &str = "ubuntu/noble";

/// Whether `host` waits to be released because its VM host runs VMs.
fn vm_host_in_use(host: &kube::api::DynamicObject) -> bool {
    host.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Provisioned" && c["reason"] == "VMHostInUse")
}

/// Compositions that took effect in the simulated MAAS.
fn composes(h: &Harness) -> u64 {
    h.sim
        .state()
        .applied_counts()
        .get("vm-host.compose")
        .copied()
        .unwrap_or(0)
}

/// `spec.vms` entries over every MaasHost of `ns`.
async fn vm_requests(h: &Harness, ns: &str) -> usize {
    list_infra(h, ns, "MaasHost")
        .await
        .iter()
        .map(|host| host.data["spec"]["vms"].as_array().map_or(0, Vec::len))
        .sum()
}

/// For each MaasMachine of `cluster`: the system id of its VM and the MAAS VM host it runs on,
/// checked against the simulator (a composed machine, Deployed) and the MaasHost it claimed
/// (labelled as composed on a VM host).
async fn vm_placement(
    h: &Harness,
    ns: &str,
    cluster: &str,
) -> std::collections::BTreeMap<String, (String, u64)> {
    let sim = h.sim.state();
    let hosts = list_infra(h, ns, "MaasHost").await;
    let mut placed = std::collections::BTreeMap::new();
    for mm in list_infra(h, ns, "MaasMachine").await {
        if mm
            .labels()
            .get("cluster.x-k8s.io/cluster-name")
            .map(String::as_str)
            != Some(cluster)
        {
            continue;
        }
        let system_id = mm.data["spec"]["systemID"].as_str().unwrap().to_owned();
        let host_name = mm.data["status"]["hostRef"]["name"].as_str().unwrap();
        let host = hosts.iter().find(|x| x.name_any() == host_name).unwrap();
        assert!(
            host.labels().contains_key(COMPOSED_ON),
            "{} claimed a bare-metal host: {:?}",
            mm.name_any(),
            host.labels()
        );
        let machine = sim
            .machines()
            .into_iter()
            .find(|m| m.system_id == system_id)
            .unwrap();
        assert_eq!(machine.status, NodeStatus::Deployed);
        let vm_host = sim
            .vm_hosts()
            .into_iter()
            .find(|v| v.machines.contains(&system_id))
            .unwrap_or_else(|| panic!("{system_id} is on no VM host"));
        placed.insert(mm.name_any(), (system_id, vm_host.id));
    }
    placed
}

fn assert_distinct_vm_hosts(placed: &std::collections::BTreeMap<String, (String, u64)>) {
    let hosts: BTreeSet<u64> = placed.values().map(|(_, host)| *host).collect();
    assert_eq!(
        hosts.len(),
        placed.len(),
        "spread over VM hosts: {placed:?}"
    );
}
