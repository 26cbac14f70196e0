//! "Nothing lost": a server is never wiped without the erase its release policy asked for, and
//! a machine that leaves an inventory's filtered list is not taken for gone.
//!
//! Against a real API server and the MAAS simulator, whose release history tells which erase
//! flags each release carried and how it ended.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use capmaas_api::MaasInventory;
use capmaas_api::common::{EraseMode, ReleasePolicy};
use capmaas_api::host::MaasHost;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams};
use maas_sim::{FaultConfig, MachineView, NodeStatus, OpFault, ReleaseResult, SimHandle};
use support::*;

const TAG: &str = "capmaas";

async fn create_tagged_inventory(client: &kube::Client, namespace: &str, name: &str) {
    let api: Api<MaasInventory> = Api::namespaced(client.clone(), namespace);
    let inv: MaasInventory = serde_json::from_value(serde_json::json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "MaasInventory",
        "metadata": { "name": name },
        "spec": { "resourcePool": "default", "tags": [TAG] },
    }))
    .unwrap();
    api.create(&PostParams::default(), &inv).await.unwrap();
}

/// An API server, a simulator, and `tagged` of its machines tagged into one inventory and
/// imported as hosts by a gateway started with `flags`.
struct World {
    _env: capmaas_testenv::TestEnv,
    client: kube::Client,
    ns: String,
    sim: maas_sim::RunningSim,
    state: SimHandle,
    ids: Vec<String>,
    gateway: InProcess,
}

async fn imported(prefix: &str, tagged: usize, flags: &[&str]) -> World {
    let (env, client, ns) = api_server(prefix).await;
    let sim = instant_sim(4).await;
    let state = sim.state();
    let ids: Vec<String> = state
        .machines()
        .iter()
        .take(tagged)
        .map(|m| m.system_id.clone())
        .collect();
    for id in &ids {
        state.add_tag(id, TAG).unwrap();
    }
    let gateway = start_in_process(&env, &sim, &ns, flags).await;
    create_tagged_inventory(&client, &ns, "inv").await;
    create_user_data(&client, &ns, "user-data", "#cloud-config\n").await;
    eventually("hosts imported", Duration::from_secs(30), || async {
        (hosts(&client, &ns).await.len() == tagged).then_some(())
    })
    .await;
    World {
        _env: env,
        client,
        ns,
        sim,
        state,
        ids,
        gateway,
    }
}

/// Waits until the host of `id` reports `Deployed`.
async fn deployed(client: &kube::Client, ns: &str, id: &str) {
    eventually("deployed", Duration::from_secs(30), || async {
        let h = host(client, ns, id).await;
        (provisioning_state(&h).as_deref() == Some("Deployed")).then_some(())
    })
    .await;
}

fn policy(erase: EraseMode) -> ReleasePolicy {
    ReleasePolicy {
        erase,
        force: false,
    }
}

/// Every release MAAS accepted answers 503 (the client's retries included), and the next
/// erase ends in Failed disk erasing.
fn refuse_releases_then_fail_one_erase(state: &SimHandle) {
    state
        .set_faults(FaultConfig {
            ops: vec![OpFault {
                op: "machine.release".into(),
                error_rate: 1.0,
                status: 503,
                latency_ms: 0,
                retry_after: None,
                body: None,
            }],
            fail_next_erases: 1,
            ..FaultConfig::default()
        })
        .unwrap();
}

/// Waits for at least one more (refused) release call, then lets releases through; the
/// erase failure stays armed.
async fn after_refused_releases(state: &SimHandle, before: u64) {
    eventually("a refused release", Duration::from_secs(30), || async {
        let calls = state.call_counts().get("machine.release").copied();
        (calls.unwrap_or(0) > before).then_some(())
    })
    .await;
    let mut faults = state.faults();
    faults.ops.clear();
    state.set_faults(faults).unwrap();
}

fn release_calls(state: &SimHandle) -> u64 {
    state
        .call_counts()
        .get("machine.release")
        .copied()
        .unwrap_or(0)
}

