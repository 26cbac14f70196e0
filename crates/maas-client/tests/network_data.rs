//! Rendered network data applied to MAAS before deploy, against a real API server and the
//! MAAS simulator with the gateway in-process: a bond of two NICs, a VLAN interface on it with
//! a static IPv4 address and the default route, a DHCP network; a second machine asking for
//! the same address is reported and not deployed. A released host's static address is
//! unlinked in MAAS before the host is `Available`, and another machine then deploys with it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use capmaas_runtime::conditions::get_condition;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use maas_client::host::annotations::STATIC_ADDRESSES;
use maas_sim::{FaultConfig, NicSpec, NodeStatus, OpFault, SimHandle, SubnetSpec};
use support::*;

const WAIT: Duration = Duration::from_secs(40);

fn network_data(macs: &[String], address: &str) -> String {
    serde_json::json!({
        "links": [
            {"id": "enp1", "type": "phy", "ethernet_mac_address": macs[0].to_uppercase(), "mtu": 9000},
            {"id": "enp2", "type": "phy", "ethernet_mac_address": macs[1], "mtu": 9000},
            {"id": "bond0", "type": "bond", "bond_links": ["enp1", "enp2"], "bond_mode": "802.3ad",
             "ethernet_mac_address": macs[0], "mtu": 9000},
            {"id": "bond0.100", "type": "vlan", "vlan_link": "bond0", "vlan_id": 100,
             "vlan_mac_address": macs[0]},
            {"id": "enp3", "type": "phy", "ethernet_mac_address": macs[2]}
        ],
        "networks": [
            {"id": "provisioning", "type": "ipv4", "link": "bond0.100", "ip_address": address,
             "netmask": "255.255.255.0",
             "routes": [{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "10.40.0.1"}]},
            {"id": "storage", "type": "ipv4_dhcp", "link": "enp3"}
        ],
        "services": [{"type": "dns", "address": "10.40.0.2"}]
    })
    .to_string()
}

async fn secret(client: &kube::Client, ns: &str, name: &str, data: &str) {
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), ns);
    let secret = serde_json::from_value(serde_json::json!({
        "metadata": { "name": name },
        "stringData": { "networkData": data },
    }))
    .unwrap();
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
}

