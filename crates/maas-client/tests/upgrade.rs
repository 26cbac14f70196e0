//! Upgrading a running installation: servers an earlier version allocated and deployed (its
//! `agent_name` was the bare installation id, and the host and release policy were in workload
//! annotations) are taken over by this version with no MAAS operation on them, released later
//! with the policy their annotations record, while new allocations carry the identity.
//!
//! The earlier version's state is written as it left it, call for call (allocate with the
//! installation id, set the annotations, rename, deploy; the host's claim, request and
//! `status.allocation`), since its binary is not built here.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use capmaas_api::MaasHost;
use capmaas_api::common::{EraseMode, ReleasePolicy};
use kube::Api;
use kube::api::{Patch, PatchParams};
use maas_api_client::{AllocateRequest, DeployRequest, MaasClient};
use maas_client::host::annotations::{self as ann, Consumer};
use maas_client::host::identity;
use maas_sim::{NodeStatus, SimHandle};
use support::*;

/// MAAS operations that change a machine.
const CHANGES: [&str; 7] = [
    "machines.allocate",
    "machine.deploy",
    "machine.release",
    "machine.power_on",
    "machine.power_off",
    "machine.set_workload_annotations",
    "machine.update",
];

fn changes(state: &SimHandle) -> BTreeMap<String, u64> {
    state
        .applied_counts()
        .into_iter()
        .filter(|(op, _)| CHANGES.contains(&op.as_str()))
        .collect()
}

fn policy(erase: EraseMode) -> ReleasePolicy {
    ReleasePolicy {
        erase,
        force: false,
    }
}

/// What the earlier version left for `host`: claimed by `consumer` and asking for a deployment
/// with `release`, its machine allocated with the bare installation id, annotated, renamed and
/// deployed, and the allocation recorded in the host status.
async fn deployed_by_the_earlier_version(
    client: &kube::Client,
    maas: &MaasClient,
    ns: &str,
    host: &str,
    consumer: &str,
    release: &ReleasePolicy,
) {
    request_deploy_with_policy(client, ns, host, consumer, release.clone()).await;
    maas.allocate(&AllocateRequest {
        system_id: Some(host.to_owned()),
        agent_name: Some(INSTALLATION.into()),
        ..AllocateRequest::default()
    })
    .await
    .unwrap();
    let uid = format!("uid-{consumer}");
    let annotations = ann::desired_machine_annotations(
        INSTALLATION,
        ns,
        host,
        Some(Consumer {
            kind: "MaasMachine",
            namespace: None,
            name: consumer,
            uid: &uid,
        }),
        Some(release),
    );
    maas.set_workload_annotations(host, &annotations)
        .await
        .unwrap();
    maas.update_hostname(host, &format!("node-{consumer}"))
        .await
        .unwrap();
    maas.deploy(
        host,
        &DeployRequest {
            distro_series: Some("ubuntu/jammy".into()),
            agent_name: Some(INSTALLATION.into()),
            ..DeployRequest::default()
        },
    )
    .await
    .unwrap();
    let api: Api<MaasHost> = Api::namespaced(client.clone(), ns);
    let status = serde_json::json!({ "status": {
        "allocation": { "agentName": INSTALLATION, "consumerUID": uid },
        "provisioningState": "Deployed",
    }});
    api.patch_status(host, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_installation_of_the_earlier_version_is_taken_over_with_no_maas_operation() {
    let (env, client, ns) = api_server("upgrade").await;
    let sim = instant_sim(4).await;
    let state = sim.state();
    let maas = maas_of(&sim);

    // The hosts exist (imported by the earlier version); nothing is asked of them yet.
    let importer = start_in_process(&env, &sim, &ns, &[]).await;
    let ids = import_hosts(&client, &ns, 4).await;
    importer.stop().await;
    let (kept, released, gone, fresh) = (&ids[0], &ids[1], &ids[2], &ids[3]);

    // The earlier version deployed three servers. `gone`'s MaasMachine was deleted while no
    // gateway ran: its claim is gone, its allocation recorded.
    for (host, consumer, erase) in [
        (kept, "m-kept", EraseMode::Secure),
        (released, "m-released", EraseMode::Quick),
        (gone, "m-gone", EraseMode::Full),
    ] {
        deployed_by_the_earlier_version(&client, &maas, &ns, host, consumer, &policy(erase)).await;
    }
    release_request(&client, &ns, gone).await;
    let before = changes(&state);

    // This version takes over, workload annotations off (the default).
    let gateway = start_in_process(&env, &sim, &ns, &[]).await;
    eventually(
        "the earlier version's deployments reported",
        Duration::from_secs(30),
        || async {
            let mut ready = true;
            for id in [kept, released] {
                let h = host(&client, &ns, id).await;
                ready &= provisioning_state(&h).as_deref() == Some("Deployed");
            }
            ready.then_some(())
        },
    )
    .await;
    // The orphaned claim's server goes back with the erase its annotations record.
    let gone_view = eventually("gone released", Duration::from_secs(30), || async {
        let view = state.machine(gone).unwrap();
        (view.status == NodeStatus::Ready).then_some(view)
    })
    .await;
    let last = gone_view.releases.last().unwrap();
    assert!(
        last.erase && !last.secure_erase && !last.quick_erase,
        "released with the recorded Full erase: {:?}",
        gone_view.releases
    );
    // Several sweeps and resyncs later, nothing else was done to any server.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let mut expected = before.clone();
    *expected.entry("machine.release".into()).or_default() += 1;
    assert_eq!(changes(&state), expected, "only the orphan's release");
    for id in [kept, released] {
        let view = state.machine(id).unwrap();
        assert_eq!(
            (view.status, view.agent_name.as_str(), view.power_on_count),
            (NodeStatus::Deployed, INSTALLATION, 1),
            "{id} kept as the earlier version deployed it"
        );
    }

    // Its consumer lets `released` go: released with the erase its annotations record.
    release_request(&client, &ns, released).await;
    let view = eventually("released", Duration::from_secs(30), || async {
        let view = state.machine(released).unwrap();
        (view.status == NodeStatus::Ready).then_some(view)
    })
    .await;
    let last = view.releases.last().unwrap();
    assert!(
        last.erase && last.quick_erase && !last.secure_erase,
        "released with the recorded Quick erase: {:?}",
        view.releases
    );

    // A new provisioning carries this version's identity, and no annotation call.
    let annotations_before = changes(&state)
        .get("machine.set_workload_annotations")
        .copied();
    request_deploy(&client, &ns, fresh, "m-fresh").await;
    eventually("fresh deployed", Duration::from_secs(30), || async {
        let h = host(&client, &ns, fresh).await;
        (provisioning_state(&h).as_deref() == Some("Deployed")).then_some(())
    })
    .await;
    let view = state.machine(fresh).unwrap();
    assert_eq!(
        view.agent_name,
        identity::agent_name(INSTALLATION, &ns, fresh, &ReleasePolicy::default())
    );
    assert!(view.owner_data.is_empty(), "{:?}", view.owner_data);
    assert_eq!(
        changes(&state)
            .get("machine.set_workload_annotations")
            .copied(),
        annotations_before
    );
    assert_eq!(
        state.machine(kept).unwrap().status,
        NodeStatus::Deployed,
        "still untouched"
    );

    gateway.stop().await;
    sim.shutdown().await;
}
