//! The cluster-controller, run in-process against a real API server (capmaas-testenv).
//!
//! One management API server hosts every scenario in its own namespace; a second API server is
//! the workload cluster for the `APIServerAvailable` probe. Hosted control planes (stand-ins
//! for Kamaji and an unknown provider) are in `scenarios/hosted.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "scenarios/hosted.rs"]
mod hosted;

use std::time::Duration;

use capmaas_api::capi::Cluster;
use capmaas_api::conditions as cond;
use capmaas_api::keys::{
    FINALIZER_MAAS_CLUSTER, FINALIZER_MAAS_DNS_RECORD, LABEL_CLUSTER_NAME, LABEL_CONTROL_PLANE,
};
use capmaas_api::{MaasCluster, MaasDNSRecord, MaasMachine};
use capmaas_runtime::embedded::Running;
use capmaas_testenv::objects::{self, kubeconfig_secret};
use capmaas_testenv::{TestEnv, eventually};
use cluster_controller::hosted::HostedKind;
use cluster_controller::{BINARY, ControllerArgs};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);

async fn start_controller(env: &TestEnv) -> Running {
    let config = env.kube_config().await.unwrap();
    let args = ControllerArgs {
        api_probe_timeout: Duration::from_secs(2),
        api_probe_interval: Duration::from_secs(2),
        api_probe_min_backoff: Duration::from_millis(200),
        api_probe_max_backoff: Duration::from_secs(1),
        hosted_control_plane_kinds: vec![HostedKind::parse(hosted::STAND_IN_KIND).unwrap()],
    };
    Running::start(BINARY, config, &[], move |ctx| {
        cluster_controller::run(ctx, args.clone())
    })
    .await
    .unwrap()
}

/// A CAPI Cluster `name` pointing at MaasCluster `<name>-maas`, and that MaasCluster owned by it
/// (CAPI core would set the owner reference; it does not run here).
async fn create_cluster(
    client: &Client,
    ns: &str,
    name: &str,
    paused: bool,
    mc_spec: serde_json::Value,
) -> MaasCluster {
    create_cluster_with(client, ns, name, paused, None, mc_spec).await
}

/// [`create_cluster`] with `spec.controlPlaneRef` = `control_plane` (`apiGroup`, `kind`, `name`).
async fn create_cluster_with(
    client: &Client,
    ns: &str,
    name: &str,
    paused: bool,
    control_plane: Option<serde_json::Value>,
    mc_spec: serde_json::Value,
) -> MaasCluster {
    let clusters: Api<Cluster> = Api::namespaced(client.clone(), ns);
    let mut cluster = json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2",
        "kind": "Cluster",
        "metadata": {"name": name},
        "spec": {
            "paused": paused,
            "infrastructureRef": {
                "apiGroup": "infrastructure.cluster.x-k8s.io",
                "kind": "MaasCluster",
                "name": format!("{name}-maas")
            }
        }
    });
    if let Some(reference) = control_plane {
        cluster["spec"]["controlPlaneRef"] = reference;
    }
    // Created as JSON: the CAPI mirror type does not model controlPlaneRef.
    let created = kube::Api::<kube::core::DynamicObject>::namespaced_with(
        client.clone(),
        ns,
        &kube::api::ApiResource::erase::<Cluster>(&()),
    )
    .create(
        &PostParams::default(),
        &serde_json::from_value(cluster).unwrap(),
    )
    .await
    .unwrap();
    let cluster = clusters.get(&created.name_any()).await.unwrap();
    let mc: MaasCluster = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "MaasCluster",
        "metadata": {
            "name": format!("{name}-maas"),
            "labels": {LABEL_CLUSTER_NAME: name},
            "ownerReferences": [cluster.controller_owner_ref(&()).unwrap()]
        },
        "spec": mc_spec
    }))
    .unwrap();
    Api::<MaasCluster>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &mc)
        .await
        .unwrap()
}

async fn create_machine(
    client: &Client,
    ns: &str,
    name: &str,
    cluster: &str,
    control_plane: bool,
    ips: &[&str],
) {
    let api: Api<MaasMachine> = Api::namespaced(client.clone(), ns);
    let mut labels = json!({LABEL_CLUSTER_NAME: cluster});
    if control_plane {
        labels[LABEL_CONTROL_PLANE] = json!("");
    }
    let machine: MaasMachine = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "MaasMachine",
        "metadata": {"name": name, "labels": labels},
        "spec": {"minCPU": 2, "minMemory": 4096, "image": "ubuntu/jammy"}
    }))
    .unwrap();
    api.create(&PostParams::default(), &machine).await.unwrap();
    let addresses: Vec<_> = ips
        .iter()
        .flat_map(|ip| {
            [
                json!({"type": "InternalIP", "address": ip}),
                json!({"type": "ExternalIP", "address": ip}),
            ]
        })
        .chain([json!({"type": "Hostname", "address": name})])
        .collect();
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"addresses": addresses, "ready": true}})),
    )
    .await
    .unwrap();
}