/// The machine is Ready and every release it ever got carried the secure erase; the first
/// accepted one failed (Failed disk erasing) and the last one completed.
fn assert_erased_securely_after_a_failed_erase(view: &MachineView) {
    assert_eq!(view.status, NodeStatus::Ready, "{view:?}");
    let releases = &view.releases;
    assert!(releases.len() >= 2, "{releases:?}");
    assert!(
        releases
            .iter()
            .all(|r| r.erase && r.secure_erase && !r.quick_erase),
        "every release carries the requested erase: {releases:?}"
    );
    assert_eq!(releases[0].result, ReleaseResult::Failed, "{releases:?}");
    assert_eq!(
        releases.last().map(|r| r.result),
        Some(ReleaseResult::Released),
        "{releases:?}"
    );
}

/// A machine must never be Ready unless its last release erased it as asked.
fn assert_never_ready_unerased(state: &SimHandle, system_id: &str) -> MachineView {
    let view = state.machine(system_id).unwrap();
    if view.status == NodeStatus::Ready
        && let Some(last) = view.releases.last()
    {
        assert!(
            last.erase && last.secure_erase && last.result == ReleaseResult::Released,
            "Ready without the requested erase: {:?}",
            view.releases
        );
    }
    view
}

#[tokio::test]
async fn releases_carry_the_erase_policy_through_failures_on_both_paths() {
    let World {
        _env,
        client,
        ns,
        sim,
        state,
        ids,
        gateway,
    } = imported("erase", 2, &[]).await;
    let (normal, orphan) = (ids[0].clone(), ids[1].clone());
    for (id, consumer) in [(&normal, "m-normal"), (&orphan, "m-orphan")] {
        request_deploy_with_policy(&client, &ns, id, consumer, policy(EraseMode::Secure)).await;
    }
    for id in [&normal, &orphan] {
        deployed(&client, &ns, id).await;
        let view = state.machine(id).unwrap();
        assert_eq!(
            maas_client::host::identity::recorded_policy(&view.agent_name),
            Some(policy(EraseMode::Secure)),
            "the policy is recorded in the allocation's identity: {}",
            view.agent_name
        );
    }

    // Normal path: the host's request is dropped; MAAS refuses the release a while (503),
    // then the first erase fails (Failed disk erasing). The release is sent again, with the
    // same flags, until the erase succeeds.
    refuse_releases_then_fail_one_erase(&state);
    let before = release_calls(&state);
    clear_provisioning(&client, &ns, &normal, "m-normal").await;
    after_refused_releases(&state, before).await;
    eventually(
        "normal path: erased and available",
        Duration::from_secs(60),
        || async {
            let view = assert_never_ready_unerased(&state, &normal);
            let h = host(&client, &ns, &normal).await;
            let state_name = provisioning_state(&h);
            if state_name.as_deref() == Some("Available") {
                assert_eq!(
                    view.status,
                    NodeStatus::Ready,
                    "reported available before MAAS finished: {view:?}"
                );
            }
            (state_name.as_deref() == Some("Available") && view.status == NodeStatus::Ready)
                .then_some(view)
        },
    )
    .await;
    assert_erased_securely_after_a_failed_erase(&state.machine(&normal).unwrap());

    // Sweeper path: the machine leaves the inventory (so its host is not re-imported) and
    // its host is deleted: an allocation of ours nobody claims. The sweeper finds the policy
    // on the machine itself; its release is refused a while, then the erase fails once.
    state.remove_tag(&orphan, TAG).unwrap();
    eventually(
        "host reports it left the filter",
        Duration::from_secs(30),
        || async {
            let h = host(&client, &ns, &orphan).await;
            let conditions = h.status.and_then(|s| s.conditions).unwrap_or_default();
            conditions
                .iter()
                .any(|c| c.type_ == "HostPresent" && c.reason == "LeftInventoryFilter")
                .then_some(())
        },
    )
    .await;
    refuse_releases_then_fail_one_erase(&state);
    let before = release_calls(&state);
    // Deleted for a move: its finalizer does not hold it for a release.
    delete_host_for_move(&client, &ns, &orphan).await;
    after_refused_releases(&state, before).await;
    let view = eventually(
        "sweeper: erased and released",
        Duration::from_secs(60),
        || async {
            let view = assert_never_ready_unerased(&state, &orphan);
            (view.status == NodeStatus::Ready).then_some(view)
        },
    )
    .await;
    assert_erased_securely_after_a_failed_erase(&view);
    assert!(
        view.releases
            .iter()
            .all(|r| r.comment.contains("orphan sweep")),
        "released by the sweeper: {:?}",
        view.releases
    );
    assert!(
        state.machines().iter().all(|m| m.owner.is_none()),
        "nothing left allocated"
    );

    gateway.stop().await;
    sim.shutdown().await;
}

