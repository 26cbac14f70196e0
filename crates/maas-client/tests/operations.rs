//! Reboot annotations, bounded deployment retries and DNS records, against a real API server
//! and the MAAS simulator, with the gateway in-process.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use capmaas_api::MaasDNSRecord;
use capmaas_api::keys::reboot_annotation;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use maas_api_client::DnsResourceFilter;
use maas_sim::{NodeStatus, PowerState};
use support::*;

async fn deployed_host(client: &kube::Client, ns: &str, name: &str, consumer: &str) {
    request_deploy(client, ns, name, consumer).await;
    eventually("deployed", Duration::from_secs(30), || async {
        (provisioning_state(&host(client, ns, name).await).as_deref() == Some("Deployed"))
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn reboots_retries_and_dns() {
    let (env, client, ns) = api_server("ops").await;
    let sim = instant_sim(4).await;
    let state = sim.state();
    let gateway = start_in_process(&env, &sim, &ns, &["--deploy-retries=2"]).await;
    let ids = import_hosts(&client, &ns, 4).await;

    // --- Reboot annotations: off while any request exists, on once when none remains.
    let rebooted = &ids[0];
    deployed_host(&client, &ns, rebooted, "r1").await;
    assert_eq!(state.machine(rebooted).unwrap().power_on_count, 1);
    let first = reboot_annotation("remediation-a");
    let second = reboot_annotation("remediation-b");
    set_annotation(&client, &ns, rebooted, &first, Some("")).await;
    set_annotation(&client, &ns, rebooted, &second, Some("")).await;
    eventually("powered off", Duration::from_secs(10), || async {
        (state.machine(rebooted).unwrap().power_state == PowerState::Off).then_some(())
    })
    .await;
    set_annotation(&client, &ns, rebooted, &first, None).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        state.machine(rebooted).unwrap().power_state,
        PowerState::Off,
        "held off while a request remains"
    );
    set_annotation(&client, &ns, rebooted, &second, None).await;
    eventually("powered on again", Duration::from_secs(10), || async {
        let h = host(&client, &ns, rebooted).await;
        let done = !h
            .annotations()
            .contains_key("maas.cluster.x-k8s.io/reboot-state");
        (state.machine(rebooted).unwrap().power_state == PowerState::On && done).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        state.machine(rebooted).unwrap().power_on_count,
        2,
        "exactly one power cycle"
    );

    // A deployed host that goes off by itself is powered on again, once (as CAPMAAS does).
    state.set_power(rebooted, PowerState::Off).unwrap();
    eventually(
        "powered on after going off",
        Duration::from_secs(10),
        || async {
            let view = state.machine(rebooted).unwrap();
            (view.power_state == PowerState::On).then_some(())
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        state.machine(rebooted).unwrap().power_on_count,
        3,
        "one power-on for one power-off"
    );
    // With `keepPoweredOn: false` it is reported, never powered on or cycled.
    Api::<capmaas_api::MaasHost>::namespaced(client.clone(), &ns)
        .patch(
            rebooted,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"provisioning": {"keepPoweredOn": false}}})),
        )
        .await
        .unwrap();
    eventually(
        "the edited request read",
        Duration::from_secs(10),
        || async {
            let h = host(&client, &ns, rebooted).await;
            (h.status.and_then(|s| s.observed_generation) == h.metadata.generation).then_some(())
        },
    )
    .await;
    state.set_power(rebooted, PowerState::Off).unwrap();
    eventually("power off reported", Duration::from_secs(10), || async {
        let h = host(&client, &ns, rebooted).await;
        (h.status.and_then(|s| s.power_state) == Some(capmaas_api::host::PowerState::Off))
            .then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let view = state.machine(rebooted).unwrap();
    assert_eq!(
        (view.power_state, view.power_on_count),
        (PowerState::Off, 3)
    );

    // --- Failed deployments: retried twice, then left failed for the consumer.
    let failing = &ids[1];
    state.fail_all_deploys(failing).unwrap();
    state.reset_counts();
    request_deploy(&client, &ns, failing, "f1").await;
    let failed = eventually("failed for good", Duration::from_secs(30), || async {
        let h = host(&client, &ns, failing).await;
        let reason = h
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| {
                capmaas_runtime::get_condition(c, "Provisioned").map(|c| c.reason.clone())
            });
        (reason.as_deref() == Some("MachineDeployFailed")).then_some(h)
    })
    .await;
    assert_eq!(provisioning_state(&failed).as_deref(), Some("Failed"));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let deploys = state
        .call_counts()
        .get("machine.deploy")
        .copied()
        .unwrap_or(0);
    assert_eq!(deploys, 3, "first attempt and two retries");
    assert_eq!(
        state.machine(failing).unwrap().status,
        NodeStatus::FailedDeployment
    );
    // The consumer gives up: released, failures forgotten.
    state.clear_deploy_failure(failing);
    release_request(&client, &ns, failing).await;
    eventually(
        "released after failure",
        Duration::from_secs(20),
        || async {
            let h = host(&client, &ns, failing).await;
            let clean = !h
                .annotations()
                .contains_key("maas.cluster.x-k8s.io/deploy-failures");
            (state.machine(failing).unwrap().status == NodeStatus::Ready && clean).then_some(())
        },
    )
    .await;

    let maas = maas_of(&sim);

    // --- A machine someone else allocated first is reported, never taken or released.
    let taken = &ids[3];
    maas.allocate(&maas_api_client::AllocateRequest {
        system_id: Some(taken.clone()),
        agent_name: Some("someone-else".into()),
        ..maas_api_client::AllocateRequest::default()
    })
    .await
    .unwrap();
    request_deploy(&client, &ns, taken, "t1").await;
    eventually(
        "held by other reported",
        Duration::from_secs(20),
        || async {
            let h = host(&client, &ns, taken).await;
            let reason = h
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| {
                    capmaas_runtime::get_condition(c, "Provisioned").map(|c| c.reason.clone())
                });
            (reason.as_deref() == Some("HeldByOther")).then_some(())
        },
    )
    .await;
    release_request(&client, &ns, taken).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let view = state.machine(taken).unwrap();
    assert_eq!(
        (view.status, view.agent_name.as_str()),
        (NodeStatus::Allocated, "someone-else")
    );

    // --- Static addresses from rendered network data, applied before deploy.
    let addressed = &ids[2];
    let mac = state.machine(addressed).unwrap().mac_addresses[0].clone();
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), &ns);
    let network_data = format!(
        "links:\n- {{id: enp1, type: phy, ethernet_mac_address: '{}'}}\nnetworks:\n- {{id: n1, type: ipv4, link: enp1, ip_address: 10.20.200.50, netmask: 255.255.0.0}}\n",
        mac.to_uppercase()
    );
    let secret = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "net-a" },
        "stringData": { "networkData": network_data },
    }))
    .unwrap();
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    request_deploy_with_network(&client, &ns, addressed, "n1", Some("net-a")).await;
    let h = eventually(
        "addressed host deployed",
        Duration::from_secs(30),
        || async {
            let h = host(&client, &ns, addressed).await;
            (provisioning_state(&h).as_deref() == Some("Deployed")).then_some(h)
        },
    )
    .await;
    assert!(
        state
            .machine(addressed)
            .unwrap()
            .ip_addresses
            .contains(&"10.20.200.50".to_owned())
    );
    assert!(
        h.status
            .unwrap()
            .addresses
            .unwrap()
            .contains(&"10.20.200.50".to_owned())
    );

    // --- DNS records: create, update on change only, delete with the object.
    let records: Api<MaasDNSRecord> = Api::namespaced(client.clone(), &ns);
    let record: MaasDNSRecord = serde_json::from_value(serde_json::json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "MaasDNSRecord",
        "metadata": { "name": "api" },
        "spec": { "name": "c1-api", "domain": "maas", "addresses": ["10.0.0.5"] },
    }))
    .unwrap();
    records
        .create(&PostParams::default(), &record)
        .await
        .unwrap();
    let ips = |addrs: &[&str]| {
        addrs
            .iter()
            .map(|a| a.parse::<std::net::IpAddr>().unwrap())
            .collect::<Vec<_>>()
    };
    let lookup = || async {
        maas.list_dns_resources(&DnsResourceFilter::fqdn("c1-api.maas"))
            .await
            .unwrap()
    };
    eventually("record created", Duration::from_secs(10), || async {
        let r = records.get("api").await.unwrap();
        let ready = r.status.as_ref().and_then(|s| s.ready) == Some(true);
        (ready
            && lookup()
                .await
                .first()
                .map(maas_api_client::DnsResource::ips)
                == Some(ips(&["10.0.0.5"])))
        .then_some(())
    })
    .await;
    state.reset_counts();
    let relabel = serde_json::json!({ "metadata": { "labels": { "touched": "yes" } } });
    records
        .patch("api", &PatchParams::default(), &Patch::Merge(&relabel))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let dns_calls: u64 = state
        .call_counts()
        .iter()
        .filter(|(k, _)| k.starts_with("dnsresource"))
        .map(|(_, n)| *n)
        .sum();
    assert_eq!(
        dns_calls, 0,
        "no MAAS call when the address set is unchanged"
    );
    let change = serde_json::json!({ "spec": { "addresses": ["10.0.0.6", "10.0.0.5"] } });
    records
        .patch("api", &PatchParams::default(), &Patch::Merge(&change))
        .await
        .unwrap();
    eventually("record updated", Duration::from_secs(10), || async {
        let mut got = lookup()
            .await
            .first()
            .map(maas_api_client::DnsResource::ips)
            .unwrap_or_default();
        got.sort();
        (got == ips(&["10.0.0.5", "10.0.0.6"])).then_some(())
    })
    .await;
    assert_eq!(
        state.call_counts().get("dnsresource.update").copied(),
        Some(1)
    );
    records
        .delete("api", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "record deleted in MAAS and object gone",
        Duration::from_secs(10),
        || async {
            let gone = records.get_opt("api").await.unwrap().is_none();
            (gone && lookup().await.is_empty()).then_some(())
        },
    )
    .await;

    gateway.stop().await;
    sim.shutdown().await;
}
