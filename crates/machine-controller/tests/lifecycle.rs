//! Pause, and node reuse: a deleted machine's host is reserved for its MachineDeployment,
//! preferred by the deployment's next machine, refused to other owners, free after expiry.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use capmaas_api::conditions::{self as cond, reasons};
use capmaas_api::{MaasHost, keys};
use capmaas_testenv::{TestEnv, eventually};
use common::*;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

#[tokio::test]
async fn pause_and_node_reuse() {
    let env = TestEnv::without_controller_manager().await.unwrap();
    let client = env.client();
    let _controller = start_controller(&env, None, 4).await;

    // Paused Cluster: the machine reports it and touches nothing, not even its finalizer.
    let paused = env.create_namespace("mc-pause").await.unwrap();
    create_cluster(&client, &paused, true, true).await;
    create_host(&client, &paused, "h1", "az1", 4, 8192).await;
    create_machine_pair(&client, &paused, "p1", Some("b"), None, json!({})).await;
    let mm = eventually("the Paused condition", Duration::from_secs(30), || async {
        get_mm(&client, &paused, "p1")
            .await
            .filter(|m| condition(m, cond::PAUSED).is_some_and(|c| c.status == "True"))
    })
    .await;
    assert!(mm.finalizers().is_empty());
    assert_eq!(holder(&client, &paused, "h1").await, None);
    // Unpausing the Cluster (a watched change) resumes at once.
    set_cluster_paused(&client, &paused, false).await;
    until_held_by(&client, &paused, "h1", "p1", "the claim after unpausing").await;
    // The claim is written before the status of the same reconcile: read until it shows.
    let mm = eventually(
        "Paused=False after unpausing",
        Duration::from_secs(30),
        || async {
            get_mm(&client, &paused, "p1")
                .await
                .filter(|m| condition(m, cond::PAUSED).is_some_and(|c| c.status == "False"))
        },
    )
    .await;
    assert!(
        mm.finalizers()
            .contains(&keys::FINALIZER_MAAS_MACHINE.to_owned())
    );

    // Node reuse.
    let ns = env.create_namespace("mc-reuse").await.unwrap();
    create_cluster(&client, &ns, true, false).await;
    let _gateway = start_gateway(&client, &ns);
    Api::<capmaas_api::MaasMachineTemplate>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasMachineTemplate",
            "metadata": {"name": "workers-v1"},
            "spec": {"nodeReuse": true, "nodeReuseTTLSeconds": 600,
                     "template": {"spec": {"minCPU": 2, "minMemory": 4096, "image": "ubuntu/jammy"}}}
        })).unwrap())
        .await
        .unwrap();
    let (md, ms) = create_deployment(&client, &ns, "workers", "workers-v1").await;
    create_host(&client, &ns, "big", "az1", 16, 65536).await;
    create_machine_pair(&client, &ns, "w1", Some("b"), Some(&ms), json!({})).await;
    eventually("w1 provisioned on big", Duration::from_secs(30), || async {
        get_mm(&client, &ns, "w1")
            .await
            .and_then(|m| m.spec.provider_id)
            .filter(|p| p.ends_with("/sys-big"))
    })
    .await;

    // A remediation's reboot request left on the host (its MaasRemediation deleted without
    // its finalizer's cleanup) goes with the claim: the next machine's server is not
    // power-cycled for an old one.
    let leftover = format!("{}maasremediation-gone", keys::ANNOTATION_REBOOT_PREFIX);
    Api::<capmaas_api::MaasHost>::namespaced(client.clone(), &ns)
        .patch(
            "big",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"metadata": {"annotations": {&leftover: "ns/w1"}}})),
        )
        .await
        .unwrap();

    // Deleting w1 leaves a reservation for the MachineDeployment.
    delete_mm(&client, &ns, "w1").await;
    let reserved = host(&client, &ns, "big").await;
    assert!(reserved.spec.consumer_ref.is_none());
    assert!(
        !reserved.annotations().contains_key(&leftover),
        "the reboot request is cleared with the claim"
    );
    let reservation = reservation_for(&reserved, "MachineDeployment", &md.uid().unwrap());
    let ttl = reservation.expires_at.0.as_second() - jiff::Timestamp::now().as_second();
    assert!((500..=600).contains(&ttl), "expires in {ttl}s");
    assert_eq!(reuse_label(&reserved), Some("md-workers"));

    // The deployment's next machine prefers the reserved host over a smaller free one.
    create_host(&client, &ns, "small", "az1", 2, 4096).await;
    create_machine_pair(&client, &ns, "w2", Some("b"), Some(&ms), json!({})).await;
    until_held_by(&client, &ns, "big", "w2", "w2 on the reserved host").await;
    let big = host(&client, &ns, "big").await;
    assert!(
        big.spec.reservation.is_none(),
        "taken reservations are cleared"
    );
    assert!(!big.labels().contains_key(keys::LABEL_NODE_REUSE));
    eventually("a HostReused event", Duration::from_secs(10), || async {
        (!events(&client, &ns, "w2", reasons::HOST_REUSED)
            .await
            .is_empty())
        .then_some(())
    })
    .await;

    // Reserved again; a machine of another owner that only fits the big host must wait.
    delete_mm(&client, &ns, "w2").await;
    create_machine_pair(&client, &ns, "other", Some("b"), None, json!({"minCPU": 8})).await;
    let waiting = no_host_available(&client, &ns, "other").await;
    let message = &condition(&waiting, cond::HOST_ASSOCIATED).unwrap().message;
    assert!(
        message.contains("1 reserved for another owner"),
        "{message}"
    );
    assert_eq!(holder(&client, &ns, "big").await, None);

    // The reservation expires (moved into the past, as time would): the host is free again.
    Api::<MaasHost>::namespaced(client.clone(), &ns)
        .patch(
            "big",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"reservation": {"expiresAt": "2020-01-01T00:00:00Z"}}})),
        )
        .await
        .unwrap();
    eventually(
        "other on the formerly reserved host",
        Duration::from_secs(30),
        || async { (holder(&client, &ns, "big").await.as_deref() == Some("other")).then_some(()) },
    )
    .await;
}
