//! The data-controller in-process against a real API server with the CAPI IPAM CRDs: claims
//! get distinct indexes and addresses, render into Secrets owned by their MaasData, keep
//! everything while machine-controller's finalizer holds the claim, report a template error
//! naming the field, and release index and address when let go.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::time::Duration;

use capmaas_api::capi_ipam::{IPAddress, IPAddressClaim};
use capmaas_api::{MaasData, MaasDataClaim, MaasDataTemplate, MaasHost, keys};
use capmaas_runtime::embedded::Running;
use capmaas_testenv::{TestEnv, eventually};
use data_controller::{BINARY, ControllerArgs};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

mod support;

const WAIT: Duration = Duration::from_secs(60);

async fn start(env: &TestEnv) -> Running {
    let config = env.kube_config().await.unwrap();
    Running::start(BINARY, config, &[], move |term| {
        data_controller::run(term, ControllerArgs::default())
    })
    .await
    .unwrap()
}

async fn apply(client: &Client, ns: &str, object: serde_json::Value) {
    let gvk = (
        object["apiVersion"].as_str().unwrap().to_owned(),
        object["kind"].as_str().unwrap().to_owned(),
    );
    let name = object["metadata"]["name"].as_str().unwrap().to_owned();
    let (group, version) = gvk.0.split_once('/').unwrap_or(("", &gvk.0));
    let gvk = kube::core::GroupVersionKind::gvk(group, version, &gvk.1);
    let (resource, _) = kube::discovery::pinned_kind(client, &gvk).await.unwrap();
    let api: Api<kube::core::DynamicObject> = Api::namespaced_with(client.clone(), ns, &resource);
    api.patch(
        &name,
        &PatchParams::apply("test").force(),
        &Patch::Apply(&object),
    )
    .await
    .unwrap();
}

async fn pool(client: &Client, ns: &str, name: &str, start: &str, end: &str) {
    apply(
        client,
        ns,
        json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
            "kind": "MaasIPPool",
            "metadata": {"name": name},
            "spec": {
                "namePrefix": name,
                "pools": [{"start": start, "end": end, "prefix": 24, "gateway": "10.8.0.1"}],
                "dnsServers": ["10.8.0.53"]
            }
        }),
    )
    .await;
}

async fn template(client: &Client, ns: &str, name: &str, interface: &str, pool: &str) {
    apply(
        client,
        ns,
        json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
            "kind": "MaasDataTemplate",
            "metadata": {"name": name},
            "spec": {
                "metaData": {
                    "indexes": [{"key": "local-hostname", "offset": 0, "step": 1, "prefix": "node-"}],
                    "ipAddressesFromPool": [{"key": "address", "name": pool}],
                    "dnsServersFromPool": [{"key": "dns", "name": pool}],
                    "fromHostInterfaces": [{"key": "mac", "interface": interface}]
                },
                "networkData": {
                    "links": {"ethernets": [{"type": "phy", "id": "eth0", "macAddress": {"fromHostInterface": interface}}]},
                    "networks": {"ipv4": [{"id": "prov", "link": "eth0", "ipAddressFromPool": {"name": pool},
                        "routes": [{"network": "0.0.0.0/0", "gatewayFromPool": {"name": pool}}]}]}
                }
            }
        }),
    )
    .await;
}

async fn host(client: &Client, ns: &str, name: &str, mac: &str) {
    let api: Api<MaasHost> = Api::namespaced(client.clone(), ns);
    api.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
            "kind": "MaasHost",
            "metadata": {"name": name},
            "spec": {"systemID": name}
        }))
        .unwrap(),
    )
    .await
    .unwrap();
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"interfaces": [{"name": "eno1", "mac": mac}]}})),
    )
    .await
    .unwrap();
}

/// A claim as machine-controller makes it: its finalizer holds the claim until the release.
async fn claim(client: &Client, ns: &str, name: &str, template: &str, host: &str) {
    Api::<MaasDataClaim>::namespaced(client.clone(), ns)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                "kind": "MaasDataClaim",
                "metadata": {"name": name, "finalizers": [keys::FINALIZER_MAAS_MACHINE]},
                "spec": {"template": {"name": template}, "hostRef": {"name": host}}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
}

/// What machine-controller does once MAAS released the server: its own finalizer off the
/// data claim (data-controller's stays until it has cleaned up).
async fn let_go(claims: &Api<MaasDataClaim>, name: &str) {
    let claim = claims.get(name).await.unwrap();
    capmaas_runtime::controller::finalizer::remove(
        claims,
        &claim,
        keys::FINALIZER_MAAS_MACHINE,
        "test",
    )
    .await
    .unwrap();
}