fn condition<'a>(mc: &'a MaasCluster, type_: &str) -> Option<&'a Condition> {
    capmaas_runtime::get_condition(mc.status.as_ref()?.conditions.as_ref()?, type_)
}

fn addresses(record: &MaasDNSRecord) -> Vec<String> {
    record.spec.addresses.clone().unwrap_or_default()
}

async fn provisioned(api: &Api<MaasCluster>, name: &str) -> MaasCluster {
    eventually("provisioned", WAIT, || async {
        let mc = api.get(name).await.unwrap();
        let done = mc
            .status
            .as_ref()
            .and_then(|s| s.initialization.as_ref())
            .and_then(|i| i.provisioned);
        (done == Some(true)).then_some(mc)
    })
    .await
}

/// Cluster + MaasCluster → finalizer, endpoint, failure domains, DNS record, provisioned; then
/// the record follows the control-plane machines, is written only on change, is never emptied;
/// then deletion waits for the machines and for the record.
async fn provision_follow_and_delete(client: &Client, ns: &str) {
    let mc = create_cluster(
        client,
        ns,
        "prod",
        false,
        json!({"dnsDomain": "maas", "failureDomains": ["az1", "az2", "az1"]}),
    )
    .await;
    let clusters: Api<MaasCluster> = Api::namespaced(client.clone(), ns);
    let records: Api<MaasDNSRecord> = Api::namespaced(client.clone(), ns);

    let mc = provisioned(&clusters, &mc.name_any()).await;
    assert!(mc.finalizers().contains(&FINALIZER_MAAS_CLUSTER.to_owned()));
    let endpoint = mc.spec.control_plane_endpoint.clone().unwrap();
    assert_eq!((endpoint.host.as_str(), endpoint.port), ("prod.maas", 6443));
    let status = mc.status.clone().unwrap();
    assert_eq!(status.ready, Some(true));
    assert_eq!(
        status.network.unwrap().dns_name.as_deref(),
        Some("prod.maas")
    );
    let fds = status.failure_domains.unwrap();
    assert_eq!(
        fds.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(),
        ["az1", "az2"]
    );
    assert!(fds.iter().all(|f| f.control_plane == Some(true)));
    assert_eq!(condition(&mc, cond::PAUSED).unwrap().status, "False");
    assert_eq!(
        condition(&mc, cond::LOAD_BALANCER_READY).unwrap().reason,
        "WaitForDNSName"
    );

    let record = records.get("prod").await.unwrap();
    assert_eq!(
        (record.spec.name.as_str(), record.spec.domain.as_str()),
        ("prod", "maas")
    );
    assert!(addresses(&record).is_empty());
    assert_eq!(record.owner_references()[0].uid, mc.uid().unwrap());
    assert_eq!(
        record.labels().get(LABEL_CLUSTER_NAME).map(String::as_str),
        Some("prod")
    );

    // The record follows the control-plane machines (not the workers), sorted.
    create_machine(client, ns, "prod-cp-a", "prod", true, &["10.0.0.12"]).await;
    create_machine(client, ns, "prod-cp-b", "prod", true, &["10.0.0.3"]).await;
    create_machine(client, ns, "prod-worker", "prod", false, &["10.0.0.50"]).await;
    let record = eventually("record follows the control plane", WAIT, || async {
        let r = records.get("prod").await.unwrap();
        (addresses(&r) == ["10.0.0.3", "10.0.0.12"]).then_some(r)
    })
    .await;
    let generation = record.metadata.generation;

    // The gateway reports the record published: LoadBalancerReady turns True.
    records
        .patch_status(
            "prod",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "ready": true, "observedGeneration": generation, "dnsResourceID": 7,
                "observedAddresses": ["10.0.0.3", "10.0.0.12"]
            }})),
        )
        .await
        .unwrap();
    wanted_condition(&clusters, "prod-maas", cond::LOAD_BALANCER_READY, |c| {
        c.status == "True"
    })
    .await;
    // More reconciles with the same set: no spec write.
    merge(
        &clusters,
        "prod-maas",
        json!({"metadata": {"annotations": {"test/touch": "1"}}}),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        records.get("prod").await.unwrap().metadata.generation,
        generation,
        "unchanged set, no update"
    );

    // Every control-plane machine gone: the record keeps the last set.
    let machines: Api<MaasMachine> = Api::namespaced(client.clone(), ns);
    delete_all(&machines, &["prod-cp-a", "prod-cp-b"]).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        addresses(&records.get("prod").await.unwrap()),
        ["10.0.0.3", "10.0.0.12"],
        "never emptied"
    );
    // A replacement takes over.
    create_machine(client, ns, "prod-cp-c", "prod", true, &["10.0.0.7"]).await;
    eventually("record follows the replacement", WAIT, || async {
        (addresses(&records.get("prod").await.unwrap()) == ["10.0.0.7"]).then_some(())
    })
    .await;

    // Deletion: blocked while MaasMachines exist. The record carries the gateway's finalizer,
    // as it would in a real installation.
    merge(
        &records,
        "prod",
        json!({"metadata": {"finalizers": [FINALIZER_MAAS_DNS_RECORD]}}),
    )
    .await;
    delete_all(&clusters, &["prod-maas"]).await;
    // Blocked by the machines.
    wanted_condition(&clusters, "prod-maas", cond::READY, |c| {
        c.reason == "WaitingForMachineDeletion"
    })
    .await;
    assert!(!deletion_requested(&records, "prod").await);
    delete_all(&machines, &["prod-cp-c", "prod-worker"]).await;
    // Then the record is deleted, and the MaasCluster waits for the gateway to let it go.
    eventually("record deletion requested", WAIT, || async {
        deletion_requested(&records, "prod").await.then_some(())
    })
    .await;
    let mc = clusters.get("prod-maas").await.unwrap();
    assert!(
        mc.finalizers().contains(&FINALIZER_MAAS_CLUSTER.to_owned()),
        "waits for the record"
    );
    merge(&records, "prod", json!({"metadata": {"finalizers": null}})).await;
    eventually("MaasCluster gone", WAIT, || async {
        clusters
            .get_opt("prod-maas")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    assert!(records.get_opt("prod").await.unwrap().is_none());
}

/// A paused Cluster is left alone (only the Paused condition), and resumes when unpaused.
async fn paused_cluster_is_left_alone(client: &Client, ns: &str) {
    create_cluster(client, ns, "idle", true, json!({"dnsDomain": "maas"})).await;
    let clusters: Api<MaasCluster> = Api::namespaced(client.clone(), ns);
    let mc = eventually("Paused condition", WAIT, || async {
        let mc = clusters.get("idle-maas").await.unwrap();
        (condition(&mc, cond::PAUSED)?.status == "True").then_some(mc)
    })
    .await;
    assert!(mc.finalizers().is_empty());
    assert!(mc.spec.control_plane_endpoint.is_none());
    assert!(mc.status.as_ref().unwrap().initialization.is_none());
    let records: Api<MaasDNSRecord> = Api::namespaced(client.clone(), ns);
    assert!(records.get_opt("idle").await.unwrap().is_none());

    let capi_clusters: Api<Cluster> = Api::namespaced(client.clone(), ns);
    merge(&capi_clusters, "idle", json!({"spec": {"paused": false}})).await;
    let mc = provisioned(&clusters, "idle-maas").await;
    assert_eq!(condition(&mc, cond::PAUSED).unwrap().status, "False");
    assert_eq!(mc.spec.control_plane_endpoint.unwrap().host, "idle.maas");
}

/// Merge-patches object `name` of `api` with `patch`.
async fn merge<K>(api: &Api<K>, name: &str, patch: serde_json::Value)
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap();
}

