//! Which address a machine gets, against a real API server: `spec.preAllocations` keyed by the
//! CAPI Machine's name (and a claim-name key winning over it); the addresses of a server kept
//! across re-provisioning (node reuse) and handed to the next machine on it, never to another.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use capmaas_api::capi_ipam::{IPAddress, IPAddressClaim};
use capmaas_api::ipam_preallocation::ANNOTATION_MACHINE;
use capmaas_api::{MaasDataClaim, MaasHost, keys};
use capmaas_runtime::embedded::Running;
use capmaas_testenv::objects::apply;
use capmaas_testenv::{TestEnv, eventually};
use data_controller::{BINARY, ControllerArgs};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

mod support;

const WAIT: Duration = Duration::from_secs(60);
const INFRA: &str = "infrastructure.cluster.x-k8s.io/v1beta1";

async fn start(env: &TestEnv) -> Running {
    let config = env.kube_config().await.unwrap();
    Running::start(BINARY, config, &[], move |term| {
        data_controller::run(term, ControllerArgs::default())
    })
    .await
    .unwrap()
}

async fn put(client: &Client, ns: &str, mut object: Value) {
    object["metadata"]["namespace"] = json!(ns);
    apply(client, &object, "test").await.unwrap();
}

/// A pool of `.10`–`.20` of `net` (e.g. `10.9.0`), with pre-allocations.
async fn pool(client: &Client, ns: &str, name: &str, net: &str, pre: Value) {
    put(client, ns, json!({
        "apiVersion": INFRA, "kind": "MaasIPPool", "metadata": {"name": name},
        "spec": {"namePrefix": name, "preAllocations": pre,
                 "pools": [{"start": format!("{net}.10"), "end": format!("{net}.20"), "prefix": 24}]}
    }))
    .await;
}

async fn template(client: &Client, ns: &str, name: &str, pool: &str) {
    put(
        client,
        ns,
        json!({
            "apiVersion": INFRA, "kind": "MaasDataTemplate", "metadata": {"name": name},
            "spec": {"metaData": {"ipAddressesFromPool": [{"key": "address", "name": pool}]}}
        }),
    )
    .await;
}

async fn host(client: &Client, ns: &str, name: &str) -> MaasHost {
    let api: Api<MaasHost> = Api::namespaced(client.clone(), ns);
    let host = serde_json::from_value(json!({
        "apiVersion": INFRA, "kind": "MaasHost", "metadata": {"name": name},
        "spec": {"systemID": name}
    }))
    .unwrap();
    api.create(&PostParams::default(), &host).await.unwrap();
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(
            json!({"status": {"interfaces": [{"name": "eno1", "mac": "52:54:00:00:01:01"}]}}),
        ),
    )
    .await
    .unwrap()
}

/// A CAPI Machine `machine`, its MaasMachine `mm` and the MaasDataClaim `mm` machine-controller
/// makes for it (owned by the MaasMachine, held by machine-controller's finalizer) on `host`.
async fn machine_with_claim(
    client: &Client,
    ns: &str,
    machine: &str,
    mm: &str,
    tpl: &str,
    host: &str,
) {
    put(client, ns, json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine", "metadata": {"name": machine},
        "spec": {"clusterName": "c", "bootstrap": {"dataSecretName": "b"},
                 "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "MaasMachine", "name": mm}}
    }))
    .await;
    let machines = kube::api::Api::<kube::core::DynamicObject>::namespaced_with(
        client.clone(),
        ns,
        &kube::discovery::ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk(
            "cluster.x-k8s.io",
            "v1beta2",
            "Machine",
        )),
    );
    let machine_uid = machines.get(machine).await.unwrap().uid().unwrap();
    put(
        client,
        ns,
        json!({
            "apiVersion": INFRA, "kind": "MaasMachine",
            "metadata": {"name": mm, "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2",
                "kind": "Machine", "name": machine, "uid": machine_uid, "controller": true}]},
            "spec": {"image": "ubuntu/jammy", "minCPU": 1, "minMemory": 1024}
        }),
    )
    .await;
    let mm_uid = Api::<capmaas_api::MaasMachine>::namespaced(client.clone(), ns)
        .get(mm)
        .await
        .unwrap()
        .uid()
        .unwrap();
    let claim = serde_json::from_value(json!({
        "apiVersion": INFRA, "kind": "MaasDataClaim",
        "metadata": {"name": mm, "finalizers": [keys::FINALIZER_MAAS_MACHINE],
            "labels": {keys::LABEL_CLUSTER_NAME: "c"},
            "ownerReferences": [{"apiVersion": INFRA, "kind": "MaasMachine", "name": mm,
                "uid": mm_uid, "controller": true}]},
        "spec": {"template": {"name": tpl}, "hostRef": {"name": host}}
    }))
    .unwrap();
    Api::<MaasDataClaim>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &claim)
        .await
        .unwrap();
}

