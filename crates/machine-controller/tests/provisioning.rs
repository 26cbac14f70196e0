//! Happy path against real API servers: a MaasMachine gets a host, a deployment request, a
//! providerID, status, Events, and its workload Node (in a second API server) gets the
//! providerID; deleting it clears the request, waits for the release, then frees the host.
//! And the guard on workload kubeconfigs: one that would run a command is refused, never run.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use capmaas_api::common::MachineAddressType;
use capmaas_api::conditions as cond;
use capmaas_api::{MaasHost, MaasMachine, keys};
use capmaas_runtime::controller::workload::reason::KUBECONFIG_REFUSED;
use capmaas_testenv::{TestEnv, eventually};
use common::*;
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

#[tokio::test]
async fn machine_is_provisioned_linked_to_its_node_and_released() {
    let (management, workload) = tokio::join!(TestEnv::start(), TestEnv::start());
    let (management, workload) = (management.unwrap(), workload.unwrap());
    let client = management.client();
    let ns = management.create_namespace("mc-happy").await.unwrap();

    // The workload cluster: a kubeconfig Secret, and the Node the kubelet registered.
    create_kubeconfig_secret(&client, &ns, &workload.kubeconfig_yaml().unwrap()).await;
    let nodes: Api<Node> = Api::all(workload.client());
    nodes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "node-small"}})).unwrap(),
        )
        .await
        .unwrap();

    create_cluster(&client, &ns, true, false).await;
    create_host(&client, &ns, "node-big", "az1", 16, 65536).await;
    create_host(&client, &ns, "node-small", "az1", 4, 8192).await;
    let gateway = start_gateway(&client, &ns);
    let _controller = start_controller(&management, Some(&ns), 4).await;
    create_machine_pair(
        &client,
        &ns,
        "m1",
        Some("m1-bootstrap"),
        None,
        json!({"deployInMemory": true}),
    )
    .await;

    let mm = eventually(
        "the MaasMachine to be provisioned",
        Duration::from_secs(60),
        || async {
            get_mm(&client, &ns, "m1")
                .await
                .filter(|m| m.status.as_ref().and_then(|s| s.ready) == Some(true))
        },
    )
    .await;
    assert_eq!(
        mm.spec.provider_id.as_deref(),
        Some("maas:///az1/sys-node-small"),
        "smallest fit"
    );
    assert_eq!(mm.spec.system_id.as_deref(), Some("sys-node-small"));
    assert!(
        mm.finalizers()
            .contains(&keys::FINALIZER_MAAS_MACHINE.to_owned())
    );
    let status = mm.status.clone().unwrap();
    assert_eq!(status.initialization.unwrap().provisioned, Some(true));
    assert_eq!(status.host_ref.unwrap().name, "node-small");
    assert_eq!(status.failure_domain.as_deref(), Some("az1"));
    let addresses = status.addresses.unwrap();
    assert!(
        addresses
            .iter()
            .any(|a| a.type_ == MachineAddressType::InternalIp)
    );
    assert!(
        addresses
            .iter()
            .any(|a| a.type_ == MachineAddressType::Hostname && a.address == "node-small")
    );
    assert_eq!(condition(&mm, cond::READY).unwrap().status, "True");
    assert_eq!(condition(&mm, cond::PAUSED).unwrap().status, "False");

    // The request the gateway executed.
    let host = Api::<MaasHost>::namespaced(client.clone(), &ns)
        .get("node-small")
        .await
        .unwrap();
    let request = host.spec.provisioning.clone().unwrap();
    assert_eq!(request.image, "ubuntu/jammy");
    assert!(request.deploy_in_memory);
    let user_data = request.user_data_secret_ref.unwrap();
    assert_eq!(
        (user_data.name.as_str(), user_data.key.as_str()),
        ("m1-bootstrap", "value")
    );
    assert_eq!(request.hostname.as_deref(), Some("node-small"));
    assert_eq!(host.spec.consumer_ref.unwrap().uid, mm.uid().unwrap());
    let big = Api::<MaasHost>::namespaced(client.clone(), &ns)
        .get("node-big")
        .await
        .unwrap();
    assert!(big.spec.consumer_ref.is_none());

    let node = eventually("the Node's providerID", Duration::from_secs(30), || async {
        nodes.get("node-small").await.ok().filter(|n| {
            n.spec
                .as_ref()
                .and_then(|s| s.provider_id.as_ref())
                .is_some()
        })
    })
    .await;
    assert_eq!(
        node.spec.unwrap().provider_id.as_deref(),
        Some("maas:///az1/sys-node-small")
    );
    for reason in ["HostClaimed", "MachineDeployed"] {
        eventually(
            &format!("event {reason}"),
            Duration::from_secs(10),
            || async { (!events(&client, &ns, "m1", reason).await.is_empty()).then_some(()) },
        )
        .await;
    }
    // The Node was there when the machine was provisioned: linked in the same reconcile and
    // said in the same Event.
    let deployed = events(&client, &ns, "m1", "MachineDeployed").await;
    let deployed_note = deployed[0].note.clone().unwrap_or_default();
    assert!(
        deployed_note.contains("set on Node node-small"),
        "{deployed_note}"
    );
    assert!(
        events(&client, &ns, "m1", "NodeProviderIDSet")
            .await
            .is_empty()
    );
    // The claim carried the deployment request: one write, one Event saying both.
    let claim_events = events(&client, &ns, "m1", "HostClaimed").await;
    let claim_note = claim_events[0].note.clone().unwrap_or_default();
    assert!(claim_note.contains("deployment with image"), "{claim_note}");
    assert!(
        events(&client, &ns, "m1", "MachineDeployStartedReason")
            .await
            .is_empty()
    );

    // Delete with the release held: the request goes, the claim and finalizer stay.
    gateway.hold_release.store(true, Ordering::SeqCst);
    Api::<MaasMachine>::namespaced(client.clone(), &ns)
        .delete("m1", &DeleteParams::default())
        .await
        .unwrap();
    let hosts_api: Api<MaasHost> = Api::namespaced(client.clone(), &ns);
    let releasing = eventually(
        "the host to be releasing",
        Duration::from_secs(30),
        || async {
            let h = hosts_api.get("node-small").await.unwrap();
            let state = h.status.as_ref().and_then(|s| s.provisioning_state);
            (h.spec.provisioning.is_none()
                && state == Some(capmaas_api::host::ProvisioningState::Releasing))
            .then_some(h)
        },
    )
    .await;
    assert!(
        releasing.spec.consumer_ref.is_some(),
        "claim kept until released"
    );
    let mm = get_mm(&client, &ns, "m1")
        .await
        .expect("finalizer holds the object");
    assert_eq!(
        condition(&mm, cond::MACHINE_DEPLOYED).unwrap().reason,
        "MachineTerminatedReason"
    );

    // Released: the claim goes, then the object.
    gateway.hold_release.store(false, Ordering::SeqCst);
    eventually(
        "the MaasMachine to be gone",
        Duration::from_secs(30),
        || async { get_mm(&client, &ns, "m1").await.is_none().then_some(()) },
    )
    .await;
    let host = hosts_api.get("node-small").await.unwrap();
    assert!(host.spec.consumer_ref.is_none());
    assert!(
        host.spec.reservation.is_none(),
        "no nodeReuse: no reservation"
    );
}