/// Deletes each of `names` (their finalizers may keep them a while).
async fn delete_all<K>(api: &Api<K>, names: &[&str])
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    for name in names {
        api.delete(name, &DeleteParams::default()).await.unwrap();
    }
}

/// Whether the deletion of MaasDNSRecord `name` was requested (it still exists).
async fn deletion_requested(records: &Api<MaasDNSRecord>, name: &str) -> bool {
    let record = records.get(name).await.unwrap();
    record.metadata.deletion_timestamp.is_some()
}

/// The `APIServerAvailable` condition of MaasCluster `name`, once `wanted` holds for it.
async fn api_server_available(
    clusters: &Api<MaasCluster>,
    name: &str,
    wanted: impl Fn(&Condition) -> bool,
) -> Condition {
    wanted_condition(clusters, name, cond::API_SERVER_AVAILABLE, wanted).await
}

/// The condition `type_` of MaasCluster `name`, once `wanted` holds for it.
async fn wanted_condition(
    clusters: &Api<MaasCluster>,
    name: &str,
    type_: &str,
    wanted: impl Fn(&Condition) -> bool,
) -> Condition {
    eventually(&format!("the wanted {type_} condition"), WAIT, || async {
        let mc = clusters.get(name).await.unwrap();
        condition(&mc, type_).filter(|c| wanted(c)).cloned()
    })
    .await
}