fn condition<'a>(
    claim: &'a MaasDataClaim,
    type_: &str,
) -> Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    capmaas_runtime::get_condition(claim.status.as_ref()?.conditions.as_ref()?, type_)
}

async fn rendered(client: &Client, ns: &str, name: &str) -> (MaasData, String, String) {
    let claims: Api<MaasDataClaim> = Api::namespaced(client.clone(), ns);
    let data_name = eventually(&format!("claim {name} rendered"), WAIT, || async {
        let c = claims.get(name).await.ok()?;
        let ready = condition(&c, "Ready").is_some_and(|c| c.status == "True");
        if !ready {
            return None;
        }
        c.status?.rendered_data.map(|r| r.name)
    })
    .await;
    let data = Api::<MaasData>::namespaced(client.clone(), ns)
        .get(&data_name)
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let mut texts = Vec::new();
    for (secret, key) in [
        (data.spec.meta_data.clone().unwrap().name, "metaData"),
        (data.spec.network_data.clone().unwrap().name, "networkData"),
    ] {
        let s = secrets.get(&secret).await.unwrap();
        assert_eq!(s.type_.as_deref(), Some(keys::SECRET_TYPE_RENDERED_DATA));
        assert_eq!(
            s.owner_references()[0].name,
            data.name_any(),
            "owned by the MaasData"
        );
        texts.push(String::from_utf8(s.data.unwrap()[key].0.clone()).unwrap());
    }
    let network = texts.pop().unwrap();
    let meta = texts.pop().unwrap();
    (data, meta, network)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_render_distinct_indexes_and_addresses_and_release_only_when_let_go() {
    let (env, client, ns) = support::env_with_namespace("data").await;
    let controller = start(&env).await;
    pool(&client, &ns, "prov", "10.8.0.10", "10.8.0.14").await;
    template(&client, &ns, "workers", "eno1", "prov").await;
    for i in 0..5 {
        host(
            &client,
            &ns,
            &format!("h{i}"),
            &format!("52:54:00:00:00:0{i}"),
        )
        .await;
    }
    for i in 0..5 {
        claim(&client, &ns, &format!("m{i}"), "workers", &format!("h{i}")).await;
    }
    let mut indexes = BTreeSet::new();
    let mut addresses = BTreeSet::new();
    for i in 0..5 {
        let (data, meta, network) = rendered(&client, &ns, &format!("m{i}")).await;
        assert!(
            indexes.insert(data.spec.index),
            "index {} twice",
            data.spec.index
        );
        assert_eq!(data.name_any(), format!("workers-{}", data.spec.index));
        let meta: serde_json::Value = serde_saphyr::from_str(&meta).unwrap();
        assert_eq!(meta["local-hostname"], format!("node-{}", data.spec.index));
        assert_eq!(meta["dns"], "10.8.0.53");
        assert_eq!(meta["mac"], format!("52:54:00:00:00:0{i}"));
        let address = meta["address"].as_str().unwrap().to_owned();
        let network: serde_json::Value = serde_json::from_str(&network).unwrap();
        assert_eq!(network["networks"][0]["ip_address"], address.as_str());
        assert_eq!(
            network["links"][0]["ethernet_mac_address"],
            format!("52:54:00:00:00:0{i}")
        );
        assert!(addresses.insert(address.clone()), "address {address} twice");
        assert_eq!(
            data.status.unwrap().hostname.as_deref(),
            Some(format!("node-{}", data.spec.index).as_str())
        );
    }
    assert_eq!(indexes, (0..5).collect());
    let templates: Api<MaasDataTemplate> = Api::namespaced(client.clone(), &ns);
    eventually("template status lists the indexes", WAIT, || async {
        let t = templates.get("workers").await.ok()?;
        (t.status?.allocated_indexes == Some(5)).then_some(())
    })
    .await;

    // The pool is full: a sixth claim waits, naming the pool, and is served once one goes.
    host(&client, &ns, "h5", "52:54:00:00:00:05").await;
    claim(&client, &ns, "m5", "workers", "h5").await;
    let claims: Api<MaasDataClaim> = Api::namespaced(client.clone(), &ns);
    let waiting = eventually("m5 waits for an address", WAIT, || async {
        let c = claims.get("m5").await.ok()?;
        condition(&c, "AddressesAllocated")
            .filter(|c| c.status == "False" && c.message.contains("prov"))
            .map(|c| c.message.clone())
    })
    .await;
    assert!(waiting.to_lowercase().contains("exhausted"), "{waiting}");

    // Deleting the IPAddressClaim of a live server (m1's) by hand frees nothing: it stays,
    // terminating, with its address, until the data claim is released.
    let ip_claims: Api<IPAddressClaim> = Api::namespaced(client.clone(), &ns);
    let m1_claim = ip_claims.get("m1-prov").await.unwrap();
    assert!(
        m1_claim
            .finalizers()
            .contains(&keys::FINALIZER_ADDRESS_IN_USE.to_owned()),
        "{:?}",
        m1_claim.finalizers()
    );
    let m1_address = m1_claim.address_ref().unwrap().to_owned();
    ip_claims
        .delete("m1-prov", &DeleteParams::default())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let terminating = ip_claims.get("m1-prov").await.unwrap();
    assert!(terminating.metadata.deletion_timestamp.is_some());
    assert!(
        Api::<IPAddress>::namespaced(client.clone(), &ns)
            .get_opt(&m1_address)
            .await
            .unwrap()
            .is_some(),
        "m1's address is kept"
    );

    // Deleting m0 while machine-controller still holds it: nothing is released.
    claims.delete("m0", &DeleteParams::default()).await.unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        ip_claims.get_opt("m0-prov").await.unwrap().is_some(),
        "address kept while held"
    );
    assert!(
        claims
            .get("m5")
            .await
            .unwrap()
            .status
            .unwrap()
            .rendered_data
            .is_none()
    );
    // machine-controller lets go after the release: index and address are freed, m5 is served.
    let_go(&claims, "m0").await;
    eventually("m0 gone with its data", WAIT, || async {
        let gone = claims.get_opt("m0").await.unwrap().is_none()
            && ip_claims.get_opt("m0-prov").await.unwrap().is_none();
        gone.then_some(())
    })
    .await;
    let (data5, _, _) = rendered(&client, &ns, "m5").await;
    let all = Api::<IPAddress>::namespaced(client.clone(), &ns)
        .list(&ListParams::default())
        .await
        .unwrap();
    let distinct: BTreeSet<String> = all.items.iter().map(|a| a.spec.address.clone()).collect();
    assert_eq!(distinct.len(), all.items.len(), "no address twice");
    assert_eq!(all.items.len(), 5);
    assert!(
        all.items.iter().any(|a| a.name_any() == m1_address),
        "m1's address still held while its server runs"
    );
    // m1's MaasData deleted by hand while its server runs: it stays (terminating, its
    // finalizer on), and so do its index and its Secrets.
    let data_api: Api<MaasData> = Api::namespaced(client.clone(), &ns);
    let m1_data = claims
        .get("m1")
        .await
        .unwrap()
        .status
        .unwrap()
        .rendered_data
        .unwrap()
        .name;
    data_api
        .delete(&m1_data, &DeleteParams::default())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let kept = data_api.get(&m1_data).await.unwrap();
    assert!(kept.metadata.deletion_timestamp.is_some());
    assert_eq!(kept.finalizers(), [keys::FINALIZER_MAAS_DATA]);
    let (still, _, _) = rendered(&client, &ns, "m1").await;
    assert_eq!(still.name_any(), m1_data);
    // m1's server released (machine-controller lets its data claim go): the address goes, and
    // the MaasData with it.
    claims.delete("m1", &DeleteParams::default()).await.unwrap();
    let_go(&claims, "m1").await;
    eventually("m1's claim, address and data gone", WAIT, || async {
        let gone = ip_claims.get_opt("m1-prov").await.unwrap().is_none()
            && data_api.get_opt(&m1_data).await.unwrap().is_none()
            && Api::<IPAddress>::namespaced(client.clone(), &ns)
                .get_opt(&m1_address)
                .await
                .unwrap()
                .is_none();
        gone.then_some(())
    })
    .await;
    assert!(data5.spec.index <= 5);

    // A template naming an interface the host lacks: the error names the field.
    template(&client, &ns, "broken", "eno9", "spare").await;
    pool(&client, &ns, "spare", "10.8.0.100", "10.8.0.110").await;
    host(&client, &ns, "h9", "52:54:00:00:00:09").await;
    claim(&client, &ns, "m9", "broken", "h9").await;
    let message = eventually("m9 reports the template error", WAIT, || async {
        let c = claims.get("m9").await.ok()?;
        condition(&c, "DataReady")
            .filter(|c| c.reason == "RenderFailed")
            .map(|c| c.message.clone())
    })
    .await;
    assert!(
        message.contains("fromHostInterface") || message.contains("fromHostInterfaces"),
        "{message}"
    );
    assert!(message.contains("eno9"), "{message}");
    drop(controller);
}
