//! Claiming under contention, with two controller instances (as two replicas without leader
//! election would) so that the resourceVersion precondition is what keeps claims exclusive,
//! and the "no host" report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use capmaas_api::conditions::{self as cond, reasons};
use capmaas_testenv::{TestEnv, eventually};
use common::*;
use kube::ResourceExt;
use serde_json::json;

/// Claims by consumer name, after checking that no host has two consumers (impossible by
/// construction of the field, so the real check is that no machine holds two hosts).
async fn claims(client: &kube::Client, ns: &str) -> BTreeMap<String, Vec<String>> {
    let mut by_machine: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for host in hosts(client, ns).await {
        if let Some(c) = &host.spec.consumer_ref {
            by_machine
                .entry(c.name.clone())
                .or_default()
                .push(host.name_any());
        }
    }
    by_machine
}

#[tokio::test]
async fn contention_never_claims_a_host_twice_and_no_host_is_reported() {
    let env = TestEnv::without_controller_manager().await.unwrap();
    let client = env.client();
    let _a = start_controller(&env, None, 10).await;
    let _b = start_controller(&env, None, 10).await;

    // Two machines, one host: exactly one wins, the other says why it waits.
    let race = env.create_namespace("mc-race").await.unwrap();
    create_cluster(&client, &race, true, false).await;
    create_host(&client, &race, "only", "az1", 8, 16384).await;
    let (_, _) = tokio::join!(
        create_machine_pair(&client, &race, "left", Some("b"), None, json!({})),
        create_machine_pair(&client, &race, "right", Some("b"), None, json!({})),
    );
    let winner = eventually("one claim", Duration::from_secs(30), || async {
        let c = claims(&client, &race).await;
        (c.len() == 1).then(|| c.into_keys().next().unwrap())
    })
    .await;
    let loser = if winner == "left" { "right" } else { "left" };
    let waiting = no_host_available(&client, &race, loser).await;
    let message = &condition(&waiting, cond::HOST_ASSOCIATED).unwrap().message;
    assert!(message.contains("1 claimed by other machines"), "{message}");
    assert_eq!(condition(&waiting, cond::READY).unwrap().status, "False");
    let winner_mm = get_mm(&client, &race, &winner).await.unwrap();
    assert_eq!(winner_mm.status.unwrap().host_ref.unwrap().name, "only");
    assert!(claims(&client, &race).await[&winner].len() == 1);

    // Ten machines, twelve hosts, two controllers at concurrency 10 each.
    let crowd = env.create_namespace("mc-crowd").await.unwrap();
    create_cluster(&client, &crowd, true, false).await;
    let host_names: Vec<String> = (0..12).map(|i| format!("h{i:02}")).collect();
    futures::future::join_all(
        host_names
            .iter()
            .map(|h| create_host(&client, &crowd, h, "az1", 4, 8192)),
    )
    .await;
    let names: Vec<String> = (0..10).map(|i| format!("m{i}")).collect();
    futures::future::join_all(
        names
            .iter()
            .map(|n| create_machine_pair(&client, &crowd, n, Some("b"), None, json!({}))),
    )
    .await;
    // Settled: every machine records a host and holds it. (A recorded host is an intent first;
    // two machines may briefly record the same one until the loser of the claim withdraws.)
    let claimed = eventually(
        "ten recorded and held claims",
        Duration::from_secs(60),
        || async {
            let mut recorded = BTreeMap::new();
            for n in &names {
                let host = get_mm(&client, &crowd, n).await?.status?.host_ref?.name;
                recorded.insert(n.clone(), host);
            }
            let held = claims(&client, &crowd).await;
            recorded
                .iter()
                .all(|(m, h)| held.get(m).is_some_and(|hs| hs.contains(h)))
                .then_some(recorded)
        },
    )
    .await;
    let distinct: BTreeSet<&String> = claimed.values().collect();
    assert_eq!(distinct.len(), 10, "no host recorded twice: {claimed:?}");
    let by_machine = claims(&client, &crowd).await;
    assert_eq!(by_machine.len(), 10);
    for (machine, held) in &by_machine {
        assert_eq!(held.len(), 1, "{machine} holds {held:?}");
        assert_eq!(
            &claimed[machine], &held[0],
            "status names the host actually held"
        );
    }

    // A request nothing satisfies: condition naming the constraint, and a Warning Event.
    let big = env.create_namespace("mc-nohost").await.unwrap();
    create_cluster(&client, &big, true, false).await;
    create_host(&client, &big, "small", "az1", 4, 8192).await;
    create_host(&client, &big, "other-zone", "az2", 64, 262_144).await;
    create_machine_pair(
        &client,
        &big,
        "huge",
        Some("b"),
        None,
        json!({"minCPU": 32, "tags": ["gpu"]}),
    )
    .await;
    let waiting = no_host_available(&client, &big, "huge").await;
    let message = condition(&waiting, cond::HOST_ASSOCIATED)
        .unwrap()
        .message
        .clone();
    assert!(message.contains("1 below minCPU 32"), "{message}");
    assert!(message.contains("1 without tags [gpu]"), "{message}");
    eventually(
        "a NoHostAvailable event",
        Duration::from_secs(10),
        || async {
            let found = events(&client, &big, "huge", reasons::NO_HOST_AVAILABLE).await;
            found
                .first()
                .filter(|e| e.type_.as_deref() == Some("Warning"))
                .map(|_| ())
        },
    )
    .await;
    // A fitting host appears: the waiting machine is woken and claims it.
    create_host(&client, &big, "gpu-box", "az1", 48, 262_144).await;
    kube::Api::<capmaas_api::MaasHost>::namespaced(client.clone(), &big)
        .patch_status(
            "gpu-box",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"status": {"tags": ["gpu"]}})),
        )
        .await
        .unwrap();
    eventually(
        "the new host to be claimed",
        Duration::from_secs(30),
        || async {
            claims(&client, &big)
                .await
                .get("huge")
                .filter(|h| h.as_slice() == ["gpu-box"])
                .map(|_| ())
        },
    )
    .await;
}

