//! One MAAS machine backs exactly one MaasHost in the whole cluster: two namespaces whose
//! inventories list the same pool never both import a machine, a hand-made duplicate is left
//! alone (and shown nothing of the machine), every machine is allocated and deployed once, and
//! only one host ever records an allocation for it. A binding whose host is gone is collected
//! and the machine is imported by the other namespace.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use capmaas_api::conditions;
use capmaas_api::keys;
use capmaas_api::{MaasHost, MaasInventory};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use maas_client::binding::{self, LABEL_BINDING};
use maas_sim::NodeStatus;
use support::*;

const MACHINES: usize = 4;

fn condition(host: &MaasHost, type_: &str) -> Option<(String, String)> {
    let c = host
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)?
        .clone();
    Some((c.reason, c.message))
}

/// Every host of both namespaces, keyed `<namespace>/<name>`.
async fn all_hosts(client: &kube::Client, namespaces: &[&str]) -> BTreeMap<String, MaasHost> {
    let mut out = BTreeMap::new();
    for ns in namespaces {
        for h in hosts(client, ns).await {
            out.insert(format!("{ns}/{}", h.name_any()), h);
        }
    }
    out
}

fn hand_made(name: &str, system_id: &str, opt_in: bool) -> MaasHost {
    let annotations = if opt_in {
        serde_json::json!({ keys::ANNOTATION_HOST_HAND_MADE: "true" })
    } else {
        serde_json::json!({})
    };
    serde_json::from_value(serde_json::json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "MaasHost",
        "metadata": { "name": name, "annotations": annotations },
        "spec": { "systemID": system_id },
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_machine_backs_one_host_across_namespaces() {
    let (env, client, ns_a) = api_server("tenant-a").await;
    let ns_b = env.create_namespace("tenant-b").await.unwrap();
    let ns_sys = env.create_namespace("capmaas-system").await.unwrap();
    let namespaces = [ns_a.as_str(), ns_b.as_str()];
    let sim = instant_sim(MACHINES).await;
    let state = sim.state();
    let binding_ns = format!("--host-binding-namespace={ns_sys}");
    // One gateway for the whole cluster, as deployed.
    let gateway = start_in_process(&env, &sim, "", &[binding_ns.as_str()]).await;

    // Every status.allocation ever seen, per system id: which hosts recorded one.
    let recorded: Arc<Mutex<BTreeMap<String, BTreeSet<String>>>> = Arc::default();
    let watcher = {
        let (client, recorded) = (client.clone(), recorded.clone());
        let namespaces = [ns_a.clone(), ns_b.clone()];
        tokio::spawn(async move {
            loop {
                let refs: Vec<&str> = namespaces.iter().map(String::as_str).collect();
                for (key, host) in all_hosts(&client, &refs).await {
                    if host.status.as_ref().is_some_and(|s| s.allocation.is_some()) {
                        recorded
                            .lock()
                            .unwrap()
                            .entry(host.spec.system_id.clone())
                            .or_default()
                            .insert(key);
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };

    // Both tenants point an inventory at the same pool at the same moment.
    tokio::join!(
        create_inventory(&client, &ns_a, "pool", "default"),
        create_inventory(&client, &ns_b, "pool", "default"),
    );
    let imported = eventually(
        "every machine imported once",
        Duration::from_secs(60),
        || async {
            let all = all_hosts(&client, &namespaces).await;
            (all.len() == MACHINES).then_some(all)
        },
    )
    .await;
    let system_ids: BTreeSet<&str> = imported
        .values()
        .map(|h| h.spec.system_id.as_str())
        .collect();
    assert_eq!(system_ids.len(), MACHINES, "no machine imported twice");
    // Later syncs change nothing, and a namespace that lost a machine says so.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let later = all_hosts(&client, &namespaces).await;
    assert_eq!(
        later.keys().collect::<Vec<_>>(),
        imported.keys().collect::<Vec<_>>()
    );
    for ns in namespaces {
        let mine = later
            .keys()
            .filter(|k| k.starts_with(&format!("{ns}/")))
            .count();
        if mine < MACHINES {
            let inventory: MaasInventory = Api::namespaced(client.clone(), ns)
                .get("pool")
                .await
                .unwrap();
            let synced = inventory.status.unwrap().conditions.unwrap();
            let message = &synced
                .iter()
                .find(|c| c.type_ == conditions::SYNCED)
                .unwrap()
                .message;
            assert!(
                message.contains("another MaasHost already holds"),
                "{ns}: {message}"
            );
        }
    }
    // The bindings name exactly the imported hosts.
    let leases: Api<Lease> = Api::namespaced(client.clone(), &ns_sys);
    let bindings = leases
        .list(&ListParams::default().labels(LABEL_BINDING))
        .await
        .unwrap();
    let holders: BTreeSet<String> = bindings
        .items
        .iter()
        .filter_map(|l| l.spec.as_ref()?.holder_identity.clone())
        .collect();
    assert_eq!(holders, later.keys().cloned().collect());

    // Pick one machine held in each namespace if possible, else two of the same one.
    let (held_a, held_b): (Vec<_>, Vec<_>) = later
        .iter()
        .partition(|(k, _)| k.starts_with(&format!("{ns_a}/")));
    let mut wanted: Vec<(String, String, String)> = Vec::new(); // (ns, host, system id)
    for (key, host) in held_a.iter().take(1).chain(held_b.iter().take(1)) {
        let (ns, name) = key.split_once('/').unwrap();
        wanted.push((ns.to_owned(), name.to_owned(), host.spec.system_id.clone()));
    }
    if wanted.len() < 2 {
        let (key, host) = later.iter().nth(1).unwrap();
        let (ns, name) = key.split_once('/').unwrap();
        wanted.push((ns.to_owned(), name.to_owned(), host.spec.system_id.clone()));
    }
    // A hand-made duplicate, opted in, of the first machine in the *other* namespace, and a
    // hand-made host that did not opt in.
    let (first_ns, first_host, first_sid) = wanted[0].clone();
    let other_ns = if first_ns == ns_a {
        ns_b.clone()
    } else {
        ns_a.clone()
    };
    let api_other: Api<MaasHost> = Api::namespaced(client.clone(), &other_ns);
    api_other
        .create(&PostParams::default(), &hand_made("dup", &first_sid, true))
        .await
        .unwrap();
    api_other
        .create(
            &PostParams::default(),
            &hand_made("no-opt-in", &wanted[1].2, false),
        )
        .await
        .unwrap();

    create_user_data(&client, &ns_a, "user-data", "#cloud-config\n").await;
    create_user_data(&client, &ns_b, "user-data", "#cloud-config\n").await;
    for (i, (ns, host, _)) in wanted.iter().enumerate() {
        request_deploy(&client, ns, host, &format!("m{i}")).await;
    }
    // The duplicate and the unregistered host are asked to deploy too (a MaasMachine that
    // claimed them): neither may ever reach MAAS.
    request_deploy(&client, &other_ns, "dup", "m-dup").await;
    request_deploy(&client, &other_ns, "no-opt-in", "m-none").await;

    for (ns, host, sid) in &wanted {
        eventually("deployed", Duration::from_secs(60), || async {
            let h = support::host(&client, ns, host).await;
            (provisioning_state(&h).as_deref() == Some("Deployed")).then_some(())
        })
        .await;
        let view = state.machine(sid).unwrap();
        assert_eq!(view.status, NodeStatus::Deployed);
        assert!(
            support::is_identity_of(&view.agent_name, ns, host),
            "allocated for {ns}/{host}: {}",
            view.agent_name
        );
    }
    let dup = eventually("duplicate reported", Duration::from_secs(30), || async {
        let h = support::host(&client, &other_ns, "dup").await;
        condition(&h, conditions::HOST_PRESENT)
            .filter(|(reason, _)| reason == "BoundToAnotherHost")
            .map(|c| (h, c))
    })
    .await;
    assert!(
        dup.1.1.contains(&format!("{first_ns}/{first_host}")),
        "{}",
        dup.1.1
    );
    let dup_status = dup.0.status.unwrap();
    assert_eq!(
        (dup_status.cpu_count, dup_status.provisioning_state),
        (None, None),
        "nothing of the machine is shown"
    );
    let unregistered = eventually("unregistered reported", Duration::from_secs(30), || async {
        let h = support::host(&client, &other_ns, "no-opt-in").await;
        condition(&h, conditions::HOST_PRESENT).filter(|(reason, _)| reason == "NotRegistered")
    })
    .await;
    assert!(
        unregistered.1.contains(keys::ANNOTATION_HOST_HAND_MADE),
        "{}",
        unregistered.1
    );

    tokio::time::sleep(Duration::from_secs(2)).await;
    let applied = state.applied_counts();
    assert_eq!(
        applied.get("machines.allocate").copied().unwrap_or(0),
        2,
        "{applied:?}"
    );
    assert_eq!(
        applied.get("machine.deploy").copied().unwrap_or(0),
        2,
        "{applied:?}"
    );
    for (sid, hosts) in recorded.lock().unwrap().iter() {
        assert_eq!(hosts.len(), 1, "{sid} recorded as allocated by {hosts:?}");
    }

    // A binding whose host is gone is collected, and the other namespace imports the machine.
    let free = later
        .iter()
        .find(|(_, h)| !wanted.iter().any(|w| w.2 == h.spec.system_id))
        .map(|(k, h)| (k.clone(), h.spec.system_id.clone()))
        .unwrap();
    let (free_ns, free_host) = free.0.split_once('/').unwrap();
    let winner_ns = if free_ns == ns_a {
        ns_b.clone()
    } else {
        ns_a.clone()
    };
    Api::<MaasInventory>::namespaced(client.clone(), free_ns)
        .delete("pool", &DeleteParams::default())
        .await
        .unwrap();
    Api::<MaasHost>::namespaced(client.clone(), free_ns)
        .delete(free_host, &DeleteParams::default())
        .await
        .unwrap();
    // Age the binding past the take-over grace instead of waiting for it.
    let lease_name = binding::binding_name(INSTALLATION, &free.1);
    let aged = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(600);
    let patch = serde_json::json!({ "spec": { "acquireTime": MicroTime(aged) } });
    leases
        .patch(&lease_name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    eventually(
        "re-imported by the other namespace",
        Duration::from_secs(60),
        || async {
            hosts(&client, &winner_ns)
                .await
                .into_iter()
                .any(|h| h.spec.system_id == free.1)
                .then_some(())
        },
    )
    .await;
    let lease = leases.get(&lease_name).await.unwrap();
    let holder = lease.spec.unwrap().holder_identity.unwrap();
    assert!(holder.starts_with(&format!("{winner_ns}/")), "{holder}");

    watcher.abort();
    gateway.stop().await;
}