/// The `address` metadata key the claim `name` was rendered with.
async fn rendered_address(client: &Client, ns: &str, name: &str) -> String {
    let claims: Api<MaasDataClaim> = Api::namespaced(client.clone(), ns);
    let data = eventually(&format!("claim {name} rendered"), WAIT, || async {
        claims
            .get(name)
            .await
            .ok()?
            .status?
            .rendered_data
            .map(|r| r.name)
    })
    .await;
    let secret = eventually(&format!("metadata of {data}"), WAIT, || async {
        Api::<Secret>::namespaced(client.clone(), ns)
            .get_opt(&format!("{data}-metadata"))
            .await
            .ok()?
    })
    .await;
    let text =
        String::from_utf8(secret.data.unwrap()[keys::META_DATA_SECRET_KEY].0.clone()).unwrap();
    let meta: Value = serde_saphyr::from_str(&text).unwrap();
    meta["address"].as_str().unwrap().to_owned()
}

/// `spec.preAllocations` keyed by the Machine's name serves the claim data-controller makes for
/// that Machine; a key naming the IPAddressClaim itself wins over it.
async fn pre_allocations_by_machine_name(client: &Client, ns: &str) {
    pool(
        client,
        ns,
        "pre",
        "10.9.0",
        json!({
            "m-keep": "10.9.0.15",
            "m-both": "10.9.0.16",
            "mm-both-pre": "10.9.0.17",
        }),
    )
    .await;
    template(client, ns, "tpl", "pre").await;
    host(client, ns, "h-keep").await;
    host(client, ns, "h-both").await;
    machine_with_claim(client, ns, "m-keep", "mm-keep", "tpl", "h-keep").await;
    machine_with_claim(client, ns, "m-both", "mm-both", "tpl", "h-both").await;
    assert_eq!(rendered_address(client, ns, "mm-keep").await, "10.9.0.15");
    assert_eq!(rendered_address(client, ns, "mm-both").await, "10.9.0.17");
    let ip_claim = Api::<IPAddressClaim>::namespaced(client.clone(), ns)
        .get("mm-keep-pre")
        .await
        .unwrap();
    assert_eq!(
        ip_claim
            .annotations()
            .get(ANNOTATION_MACHINE)
            .map(String::as_str),
        Some("m-keep"),
        "the IPAddressClaim names its Machine"
    );
}

/// What machine-controller does to a host: `consumer` claims it (clearing any reservation),
/// or a node-reuse reservation for `seconds` keeps it unclaimed.
async fn set_host(
    client: &Client,
    ns: &str,
    host: &str,
    consumer: Option<&str>,
    reserve_secs: Option<i64>,
) {
    let consumer = consumer.map(|mm| json!({"apiVersion": INFRA, "kind": "MaasMachine", "name": mm, "uid": format!("uid-{mm}")}));
    let reservation = reserve_secs.map(|s| {
        let until = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(s);
        json!({"owner": {"kind": "MachineDeployment", "name": "md", "uid": "md-uid"},
               "expiresAt": until.round(jiff::Unit::Second).unwrap().to_string()})
    });
    Api::<MaasHost>::namespaced(client.clone(), ns)
        .patch(
            host,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"consumerRef": consumer, "reservation": reservation}})),
        )
        .await
        .unwrap();
}

/// machine-controller releases the data claim once MAAS released the server: deleted, its own
/// finalizer off.
async fn release(client: &Client, ns: &str, name: &str) {
    let claims: Api<MaasDataClaim> = Api::namespaced(client.clone(), ns);
    claims.delete(name, &DeleteParams::default()).await.unwrap();
    let claim = claims.get(name).await.unwrap();
    capmaas_runtime::controller::finalizer::remove(
        &claims,
        &claim,
        keys::FINALIZER_MAAS_MACHINE,
        "test",
    )
    .await
    .unwrap();
    eventually(&format!("{name} released"), WAIT, || async {
        claims.get_opt(name).await.unwrap().is_none().then_some(())
    })
    .await;
}

fn held_for(c: &IPAddressClaim) -> Option<&String> {
    c.annotations()
        .get(data_controller::hold::decide::ANNOTATION_HELD_FOR_HOST)
}