/// A policy edited while deployed is the one the release uses, and with no policy MAAS's own
/// erase-on-release setting decides (the gateway asks for no erase and MAAS enforces it).
#[tokio::test]
async fn an_edited_policy_and_the_maas_erase_setting_decide_the_release() {
    let World {
        _env,
        client,
        ns,
        sim,
        state,
        ids,
        gateway,
    } = imported("edited", 2, &[]).await;
    let (edited, unset) = (ids[0].clone(), ids[1].clone());
    request_deploy(&client, &ns, &edited, "m-edited").await;
    request_deploy(&client, &ns, &unset, "m-unset").await;
    for id in [&edited, &unset] {
        deployed(&client, &ns, id).await;
    }
    let recorded = |id: &str| {
        state
            .machine(id)
            .unwrap()
            .owner_data
            .get("capmaas.release-erase")
            .cloned()
    };
    // Allocated with the default policy, in its identity; no annotations.
    assert_eq!(
        maas_client::host::identity::recorded_policy(&state.machine(&edited).unwrap().agent_name),
        Some(ReleasePolicy::default())
    );
    assert_eq!(recorded(&edited), None);

    // The edit reaches the deployed machine's record (what the release and the sweeper read).
    request_deploy_with_policy(&client, &ns, &edited, "m-edited", policy(EraseMode::Secure)).await;
    eventually(
        "edited policy recorded",
        Duration::from_secs(30),
        || async { (recorded(&edited).as_deref() == Some("Secure")).then_some(()) },
    )
    .await;
    assert_eq!(
        state.machine(&edited).unwrap().status,
        NodeStatus::Deployed,
        "recording the policy does not touch the deployment"
    );

    assert!(state.set_config("enable_disk_erasing_on_release", true));
    for (id, consumer) in [(&edited, "m-edited"), (&unset, "m-unset")] {
        clear_provisioning(&client, &ns, id, consumer).await;
    }
    let released = |id: String| {
        let state = state.clone();
        async move {
            eventually("released", Duration::from_secs(60), || async {
                let view = state.machine(&id).unwrap();
                (view.status == NodeStatus::Ready).then_some(view)
            })
            .await
        }
    };
    let edited_view = released(edited.clone()).await;
    let last = edited_view.releases.last().unwrap();
    assert!(
        last.erase && last.secure_erase && !last.quick_erase,
        "released with the edited policy: {:?}",
        edited_view.releases
    );
    let unset_view = released(unset.clone()).await;
    let last = unset_view.releases.last().unwrap();
    assert!(
        last.erase,
        "MAAS's erase-on-release setting applies when no policy asks: {:?}",
        unset_view.releases
    );

    gateway.stop().await;
    sim.shutdown().await;
}

