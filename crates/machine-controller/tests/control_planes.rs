//! Control planes of any kind: machine-controller, running with exactly the RBAC of
//! `deploy/base`, releases the machines of a control plane that is not a KubeadmControlPlane
//! and keeps their hosts for it (node reuse), whether or not its RBAC names the kind.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use capmaas_api::{MaasHost, MaasMachine, keys};
use capmaas_runtime::embedded::Running;
use capmaas_testenv::objects::{apply, deploy_base_rbac};
use capmaas_testenv::{TestEnv, eventually};
use common::*;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, ResourceExt};
use machine_controller::{BINARY, ControllerArgs};
use serde_json::{Value, json};

/// A stand-in CRD for a control-plane provider's kind: served, any fields kept.
fn control_plane_crd(group: &str, version: &str, kind: &str) -> CustomResourceDefinition {
    let plural = format!("{}s", kind.to_ascii_lowercase());
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "group": group, "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.to_ascii_lowercase(), "listKind": format!("{kind}List")},
            "versions": [{"name": version, "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    }))
    .unwrap()
}

/// deploy/base's namespace, and machine-controller's ServiceAccount and RBAC.
async fn apply_machine_controller_rbac(client: &Client) {
    let documents = deploy_base_rbac(&["machine-controller"]).unwrap();
    for document in &documents {
        apply(client, document, "test").await.unwrap();
    }
}

/// machine-controller in-process, authenticated as its ServiceAccount: RBAC applies.
async fn start_as_service_account(env: &TestEnv) -> Running {
    let (yaml, _) = env
        .service_account_kubeconfig("capmaas-system", "capmaas-machine-controller")
        .await
        .unwrap();
    let kubeconfig = Kubeconfig::from_yaml(&yaml).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    let args = ControllerArgs::default();
    Running::start(BINARY, config, &["--concurrency=4"], move |term| {
        machine_controller::run(term, args.clone())
    })
    .await
    .unwrap()
}

async fn create_dynamic(
    client: &Client,
    ns: &str,
    crd: &CustomResourceDefinition,
    body: Value,
) -> DynamicObject {
    let api = capmaas_testenv::objects::kind_api(
        client,
        ns,
        &format!("{}/{}", crd.spec.group, crd.spec.versions[0].name),
        &crd.spec.names.kind,
    )
    .await
    .unwrap();
    api.create(
        &PostParams::default(),
        &serde_json::from_value(body).unwrap(),
    )
    .await
    .unwrap()
}

async fn create_template(client: &Client, ns: &str, name: &str) {
    Api::<capmaas_api::MaasMachineTemplate>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasMachineTemplate",
            "metadata": {"name": name},
            "spec": {"nodeReuse": true, "nodeReuseTTLSeconds": 600,
                     "template": {"spec": {"minCPU": 2, "minMemory": 4096, "image": "ubuntu/jammy"}}}
        })).unwrap())
        .await
        .unwrap();
}

/// Provisions `machine` (on the only free host, `host_name`), deletes it, and returns the host
/// once machine-controller has released it.
async fn provision_then_delete(
    client: &Client,
    ns: &str,
    machine: &str,
    host_name: &str,
) -> MaasHost {
    eventually(
        &format!("{machine} provisioned on {host_name}"),
        Duration::from_secs(30),
        || async {
            get_mm(client, ns, machine)
                .await
                .and_then(|m| m.spec.provider_id)
                .filter(|p| p.ends_with(&format!("/sys-{host_name}")))
        },
    )
    .await;
    Api::<MaasMachine>::namespaced(client.clone(), ns)
        .delete(machine, &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        &format!("{machine} released and gone"),
        Duration::from_secs(30),
        || async { get_mm(client, ns, machine).await.is_none().then_some(()) },
    )
    .await;
    host(client, ns, host_name).await
}

