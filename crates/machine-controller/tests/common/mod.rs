//! Test support: objects, a fake MAAS gateway that answers MaasHost requests in status, the
//! controller running in-process, and polling helpers.
#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use capmaas_api::conditions::{self as cond, reasons};
use capmaas_api::host::HostReservation;
use capmaas_api::{MaasHost, MaasMachine, keys};
use capmaas_runtime::embedded::Running;
use capmaas_testenv::objects;
use capmaas_testenv::task::AbortOnDrop;
use capmaas_testenv::{TestEnv, eventually};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::DynamicObject;
use kube::{Client, ResourceExt};
use machine_controller::{BINARY, ControllerArgs};
use serde_json::{Value, json};

pub const CLUSTER: &str = "c1";
pub const INFRA_GROUP: &str = "infrastructure.cluster.x-k8s.io";

/// Starts the controller against `env`, watching `namespace` (or all namespaces), with
/// `concurrency` reconciles in parallel; it stops when the returned value is dropped.
pub async fn start_controller(env: &TestEnv, namespace: Option<&str>, concurrency: u16) -> Running {
    let config = env.kube_config().await.unwrap();
    let concurrency = format!("--concurrency={concurrency}");
    let mut flags = vec![concurrency.as_str()];
    let namespace = namespace.map(|ns| format!("--namespace={ns}"));
    flags.extend(namespace.as_deref());
    let args = ControllerArgs::default();
    Running::start(BINARY, config, &flags, move |term| {
        machine_controller::run(term, args.clone())
    })
    .await
    .unwrap()
}

pub fn capi_api(client: &Client, ns: &str, kind: &str, plural: &str) -> Api<DynamicObject> {
    objects::namespaced_api(client, ns, "cluster.x-k8s.io/v1beta2", kind, plural)
}

async fn create(api: &Api<DynamicObject>, body: Value) -> DynamicObject {
    api.create(
        &PostParams::default(),
        &serde_json::from_value(body).unwrap(),
    )
    .await
    .unwrap()
}

/// A Cluster with `status.initialization.infrastructureProvisioned = provisioned`.
pub async fn create_cluster(client: &Client, ns: &str, provisioned: bool, paused: bool) {
    let api = capi_api(client, ns, "Cluster", "clusters");
    create(
        &api,
        json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "metadata": {"name": CLUSTER, "namespace": ns},
            "spec": {"paused": paused}
        }),
    )
    .await;
    set_cluster_provisioned(client, ns, provisioned).await;
}

pub async fn set_cluster_provisioned(client: &Client, ns: &str, provisioned: bool) {
    capi_api(client, ns, "Cluster", "clusters")
        .patch_status(
            CLUSTER,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"initialization": {"infrastructureProvisioned": provisioned}}}),
            ),
        )
        .await
        .unwrap();
}

pub async fn set_cluster_paused(client: &Client, ns: &str, paused: bool) {
    capi_api(client, ns, "Cluster", "clusters")
        .patch(
            CLUSTER,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"paused": paused}})),
        )
        .await
        .unwrap();
}

fn machine_spec(name: &str, bootstrap: Option<&str>) -> Value {
    json!({
        "clusterName": CLUSTER,
        "bootstrap": {"dataSecretName": bootstrap},
        "infrastructureRef": {"apiGroup": INFRA_GROUP, "kind": "MaasMachine", "name": name}
    })
}

/// A CAPI Machine (optionally owned by a MachineSet or a control plane) and its MaasMachine
/// owned by it.
pub async fn create_machine_pair(
    client: &Client,
    ns: &str,
    name: &str,
    bootstrap: Option<&str>,
    owner: Option<&DynamicObject>,
    mm_spec: Value,
) -> MaasMachine {
    let owners = owner.map(|o| {
        let types = o.types.as_ref().unwrap();
        json!([{
            "apiVersion": types.api_version, "kind": types.kind,
            "name": o.name_any(), "uid": o.uid().unwrap(), "controller": true
        }])
    });
    let machine = create(&capi_api(client, ns, "Machine", "machines"), json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
        "metadata": {"name": name, "namespace": ns, "labels": {"cluster.x-k8s.io/cluster-name": CLUSTER},
                     "ownerReferences": owners},
        "spec": machine_spec(name, bootstrap)
    }))
    .await;
    let mut spec = json!({"minCPU": 2, "minMemory": 4096, "image": "ubuntu/jammy"});
    if let (Some(base), Some(extra)) = (spec.as_object_mut(), mm_spec.as_object()) {
        base.extend(extra.clone());
    }
    let api: Api<MaasMachine> = Api::namespaced(client.clone(), ns);
    api.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasMachine",
            "metadata": {
                "name": name, "namespace": ns,
                "labels": {"cluster.x-k8s.io/cluster-name": CLUSTER},
                "ownerReferences": [{
                    "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
                    "name": name, "uid": machine.uid().unwrap(), "controller": true
                }]
            },
            "spec": spec
        }))
        .unwrap(),
    )
    .await
    .unwrap()
}

