//! `clusterctl move` of a provisioned cluster from one management cluster to another, with the
//! real clusterctl. The target runs its own CAPI core and our six binaries; the source's keep
//! running through the move. Every deployed server stays deployed and is claimed again on the
//! other side: nothing is allocated, deployed, released or erased in MAAS, the control-plane
//! DNS name and the pool's reserved range stay, and the Machines are Running again.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use capmaas_e2e::{ClusterSpec, Harness, HarnessConfig, WorkerAddresses, wait_for};
use capmaas_testenv::TestEnv;
use common::{
    LONG, POLL, declare, describe_rollout, list_infra, maas_client, running_machines,
    wait_argocd_healthy, wait_running,
};
use k8s_openapi::api::core::v1::Event;
use kube::api::ListParams;
use maas_sim::NodeStatus;

/// MaasMachine name → `spec.systemID`, for those that have one.
async fn system_ids(h: &Harness, ns: &str) -> BTreeMap<String, String> {
    list_infra(h, ns, "MaasMachine")
        .await
        .into_iter()
        .filter_map(|m| {
            Some((
                m.metadata.name.clone()?,
                m.data["spec"]["systemID"].as_str()?.to_owned(),
            ))
        })
        .collect()
}

fn deployed_servers(h: &Harness) -> Vec<String> {
    let mut ids: Vec<String> = h
        .sim
        .state()
        .machines()
        .into_iter()
        .filter(|m| m.status == NodeStatus::Deployed)
        .map(|m| m.system_id)
        .collect();
    ids.sort();
    ids
}

/// The Events of `ns` in both management clusters (who released or deployed what), for a
/// failure.
async fn provider_events(h: &Harness, ns: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let sides = [
        ("source", h.source().map(TestEnv::client)),
        ("target", Some(h.management.client())),
    ];
    for (side, client) in sides {
        let Some(client) = client else { continue };
        let events: kube::Api<Event> = kube::Api::namespaced(client, ns);
        for e in events.list(&ListParams::default()).await.unwrap().items {
            let _ = writeln!(
                out,
                "{side}: {} {}: {}",
                e.involved_object.name.unwrap_or_default(),
                e.reason.unwrap_or_default(),
                e.message.unwrap_or_default()
            );
        }
    }
    out
}

/// MAAS operations that change a server, a DNS name or a reserved range.
fn harmful(op: &str) -> bool {
    let (_, action) = op.split_once('.').unwrap_or((op, ""));
    let changing = !matches!(action, "read" | "list");
    changing
        && [
            "allocate",
            "deploy",
            "release",
            "power",
            "erase",
            "dnsresource",
            "iprange",
        ]
        .iter()
        .any(|word| op.contains(word))
}