#[tokio::test]
async fn machines_of_any_control_plane_kind_are_released_and_their_hosts_kept_for_it() {
    let env = TestEnv::without_controller_manager().await.unwrap();
    let client = env.client();
    // RKE2 is one of the kinds deploy/base names; Acme's is one nobody has heard of.
    let rke2 = control_plane_crd(
        "controlplane.cluster.x-k8s.io",
        "v1beta1",
        "RKE2ControlPlane",
    );
    let acme = control_plane_crd("controlplane.acme.example", "v1alpha1", "AcmeControlPlane");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in [&rke2, &acme] {
        crds.create(&PostParams::default(), crd).await.unwrap();
    }
    eventually(
        "the stand-in CRDs served",
        Duration::from_secs(30),
        || async {
            for crd in [&rke2, &acme] {
                let version = format!("{}/{}", crd.spec.group, crd.spec.versions[0].name);
                capmaas_testenv::objects::kind_api(
                    &client,
                    "default",
                    &version,
                    &crd.spec.names.kind,
                )
                .await
                .ok()?;
            }
            Some(())
        },
    )
    .await;
    apply_machine_controller_rbac(&client).await;
    let controller = start_as_service_account(&env).await;

    let ns = env.create_namespace("mc-cp").await.unwrap();
    create_cluster(&client, &ns, true, false).await;
    let _gateway = start_gateway(&client, &ns);
    create_template(&client, &ns, "cp-v1").await;

    // A kind our RBAC covers: its current machine template is read from the object itself
    // (the MaasMachine carries no cloned-from annotation to fall back on).
    let cp = create_dynamic(&client, &ns, &rke2, json!({
        "apiVersion": "controlplane.cluster.x-k8s.io/v1beta1", "kind": "RKE2ControlPlane",
        "metadata": {"name": "rke"},
        "spec": {"machineTemplate": {"infrastructureRef": {
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasMachineTemplate", "name": "cp-v1"}}}
    }))
    .await;
    create_host(&client, &ns, "cp-a", "az1", 8, 16384).await;
    create_machine_pair(&client, &ns, "rke-0", Some("b"), Some(&cp), json!({})).await;
    let released = provision_then_delete(&client, &ns, "rke-0", "cp-a").await;
    assert!(released.spec.consumer_ref.is_none());
    reservation_for(&released, "RKE2ControlPlane", &cp.uid().unwrap());
    assert_eq!(reuse_label(&released), Some("cp-rke"));
    // The control plane's next machine takes its server back over a smaller free one.
    create_host(&client, &ns, "cp-small", "az1", 2, 4096).await;
    create_machine_pair(&client, &ns, "rke-1", Some("b"), Some(&cp), json!({})).await;
    until_held_by(
        &client,
        &ns,
        "cp-a",
        "rke-1",
        "rke-1 on the reserved server",
    )
    .await;

    // A kind our RBAC does not name: reading it is refused (403), which neither blocks the
    // release nor loses the reservation: the cloned-from annotations name the template.
    let acme_cp = create_dynamic(
        &client,
        &ns,
        &acme,
        json!({
            "apiVersion": "controlplane.acme.example/v1alpha1", "kind": "AcmeControlPlane",
            "metadata": {"name": "acme"}, "spec": {}
        }),
    )
    .await;
    create_host(&client, &ns, "cp-b", "az2", 8, 16384).await;
    create_machine_pair(
        &client,
        &ns,
        "acme-0",
        Some("b"),
        Some(&acme_cp),
        json!({"minCPU": 8}),
    )
    .await;
    Api::<MaasMachine>::namespaced(client.clone(), &ns)
        .patch("acme-0", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"annotations": {
            keys::ANNOTATION_CLONED_FROM_NAME: "cp-v1",
            keys::ANNOTATION_CLONED_FROM_GROUP_KIND: machine_controller::reuse::TEMPLATE_GROUP_KIND,
        }}})))
        .await
        .unwrap();
    let released = provision_then_delete(&client, &ns, "acme-0", "cp-b").await;
    reservation_for(&released, "AcmeControlPlane", &acme_cp.uid().unwrap());
    drop(controller);
}
