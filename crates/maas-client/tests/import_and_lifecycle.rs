//! Import of 50 hosts (then neither a MAAS read nor an API write while idle), a MAAS-side
//! change within one sync, the full provisioning life cycle driven by the host spec, and
//! release back to available — against a real API server and the MAAS simulator, with the
//! gateway in-process.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use capmaas_api::keys;
use maas_sim::{NodeStatus, PowerState};
use support::*;

/// The (reason, note) of every Event about the object `name` (a MaasHost, an inventory),
/// oldest first.
async fn host_events(client: &kube::Client, ns: &str, name: &str) -> Vec<(String, String)> {
    let api: kube::Api<k8s_openapi::api::events::v1::Event> =
        kube::Api::namespaced(client.clone(), ns);
    let mut events: Vec<_> = api
        .list(&kube::api::ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .collect();
    events.sort_by_key(|e| e.event_time.as_ref().map(|t| t.0));
    events
        .into_iter()
        .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
        .collect()
}

#[tokio::test]
async fn import_then_provision_and_release() {
    let (env, client, ns) = api_server("gw").await;
    let sim = instant_sim(50).await;
    let state = sim.state();
    // With the workload annotations, for people reading MAAS: checked below.
    let gateway = start_in_process(&env, &sim, &ns, &["--maas-workload-annotations"]).await;
    create_inventory(&client, &ns, "pool-default", "default").await;

    // Import: one host per machine, labels and status from MAAS.
    let imported = eventually("50 hosts with status", Duration::from_secs(60), || async {
        let hosts = hosts(&client, &ns).await;
        (hosts.len() == 50
            && hosts
                .iter()
                .all(|h| h.status.as_ref().is_some_and(|s| s.maas_status.is_some())))
        .then_some(hosts)
    })
    .await;
    for host in &imported {
        let view = state.machine(&host.spec.system_id).unwrap();
        let labels = labels(host);
        assert_eq!(labels[keys::LABEL_HOST_ZONE], view.zone);
        assert_eq!(labels[keys::LABEL_HOST_POOL], view.pool);
        assert_eq!(
            labels[keys::LABEL_HOST_ARCH],
            view.architecture.split('/').next().unwrap()
        );
        assert_eq!(labels[keys::LABEL_HOST_INVENTORY], "pool-default");
        for tag in &view.tags {
            if let Some(key) = keys::host_tag_label(tag) {
                assert_eq!(labels.get(&key).map(String::as_str), Some("true"), "{tag}");
            }
        }
        let status = host.status.as_ref().unwrap();
        assert_eq!(status.maas_status, Some(i32::from(view.status_number)));
        assert_eq!(
            status.cpu_count,
            Some(i32::try_from(view.cpu_count).unwrap())
        );
        assert_eq!(status.memory_mib, Some(i64::try_from(view.memory).unwrap()));
        assert_eq!(
            status.interfaces.as_ref().map(Vec::len),
            Some(view.mac_addresses.len())
        );
        // maas-sim reports the first interface as the boot interface.
        assert_eq!(
            status.boot_interface.as_ref().map(|b| &b.mac),
            view.mac_addresses.first()
        );
    }

    // The simulator is plain http (accepted with --maas-allow-insecure-http): the inventory
    // says so in a condition, and in one Warning Event, not one per sync.
    let inventory = eventually(
        "MAASConnectionSecure on the inventory",
        Duration::from_secs(10),
        || async {
            let inventory =
                kube::Api::<capmaas_api::MaasInventory>::namespaced(client.clone(), &ns)
                    .get("pool-default")
                    .await
                    .unwrap();
            let conditions = inventory.status?.conditions?;
            conditions
                .into_iter()
                .find(|c| c.type_ == capmaas_api::conditions::MAAS_CONNECTION_SECURE)
        },
    )
    .await;
    assert_eq!(
        (inventory.status.as_str(), inventory.reason.as_str()),
        ("False", "PlainHTTP"),
        "{inventory:?}"
    );
    assert!(
        inventory.message.contains("plain http"),
        "{}",
        inventory.message
    );

    // One list per sync, whatever the number of hosts: no per-machine reads while idle.
    state.reset_counts();
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    let counts = state.call_counts();
    let reads: u64 = counts
        .iter()
        .filter(|(op, _)| op.starts_with("machine."))
        .map(|(_, n)| *n)
        .sum();
    assert_eq!(reads, 0, "no per-machine calls while idle: {counts:?}");
    let lists: u64 = counts
        .iter()
        .filter(|(op, _)| op.starts_with("machines."))
        .map(|(_, n)| *n)
        .sum();
    // 3.5 s with a 1 s inventory sync and a 1 s orphan sweep: about 7 lists for 50 hosts.
    assert!(
        (4..=9).contains(&lists),
        "one list per sync and per sweep: {counts:?}"
    );

    // An idle sync writes nothing at all: no host, binding, Event or inventory status (the
    // status keeps its time of the last change). Counted by the API server, so a write that
    // changes nothing would count too; its own lease renewals are left out.
    let background = BackgroundLeases::start(&client).await;
    let before = ApiWrites::scrape(&client).await;
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    let writes = ApiWrites::scrape(&client)
        .await
        .since(&before)
        .without_leases(background.stop());
    assert_eq!(writes.total(), 0, "API writes while idle: {writes}");
    let warnings = host_events(&client, &ns, "pool-default").await;
    let insecure: Vec<_> = warnings
        .iter()
        .filter(|(reason, _)| reason == "InsecureMAASEndpoint")
        .collect();
    assert_eq!(
        insecure.len(),
        1,
        "one plain-http Warning per inventory: {warnings:?}"
    );

    // A MAAS-side change shows up within one sync.
    let target = imported[0].spec.system_id.clone();
    state.add_tag(&target, "gpu-new").unwrap();
    state.set_power(&target, PowerState::Off).unwrap();
    eventually(
        "tag label and power off",
        Duration::from_secs(5),
        || async {
            let h = host(&client, &ns, &target).await;
            let tagged = labels(&h).contains_key("tag.maas.cluster.x-k8s.io/gpu-new");
            let off = h.status.as_ref().and_then(|s| s.power_state)
                == Some(capmaas_api::host::PowerState::Off);
            (tagged && off).then_some(())
        },
    )
    .await;

    // Full life cycle of one host, driven only by its spec.
    let host_name = imported
        .iter()
        .find(|h| state.machine(&h.spec.system_id).unwrap().status == NodeStatus::Ready)
        .unwrap()
        .metadata
        .name
        .clone()
        .unwrap();
    create_user_data(&client, &ns, "user-data", "#cloud-config\nhostname: x\n").await;
    request_deploy(&client, &ns, &host_name, "m1").await;
    let deployed = eventually("host deployed", Duration::from_secs(30), || async {
        let h = host(&client, &ns, &host_name).await;
        (provisioning_state(&h).as_deref() == Some("Deployed")).then_some(h)
    })
    .await;
    let view = state.machine(&host_name).unwrap();
    assert_eq!(view.status, NodeStatus::Deployed);
    assert!(
        is_identity_of(&view.agent_name, &ns, &host_name),
        "{}",
        view.agent_name
    );
    assert_eq!(view.hostname, "node-m1");
    assert_eq!(view.hwe_kernel.as_deref(), Some("hwe-22.04"));
    assert_eq!(
        view.user_data.as_deref(),
        Some(&b"#cloud-config\nhostname: x\n"[..])
    );
    assert_eq!(
        view.owner_data.get("capmaas.host"),
        Some(&format!("{ns}/{host_name}"))
    );
    assert_eq!(
        view.owner_data.get("capmaas.consumer").map(String::as_str),
        Some("MaasMachine/m1")
    );
    assert_eq!(view.power_on_count, 1, "deployed exactly once");
    let status = deployed.status.unwrap();
    assert_eq!(
        status.allocation.unwrap().agent_name.as_deref(),
        Some(view.agent_name.as_str()),
        "the identity MAAS holds is recorded"
    );
    assert_eq!(status.deployed_image.as_deref(), Some("ubuntu/jammy"));
    assert_eq!(status.hostname.as_deref(), Some("node-m1"));
    assert!(!status.addresses.unwrap_or_default().is_empty());
    let conditions = status.conditions.unwrap();
    assert!(capmaas_runtime::is_true(&conditions, "Provisioned"));
    assert!(capmaas_runtime::is_true(&conditions, "Ready"));

    // Allocate and deploy in one reconcile are announced by one Event, and each state change
    // by an Event named after the new state (the recorder folds Events of one reason and
    // object into a series that keeps the first note, so one reason must mean one note).
    let events = host_events(&client, &ns, &host_name).await;
    let announced = |reason: &str| {
        events
            .iter()
            .filter(|(r, _)| r == reason)
            .map(|(_, note)| note.as_str())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        announced("DeployStarted"),
        [format!("allocated MAAS machine {host_name}, deploying ubuntu/jammy").as_str()],
        "{events:?}"
    );
    assert!(announced("Allocated").is_empty(), "{events:?}");
    for (reason, note) in &events {
        if let Some((_, to)) = note.split_once(" -> ") {
            assert_eq!(
                to, reason,
                "a state change Event is named after its state: {events:?}"
            );
        }
    }

    // Release back to available.
    release_request(&client, &ns, &host_name).await;
    eventually("host available", Duration::from_secs(30), || async {
        let h = host(&client, &ns, &host_name).await;
        let available = provisioning_state(&h).as_deref() == Some("Available")
            && h.status.as_ref().is_some_and(|s| s.allocation.is_none());
        available.then_some(())
    })
    .await;
    let view = state.machine(&host_name).unwrap();
    assert_eq!(view.status, NodeStatus::Ready);
    assert!(view.owner.is_none());
    assert!(
        state.machines().iter().all(|m| m.owner.is_none()),
        "nothing left allocated"
    );

    // A vanished, unconsumed machine's host is deleted.
    state.remove_machine(&target).unwrap();
    eventually(
        "host of removed machine deleted",
        Duration::from_secs(10),
        || async {
            let hosts = hosts(&client, &ns).await;
            (!hosts.iter().any(|h| h.spec.system_id == target)).then_some(())
        },
    )
    .await;

    gateway.stop().await;
    sim.shutdown().await;
}
