//! Switching from CAPMAAS in place, as the gateway sees it: servers CAPMAAS allocated and
//! deployed (no `agent_name`) are taken over by the hosts their MaasMachines claim again, with
//! no allocate, deploy, release or power operation; what is not ours is left alone and
//! reported. Against a real API server and the MAAS simulator.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use maas_api_client::{AllocateRequest, DeployRequest, MaasClient};
use maas_sim::{NodeStatus, SimConfig, Simulator};
use support::*;

/// The MAAS operations a takeover must never send for a server it takes.
const OPERATIONS: [&str; 5] = [
    "machines.allocate",
    "machine.deploy",
    "machine.release",
    "machine.power_on",
    "machine.power_off",
];

/// What CAPMAAS's machine service does: allocate (it gives constraints; here the exact
/// machine) with no `agent_name`, then deploy with the bootstrap data.
async fn provision_like_capmaas(maas: &MaasClient, system_id: &str) {
    maas.allocate(&AllocateRequest {
        system_id: Some(system_id.to_owned()),
        ..AllocateRequest::default()
    })
    .await
    .unwrap();
    maas.deploy(
        system_id,
        &DeployRequest {
            distro_series: Some("ubuntu/jammy".into()),
            user_data: Some(b"#cloud-config\n".to_vec()),
            ..DeployRequest::default()
        },
    )
    .await
    .unwrap();
}

fn provisioned(h: &capmaas_api::MaasHost) -> Option<(String, String)> {
    let conditions = h.status.as_ref()?.conditions.as_ref()?;
    capmaas_runtime::get_condition(conditions, "Provisioned")
        .map(|c| (c.reason.clone(), c.message.clone()))
}

fn operations(counts: &BTreeMap<String, u64>) -> BTreeMap<&'static str, u64> {
    OPERATIONS
        .iter()
        .filter_map(|op| counts.get(*op).map(|n| (*op, *n)))
        .collect()
}

#[tokio::test]
async fn capmaas_allocations_are_taken_over_and_nothing_else() {
    let (env, client, ns) = api_server("takeover").await;
    let admin = maas_sim::ApiKey::generate("admin", true);
    let bob = maas_sim::ApiKey::generate("bob", false);
    let sim = Simulator::start(SimConfig {
        machines: 4,
        api_keys: vec![admin, bob.clone()],
        ..SimConfig::instant()
    })
    .await
    .unwrap();
    let state = sim.state();
    let mut ids: Vec<String> = state.machines().into_iter().map(|m| m.system_id).collect();
    ids.sort();
    let (recorded, unrecorded, bobs) = (&ids[0], &ids[1], &ids[2]);

    // CAPMAAS, with the same key as ours, provisioned two servers; another user took a third.
    let capmaas = maas_of(&sim);
    provision_like_capmaas(&capmaas, recorded).await;
    provision_like_capmaas(&capmaas, unrecorded).await;
    maas_as(&sim.url(), &bob.credential())
        .allocate(&AllocateRequest {
            system_id: Some(bobs.clone()),
            ..AllocateRequest::default()
        })
        .await
        .unwrap();
    eventually(
        "CAPMAAS's servers deployed",
        Duration::from_secs(20),
        || async {
            [recorded, unrecorded]
                .iter()
                .all(|id| state.machine(id).unwrap().status == NodeStatus::Deployed)
                .then_some(())
        },
    )
    .await;

    let gateway = start_in_process(&env, &sim, &ns, &[]).await;
    import_hosts(&client, &ns, 4).await;
    state.reset_counts();

    // The MaasMachine that recorded `recorded` claims its host again; another claims
    // `unrecorded` without having recorded it; a third asks for bob's server as its own.
    request_takeover(&client, &ns, recorded, "cp-0").await;
    request_deploy(&client, &ns, unrecorded, "w-0").await;
    request_takeover(&client, &ns, bobs, "w-1").await;

    let taken = eventually("taken over", Duration::from_secs(20), || async {
        let h = host(&client, &ns, recorded).await;
        let allocation = h.status.as_ref()?.allocation.clone()?;
        (provisioning_state(&h).as_deref() == Some("Deployed")
            && allocation.taken_over == Some(true))
        .then_some(allocation)
    })
    .await;
    assert_eq!(taken.consumer_uid.as_deref(), Some("uid-cp-0"));
    assert!(is_identity_of(
        taken.agent_name.as_deref().unwrap(),
        &ns,
        recorded
    ));
    // Its identity from now on: our workload annotations on the MAAS machine.
    let server = state.machine(recorded).unwrap();
    assert_eq!(
        server
            .owner_data
            .get("capmaas.installation")
            .map(String::as_str),
        Some(INSTALLATION),
        "{:?}",
        server.owner_data
    );

    for (id, expected) in [
        (unrecorded, "no MaasMachine records it in spec.systemID"),
        (bobs, "allocated by MAAS user \"bob\""),
    ] {
        eventually("refusal reported", Duration::from_secs(20), || async {
            let (reason, message) = provisioned(&host(&client, &ns, id).await)?;
            (reason == "HeldByOther" && message.contains(expected)).then_some(())
        })
        .await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        operations(&state.call_counts()),
        BTreeMap::new(),
        "no allocate, deploy, release or power operation during the takeover"
    );
    for (id, owner, status) in [
        (recorded, "admin", NodeStatus::Deployed),
        (unrecorded, "admin", NodeStatus::Deployed),
        (bobs, "bob", NodeStatus::Allocated),
    ] {
        let server = state.machine(id).unwrap();
        assert_eq!(
            (server.owner.as_deref(), server.status),
            (Some(owner), status)
        );
    }

    // Taken over, it is ours to release when its MaasMachine goes: once.
    clear_provisioning(&client, &ns, recorded, "cp-0").await;
    eventually("released", Duration::from_secs(20), || async {
        (state.machine(recorded).unwrap().status == NodeStatus::Ready).then_some(())
    })
    .await;
    // The hosts that were refused give up their claims: nothing of theirs is touched.
    release_request(&client, &ns, unrecorded).await;
    release_request(&client, &ns, bobs).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        operations(&state.call_counts()),
        BTreeMap::from([("machine.release", 1)])
    );
    assert_eq!(
        state.machine(unrecorded).unwrap().status,
        NodeStatus::Deployed
    );
    assert_eq!(state.machine(bobs).unwrap().status, NodeStatus::Allocated);
    gateway.stop().await;
}
