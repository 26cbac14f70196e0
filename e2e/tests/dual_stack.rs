//! A dual-stack (IPv4 + IPv6) cluster: 1 control plane and 2 workers, every machine with an
//! IPv4 and an IPv6 static address on `eth0`, each from its MaasIPPool, through two
//! MaasDataTemplates (control plane, workers) with `networks.ipv4` and `networks.ipv6`. The
//! MAAS servers carry both addresses (two static links, a default gateway per family), the
//! MaasMachines, Machines and Nodes report both, every Machine has its providerID, and the
//! control-plane DNS record (`publishedAddressSubnets`: one CIDR per family) serves both. No
//! address is given twice; deleting the cluster gives every address back and releases every
//! server.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::time::Instant;

use capmaas_e2e::{ClusterSpec, Harness, HarnessConfig, WorkerAddresses, wait_for};
use common::{
    LONG, ONE_AT_A_TIME, POLL, api, capi, declare, in_use, list_capi, list_infra, sim_counts,
    wait_running,
};
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams};
use maas_sim::SubnetSpec;
use serde_json::Value;

const V4_POOL: &str = "story-workers";
const V6_POOL: &str = "story-workers-v6";
const MACHINES: u16 = 3;

/// The IPAddress objects: pool name → addresses (asserting none is given twice).
async fn given_addresses(h: &Harness, ns: &str) -> BTreeMap<String, BTreeSet<IpAddr>> {
    let addresses = api(
        &h.management.client(),
        ns,
        "ipam.cluster.x-k8s.io",
        "v1beta2",
        "IPAddress",
    )
    .await
    .list(&ListParams::default())
    .await
    .unwrap()
    .items;
    let mut by_pool: BTreeMap<String, BTreeSet<IpAddr>> = BTreeMap::new();
    for address in addresses {
        let ip: IpAddr = address.data["spec"]["address"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        let pool = address.data["spec"]["poolRef"]["name"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(
            by_pool.entry(pool).or_default().insert(ip),
            "{ip} is given twice"
        );
    }
    by_pool
}

/// The `InternalIP` addresses of a `status.addresses` list, and whether any is `ExternalIP`.
fn internal_ips(status: &Value) -> (BTreeSet<IpAddr>, bool) {
    let list = status["addresses"].as_array().cloned().unwrap_or_default();
    let internal = list
        .iter()
        .filter(|a| a["type"] == "InternalIP")
        .filter_map(|a| a["address"].as_str()?.parse().ok())
        .collect();
    (internal, list.iter().any(|a| a["type"] == "ExternalIP"))
}

/// One address of each family, the IPv4 one from the IPv4 pool and the IPv6 one from the IPv6
/// pool (and nothing else, MAAS's own address having been replaced by the static links).
fn assert_dual_stack(
    what: &str,
    ips: &BTreeSet<IpAddr>,
    given: &BTreeMap<String, BTreeSet<IpAddr>>,
) {
    let v4: Vec<&IpAddr> = ips.iter().filter(|ip| ip.is_ipv4()).collect();
    let v6: Vec<&IpAddr> = ips.iter().filter(|ip| ip.is_ipv6()).collect();
    assert!(
        v4.len() == 1 && v6.len() == 1,
        "{what}: one address of each family: {ips:?}"
    );
    assert!(
        given[V4_POOL].contains(v4[0]),
        "{what}: {} not from {V4_POOL}",
        v4[0]
    );
    assert!(
        given[V6_POOL].contains(v6[0]),
        "{what}: {} not from {V6_POOL}",
        v6[0]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dual_stack_cluster_has_both_families_everywhere_and_gives_them_back() {
    let _one = ONE_AT_A_TIME.lock().await;
    let started = Instant::now();
    let mut h = Harness::start(HarnessConfig {
        machines: 6,
        ..HarnessConfig::default()
    })
    .await
    .unwrap();
    // MAAS: an IPv6 subnet on the untagged VLAN of fabric-0, next to 10.20.0.0/16, so eth0 of
    // every server can hold an address of each.
    h.sim
        .state()
        .add_subnet(&SubnetSpec {
            cidr: WorkerAddresses::IPV6_SUBNET.into(),
            gateway_ip: Some("fd00:20::1".into()),
            ..SubnetSpec::default()
        })
        .unwrap();
    let ns = h.management.create_namespace("dual-stack").await.unwrap();
    let mut spec = ClusterSpec::story(&ns);
    spec.control_plane = 1;
    spec.workers = 2;
    spec.worker_addresses = Some(WorkerAddresses::in_default_subnet(MACHINES));
    spec.ipv6_addresses = Some(WorkerAddresses::ipv6(MACHINES));
    spec.control_plane_addresses = true;
    spec.dns_published_subnets = vec!["10.20.0.0/16".into(), WorkerAddresses::IPV6_SUBNET.into()];
    declare(&h, &spec).await;
    let machines = wait_running(&mut h, &ns, usize::from(MACHINES)).await;
    let running_at = started.elapsed();

    // Each pool gave one address per machine, none twice.
    let given = given_addresses(&h, &ns).await;
    assert_eq!(
        given.values().map(BTreeSet::len).collect::<Vec<_>>(),
        [usize::from(MACHINES); 2],
        "{given:?}"
    );
    assert!(given[V6_POOL].iter().all(IpAddr::is_ipv6), "{given:?}");

    // MaasMachines, Machines and the MAAS servers: both families, and the providerID.
    let maas_machines = list_infra(&h, &ns, "MaasMachine").await;
    let mut control_plane = None;
    for machine in &machines {
        let name = machine.data["spec"]["infrastructureRef"]["name"]
            .as_str()
            .unwrap();
        let mm = maas_machines.iter().find(|m| m.name_any() == name).unwrap();
        let (mm_ips, mm_external) = internal_ips(&mm.data["status"]);
        assert_dual_stack(&format!("MaasMachine {name}"), &mm_ips, &given);
        assert!(
            !mm_external,
            "{name}: private and ULA addresses are not external"
        );
        let (machine_ips, _) = internal_ips(&machine.data["status"]);
        assert_eq!(
            machine_ips, mm_ips,
            "Machine {name} reports its MaasMachine's addresses"
        );

        let system_id = mm.data["spec"]["systemID"].as_str().unwrap();
        let server = h.sim.state().machine(system_id).unwrap();
        let provider_id = machine.data["spec"]["providerID"].as_str().unwrap();
        assert_eq!(provider_id, format!("maas:///{}/{system_id}", server.zone));
        let on_server: BTreeSet<IpAddr> = server
            .ip_addresses
            .iter()
            .map(|ip| ip.parse().unwrap())
            .collect();
        assert_eq!(on_server, mm_ips, "server {system_id} ({name})");
        let eth0 = h
            .sim
            .state()
            .interfaces(system_id)
            .unwrap()
            .into_iter()
            .find(|i| i.name == "eth0")
            .unwrap();
        let statics: BTreeSet<IpAddr> = eth0
            .links
            .iter()
            .filter(|l| l.mode == "static")
            .filter_map(|l| l.ip)
            .collect();
        assert_eq!(statics, mm_ips, "two static links on eth0 of {system_id}");
        let gateways = h.sim.state().default_gateways(system_id).unwrap();
        assert_eq!(
            (
                gateways.ipv4.map(|g| g.0.to_string()),
                gateways.ipv6.map(|g| g.0.to_string())
            ),
            (Some("10.20.0.1".into()), Some("fd00:20::1".into())),
            "a default gateway per family on {system_id}"
        );
        if name.contains("control-plane") {
            control_plane = Some(mm_ips.clone());
        }
    }

    // Nodes: the kubelet reports the server's addresses, both families.
    let nodes = Api::<Node>::all(h.workload.client())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    assert_eq!(nodes.len(), usize::from(MACHINES));
    for node in &nodes {
        let status = serde_json::to_value(node.status.clone().unwrap_or_default()).unwrap();
        let (ips, _) = internal_ips(&status);
        assert_dual_stack(&format!("Node {}", node.name_any()), &ips, &given);
    }

    // The control-plane DNS record: an A and an AAAA address, the control plane's.
    let control_plane = control_plane.expect("a control-plane machine");
    let dns_name = list_infra(&h, &ns, "MaasCluster").await[0].data["status"]["network"]["dnsName"]
        .as_str()
        .unwrap()
        .to_owned();
    let wanted: BTreeSet<String> = control_plane.iter().map(ToString::to_string).collect();
    wait_for("the DNS record with both families", LONG, POLL, || async {
        let served = common::maas_dns(&h.sim, &dns_name).await;
        Ok((served.as_ref() == Some(&wanted)).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}: {dns_name}, wanted {wanted:?}\n{}", h.logs(30)));
    let dns_record = list_infra(&h, &ns, "MaasDNSRecord").await;
    assert_eq!(dns_record.len(), 1);
    let record_addresses: BTreeSet<String> = dns_record[0].data["spec"]["addresses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(record_addresses, wanted);

    // Deleting the cluster: every server released, every address back in its pool.
    capi(&h, &ns, "Cluster")
        .await
        .delete("story", &DeleteParams::default())
        .await
        .unwrap();
    let pools = list_infra(&h, &ns, "MaasIPPool").await;
    assert_eq!(pools.len(), 2);
    wait_for(
        "every server released, every address given back",
        LONG,
        POLL,
        || async {
            let left = given_addresses(&h, &ns).await;
            let in_pools: Vec<Value> = list_infra(&h, &ns, "MaasIPPool")
                .await
                .iter()
                .map(|p| p.data["status"]["addressesInUse"].clone())
                .collect();
            let machines_left = list_capi(&h, &ns, "Machine").await.len();
            Ok((in_use(&h) == 0
                && left.is_empty()
                && machines_left == 0
                && in_pools.iter().all(|n| n.as_u64() == Some(0)))
            .then_some(()))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}: {:?}\n{}", sim_counts(&h), h.logs(30)));
    for server in h.sim.state().machines() {
        assert!(
            !server
                .ip_addresses
                .iter()
                .any(|ip| ip.starts_with("10.20.200.") || ip.starts_with("fd00:20:")),
            "{} keeps a pool address: {:?}",
            server.system_id,
            server.ip_addresses
        );
    }
    h.ensure_running().unwrap();
    eprintln!(
        "dual stack: {MACHINES} machines running after {running_at:?}, all given back after {:?}",
        started.elapsed()
    );
}
