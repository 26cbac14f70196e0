//! 50 claims against one pool while two data-controller replicas run without leader election
//! and one of them is SIGKILLed and restarted every second and a half: every claim is served,
//! no index and no address is given twice, and once the claims go nothing is left behind.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use capmaas_api::capi_ipam::{IPAddress, IPAddressClaim};
use capmaas_api::{MaasData, MaasDataClaim, keys};
use capmaas_testenv::TestEnv;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use tokio::process::{Child, Command};

mod support;

const CLAIMS: usize = 50;

fn spawn(env: &TestEnv, ns: &str, log: &Path) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    Command::new(env!("CARGO_BIN_EXE_data-controller"))
        .arg(format!("--kubeconfig={}", env.kubeconfig_path().display()))
        .arg(format!("--namespace={ns}"))
        .arg("--metrics-bind-addr=127.0.0.1:0")
        .arg("--health-addr=127.0.0.1:0")
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

async fn create(client: &Client, ns: &str, object: serde_json::Value) {
    let gvk = object["apiVersion"]
        .as_str()
        .unwrap()
        .split_once('/')
        .unwrap();
    let gvk = kube::core::GroupVersionKind::gvk(gvk.0, gvk.1, object["kind"].as_str().unwrap());
    let (resource, _) = kube::discovery::pinned_kind(client, &gvk).await.unwrap();
    let api: Api<kube::core::DynamicObject> = Api::namespaced_with(client.clone(), ns, &resource);
    api.create(
        &PostParams::default(),
        &serde_json::from_value(object).unwrap(),
    )
    .await
    .unwrap();
}

fn rendered(claim: &MaasDataClaim) -> Option<String> {
    let status = claim.status.as_ref()?;
    let ready = status
        .conditions
        .as_ref()?
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    ready.then(|| status.rendered_data.as_ref().map(|r| r.name.clone()))?
}

/// Each object (name and finalizers) of `K` in `ns`.
async fn described<K>(client: &Client, ns: &str) -> Result<Vec<String>, kube::Error>
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    Ok(Api::<K>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .map(|o| format!("{} {:?}", o.name_any(), o.finalizers()))
        .collect())
}