/// A MachineDeployment and a MachineSet it owns, both templating `template` (a MaasMachineTemplate).
pub async fn create_deployment(
    client: &Client,
    ns: &str,
    name: &str,
    template: &str,
) -> (DynamicObject, DynamicObject) {
    let template_spec = json!({
        "metadata": {"labels": {"pool": name}},
        "spec": {
            "clusterName": CLUSTER,
            "bootstrap": {"dataSecretName": "bootstrap"},
            "infrastructureRef": {"apiGroup": INFRA_GROUP, "kind": "MaasMachineTemplate", "name": template}
        }
    });
    let md = create(&capi_api(client, ns, "MachineDeployment", "machinedeployments"), json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"clusterName": CLUSTER, "selector": {"matchLabels": {"pool": name}}, "template": template_spec}
    }))
    .await;
    let ms = create(&capi_api(client, ns, "MachineSet", "machinesets"), json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineSet",
        "metadata": {"name": format!("{name}-abc"), "namespace": ns, "ownerReferences": [{
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
            "name": name, "uid": md.uid().unwrap(), "controller": true
        }]},
        "spec": {"clusterName": CLUSTER, "selector": {"matchLabels": {"pool": name}}, "template": template_spec}
    }))
    .await;
    (md, ms)
}

/// The `<CLUSTER>-kubeconfig` Secret CAPI would write for the workload cluster (key `value`).
pub async fn create_kubeconfig_secret(client: &Client, ns: &str, kubeconfig: &str) {
    let secret = objects::kubeconfig_secret(CLUSTER, kubeconfig.as_bytes());
    Api::<Secret>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
}

/// A MaasHost reported Available by the (fake) gateway.
pub async fn create_host(
    client: &Client,
    ns: &str,
    name: &str,
    zone: &str,
    cpu: i32,
    memory_mib: i64,
) {
    let api: Api<MaasHost> = Api::namespaced(client.clone(), ns);
    api.create(&PostParams::default(), &serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasHost",
        "metadata": {"name": name, "namespace": ns, "labels": {"maas.cluster.x-k8s.io/zone": zone}},
        "spec": {"systemID": format!("sys-{name}")}
    })).unwrap())
    .await
    .unwrap();
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(json!({"status": {
        "hostname": name, "zone": zone, "pool": "default", "cpuCount": cpu, "memoryMiB": memory_mib,
        "storageGiB": 500, "provisioningState": "Available", "maasStatusName": "Ready",
        "powerState": "off", "observedGeneration": 1
    }})))
    .await
    .unwrap();
}

pub async fn get_mm(client: &Client, ns: &str, name: &str) -> Option<MaasMachine> {
    Api::<MaasMachine>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
        .unwrap()
}

/// Deletes MaasMachine `name` and waits until it is gone (its finalizer done).
pub async fn delete_mm(client: &Client, ns: &str, name: &str) {
    Api::<MaasMachine>::namespaced(client.clone(), ns)
        .delete(name, &DeleteParams::default())
        .await
        .unwrap();
    eventually(&format!("{name} gone"), Duration::from_secs(30), || async {
        get_mm(client, ns, name).await.is_none().then_some(())
    })
    .await;
}

/// Waits until MaasMachine `name` reports no host available (`HostAssociated` with reason
/// `NoHostAvailable`); the MaasMachine then.
pub async fn no_host_available(client: &Client, ns: &str, name: &str) -> MaasMachine {
    eventually(
        &format!("{name}'s NoHostAvailable"),
        Duration::from_secs(30),
        || async {
            get_mm(client, ns, name).await.filter(|m| {
                condition(m, cond::HOST_ASSOCIATED)
                    .is_some_and(|c| c.reason == reasons::NO_HOST_AVAILABLE)
            })
        },
    )
    .await
}