/// A `<cluster>-kubeconfig` whose user authenticates with an exec credential plugin (a script
/// that would create a marker file) is refused when the provisioned machine links its Node: a
/// Warning Event `KubeconfigRefused` on the MaasMachine names the problem without quoting the
/// kubeconfig, the machine stays provisioned, and the plugin never runs.
#[tokio::test]
async fn exec_plugin_kubeconfig_is_refused_and_never_run() {
    let env = TestEnv::without_controller_manager().await.unwrap();
    let client = env.client();
    let ns = env.create_namespace("mc-exec").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (kubeconfig, marker) = env.exec_plugin_kubeconfig_yaml(dir.path()).unwrap();
    create_kubeconfig_secret(&client, &ns, &kubeconfig).await;
    create_cluster(&client, &ns, true, false).await;
    create_host(&client, &ns, "node-x", "az1", 4, 8192).await;
    let _gateway = start_gateway(&client, &ns);
    let _controller = start_controller(&env, Some(&ns), 2).await;
    create_machine_pair(&client, &ns, "m1", Some("m1-bootstrap"), None, json!({})).await;

    let event = eventually(
        "a KubeconfigRefused Warning Event",
        Duration::from_secs(60),
        || async {
            events(&client, &ns, "m1", KUBECONFIG_REFUSED)
                .await
                .into_iter()
                .next()
        },
    )
    .await;
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    let note = event.note.unwrap_or_default();
    assert!(note.contains("exec credential plugin"), "{note}");
    assert!(
        note.contains(&format!("{ns}/{CLUSTER}-kubeconfig")),
        "{note}"
    );
    let plugin_dir = dir.path().display().to_string();
    assert!(
        !note.contains(&plugin_dir),
        "the kubeconfig is not quoted: {note}"
    );
    let mm = get_mm(&client, &ns, "m1").await.unwrap();
    assert_eq!(
        mm.status.as_ref().and_then(|s| s.ready),
        Some(true),
        "a workload problem does not undo the provisioning"
    );
    assert!(!marker.exists(), "the exec plugin must never run");
}