#[tokio::test]
async fn bonds_vlans_static_dhcp_and_gateway_reach_maas() {
    let (env, client, ns) = api_server("netdata").await;
    let sim = instant_sim(2).await;
    let state = sim.state();
    state
        .add_subnet(&SubnetSpec {
            cidr: "10.40.0.0/24".into(),
            gateway_ip: Some("10.40.0.1".into()),
            dns_servers: vec!["10.40.0.2".into()],
            vid: 100,
            ..SubnetSpec::default()
        })
        .unwrap();
    let ids: Vec<String> = state.machines().into_iter().map(|m| m.system_id).collect();
    let mut macs = Vec::new();
    for (n, id) in ids.iter().enumerate() {
        let nics: Vec<NicSpec> = (0..3)
            .map(|k| NicSpec {
                mac_address: format!("52:54:00:99:0{n}:0{k}"),
                subnet: Some(
                    if k == 2 {
                        "10.30.0.0/16"
                    } else {
                        "10.20.0.0/16"
                    }
                    .into(),
                ),
            })
            .collect();
        state.set_nics(id, &nics).unwrap();
        macs.push(nics.into_iter().map(|n| n.mac_address).collect::<Vec<_>>());
    }
    let gateway = start_in_process(&env, &sim, &ns, &[]).await;
    create_deployable_inventory(&client, &ns).await;
    imported_within(&client, &ns, 2, WAIT).await;

    // --- The first machine: bond, VLAN interface, static address, DHCP, default gateway.
    let first = &ids[0];
    secret(
        &client,
        &ns,
        "net-a",
        &network_data(&macs[0], "10.40.0.10/24"),
    )
    .await;
    request_deploy_with_network(&client, &ns, first, "a", Some("net-a")).await;
    eventually("first host deployed", WAIT, || async {
        (provisioning_state(&host(&client, &ns, first).await).as_deref() == Some("Deployed"))
            .then_some(())
    })
    .await;
    let interfaces = state.interfaces(first).unwrap();
    let by_name = |name: &str| interfaces.iter().find(|i| i.name == name).unwrap();
    let bond = by_name("bond0");
    assert_eq!(bond.kind, "bond");
    assert_eq!(bond.parents, ["eth0", "eth1"]);
    assert_eq!(bond.bond_mode.as_deref(), Some("802.3ad"));
    assert_eq!(bond.mtu, Some(9000));
    assert_eq!(bond.mac_address, macs[0][0]);
    assert_eq!(by_name("eth0").mtu, Some(9000));
    let vlan = by_name("bond0.100");
    assert_eq!((vlan.kind.as_str(), vlan.vid), ("vlan", Some(100)));
    assert_eq!(vlan.parents, ["bond0"]);
    let static_link = vlan.links.iter().find(|l| l.mode == "static").unwrap();
    assert_eq!(static_link.ip, Some("10.40.0.10".parse().unwrap()));
    assert_eq!(static_link.subnet.as_deref(), Some("10.40.0.0/24"));
    let eth2 = by_name("eth2");
    assert_eq!(
        eth2.links
            .iter()
            .map(|l| (l.mode.as_str(), l.subnet.as_deref()))
            .collect::<Vec<_>>(),
        [("dhcp", Some("10.30.0.0/16"))]
    );
    assert!(
        by_name("eth0").links.is_empty(),
        "bond members carry no address"
    );
    let gateways = state.default_gateways(first).unwrap();
    assert_eq!(
        gateways.ipv4,
        Some(("10.40.0.1".parse().unwrap(), static_link.id))
    );
    let view = state.machine(first).unwrap();
    assert_eq!(view.ip_addresses, ["10.40.0.10"]);

    // --- The second machine asks for the same address: reported, never deployed.
    let second = &ids[1];
    secret(&client, &ns, "net-b", &network_data(&macs[1], "10.40.0.10")).await;
    request_deploy_with_network(&client, &ns, second, "b", Some("net-b")).await;
    let message = eventually("second host reports the taken address", WAIT, || async {
        let h = host(&client, &ns, second).await;
        let conditions = h.status.and_then(|s| s.conditions).unwrap_or_default();
        get_condition(&conditions, "Provisioned")
            .filter(|c| c.reason == "InvalidSpec" && c.status == "False")
            .map(|c| c.message.clone())
    })
    .await;
    assert!(message.contains("network provisioning"), "{message}");
    assert!(message.contains("10.40.0.10"), "{message}");
    assert!(message.contains("already in use"), "{message}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let view = state.machine(second).unwrap();
    assert_eq!(view.status, NodeStatus::Allocated, "not deployed");
    assert_eq!(state.machine(first).unwrap().status, NodeStatus::Deployed);
    gateway.stop().await;
}

/// Whether MAAS (the simulator) shows `ip` on any link of the machine.
fn holds(state: &SimHandle, system_id: &str, ip: &str) -> bool {
    let ip: std::net::IpAddr = ip.parse().unwrap();
    let linked = state
        .interfaces(system_id)
        .unwrap()
        .iter()
        .flat_map(|i| i.links.iter())
        .any(|l| l.ip == Some(ip));
    linked
        || state
            .machine(system_id)
            .unwrap()
            .ip_addresses
            .contains(&ip.to_string())
}

fn one_static_address(mac: &str, address: &str) -> String {
    serde_json::json!({
        "links": [{"id": "enp1", "type": "phy", "ethernet_mac_address": mac}],
        "networks": [{"id": "n1", "type": "ipv4", "link": "enp1", "ip_address": address,
                      "netmask": "255.255.0.0"}]
    })
    .to_string()
}

#[tokio::test]
async fn a_released_static_address_is_unlinked_before_available_and_reused() {
    const ADDRESS: &str = "10.20.200.77";
    let (env, client, ns) = api_server("netfree").await;
    let sim = instant_sim(2).await;
    let state = sim.state();
    let ids: Vec<String> = state.machines().into_iter().map(|m| m.system_id).collect();
    let gateway = start_in_process(&env, &sim, &ns, &[]).await;
    create_deployable_inventory(&client, &ns).await;
    imported_within(&client, &ns, 2, WAIT).await;

    // --- Host A deploys with the static address; the host records it.
    let (a, b) = (&ids[0], &ids[1]);
    let mac = |id: &str| state.machine(id).unwrap().mac_addresses[0].clone();
    secret(&client, &ns, "net-a", &one_static_address(&mac(a), ADDRESS)).await;
    request_deploy_with_network(&client, &ns, a, "a", Some("net-a")).await;
    let deployed = eventually("host A deployed", WAIT, || async {
        let h = host(&client, &ns, a).await;
        (provisioning_state(&h).as_deref() == Some("Deployed")).then_some(h)
    })
    .await;
    assert!(holds(&state, a, ADDRESS));
    assert_eq!(
        deployed
            .annotations()
            .get(STATIC_ADDRESSES)
            .map(String::as_str),
        Some(ADDRESS)
    );

    // --- Released while MAAS refuses the unlink: Ready in MAAS, the address still on A, and
    // the host not Available.
    let refuse_unlinks = FaultConfig {
        ops: vec![OpFault {
            op: "interface.unlink_subnet".into(),
            error_rate: 1.0,
            status: 503,
            latency_ms: 0,
            retry_after: None,
            body: None,
        }],
        ..FaultConfig::default()
    };
    state.set_faults(refuse_unlinks).unwrap();
    clear_provisioning(&client, &ns, a, "a").await;
    eventually("unlinks refused on the released machine", WAIT, || async {
        let refused = state
            .injected_error_counts()
            .get("interface.unlink_subnet")
            .copied()
            .unwrap_or(0);
        (refused >= 2 && state.machine(a).unwrap().status == NodeStatus::Ready).then_some(())
    })
    .await;
    let h = host(&client, &ns, a).await;
    assert_ne!(provisioning_state(&h).as_deref(), Some("Available"));
    assert!(holds(&state, a, ADDRESS), "MAAS still holds it");

    // --- MAAS accepts the unlink: the address is gone from A by the time A is Available.
    state.set_faults(FaultConfig::default()).unwrap();
    let released = eventually("host A available", WAIT, || async {
        let h = host(&client, &ns, a).await;
        let available = provisioning_state(&h).as_deref() == Some("Available");
        if available {
            assert!(
                !holds(&state, a, ADDRESS),
                "reported available while MAAS still shows {ADDRESS} on A"
            );
        }
        available.then_some(h)
    })
    .await;
    assert_eq!(
        released.annotations().get(STATIC_ADDRESSES),
        None,
        "the record is dropped with the links"
    );
    assert!(
        state
            .interfaces(a)
            .unwrap()
            .iter()
            .flat_map(|i| i.links.iter())
            .all(|l| l.mode != "static"),
        "no static link left on A: {:?}",
        state.interfaces(a).unwrap()
    );
    release_request(&client, &ns, a).await;

    // --- Host B gets the same address and deploys.
    secret(&client, &ns, "net-b", &one_static_address(&mac(b), ADDRESS)).await;
    request_deploy_with_network(&client, &ns, b, "b", Some("net-b")).await;
    eventually("host B deployed with the address", WAIT, || async {
        let h = host(&client, &ns, b).await;
        (provisioning_state(&h).as_deref() == Some("Deployed")).then_some(())
    })
    .await;
    assert!(holds(&state, b, ADDRESS));
    assert!(!holds(&state, a, ADDRESS));
    assert_eq!(state.machine(b).unwrap().status, NodeStatus::Deployed);
    gateway.stop().await;
}
