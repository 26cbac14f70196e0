//! Races on delete: the inventory deletes a host only if it is still the object the sync
//! decided from (uid + resourceVersion preconditions), so a claim written in between wins; a
//! gateway scoped to one namespace never releases an allocation of ours recorded for a host of
//! another namespace.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use capmaas_api::MaasHost;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use maas_api_client::AllocateRequest;
use maas_client::host::annotations as ann;
use maas_client::inventory::act::{DeleteOutcome, delete_unchanged};
use maas_client::inventory::state::existing;
use maas_sim::NodeStatus;
use support::*;

fn new_host(name: &str) -> MaasHost {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "MaasHost",
        "metadata": { "name": name },
        "spec": { "systemID": name },
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_claimed_after_the_decision_is_never_deleted() {
    let (_env, client, ns) = api_server("delete-race").await;
    let api: Api<MaasHost> = Api::namespaced(client.clone(), &ns);
    api.create(&PostParams::default(), &new_host("h1"))
        .await
        .unwrap();

    // The sync's view: unconsumed. Then machine-controller claims it (new resourceVersion).
    let stale = existing(&api.get("h1").await.unwrap());
    assert!(!stale.held());
    request_deploy(&client, &ns, "h1", "m1").await;
    let outcome = delete_unchanged(&api, "h1", &stale.version).await.unwrap();
    assert_eq!(outcome, DeleteOutcome::Changed);
    let kept = api.get("h1").await.unwrap();
    assert_eq!(
        kept.spec.consumer_ref.as_ref().map(|c| c.name.as_str()),
        Some("m1"),
        "claim intact"
    );
    assert!(kept.metadata.deletion_timestamp.is_none());

    // Same name, another object (deleted and re-created in between): the uid differs.
    api.delete("h1", &DeleteParams::default()).await.unwrap();
    api.create(&PostParams::default(), &new_host("h1"))
        .await
        .unwrap();
    let mut other_uid = existing(&api.get("h1").await.unwrap()).version;
    other_uid.uid = stale.version.uid.clone();
    assert_eq!(
        delete_unchanged(&api, "h1", &other_uid).await.unwrap(),
        DeleteOutcome::Changed
    );
    assert!(api.get_opt("h1").await.unwrap().is_some());

    // Unchanged since the decision: deleted; a second delete finds it gone, not an error.
    let fresh = existing(&api.get("h1").await.unwrap());
    assert_eq!(
        delete_unchanged(&api, "h1", &fresh.version).await.unwrap(),
        DeleteOutcome::Deleted
    );
    assert!(api.get_opt("h1").await.unwrap().is_none());
    assert_eq!(
        delete_unchanged(&api, "h1", &fresh.version).await.unwrap(),
        DeleteOutcome::Gone
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweeper_releases_only_allocations_recorded_for_what_it_watches() {
    let (env, _client, ns_a) = api_server("sweep-a").await;
    let ns_b = env.create_namespace("sweep-b").await.unwrap();
    let sim = instant_sim(3).await;
    let state = sim.state();
    let ids: Vec<String> = state.machines().into_iter().map(|m| m.system_id).collect();
    let (mine, theirs, bare) = (&ids[0], &ids[1], &ids[2]);
    let maas = maas_of(&sim);
    // Three allocations with our agent_name, as gateways of this installation leave them: one
    // recorded for a host of namespace A (gone: an orphan), one for a host of namespace B (the
    // gateway of B holds it), one never annotated.
    for (id, namespace) in [(mine, Some(&ns_a)), (theirs, Some(&ns_b)), (bare, None)] {
        maas.allocate(&AllocateRequest {
            system_id: Some(id.clone()),
            agent_name: Some(INSTALLATION.into()),
            ..AllocateRequest::default()
        })
        .await
        .unwrap();
        if let Some(namespace) = namespace {
            let annotations =
                ann::desired_machine_annotations(INSTALLATION, namespace, id, None, None);
            maas.set_workload_annotations(id, &annotations)
                .await
                .unwrap();
        }
    }

    // Grace period 3 s, one sweep a second.
    let gateway = start_in_process(&env, &sim, &ns_a, &[]).await;
    eventually("orphan of A released", Duration::from_secs(30), || async {
        (state.machine(mine).unwrap().status == NodeStatus::Ready).then_some(())
    })
    .await;
    // Well past the grace period, several sweeps later: B's allocation and the unrecorded one
    // are still ours in MAAS, never released.
    tokio::time::sleep(Duration::from_secs(6)).await;
    for id in [theirs, bare] {
        let view = state.machine(id).unwrap();
        assert_eq!(
            (view.status, view.agent_name.as_str()),
            (NodeStatus::Allocated, INSTALLATION),
            "{id} left alone"
        );
    }
    assert_eq!(
        state.call_counts().get("machine.release").copied(),
        Some(1),
        "exactly one release: the orphan of A"
    );
    gateway.stop().await;

    // The same installation cluster-wide sees every namespace of its cluster that has hosts;
    // namespace B has none, and no host is the unrecorded machine's: both may be another
    // management cluster's (the source or target of a `clusterctl move`), so they stay.
    let gateway = start_in_process(&env, &sim, "", &[]).await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    for id in [theirs, bare] {
        assert_eq!(
            state.machine(id).unwrap().status,
            NodeStatus::Allocated,
            "{id} left alone"
        );
    }
    // A host in B for the unrecorded machine: B is served here, both are orphans of ours.
    Api::<MaasHost>::namespaced(env.client(), &ns_b)
        .create(&PostParams::default(), &new_host(bare))
        .await
        .unwrap();
    eventually("both orphans released", Duration::from_secs(30), || async {
        [theirs, bare]
            .iter()
            .all(|id| state.machine(id).unwrap().status == NodeStatus::Ready)
            .then_some(())
    })
    .await;
    gateway.stop().await;
}
