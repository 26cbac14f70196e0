//! Hosted control planes against the real API server, with stand-ins: no Kamaji or k0smotron
//! runs here. The test installs a minimal CRD for the real kind name `KamajiControlPlane` (and one
//! for `StandInControlPlane`, a kind only `--hosted-control-plane-kinds` makes hosted), creates
//! the control-plane object and a Cluster pointing at it, and then acts as the provider itself:
//! it writes the endpoint the way the provider's source does (Kamaji: a merge patch of the
//! InfraCluster's `spec.controlPlaneEndpoint`; an unknown provider: the Cluster's).

use std::time::Duration;

use capmaas_api::capi::Cluster;
use capmaas_api::conditions as cond;
use capmaas_api::keys::FINALIZER_MAAS_CLUSTER;
use capmaas_api::{MaasCluster, MaasDNSRecord};
use capmaas_testenv::objects::namespaced_api;
use capmaas_testenv::{TestEnv, eventually};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use super::{WAIT, condition, create_cluster_with, merge, provisioned, wanted_condition};

/// The control-plane providers' API group.
const CONTROL_PLANE_GROUP: &str = "controlplane.cluster.x-k8s.io";
/// A kind no built-in list knows; the test's controller is started with it as a hosted kind.
pub(super) const STAND_IN_KIND: &str = "StandInControlPlane.controlplane.test.capmaas.io";

/// Minimal CRDs (any spec) for `KamajiControlPlane` and the stand-in kind.
pub(super) async fn install_stand_in_crds(env: &TestEnv) {
    let crd = |group: &str, version: &str, kind: &str, plural: &str| {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{plural}.{group}")},
            "spec": {
                "group": group,
                "names": {"kind": kind, "listKind": format!("{kind}List"), "plural": plural, "singular": plural.trim_end_matches('s')},
                "scope": "Namespaced",
                "versions": [{
                    "name": version, "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
                }]
            }
        })
    };
    let dir = tempfile::tempdir().unwrap();
    let yaml = [
        crd(
            CONTROL_PLANE_GROUP,
            "v1alpha2",
            "KamajiControlPlane",
            "kamajicontrolplanes",
        ),
        crd(
            "controlplane.test.capmaas.io",
            "v1",
            "StandInControlPlane",
            "standincontrolplanes",
        ),
    ]
    .iter()
    .map(|doc| serde_json::to_string(doc).unwrap())
    .collect::<Vec<_>>()
    .join("\n---\n");
    std::fs::write(dir.path().join("stand-ins.yaml"), yaml).unwrap();
    env.install_crd_dir(dir.path()).await.unwrap();
}

/// Creates the control-plane object `name` of `kind` (a stand-in: nothing reconciles it).
async fn create_control_plane(
    client: &Client,
    ns: &str,
    api_version: &str,
    kind: &str,
    plural: &str,
    name: &str,
) {
    let api = namespaced_api(client, ns, api_version, kind, plural);
    let object =
        json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}, "spec": {}});
    api.create(
        &PostParams::default(),
        &serde_json::from_value(object).unwrap(),
    )
    .await
    .unwrap();
}

/// The MaasCluster `name` once its `LoadBalancerReady` says it waits for the provider.
async fn waiting(clusters: &Api<MaasCluster>, name: &str) -> MaasCluster {
    wanted_condition(clusters, name, cond::LOAD_BALANCER_READY, |c| {
        c.reason == "WaitingForControlPlaneEndpoint"
    })
    .await;
    clusters.get(name).await.unwrap()
}