/// APIServerAvailable: False with a dead endpoint, True with the workload server's kubeconfig.
async fn api_server_probe(client: &Client, ns: &str, workload: &TestEnv) {
    let good = workload.kubeconfig_yaml().unwrap();
    let dead = good.replace(workload.server_url(), "https://127.0.0.1:1");
    assert_ne!(good, dead);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let secret = |yaml: &str| kubeconfig_secret("wl", yaml.as_bytes());
    secrets
        .create(&PostParams::default(), &secret(&dead))
        .await
        .unwrap();
    create_cluster(client, ns, "wl", false, json!({"dnsDomain": "maas"})).await;
    let clusters: Api<MaasCluster> = Api::namespaced(client.clone(), ns);
    let c = api_server_available(&clusters, "wl-maas", |c| c.status == "False").await;
    assert_eq!(c.reason, "APIServerNotReady");
    assert!(
        !c.message.contains("BEGIN"),
        "no credentials in messages: {}",
        c.message
    );

    secrets
        .replace("wl-kubeconfig", &PostParams::default(), &secret(&good))
        .await
        .unwrap();
    let c = api_server_available(&clusters, "wl-maas", |c| c.status == "True").await;
    assert_eq!(c.reason, "APIServerAvailable");
    // Ready summarises LoadBalancerReady too, which waits for the DNS record here.
    let mc = clusters.get("wl-maas").await.unwrap();
    assert_eq!(condition(&mc, cond::READY).unwrap().status, "False");
}

/// A kubeconfig Secret with an exec credential plugin is refused: `APIServerAvailable=False`
/// with reason `KubeconfigRefused`, a Warning Event naming it, and the plugin never runs.
async fn exec_plugin_kubeconfig_is_refused(client: &Client, ns: &str, workload: &TestEnv) {
    let dir = tempfile::tempdir().unwrap();
    let (kubeconfig, marker) = workload.exec_plugin_kubeconfig_yaml(dir.path()).unwrap();
    let secret = kubeconfig_secret("ex", kubeconfig.as_bytes());
    Api::<Secret>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    create_cluster(client, ns, "ex", false, json!({"dnsDomain": "maas"})).await;
    let clusters: Api<MaasCluster> = Api::namespaced(client.clone(), ns);
    let c = api_server_available(&clusters, "ex-maas", |c| c.reason == "KubeconfigRefused").await;
    assert_eq!(c.status, "False");
    assert!(
        c.message.contains("exec credential plugin"),
        "{}",
        c.message
    );
    let event = eventually("a KubeconfigRefused Warning Event", WAIT, || async {
        let refused = objects::events(client, ns, "KubeconfigRefused", |e| {
            objects::regarding_name(e) == Some("ex-maas")
        });
        refused.await.unwrap().into_iter().next()
    })
    .await;
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert!(
        event
            .note
            .as_deref()
            .unwrap_or_default()
            .contains("exec credential plugin"),
        "{:?}",
        event.note
    );
    assert!(!marker.exists(), "the exec plugin must never run");
}

#[tokio::test]
async fn cluster_controller_against_a_real_api_server() {
    let (management, workload) = tokio::join!(TestEnv::start(), TestEnv::api_server_only());
    let (management, workload) = (management.unwrap(), workload.unwrap());
    let client = management.client();
    let controller = start_controller(&management).await;
    hosted::install_stand_in_crds(&management).await;
    let (a, b, c, d) = (
        management.create_namespace("cc-provision").await.unwrap(),
        management.create_namespace("cc-paused").await.unwrap(),
        management.create_namespace("cc-probe").await.unwrap(),
        management.create_namespace("cc-exec").await.unwrap(),
    );
    let (kamaji, hosted_flag, kubeadm) = (
        management.create_namespace("cc-kamaji").await.unwrap(),
        management.create_namespace("cc-hosted-flag").await.unwrap(),
        management.create_namespace("cc-kubeadm").await.unwrap(),
    );
    tokio::join!(
        provision_follow_and_delete(&client, &a),
        paused_cluster_is_left_alone(&client, &b),
        api_server_probe(&client, &c, &workload),
        exec_plugin_kubeconfig_is_refused(&client, &d, &workload),
        hosted::kamaji_sets_the_endpoint_once(&client, &kamaji),
        hosted::unknown_provider_sets_it_on_the_cluster(&client, &hosted_flag),
        hosted::kubeadm_control_plane_keeps_the_generated_name(&client, &kubeadm),
    );
    controller
        .stop(Duration::from_secs(15))
        .await
        .expect("controller stops");
}