#[tokio::test]
async fn a_machine_leaving_the_inventory_filter_stays_managed() {
    let World {
        _env,
        client,
        ns,
        sim,
        state,
        ids,
        gateway,
    } = imported("filter", 2, &[]).await;
    let (moved, deleted) = (ids[0].clone(), ids[1].clone());
    request_deploy_with_policy(&client, &ns, &moved, "m-moved", policy(EraseMode::Quick)).await;
    request_deploy(&client, &ns, &deleted, "m-deleted").await;
    for id in [&moved, &deleted] {
        deployed(&client, &ns, id).await;
    }

    // Re-tagged in MAAS: no longer in the inventory's list, but it exists. The host stays
    // present and deployed, and says it left the filter.
    state.remove_tag(&moved, TAG).unwrap();
    eventually(
        "host reports it left the filter",
        Duration::from_secs(30),
        || async {
            let h = host(&client, &ns, &moved).await;
            let status = h.status.clone().unwrap_or_default();
            let left = status.conditions.unwrap_or_default().iter().any(|c| {
                c.type_ == "HostPresent" && c.status == "True" && c.reason == "LeftInventoryFilter"
            });
            left.then_some(())
        },
    )
    .await;
    // Several syncs later: still not missing, still deployed; the inventory counts no
    // missing host.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let h = host(&client, &ns, &moved).await;
    let status = h.status.clone().unwrap();
    assert_ne!(status.missing, Some(true), "{status:?}");
    assert_eq!(provisioning_state(&h).as_deref(), Some("Deployed"));
    let inventory = Api::<MaasInventory>::namespaced(client.clone(), &ns)
        .get("inv")
        .await
        .unwrap();
    assert_eq!(inventory.status.unwrap().missing, Some(0));

    // The consumer goes away (machine-controller drops `provisioning` first): MAAS gets the
    // release by system id, with the recorded erase flags.
    clear_provisioning(&client, &ns, &moved, "m-moved").await;
    eventually(
        "released with the recorded erase",
        Duration::from_secs(30),
        || async {
            let h = host(&client, &ns, &moved).await;
            let view = state.machine(&moved).unwrap();
            (provisioning_state(&h).as_deref() == Some("Available")
                && view.status == NodeStatus::Ready)
                .then_some(())
        },
    )
    .await;
    let view = state.machine(&moved).unwrap();
    assert_eq!(view.releases.len(), 1, "{:?}", view.releases);
    let release = &view.releases[0];
    assert!(
        release.erase && release.quick_erase && !release.secure_erase,
        "{release:?}"
    );
    assert_eq!(release.result, ReleaseResult::Released);
    let h = host(&client, &ns, &moved).await;
    assert_ne!(h.status.unwrap().missing, Some(true));

    // Claim dropped: the unconsumed host of a machine outside the filter goes.
    release_request(&client, &ns, &moved).await;
    eventually(
        "unconsumed unlisted host deleted",
        Duration::from_secs(30),
        || async {
            let hosts = hosts(&client, &ns).await;
            (!hosts.iter().any(|h| h.spec.system_id == moved)).then_some(())
        },
    )
    .await;

    // A machine really deleted from MAAS (404 for its system id) is missing.
    state.remove_machine(&deleted).unwrap();
    eventually(
        "deleted machine missing",
        Duration::from_secs(30),
        || async {
            let h = host(&client, &ns, &deleted).await;
            let status = h.status.clone().unwrap_or_default();
            (status.missing == Some(true) && provisioning_state(&h).as_deref() == Some("Missing"))
                .then_some(())
        },
    )
    .await;

    gateway.stop().await;
    sim.shutdown().await;
}