/// An inventory open to other namespaces (decision record 0003): two namespaces race for its
/// last host and exactly one wins; a namespace it does not admit is never given its hosts; a
/// released host wakes the waiting machine of the other namespace; a pool nobody imports is
/// imported on demand, open to all.
#[tokio::test]
async fn hosts_of_an_open_inventory_are_claimed_across_namespaces_exactly_once() {
    let env = TestEnv::without_controller_manager().await.unwrap();
    let client = env.client();
    let _a = start_controller(&env, None, 10).await;
    let _b = start_controller(&env, None, 10).await;
    let shared = env.create_namespace("mc-shared").await.unwrap();
    let _gateway = start_gateway(&client, &shared);
    // Generated names: team-a is admitted by name, team-b by the pattern.
    let mut teams = Vec::new();
    for team in ["mc-team-a", "mc-team-b"] {
        let ns = env.create_namespace(team).await.unwrap();
        create_cluster(&client, &ns, true, false).await;
        teams.push(ns);
    }
    let inventories = |ns: &str| -> kube::Api<capmaas_api::MaasInventory> {
        kube::Api::namespaced(client.clone(), ns)
    };
    inventories(&shared)
        .create(
            &kube::api::PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasInventory",
                "metadata": {"name": "shared", "namespace": shared},
                "spec": {"resourcePool": "default",
                         "claimNamespaces": {"names": [teams[0]], "nameMatches": "mc-team-[b]-.+"}}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let imported = |name: &'static str| {
        let client = client.clone();
        let shared = shared.clone();
        async move {
            create_host(&client, &shared, name, "az1", 8, 16384).await;
            kube::Api::<capmaas_api::MaasHost>::namespaced(client, &shared)
                .patch(
                    name,
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(json!({"metadata": {"labels": {
                        capmaas_api::keys::LABEL_HOST_INVENTORY: "shared"
                    }}})),
                )
                .await
                .unwrap();
        }
    };
    imported("last").await;
    let (_, _) = tokio::join!(
        create_machine_pair(&client, &teams[0], "m", Some("b"), None, json!({})),
        create_machine_pair(&client, &teams[1], "m", Some("b"), None, json!({})),
    );
    let holder = eventually(
        "one claim across namespaces",
        Duration::from_secs(30),
        || async { hosts(&client, &shared).await[0].spec.consumer_ref.clone() },
    )
    .await;
    let winner = holder
        .namespace
        .clone()
        .expect("the consumer's namespace is recorded");
    let loser = teams.iter().find(|t| **t != winner).unwrap().clone();
    let winner_mm = get_mm(&client, &winner, "m").await.unwrap();
    assert_eq!(holder.uid, winner_mm.uid().unwrap());
    let host_ref = winner_mm.status.unwrap().host_ref.unwrap();
    assert_eq!(
        (host_ref.name.as_str(), host_ref.namespace.as_deref()),
        ("last", Some(shared.as_str()))
    );
    no_host_available(&client, &loser, "m").await;
    eventually(
        "the winner's deployment",
        Duration::from_secs(30),
        || async {
            let host = hosts(&client, &shared).await.pop()?;
            (host.status?.provisioning_state
                == Some(capmaas_api::host::ProvisioningState::Deployed))
            .then_some(())
        },
    )
    .await;

    // A namespace the inventory does not admit: a free host of it is never proposed.
    let outsider = env.create_namespace("mc-outsider").await.unwrap();
    create_cluster(&client, &outsider, true, false).await;
    imported("spare").await;
    create_machine_pair(&client, &outsider, "m", Some("b"), None, json!({})).await;
    let waiting = no_host_available(&client, &outsider, "m").await;
    let message = &condition(&waiting, cond::HOST_ASSOCIATED).unwrap().message;
    assert!(
        message.starts_with("no MaasHost this namespace may claim"),
        "{message}"
    );
    // The loser, admitted, takes the spare host instead (woken by the host's creation).
    eventually(
        "the loser's claim of the spare host",
        Duration::from_secs(30),
        || async {
            let mm = get_mm(&client, &loser, "m").await?;
            (mm.status?.host_ref?.name == "spare").then_some(())
        },
    )
    .await;
    let spare = hosts(&client, &shared)
        .await
        .into_iter()
        .find(|h| h.name_any() == "spare")
        .unwrap();
    assert_eq!(
        spare.spec.consumer_ref.unwrap().namespace.as_deref(),
        Some(loser.as_str())
    );
    assert!(
        get_mm(&client, &outsider, "m")
            .await
            .unwrap()
            .status
            .unwrap()
            .host_ref
            .is_none()
    );

    // A pool that no inventory imports is imported on demand, open to every namespace (in the
    // pod's namespace; outside a pod, `default`).
    create_machine_pair(
        &client,
        &outsider,
        "gpu",
        Some("b"),
        None,
        json!({"resourcePool": "gpu-pool"}),
    )
    .await;
    let on_demand = eventually(
        "the on-demand inventory",
        Duration::from_secs(30),
        || async {
            inventories("default")
                .get_opt("pool-gpu-pool")
                .await
                .unwrap()
        },
    )
    .await;
    assert_eq!(on_demand.spec.resource_pool, "gpu-pool");
    assert!(on_demand.admits(&outsider) && on_demand.admits("anyone"));
    let message = eventually(
        "the gpu machine's message naming it",
        Duration::from_secs(30),
        || async {
            let mm = get_mm(&client, &outsider, "gpu").await?;
            let message = condition(&mm, cond::HOST_ASSOCIATED)?.message.clone();
            message.contains("imported on demand").then_some(message)
        },
    )
    .await;
    assert!(
        message.contains("MaasInventory default/pool-gpu-pool"),
        "{message}"
    );
}
