//! The data-controller end to end: workers of a MachineDeployment take static addresses,
//! hostnames and metadata from a MaasDataTemplate and a MaasIPPool of five addresses. A sixth
//! worker waits (the claim names the exhausted pool) and is served once an address frees up;
//! no address ever backs two servers, and no server keeps running on an address that was
//! given back. The data-controller is SIGKILLed while it serves the first claims.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::{BTreeMap, BTreeSet};

use capmaas_e2e::{ClusterSpec, Harness, HarnessConfig, WorkerAddresses, wait_for};
use common::{
    LONG, ONE_AT_A_TIME, POLL, api, argocd_health, capi, declare, describe_rollout, in_use, infra,
    list_infra, maas_client, name_contains, running_machines, sim_counts, wait_argocd_healthy,
    wait_running,
};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use maas_sim::NodeStatus;
use serde_json::json;

const POOL_SIZE: u8 = 5;
const POOL_PREFIX: &str = "10.20.200.";

async fn ipam(h: &Harness, ns: &str, kind: &str) -> Api<DynamicObject> {
    api(
        &h.management.client(),
        ns,
        "ipam.cluster.x-k8s.io",
        "v1beta2",
        kind,
    )
    .await
}

/// The pool's IPAddress objects: address → claim name.
async fn given_addresses(h: &Harness, ns: &str) -> BTreeMap<String, String> {
    let mut given = BTreeMap::new();
    for address in ipam(h, ns, "IPAddress")
        .await
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
    {
        let ip = address.data["spec"]["address"].as_str().unwrap().to_owned();
        let claim = address.data["spec"]["claimRef"]["name"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(
            given.insert(ip.clone(), claim).is_none(),
            "{ip} is given twice"
        );
    }
    given
}

/// Pool addresses on simulated servers that MAAS has allocated, is deploying or deployed:
/// address → system ids holding it.
fn addresses_on_servers(h: &Harness) -> BTreeMap<String, Vec<String>> {
    let mut held: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for machine in h.sim.state().machines() {
        if !matches!(
            machine.status,
            NodeStatus::Allocated | NodeStatus::Deploying | NodeStatus::Deployed
        ) {
            continue;
        }
        for ip in machine
            .ip_addresses
            .iter()
            .filter(|ip| ip.starts_with(POOL_PREFIX))
        {
            held.entry(ip.clone())
                .or_default()
                .push(machine.system_id.clone());
        }
    }
    held
}

/// What must hold at every instant: no pool address is on two servers, and every pool address
/// on a server in use is still given out by an IPAddress (read first, so a release between the
/// two reads cannot be mistaken for a violation).
async fn check_invariants(h: &Harness, ns: &str) {
    let given = given_addresses(h, ns).await;
    for (ip, servers) in addresses_on_servers(h) {
        assert_eq!(servers.len(), 1, "{ip} is on several servers: {servers:?}");
        assert!(
            given.contains_key(&ip),
            "{ip} is on server {} but no IPAddress gives it out any more (given: {given:?})",
            servers[0]
        );
    }
}

/// Worker MaasMachines: name → system id (once claimed).
async fn worker_servers(h: &Harness, ns: &str) -> BTreeMap<String, Option<String>> {
    list_infra(h, ns, "MaasMachine")
        .await
        .iter()
        .filter(|m| m.metadata.name.as_deref().unwrap().contains("workers"))
        .map(|m| {
            (
                m.metadata.name.clone().unwrap(),
                m.data["spec"]["systemID"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

/// Every running worker's server carries the address its claim was given, on eth0's subnet,
/// the hostname of its index and the metadata in its user data; hostnames are distinct.
async fn assert_workers_use_their_data(h: &Harness, ns: &str, running: usize) {
    let given = given_addresses(h, ns).await;
    let running_names: BTreeSet<String> = running_machines(h, ns)
        .await
        .iter()
        .filter_map(|m| m.data["spec"]["infrastructureRef"]["name"].as_str())
        .map(str::to_owned)
        .collect();
    let mut hostnames = BTreeSet::new();
    for (name, system_id) in worker_servers(h, ns).await {
        if !running_names.contains(&name) {
            continue;
        }
        let server = h
            .sim
            .state()
            .machine(system_id.as_deref().unwrap())
            .unwrap();
        let pool_ips: Vec<&String> = server
            .ip_addresses
            .iter()
            .filter(|ip| ip.starts_with(POOL_PREFIX))
            .collect();
        assert_eq!(pool_ips.len(), 1, "{name}: {:?}", server.ip_addresses);
        let claim = given
            .get(pool_ips[0])
            .unwrap_or_else(|| panic!("{name} runs on {} which no IPAddress gives", pool_ips[0]));
        assert!(
            claim.starts_with(&name),
            "{name}'s address {} belongs to claim {claim}",
            pool_ips[0]
        );
        assert!(
            server.hostname.starts_with("story-worker-"),
            "{name}: hostname {}",
            server.hostname
        );
        let user_data = String::from_utf8_lossy(server.user_data.as_deref().unwrap()).into_owned();
        let meta_data = delivered_meta_data(&user_data)
            .unwrap_or_else(|| panic!("{name}: no metadata in the user data:\n{user_data}"));
        assert_eq!(
            meta_data.get("address").map(String::as_str),
            Some(pool_ips[0].as_str()),
            "{name}: {meta_data:?}"
        );
        assert_eq!(
            meta_data.get("local-hostname"),
            Some(&server.hostname),
            "{name}: {meta_data:?}"
        );
        // The Node (the kubelet reports the server's addresses) and the MaasMachine (which
        // CAPI copies to the Machine) both carry the pool address.
        let node = Api::<Node>::all(h.workload.client())
            .get(&server.hostname)
            .await
            .unwrap();
        let node_ips: Vec<String> = node
            .status
            .and_then(|s| s.addresses)
            .unwrap_or_default()
            .into_iter()
            .filter(|a| a.type_ == "InternalIP")
            .map(|a| a.address)
            .collect();
        assert!(
            node_ips.contains(pool_ips[0]),
            "{name}: Node addresses {node_ips:?}"
        );
        let machine = infra(h, ns, "MaasMachine").await.get(&name).await.unwrap();
        let machine_ips: Vec<&str> = machine.data["status"]["addresses"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|a| a["type"] == "InternalIP")
            .filter_map(|a| a["address"].as_str())
            .collect();
        assert!(
            machine_ips.contains(&pool_ips[0].as_str()),
            "{name}: MaasMachine addresses {machine_ips:?}"
        );
        hostnames.insert(server.hostname.clone());
    }
    assert_eq!(hostnames.len(), running, "{hostnames:?}");
}

/// The metadata the user data writes to `/etc/capmaas/meta-data.yaml` on the server: the
/// `capmaas-meta-data.cfg` MIME part (base64) is a cloud-config whose `write_files` entry holds
/// the file (base64 again).
fn delivered_meta_data(user_data: &str) -> Option<BTreeMap<String, String>> {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    let user_data = user_data.replace("\r\n", "\n");
    let part = user_data
        .split("--==")
        .find(|p| p.contains("filename=\"capmaas-meta-data.cfg\""))?;
    let body: String = part.split("\n\n").nth(1)?.split_whitespace().collect();
    let cloud_config = String::from_utf8(b64.decode(body).ok()?).ok()?;
    assert!(
        cloud_config.contains("path: /etc/capmaas/meta-data.yaml"),
        "{cloud_config}"
    );
    let content = cloud_config
        .lines()
        .find_map(|l| l.trim().strip_prefix("content: "))?;
    let file = String::from_utf8(b64.decode(content).ok()?).ok()?;
    serde_saphyr::from_str(&file).ok()
}

async fn set_workers(h: &Harness, ns: &str, replicas: usize) {
    capi(h, ns, "MachineDeployment")
        .await
        .patch(
            "story-workers",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"replicas": replicas}})),
        )
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_take_addresses_hostnames_and_metadata_from_a_pool_and_wait_when_it_is_empty() {
    let _one = ONE_AT_A_TIME.lock().await;
    let mut h = Harness::start(HarnessConfig::default()).await.unwrap();
    let ns = h.management.create_namespace("data").await.unwrap();
    let mut spec = ClusterSpec::story(&ns);
    spec.control_plane = 1;
    spec.workers = usize::from(POOL_SIZE);
    spec.worker_addresses = Some(WorkerAddresses::in_default_subnet(u16::from(POOL_SIZE)));
    declare(&h, &spec).await;

    // The data-controller is SIGKILLed once the first address is out.
    wait_for("a first address given out", LONG, POLL, || async {
        Ok((!given_addresses(&h, &ns).await.is_empty()).then_some(()))
    })
    .await
    .unwrap();
    h.restart_controller("data-controller").await.unwrap();
    wait_running(&mut h, &ns, 1 + usize::from(POOL_SIZE)).await;
    check_invariants(&h, &ns).await;
    assert_workers_use_their_data(&h, &ns, usize::from(POOL_SIZE)).await;
    let given = given_addresses(&h, &ns).await;
    let expected: BTreeSet<String> = (10..10 + POOL_SIZE)
        .map(|i| format!("{POOL_PREFIX}{i}"))
        .collect();
    assert_eq!(given.keys().cloned().collect::<BTreeSet<_>>(), expected);

    // MAAS was told: the pool's range is reserved in its subnet.
    let ranges = maas_client(&h).list_ipranges().await.unwrap();
    assert!(
        ranges
            .iter()
            .any(|r| r.start_ip.to_string() == "10.20.200.10"
                && r.end_ip.to_string() == "10.20.200.14"),
        "no reserved range for the pool in MAAS: {ranges:?}"
    );
    let pools = infra(&h, &ns, "MaasIPPool").await;
    wait_for(
        "the pool status to count 5 in use, 0 free",
        LONG,
        POLL,
        || async {
            let pool = pools.get("story-workers").await.unwrap();
            let status = &pool.data["status"];
            Ok((status["addressesInUse"] == 5 && status["addressesFree"] == 0).then_some(()))
        },
    )
    .await
    .unwrap();
    // Argo CD would show the provisioned cluster Healthy, read from these real statuses.
    wait_argocd_healthy(
        &h,
        &ns,
        &[
            "MaasCluster",
            "MaasMachine",
            "MaasHost",
            "MaasIPPool",
            "MaasInventory",
        ],
    )
    .await;

    // A sixth worker: the pool is empty, so its claim says so and no sixth server is deployed.
    set_workers(&h, &ns, usize::from(POOL_SIZE) + 1).await;
    let claims = ipam(&h, &ns, "IPAddressClaim").await;
    let waiting_claim = wait_for("a claim naming the exhausted pool", LONG, POLL, || async {
        let waiting = claims
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .find(|c| {
                c.data["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| {
                        c["type"] == "Ready"
                            && c["status"] == "False"
                            && c["reason"] == "PoolExhausted"
                            && c["message"]
                                .as_str()
                                .is_some_and(|m| m.contains("story-workers"))
                    })
            });
        Ok(waiting.and_then(|c| c.metadata.name))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", h.logs(30)));
    let machines = infra(&h, &ns, "MaasMachine").await;
    wait_for(
        "the sixth worker to wait for its data",
        LONG,
        POLL,
        || async {
            let waiting = machines
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .iter()
                .any(|m| {
                    m.data["status"]["conditions"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|c| c["reason"] == "WaitingForData")
                });
            Ok(waiting.then_some(()))
        },
    )
    .await
    .unwrap();
    check_invariants(&h, &ns).await;
    assert_eq!(
        in_use(&h),
        1 + usize::from(POOL_SIZE),
        "a server was deployed without an address: {:?}",
        sim_counts(&h)
    );
    // Argo CD shows the waiting worker and its data claim as Progressing (they wait for an
    // address to be given back), and the full pool still Healthy.
    let health = argocd_health(&h, &ns, "MaasMachine").await;
    let progressing: Vec<_> = health
        .values()
        .filter(|(s, _)| s == "Progressing")
        .collect();
    assert_eq!(progressing.len(), 1, "{health:?}");
    assert_eq!(health.len(), 2 + usize::from(POOL_SIZE), "{health:?}");
    assert!(
        argocd_health(&h, &ns, "MaasIPPool")
            .await
            .values()
            .all(|(s, _)| s == "Healthy")
    );
    let data_claims = argocd_health(&h, &ns, "MaasDataClaim").await;
    assert!(
        data_claims
            .values()
            .any(|(s, m)| s == "Progressing" && m.contains("story-workers")),
        "{data_claims:?}"
    );

    // One running worker goes away: its server is released, then its address is given back
    // and the waiting worker (or the replacement) is served with it.
    let running_worker = running_machines(&h, &ns)
        .await
        .into_iter()
        .find(|m| name_contains(m, "workers"))
        .unwrap();
    let victim = running_worker.metadata.name.clone().unwrap();
    capi(&h, &ns, "Machine")
        .await
        .delete(&victim, &DeleteParams::default())
        .await
        .unwrap();
    let result = wait_for(
        "five workers running again, one still waiting",
        LONG,
        POLL,
        || async {
            check_invariants(&h, &ns).await;
            let running = running_machines(&h, &ns).await;
            let victim_gone = running
                .iter()
                .all(|m| m.metadata.name.as_deref() != Some(victim.as_str()));
            Ok((victim_gone && running.len() == 1 + usize::from(POOL_SIZE)).then_some(()))
        },
    )
    .await;
    if let Err(e) = result {
        panic!(
            "{e}\nclaim waiting before: {waiting_claim}\n{}\n{}",
            describe_rollout(&h, &ns).await,
            h.logs(40)
        );
    }
    assert_workers_use_their_data(&h, &ns, usize::from(POOL_SIZE)).await;

    // Back to five: the waiting worker goes, and every address is in use by a running worker.
    set_workers(&h, &ns, usize::from(POOL_SIZE)).await;
    wait_running(&mut h, &ns, 1 + usize::from(POOL_SIZE)).await;
    check_invariants(&h, &ns).await;
    assert_eq!(given_addresses(&h, &ns).await.len(), usize::from(POOL_SIZE));

    // Deleting the cluster: every server is released before its address is given back, and in
    // the end no address, claim or server is left.
    capi(&h, &ns, "Cluster")
        .await
        .delete("story", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(
        "every server released, every address given back",
        LONG,
        POLL,
        || async {
            check_invariants(&h, &ns).await;
            let claims_left = claims
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .len();
            Ok(
                (in_use(&h) == 0 && given_addresses(&h, &ns).await.is_empty() && claims_left == 0)
                    .then_some(()),
            )
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}: {:?}\n{}", sim_counts(&h), h.logs(30)));
    h.ensure_running().unwrap();
    common::assert_rbac_sufficient(&h);
}