/// A deployed host that is deleted stays, terminating, until its server is released with the
/// recorded erase; it goes only then (the MaasHost finalizer), with no orphan sweep needed.
#[tokio::test]
async fn a_deleted_host_goes_only_after_its_server_is_released() {
    let World {
        _env,
        client,
        ns,
        sim,
        state,
        ids,
        gateway,
    } = imported("finalizer", 1, &["--orphan-grace-period=600s"]).await;
    let id = ids[0].clone();
    let free = host(&client, &ns, &id).await;
    assert!(
        free.finalizers().is_empty(),
        "a free host carries no finalizer"
    );
    request_deploy_with_policy(&client, &ns, &id, "m-1", policy(EraseMode::Quick)).await;
    deployed(&client, &ns, &id).await;
    let held = host(&client, &ns, &id).await;
    assert!(
        held.finalizers()
            .contains(&capmaas_api::keys::FINALIZER_MAAS_HOST.to_owned()),
        "{:?}",
        held.finalizers()
    );

    let hosts_api = Api::<MaasHost>::namespaced(client.clone(), &ns);
    let first_uid = held.metadata.uid.clone();
    hosts_api
        .delete(&id, &DeleteParams::default())
        .await
        .unwrap();
    eventually("released, then gone", Duration::from_secs(30), || async {
        let gone = hosts_api
            .get_opt(&id)
            .await
            .unwrap()
            .is_none_or(|h| h.metadata.uid != first_uid);
        if gone {
            assert_eq!(
                state.machine(&id).unwrap().status,
                NodeStatus::Ready,
                "the host went before its server was back"
            );
        }
        gone.then_some(())
    })
    .await;
    let view = state.machine(&id).unwrap();
    let last = view.releases.last().unwrap();
    assert!(last.erase && last.quick_erase, "{:?}", view.releases);
    assert!(
        !last.comment.contains("orphan sweep"),
        "released by the host's deletion, not the sweep: {:?}",
        view.releases
    );

    gateway.stop().await;
    sim.shutdown().await;
}

/// An allocation of ours that no consumer claims (its host deleted for a move and imported
/// again) is
/// reported `Unclaimed`, and with `--release-unclaimed-after` released once it has been so that
/// long, with the erase recorded on the machine. Claimed hosts are never released that way.
#[tokio::test]
async fn an_unclaimed_allocation_is_released_after_the_opted_in_period() {
    // The orphan sweep must not be what releases it: its grace outlasts the test.
    let World {
        _env,
        client,
        ns,
        sim,
        state,
        ids,
        gateway,
    } = imported(
        "unclaimed",
        1,
        &["--release-unclaimed-after=4s", "--orphan-grace-period=600s"],
    )
    .await;
    let id = ids[0].clone();
    request_deploy_with_policy(&client, &ns, &id, "m-gone", policy(EraseMode::Quick)).await;
    deployed(&client, &ns, &id).await;

    let hosts_api = Api::<MaasHost>::namespaced(client.clone(), &ns);
    let first_uid = host(&client, &ns, &id).await.metadata.uid;
    // Deleted for a move (so its finalizer does not release it) and imported again.
    delete_host_for_move(&client, &ns, &id).await;
    let since = eventually(
        "imported again, Unclaimed",
        Duration::from_secs(30),
        || async {
            let h = hosts_api.get_opt(&id).await.unwrap()?;
            if h.metadata.uid == first_uid {
                return None;
            }
            let condition = h
                .status?
                .conditions?
                .into_iter()
                .find(|c| c.type_ == "Provisioned" && c.reason == "Unclaimed")?;
            Some(condition.last_transition_time.0)
        },
    )
    .await;
    assert_eq!(
        state.machine(&id).unwrap().status,
        NodeStatus::Deployed,
        "reported, not released at once"
    );
    // The period, then a release through the simulator's erase, while the file's four other
    // scenarios run their own API servers and gateways on the same cores: CI once took over 30 s.
    let view = eventually(
        "released after the period",
        Duration::from_secs(90),
        || async {
            let view = state.machine(&id).unwrap();
            (view.status == NodeStatus::Ready).then_some(view)
        },
    )
    .await;
    let waited = jiff::Timestamp::now().duration_since(since);
    assert!(
        waited.as_secs() >= 4,
        "released {waited:?} after it was first reported Unclaimed"
    );
    let last = view.releases.last().unwrap();
    assert!(
        last.erase && last.quick_erase,
        "released with the erase recorded on the machine: {:?}",
        view.releases
    );

    gateway.stop().await;
    sim.shutdown().await;
}