/// What is left of the claims: MaasDataClaims, MaasData, IPAddressClaims, IPAddresses.
async fn left_behind(client: &Client, ns: &str) -> Result<[Vec<String>; 4], kube::Error> {
    Ok([
        described::<MaasDataClaim>(client, ns).await?,
        described::<MaasData>(client, ns).await?,
        described::<IPAddressClaim>(client, ns).await?,
        described::<IPAddress>(client, ns).await?,
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_killed_repeatedly_never_give_anything_twice() {
    let (env, client, ns) = support::env_with_namespace("kill").await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("data-controller.log");
    create(&client, &ns, json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasIPPool",
        "metadata": {"name": "prov"},
        "spec": {"namePrefix": "prov", "pools": [{"start": "10.9.0.10", "end": "10.9.0.69", "prefix": 24}]}
    })).await;
    create(
        &client,
        &ns,
        json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasDataTemplate",
            "metadata": {"name": "workers"},
            "spec": {"metaData": {
                "indexes": [{"key": "index", "offset": 0, "step": 1}],
                "ipAddressesFromPool": [{"key": "address", "name": "prov"}]
            }}
        }),
    )
    .await;
    let mut replicas = vec![spawn(&env, &ns, &log), spawn(&env, &ns, &log)];
    for i in 0..CLAIMS {
        create(
            &client,
            &ns,
            json!({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasDataClaim",
                "metadata": {"name": format!("m{i}"), "finalizers": [keys::FINALIZER_MAAS_MACHINE]},
                "spec": {"template": {"name": "workers"}}
            }),
        )
        .await;
    }
    let claims: Api<MaasDataClaim> = Api::namespaced(client.clone(), &ns);
    let started = Instant::now();
    let mut kills = 0;
    // Kill one replica at random every 1.5 s for 20 s, restarting it at once.
    while started.elapsed() < Duration::from_secs(20) {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let victim = fastrand::usize(..replicas.len());
        let mut old = std::mem::replace(&mut replicas[victim], spawn(&env, &ns, &log));
        old.start_kill().unwrap();
        old.wait().await.unwrap();
        kills += 1;
    }
    let served = capmaas_testenv::poll_until(
        Duration::from_secs(120),
        Duration::from_millis(500),
        || async {
            let all = claims.list(&ListParams::default()).await?;
            let done: BTreeMap<String, String> = all
                .items
                .iter()
                .filter_map(|c| Some((c.name_any(), rendered(c)?)))
                .collect();
            Ok::<_, kube::Error>((done.len() == CLAIMS).then_some(done))
        },
    )
    .await
    .unwrap();
    let Some(served) = served else {
        let all = claims.list(&ListParams::default()).await.unwrap();
        for c in all.items.iter().filter(|c| rendered(c).is_none()) {
            eprintln!("not rendered: {} {:?}", c.name_any(), c.status);
        }
        let log = std::fs::read_to_string(&log).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(60).collect();
        eprintln!(
            "log tail:\n{}",
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
        panic!("not every claim was rendered");
    };
    // Settle: duplicates made in a race are cleaned up after one is recorded.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (data, indexes) = support::data_and_indexes(&client, &ns).await;
    assert_eq!(indexes.len(), data.len(), "an index given twice");
    assert_eq!(
        data.len(),
        CLAIMS,
        "one MaasData per claim: {:?}",
        data.iter().map(ResourceExt::name_any).collect::<Vec<_>>()
    );
    for (claim, recorded) in &served {
        let d = data.iter().find(|d| &d.name_any() == recorded).unwrap();
        assert_eq!(&d.spec.claim.name, claim);
    }
    let addresses = Api::<IPAddress>::namespaced(client.clone(), &ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    let distinct: BTreeSet<&str> = addresses.iter().map(|a| a.spec.address.as_str()).collect();
    assert_eq!(distinct.len(), addresses.len(), "an address given twice");
    assert_eq!(addresses.len(), CLAIMS, "one address per claim");
    let owners: BTreeSet<&str> = addresses
        .iter()
        .map(|a| a.spec.claim_ref.name.as_str())
        .collect();
    assert_eq!(owners.len(), CLAIMS);
    println!(
        "{CLAIMS} claims served through {kills} kills in {:?}",
        started.elapsed()
    );

    // Let every claim go (machine-controller after the releases): nothing is left.
    for i in 0..CLAIMS {
        let name = format!("m{i}");
        claims
            .delete(&name, &DeleteParams::default())
            .await
            .unwrap();
        // machine-controller's finalizer only: data-controller's stays until it cleaned up.
        let claim = claims.get(&name).await.unwrap();
        capmaas_runtime::controller::finalizer::remove(
            &claims,
            &claim,
            keys::FINALIZER_MAAS_MACHINE,
            "test",
        )
        .await
        .unwrap();
    }
    let left = capmaas_testenv::poll_until(
        Duration::from_secs(120),
        Duration::from_millis(500),
        || async {
            let all = left_behind(&client, &ns).await?;
            Ok::<_, kube::Error>(all.iter().all(Vec::is_empty).then_some(()).ok_or(all).ok())
        },
    )
    .await
    .unwrap();
    if left.is_none() {
        let [claims_left, data_left, ip_claims_left, addresses_left] =
            left_behind(&client, &ns).await.unwrap();
        let log = std::fs::read_to_string(&log).unwrap_or_default();
        let tail: Vec<&str> = log
            .lines()
            .rev()
            .filter(|l| l.contains("WARN") || l.contains("ERROR"))
            .take(30)
            .collect();
        panic!(
            "left behind: claims {claims_left:?}\ndata {data_left:?}\nip claims {ip_claims_left:?}\naddresses {addresses_left:?}\nlog:\n{}",
            tail.join("\n")
        );
    }
    for mut r in replicas {
        r.start_kill().unwrap();
        r.wait().await.unwrap();
    }
}