#[tokio::test]
async fn a_provisioned_cluster_moves_and_keeps_its_servers() {
    // Orphans are released 4 s after they are seen (5 min by default): a gateway that took
    // another management cluster's allocations (or a moved one's, before its machine claims it
    // again) for orphans would release them within the test. Not shorter: the target's import
    // of the namespace's 20 hosts must finish within it on a loaded machine.
    let mut h = Harness::start(HarnessConfig {
        gateway_args: vec![
            "--orphan-grace-period=4s".into(),
            "--orphan-sweep-interval=1s".into(),
        ],
        ..HarnessConfig::default()
    })
    .await
    .unwrap();
    let ns = h.management.create_namespace("move").await.unwrap();
    let mut spec = ClusterSpec::story(&ns);
    spec.control_plane = 1;
    spec.workers = 2;
    spec.worker_addresses = Some(WorkerAddresses::in_default_subnet(4));
    declare(&h, &spec).await;
    wait_running(&mut h, &ns, 3).await;
    wait_argocd_healthy(&h, &ns, &["MaasCluster", "MaasMachine", "MaasIPPool"]).await;

    let identities = system_ids(&h, &ns).await;
    assert_eq!(identities.len(), 3, "{identities:?}");
    let servers = deployed_servers(&h);
    let maas = maas_client(&h);
    let dns_before = maas
        .list_dns_resources(&maas_api_client::DnsResourceFilter::default())
        .await
        .unwrap();
    let ranges_before = maas.list_ipranges().await.unwrap();
    let applied_before = h.sim.state().applied_counts();

    // The provider is installed in the target well before the move (here: several of its
    // gateway's sweeps); it must leave the source's servers alone.
    if let Err(e) = h.start_new_management().await {
        panic!("{e}\n{}", h.logs(40));
    }
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert_eq!(deployed_servers(&h), servers, "released before the move");
    let log = match h.clusterctl_move(&ns) {
        Ok(log) => log,
        Err(e) => panic!("{e}\n{}", h.logs(40)),
    };
    assert!(log.contains("Moving Cluster API objects"), "{log}");

    // The target: the same Machines Running again, each on the server it had.
    let running = wait_for("3 Machines Running again", LONG, POLL, || async {
        Ok((running_machines(&h, &ns).await.len() == 3).then_some(()))
    })
    .await;
    if let Err(e) = running {
        panic!("{e}\n{}", describe_rollout(&h, &ns).await);
    }
    let reclaimed = wait_for(
        "every MaasMachine to claim its host again and be Ready",
        LONG,
        POLL,
        || async {
            let machines = list_infra(&h, &ns, "MaasMachine").await;
            let ready = machines.iter().all(|m| {
                m.data["status"]["hostRef"]["name"].is_string()
                    && m.data["status"]["conditions"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|c| c["type"] == "Ready" && c["status"] == "True")
            });
            Ok((machines.len() == 3 && ready).then_some(()))
        },
    )
    .await;
    if let Err(e) = reclaimed {
        panic!("{e}\n{}", h.logs(40));
    }
    assert_eq!(system_ids(&h, &ns).await, identities);
    wait_argocd_healthy(&h, &ns, &["MaasCluster", "MaasMachine", "MaasIPPool"]).await;

    // The source's controllers ran through the move; give them a pass more, then stop them.
    tokio::time::sleep(Duration::from_secs(5)).await;
    h.retire_source().await;

    // MAAS: nothing was allocated, deployed, released or erased, the DNS name and the range
    // are the ones made before.
    let applied_after = h.sim.state().applied_counts();
    let changed: BTreeMap<&String, u64> = applied_after
        .iter()
        .map(|(op, n)| (op, n - applied_before.get(op).copied().unwrap_or(0)))
        .filter(|(op, n)| *n > 0 && harmful(op))
        .collect();
    assert!(
        changed.is_empty(),
        "MAAS changed by the move: {changed:?}\n{}",
        provider_events(&h, &ns).await
    );
    assert_eq!(deployed_servers(&h), servers);
    let dns_after = maas
        .list_dns_resources(&maas_api_client::DnsResourceFilter::default())
        .await
        .unwrap();
    assert_eq!(
        format!("{dns_after:?}"),
        format!("{dns_before:?}"),
        "DNS resources changed"
    );
    assert_eq!(
        format!("{:?}", maas.list_ipranges().await.unwrap()),
        format!("{ranges_before:?}"),
        "IP ranges changed"
    );

    // The source holds none of the moved objects any more; its hosts (not moved) stay.
    let source = h.source().unwrap().client();
    for kind in [
        "MaasMachine",
        "MaasCluster",
        "MaasIPPool",
        "MaasDataTemplate",
    ] {
        let api = common::api(
            &source,
            &ns,
            "infrastructure.cluster.x-k8s.io",
            "v1beta1",
            kind,
        )
        .await;
        let left = api.list(&ListParams::default()).await.unwrap().items;
        assert!(left.is_empty(), "{kind} left in the source: {left:?}");
    }
    common::assert_rbac_sufficient(&h);
}
