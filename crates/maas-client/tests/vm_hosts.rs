//! LXD VM hosts: a host deployed with `registerVMHost` shows `status.vmHost` (and the VMs
//! composed on it afterwards), a composed VM's host shows `status.vmHostId`; a MAAS without VM
//! hosts and a key without admin rights are reported once, without a deploy loop; an
//! installation without LXD never calls `/vm-hosts/`. Real API server, MAAS simulator, gateway
//! in-process.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use capmaas_api::conditions as cond;
use capmaas_api::host::MaasHost;
use maas_sim::{SimConfig, VmHostEventKind};
use support::*;

fn vm_host_calls(counts: &BTreeMap<String, u64>) -> u64 {
    counts
        .iter()
        .filter(|(op, _)| op.starts_with("vm-host") || op.starts_with("pod"))
        .map(|(_, n)| *n)
        .sum()
}

fn provisioned(h: &MaasHost) -> Option<(String, String, String)> {
    let conditions = h.status.as_ref()?.conditions.as_ref()?;
    conditions
        .iter()
        .find(|c| c.type_ == cond::PROVISIONED)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

async fn event_reasons(client: &kube::Client, ns: &str, name: &str) -> Vec<String> {
    let api: kube::Api<k8s_openapi::api::events::v1::Event> =
        kube::Api::namespaced(client.clone(), ns);
    api.list(&kube::api::ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .filter_map(|e| e.reason)
        .collect()
}

#[tokio::test]
async fn a_registered_vm_host_shows_its_resources_and_composed_vms() {
    let (env, client, ns) = api_server("vmhost").await;
    let sim = instant_sim(3).await;
    let state = sim.state();
    let gateway = start_in_process(&env, &sim, &ns, &[]).await;
    let ids = import_hosts(&client, &ns, 3).await;
    let lxd = ids[0].clone();
    request_deploy_adjusted(&client, &ns, &lxd, "c0", |p| {
        p.register_vm_host = Some(true);
    })
    .await;

    let shown = eventually("status.vmHost", Duration::from_secs(30), || async {
        let h = host(&client, &ns, &lxd).await;
        (provisioning_state(&h).as_deref() == Some("Deployed"))
            .then(|| h.status.and_then(|s| s.vm_host))
            .flatten()
    })
    .await;
    // Deployed with register_vmhost: MAAS registered the VM host when the deployment ended.
    let registered: Vec<_> = state
        .vm_host_events()
        .into_iter()
        .filter(|e| e.kind == VmHostEventKind::Registered)
        .collect();
    assert_eq!(registered.len(), 1, "{registered:?}");
    assert_eq!(registered[0].system_id.as_deref(), Some(lxd.as_str()));
    let view = state.vm_hosts().into_iter().next().unwrap();
    assert_eq!(shown.id, i64::try_from(view.id).unwrap());
    assert_eq!(shown.name, view.name);
    assert_eq!(shown.pool.as_deref(), Some(view.pool.as_str()));
    assert_eq!(shown.zone.as_deref(), Some(view.zone.as_str()));
    assert_eq!(
        (shown.cores.total, shown.cores.used),
        (i64::from(view.cores), 0)
    );
    assert_eq!(shown.memory_mib.total, i64::try_from(view.memory).unwrap());
    assert_eq!(
        shown.storage_gib.total,
        i64::try_from(view.local_storage >> 30).unwrap(),
        "GiB rounded down"
    );
    assert_eq!(shown.machines, Some(vec![]));

    // A VM composed on it: in the VM host's machines and usage; imported (pool default) with
    // the VM host's id.
    let request = maas_api_client::ComposeRequest {
        hostname: Some("vm-a".into()),
        cores: Some(2),
        memory_mib: Some(1024),
        storage_gb: Some(8),
        ..maas_api_client::ComposeRequest::default()
    };
    let vm = maas_of(&sim).compose(shown.id, &request).await.unwrap();
    let updated = eventually("the VM on the VM host", Duration::from_secs(30), || async {
        let h = host(&client, &ns, &lxd).await;
        h.status
            .and_then(|s| s.vm_host)
            .filter(|v| v.machines.as_deref() == Some(std::slice::from_ref(&vm)))
    })
    .await;
    assert_eq!((updated.cores.used, updated.memory_mib.used), (2, 1024));
    let vm_host_id = eventually("the VM's vmHostId", Duration::from_secs(30), || async {
        let hosts = hosts(&client, &ns).await;
        hosts
            .into_iter()
            .find(|h| h.spec.system_id == vm)
            .and_then(|h| h.status?.vm_host_id)
    })
    .await;
    assert_eq!(vm_host_id, shown.id);
    // Idle: the status stays as it is (no write per sync).
    let before = host(&client, &ns, &lxd).await;
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let after = host(&client, &ns, &lxd).await;
    assert_eq!(
        before.metadata.resource_version, after.metadata.resource_version,
        "no status write while nothing changes"
    );
    // The other hosts never became VM hosts.
    for id in &ids[1..] {
        let h = host(&client, &ns, id).await;
        assert_eq!(h.status.and_then(|s| s.vm_host), None, "{id}");
    }
    gateway.stop().await;
}

#[tokio::test]
async fn an_installation_without_lxd_never_calls_vm_hosts() {
    let (env, client, ns) = api_server("novmhost").await;
    let sim = instant_sim(2).await;
    let state = sim.state();
    let gateway = start_in_process(&env, &sim, &ns, &[]).await;
    let ids = import_hosts(&client, &ns, 2).await;
    request_deploy(&client, &ns, &ids[0], "c0").await;
    eventually("deployed", Duration::from_secs(30), || async {
        let h = host(&client, &ns, &ids[0]).await;
        (provisioning_state(&h).as_deref() == Some("Deployed")).then_some(())
    })
    .await;
    // A few more syncs (1 s interval).
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let counts = state.call_counts();
    assert!(counts.contains_key("machines.read"), "{counts:?}");
    assert_eq!(vm_host_calls(&counts), 0, "{counts:?}");
    let h = host(&client, &ns, &ids[0]).await;
    let status = h.status.unwrap();
    assert_eq!((status.vm_host, status.vm_host_id), (None, None));
    gateway.stop().await;
}

/// Requests a VM host deployment of the first host and waits for the refusal on it; returns
/// the condition message and the deploy calls MAAS saw after a few more syncs.
async fn refused(
    sim: &maas_sim::RunningSim,
    prefix: &str,
    reason: &str,
) -> (String, u64, Vec<String>) {
    let (env, client, ns) = api_server(prefix).await;
    let state = sim.state();
    let gateway = start_in_process(&env, sim, &ns, &[]).await;
    let ids = import_hosts(&client, &ns, 2).await;
    request_deploy_adjusted(&client, &ns, &ids[0], "c0", |p| {
        p.register_vm_host = Some(true);
        // MAAS lets only admins rename a machine: the key without admin rights gets as far
        // as the deploy only without a hostname.
        p.hostname = None;
    })
    .await;
    let message = eventually("the refusal", Duration::from_secs(30), || async {
        let h = host(&client, &ns, &ids[0]).await;
        provisioned(&h)
            .filter(|(status, r, _)| status == "False" && r == reason)
            .map(|(_, _, message)| message)
    })
    .await;
    // Several syncs and the reconciles of our own writes later: no deploy loop.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let deploys = state
        .call_counts()
        .get("machine.deploy")
        .copied()
        .unwrap_or(0);
    let h = host(&client, &ns, &ids[0]).await;
    assert_eq!(
        provisioned(&h).map(|(_, r, _)| r).as_deref(),
        Some(reason),
        "still reported"
    );
    // The inventory keeps syncing: the VM host refusal is no sync failure.
    let inventory: capmaas_api::MaasInventory = kube::Api::namespaced(client.clone(), &ns)
        .get("inv")
        .await
        .unwrap();
    let synced = inventory
        .status
        .and_then(|s| s.conditions)
        .and_then(|c| c.into_iter().find(|c| c.type_ == cond::SYNCED))
        .unwrap();
    assert_eq!(synced.status, "True", "{synced:?}");
    let events = event_reasons(&client, &ns, &ids[0]).await;
    gateway.stop().await;
    (message, deploys, events)
}

#[tokio::test]
async fn a_maas_without_vm_hosts_refuses_register_vmhost_once() {
    let sim = maas_sim::Simulator::start(SimConfig {
        machines: 2,
        vm_hosts: false,
        ..SimConfig::instant()
    })
    .await
    .unwrap();
    let (message, deploys, events) = refused(&sim, "vmhost4", "VMHostsUnsupported").await;
    assert!(
        message.contains("no VM hosts") && message.contains("lxdConfig"),
        "{message}"
    );
    // Refused by MAAS once, or not sent at all when the VM host listing told first.
    assert!(deploys <= 1, "no deploy loop: {deploys}");
    assert_eq!(
        events.iter().filter(|r| *r == "VMHostsUnsupported").count(),
        1,
        "{events:?}"
    );
}

#[tokio::test]
async fn a_key_without_admin_rights_is_told_so() {
    let sim = maas_sim::Simulator::start(SimConfig {
        machines: 2,
        api_keys: vec![maas_sim::ApiKey::generate("user", false)],
        ..SimConfig::instant()
    })
    .await
    .unwrap();
    let (message, deploys, events) =
        refused(&sim, "vmhostuser", "VMHostRegistrationForbidden").await;
    assert!(message.contains("admin rights"), "{message}");
    assert_eq!(deploys, 1, "refused once, not sent again");
    assert!(
        events.iter().any(|r| r == "VMHostRegistrationForbidden"),
        "{events:?}"
    );
}
