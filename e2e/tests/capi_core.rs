//! Cluster API core, built from Go modules, runs against the management API server and
//! treats our kinds as an infrastructure provider: it adopts MaasClusters and MaasMachines
//! and clones MaasMachineTemplates for a MachineDeployment.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use capmaas_e2e::{ClusterSpec, apply, capi, dynamic_api, wait_for};
use capmaas_testenv::TestEnv;
use kube::api::{Api, DynamicObject, ListParams};

async fn maas_api(client: &kube::Client, ns: &str, kind: &str) -> Api<DynamicObject> {
    dynamic_api(
        client,
        ns,
        "infrastructure.cluster.x-k8s.io",
        "v1beta1",
        kind,
    )
    .await
    .unwrap()
}

fn owned_by(object: &DynamicObject, kind: &str) -> bool {
    object
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == kind)
}

#[tokio::test]
async fn capi_core_adopts_our_infrastructure_objects_and_clones_templates() {
    let env = TestEnv::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut manager = capi::start_core_manager(&env, dir.path()).await.unwrap();
    let client = env.client();
    let ns = env.create_namespace("capi").await.unwrap();
    let spec = ClusterSpec::story(&ns);
    for object in spec.objects() {
        apply(&client, &object)
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", manager.log_tail(30)));
    }

    let clusters = maas_api(&client, &ns, "MaasCluster").await;
    wait_for(
        "CAPI to own the MaasCluster",
        Duration::from_secs(60),
        Duration::from_millis(250),
        || async {
            Ok(clusters
                .get_opt("story")
                .await
                .unwrap()
                .filter(|c| owned_by(c, "Cluster")))
        },
    )
    .await
    .unwrap();

    let machines = maas_api(&client, &ns, "MaasMachine").await;
    let all = wait_for(
        "CAPI to create and own 8 MaasMachines",
        Duration::from_secs(90),
        Duration::from_millis(500),
        || async {
            let list = machines.list(&ListParams::default()).await.unwrap();
            let owned = list.items.iter().filter(|m| owned_by(m, "Machine")).count();
            Ok((owned == 8).then_some(list.items))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", manager.log_tail(40)));
    let cloned = all
        .iter()
        .filter(|m| {
            m.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with("story-workers"))
        })
        .count();
    assert_eq!(
        cloned, 5,
        "the MachineDeployment's MaasMachines are cloned from the template"
    );
    manager.ensure_running().unwrap();
}