pub async fn host(client: &Client, ns: &str, name: &str) -> MaasHost {
    Api::<MaasHost>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .unwrap()
}

/// The machine holding host `name` (its consumerRef), if any.
pub async fn holder(client: &Client, ns: &str, name: &str) -> Option<String> {
    host(client, ns, name)
        .await
        .spec
        .consumer_ref
        .map(|c| c.name)
}

/// Waits (`what`) until machine `machine` holds host `name`.
pub async fn until_held_by(client: &Client, ns: &str, name: &str, machine: &str, what: &str) {
    eventually(what, Duration::from_secs(30), || async {
        (holder(client, ns, name).await.as_deref() == Some(machine)).then_some(())
    })
    .await;
}

/// The reservation of `host`, asserted to be for the owner of kind `kind` with UID `uid`.
#[track_caller]
pub fn reservation_for(host: &MaasHost, kind: &str, uid: &str) -> HostReservation {
    let reservation = host
        .spec
        .reservation
        .clone()
        .unwrap_or_else(|| panic!("a reservation for the {kind}"));
    assert_eq!(reservation.owner.kind, kind);
    assert_eq!(reservation.owner.uid, uid);
    reservation
}

/// The node-reuse label of `host`: the owner its reservation is kept for.
pub fn reuse_label(host: &MaasHost) -> Option<&str> {
    host.labels()
        .get(keys::LABEL_NODE_REUSE)
        .map(String::as_str)
}

pub async fn hosts(client: &Client, ns: &str) -> Vec<MaasHost> {
    Api::<MaasHost>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
}

pub fn condition<'a>(
    mm: &'a MaasMachine,
    type_: &str,
) -> Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    capmaas_runtime::get_condition(mm.status.as_ref()?.conditions.as_ref()?, type_)
}

/// Events regarding object `name` with `reason`.
pub async fn events(client: &Client, ns: &str, name: &str, reason: &str) -> Vec<Event> {
    objects::events(client, ns, reason, |e| {
        objects::regarding_name(e) == Some(name)
    })
    .await
    .unwrap()
}

/// Plays the MAAS gateway for every MaasHost of a namespace: a requested deployment becomes
/// `Deployed` (with an address); a withdrawn one becomes `Available` again, or stays
/// `Releasing` while `hold_release` is set. Always reports the generation it acted on.
pub struct FakeGateway {
    pub hold_release: Arc<AtomicBool>,
    _task: AbortOnDrop,
}

pub fn start_gateway(client: &Client, ns: &str) -> FakeGateway {
    let hold = Arc::new(AtomicBool::new(false));
    let hold_release = hold.clone();
    let api: Api<MaasHost> = Api::namespaced(client.clone(), ns);
    let task = AbortOnDrop::spawn(async move {
        loop {
            if let Ok(list) = api.list(&ListParams::default()).await {
                for (i, host) in list.items.iter().enumerate() {
                    let status = host.status.clone().unwrap_or_default();
                    let state = status
                        .provisioning_state
                        .map(|s| serde_json::to_value(s).unwrap());
                    let state = state
                        .as_ref()
                        .and_then(Value::as_str)
                        .unwrap_or("Available");
                    let wanted = match (host.spec.provisioning.is_some(), state) {
                        (true, "Available") => "Deployed",
                        (false, "Deployed" | "Releasing") if hold.load(Ordering::SeqCst) => {
                            "Releasing"
                        }
                        (false, "Deployed" | "Releasing") => "Available",
                        (_, other) => other,
                    };
                    let generation = host.metadata.generation;
                    if wanted == state && status.observed_generation == generation {
                        continue;
                    }
                    let addresses = if wanted == "Deployed" {
                        json!([format!("10.0.0.{}", i + 10)])
                    } else {
                        Value::Null
                    };
                    let patch = json!({"status": {
                        "provisioningState": wanted, "observedGeneration": generation,
                        "addresses": addresses,
                        "maasStatusName": if wanted == "Deployed" { "Deployed" } else { "Ready" },
                        "powerState": if wanted == "Deployed" { "on" } else { "off" }
                    }});
                    let _ = api
                        .patch_status(
                            &host.name_any(),
                            &PatchParams::default(),
                            &Patch::Merge(patch),
                        )
                        .await;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    FakeGateway {
        hold_release,
        _task: task,
    }
}