/// KamajiControlPlane (stand-in): no endpoint is generated and no DNS record made; failure
/// domains are published; the MaasCluster waits without writing; the provider's one write of
/// `spec.controlPlaneEndpoint` is accepted and the cluster becomes provisioned; a second change
/// is refused by the API server, naming the field.
pub(super) async fn kamaji_sets_the_endpoint_once(client: &Client, ns: &str) {
    create_control_plane(
        client,
        ns,
        &format!("{CONTROL_PLANE_GROUP}/v1alpha2"),
        "KamajiControlPlane",
        "kamajicontrolplanes",
        "tenant-cp",
    )
    .await;
    let reference =
        json!({"apiGroup": CONTROL_PLANE_GROUP, "kind": "KamajiControlPlane", "name": "tenant-cp"});
    create_cluster_with(
        client,
        ns,
        "tenant",
        false,
        Some(reference),
        json!({"dnsDomain": "maas", "failureDomains": ["az1", "az2"]}),
    )
    .await;
    let clusters: Api<MaasCluster> = Api::namespaced(client.clone(), ns);
    let records: Api<MaasDNSRecord> = Api::namespaced(client.clone(), ns);

    let mc = waiting(&clusters, "tenant-maas").await;
    assert!(mc.finalizers().contains(&FINALIZER_MAAS_CLUSTER.to_owned()));
    assert!(
        mc.spec.control_plane_endpoint.is_none(),
        "nothing generated"
    );
    let status = mc.status.clone().unwrap();
    assert_eq!(
        status.initialization, None,
        "not provisioned without an endpoint"
    );
    assert_eq!(status.ready, None);
    let zones: Vec<_> = status
        .failure_domains
        .iter()
        .flatten()
        .map(|f| f.name.as_str())
        .collect();
    assert_eq!(zones, ["az1", "az2"], "workers still go to MAAS zones");
    let ready = condition(&mc, cond::READY).unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "WaitingForControlPlaneEndpoint")
    );
    assert!(
        condition(&mc, cond::LOAD_BALANCER_READY)
            .unwrap()
            .message
            .contains("KamajiControlPlane tenant-cp")
    );
    assert!(
        records.get_opt("tenant").await.unwrap().is_none(),
        "no DNS record"
    );

    // Waiting is quiet: once the probe has settled too, nothing is written.
    wanted_condition(&clusters, "tenant-maas", cond::API_SERVER_AVAILABLE, |c| {
        c.status == "False"
    })
    .await;
    let before = clusters
        .get("tenant-maas")
        .await
        .unwrap()
        .resource_version();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        clusters
            .get("tenant-maas")
            .await
            .unwrap()
            .resource_version(),
        before,
        "no hot loop"
    );

    // The provider (here: the test) sets the endpoint, as Kamaji's merge patch does.
    merge(
        &clusters,
        "tenant-maas",
        json!({"spec": {"controlPlaneEndpoint": {"host": "10.20.0.5", "port": 6443}}}),
    )
    .await;
    let mc = provisioned(&clusters, "tenant-maas").await;
    let endpoint = mc.spec.control_plane_endpoint.clone().unwrap();
    assert_eq!((endpoint.host.as_str(), endpoint.port), ("10.20.0.5", 6443));
    assert_eq!(mc.status.as_ref().unwrap().ready, Some(true));
    assert_eq!(mc.status.as_ref().unwrap().network, None);
    let lb = condition(&mc, cond::LOAD_BALANCER_READY).unwrap();
    assert_eq!(
        (lb.status.as_str(), lb.reason.as_str()),
        ("True", "ExternalEndpoint")
    );
    assert!(
        records.get_opt("tenant").await.unwrap().is_none(),
        "still no DNS record"
    );

    // A second change is refused by the API server (the CEL rule), naming the field.
    let refused = clusters
        .patch(
            "tenant-maas",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"controlPlaneEndpoint": {"host": "10.20.0.6", "port": 6443}}}),
            ),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(status) = refused else {
        panic!("expected a refusal, got {refused:?}");
    };
    assert_eq!(status.code, 422, "{status:?}");
    assert!(
        status
            .message
            .contains("spec.controlPlaneEndpoint is immutable once its host is set"),
        "{}",
        status.message
    );
    let kept = clusters
        .get("tenant-maas")
        .await
        .unwrap()
        .spec
        .control_plane_endpoint
        .unwrap();
    assert_eq!(kept.host, "10.20.0.5");
}

/// A kind only `--hosted-control-plane-kinds` names: the provider sets the endpoint on the Cluster,
/// and cluster-controller copies it into the MaasCluster (no generated name, no DNS record).
pub(super) async fn unknown_provider_sets_it_on_the_cluster(client: &Client, ns: &str) {
    create_control_plane(
        client,
        ns,
        "controlplane.test.capmaas.io/v1",
        "StandInControlPlane",
        "standincontrolplanes",
        "edge-cp",
    )
    .await;
    let reference = json!({"apiGroup": "controlplane.test.capmaas.io", "kind": "StandInControlPlane", "name": "edge-cp"});
    create_cluster_with(
        client,
        ns,
        "edge",
        false,
        Some(reference),
        json!({"dnsDomain": "maas"}),
    )
    .await;
    let clusters: Api<MaasCluster> = Api::namespaced(client.clone(), ns);
    let mc = waiting(&clusters, "edge-maas").await;
    assert!(mc.spec.control_plane_endpoint.is_none());

    let capi: Api<Cluster> = Api::namespaced(client.clone(), ns);
    merge(
        &capi,
        "edge",
        json!({"spec": {"controlPlaneEndpoint": {"host": "edge.hosted.example", "port": 443}}}),
    )
    .await;
    let mc = provisioned(&clusters, "edge-maas").await;
    let endpoint = mc.spec.control_plane_endpoint.unwrap();
    assert_eq!(
        (endpoint.host.as_str(), endpoint.port),
        ("edge.hosted.example", 443)
    );
    let records: Api<MaasDNSRecord> = Api::namespaced(client.clone(), ns);
    assert!(records.get_opt("edge").await.unwrap().is_none());
}

/// A KubeadmControlPlane cluster still gets `<cluster>.<dnsDomain>` and its DNS record.
pub(super) async fn kubeadm_control_plane_keeps_the_generated_name(client: &Client, ns: &str) {
    let reference = json!({"apiGroup": CONTROL_PLANE_GROUP, "kind": "KubeadmControlPlane", "name": "classic-cp"});
    create_cluster_with(
        client,
        ns,
        "classic",
        false,
        Some(reference),
        json!({"dnsDomain": "maas"}),
    )
    .await;
    let clusters: Api<MaasCluster> = Api::namespaced(client.clone(), ns);
    let mc = provisioned(&clusters, "classic-maas").await;
    let endpoint = mc.spec.control_plane_endpoint.unwrap();
    assert_eq!(
        (endpoint.host.as_str(), endpoint.port),
        ("classic.maas", 6443)
    );
    let records: Api<MaasDNSRecord> = Api::namespaced(client.clone(), ns);
    eventually("the DNS record", WAIT, || async {
        records.get_opt("classic").await.unwrap()
    })
    .await;
}