/// Node reuse: a re-provisioned server keeps its address, whether the next machine comes after
/// the release (reserved host) or claimed the host first; other claims never get it meanwhile;
/// a hold whose reservation lapses gives the address back.
async fn addresses_kept_for_the_host(client: &Client, ns: &str) {
    pool(client, ns, "reuse", "10.9.1", json!({})).await;
    template(client, ns, "tpl-r", "reuse").await;
    for h in ["h-r1", "h-r2", "h-r3", "h-r4"] {
        host(client, ns, h).await;
    }
    machine_with_claim(client, ns, "m-a", "mm-a", "tpl-r", "h-r1").await;
    assert_eq!(rendered_address(client, ns, "mm-a").await, "10.9.1.10");
    machine_with_claim(client, ns, "m-b", "mm-b", "tpl-r", "h-r2").await;
    assert_eq!(rendered_address(client, ns, "mm-b").await, "10.9.1.11");
    let ip_claims: Api<IPAddressClaim> = Api::namespaced(client.clone(), ns);
    let addresses: Api<IPAddress> = Api::namespaced(client.clone(), ns);

    // 1. Rollout with node reuse: m-a's server is released and reserved for its
    // MachineDeployment; its address stays held for h-r1.
    set_host(client, ns, "h-r1", None, Some(600)).await;
    release(client, ns, "mm-a").await;
    let held = ip_claims.get("mm-a-reuse").await.unwrap();
    assert_eq!(
        held_for(&held).map(String::as_str),
        Some(format!("{ns}/h-r1").as_str())
    );
    assert!(
        held.owner_references().is_empty(),
        "no longer owned by the released claim"
    );
    assert!(
        addresses
            .get_opt("reuse-10-9-1-10")
            .await
            .unwrap()
            .is_some()
    );
    // Meanwhile a machine on another server does not get it: the lowest free address is .12.
    machine_with_claim(client, ns, "m-c", "mm-c", "tpl-r", "h-r3").await;
    assert_eq!(rendered_address(client, ns, "mm-c").await, "10.9.1.12");
    // The next machine of the MachineDeployment claims h-r1: same address.
    set_host(client, ns, "h-r1", Some("mm-a2"), None).await;
    machine_with_claim(client, ns, "m-a2", "mm-a2", "tpl-r", "h-r1").await;
    assert_eq!(rendered_address(client, ns, "mm-a2").await, "10.9.1.10");
    let adopted = ip_claims.get("mm-a-reuse").await.unwrap();
    assert_eq!(held_for(&adopted), None);
    assert_eq!(adopted.owner_references()[0].name, "mm-a2");
    assert_eq!(adopted.labels()[keys::LABEL_DATA_CLAIM], "mm-a2");
    assert_eq!(adopted.annotations()[ANNOTATION_MACHINE], "m-a2");

    // 2. The next machine claims h-r2 before m-b's data claim is released: its claim waits for
    // the handover, then gets m-b's address.
    set_host(client, ns, "h-r2", Some("mm-b2"), None).await;
    machine_with_claim(client, ns, "m-b2", "mm-b2", "tpl-r", "h-r2").await;
    let claims: Api<MaasDataClaim> = Api::namespaced(client.clone(), ns);
    let waiting = eventually("mm-b2 waits for the handover", WAIT, || async {
        let c = claims.get("mm-b2").await.ok()?;
        let conditions = c.status?.conditions?;
        let c = capmaas_runtime::get_condition(&conditions, "AddressesAllocated")?;
        c.message
            .contains("hand its address over")
            .then(|| c.message.clone())
    })
    .await;
    assert!(waiting.contains("MaasDataClaim mm-b"), "{waiting}");
    release(client, ns, "mm-b").await;
    assert_eq!(rendered_address(client, ns, "mm-b2").await, "10.9.1.11");

    // 3. A reservation that lapses: the address goes back to the pool.
    set_host(client, ns, "h-r3", None, Some(4)).await;
    release(client, ns, "mm-c").await;
    assert!(held_for(&ip_claims.get("mm-c-reuse").await.unwrap()).is_some());
    eventually("the lapsed hold released", WAIT, || async {
        let gone = ip_claims.get_opt("mm-c-reuse").await.unwrap().is_none()
            && addresses
                .get_opt("reuse-10-9-1-12")
                .await
                .unwrap()
                .is_none();
        gone.then_some(())
    })
    .await;
    machine_with_claim(client, ns, "m-d", "mm-d", "tpl-r", "h-r4").await;
    assert_eq!(rendered_address(client, ns, "mm-d").await, "10.9.1.12");

    // Never two holders of one address.
    let all = addresses.list(&ListParams::default()).await.unwrap().items;
    let distinct: std::collections::BTreeSet<_> =
        all.iter().map(|a| a.spec.address.clone()).collect();
    assert_eq!(distinct.len(), all.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn addresses_chosen_by_machine_and_kept_for_the_host() {
    let (env, client, ns) = support::env_with_namespace("hostaddr").await;
    let controller = start(&env).await;
    pre_allocations_by_machine_name(&client, &ns).await;
    addresses_kept_for_the_host(&client, &ns).await;
    drop(controller);
}
