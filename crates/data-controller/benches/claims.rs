//! Claims per second of the data-controller against a real kube-apiserver (capmaas-testenv with
//! our CRDs and the CAPI IPAM CRDs, no kube-controller-manager). Prints numbers, asserts nothing
//! but setup (`cargo bench -p data-controller --bench claims`).
//!
//! The controller runs in-process (both halves, `--concurrency` as the binary's default), as in
//! `tests/data_claims.rs`. Each case gets its own namespace; its fixed objects (pool, template,
//! hosts) are made first and the controller is left to settle, then the claims are all created
//! at once (at most [`CREATE_CONCURRENCY`] requests in flight) and polled until done:
//! - `IPAM only`: one MaasIPPool of 256 addresses (more if there are more claims) and
//!   `BENCH_IPAM_CLAIMS` (200) `IPAddressClaim`s; done when every claim has `status.addressRef`;
//! - `data templates`: one MaasIPPool, one MaasDataTemplate (index, an address, networkData with
//!   a link by host-interface MAC and an IPv4 network from the pool), `BENCH_DATA_CLAIMS` (100)
//!   MaasHosts with one interface and as many MaasDataClaims; done when every claim is `Ready`
//!   with `status.renderedData`.
//!
//! Writes are the API server's own count (`apiserver_request_total`, verbs POST, PUT, PATCH,
//! DELETE, APPLY, any response code) from just before the claims are created until the
//! controller has gone quiet after the last one is done, less the bench's own creates and less
//! `leases` (the API server renews its identity Lease; the controller runs without leader
//! election). Each row is followed by the writes per claim by resource and verb.
#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_precision_loss
)]

use std::collections::BTreeSet;
use std::future::Future;
use std::time::{Duration, Instant};

use capmaas_api::capi_ipam::{IPAddress, IPAddressClaim, IPAddressClaimSpec, IPPoolReference};
use capmaas_api::{MaasDataClaim, MaasDataTemplate, MaasHost, MaasIPPool, keys};
use capmaas_runtime::embedded::Running;
use capmaas_testenv::{ApiRequests, TestEnv, env_or};
use data_controller::{BINARY, ControllerArgs};
use futures::StreamExt;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use serde_json::json;

#[path = "../tests/support/mod.rs"]
mod support;

/// Requests the bench keeps in flight while it creates the claims.
const CREATE_CONCURRENCY: usize = 32;
/// How long a case may take until every claim is done.
const DONE_TIMEOUT: Duration = Duration::from_secs(600);
/// How often the claims are listed while waiting.
const POLL: Duration = Duration::from_millis(100);
/// The controller counts as quiet when no write happened for this long.
const QUIET: Duration = Duration::from_secs(2);

/// Writes since `before` once no write happened for [`QUIET`].
async fn settled(client: &Client, before: &ApiRequests) -> ApiRequests {
    ApiRequests::settled(client, before, QUIET)
        .await
        .unwrap()
        .writes()
}

async fn create<K>(client: &Client, ns: &str, object: serde_json::Value) -> K
where
    K: Resource<Scope = kube::core::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let object: K = serde_json::from_value(object).unwrap();
    Api::<K>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &object)
        .await
        .unwrap()
}

/// Runs `make(i)` for `0..n`, [`CREATE_CONCURRENCY`] at a time.
async fn all_at_once<F, Fut>(n: usize, make: F)
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = ()>,
{
    futures::stream::iter(0..n)
        .map(make)
        .buffer_unordered(CREATE_CONCURRENCY)
        .collect::<()>()
        .await;
}

/// A MaasIPPool of `size` IPv4 addresses from `10.<second>.0.10`, prefix 16, gateway
/// `10.<second>.0.1`.
async fn pool(client: &Client, ns: &str, second: u8, size: usize) {
    let first = u32::from(std::net::Ipv4Addr::new(10, second, 0, 10));
    let last = std::net::Ipv4Addr::from(first + u32::try_from(size).unwrap() - 1);
    create::<MaasIPPool>(
        client,
        ns,
        json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
            "kind": "MaasIPPool",
            "metadata": {"name": "prov"},
            "spec": {
                "namePrefix": "prov",
                "pools": [{"start": std::net::Ipv4Addr::from(first).to_string(), "end": last.to_string(),
                    "prefix": 16, "gateway": format!("10.{second}.0.1")}],
                "dnsServers": [format!("10.{second}.0.53")]
            }
        }),
    )
    .await;
}

/// Polls until `done` of the listed objects reaches `n`; the time from `start`, and how many
/// were done.
async fn wait_done<K, F>(
    client: &Client,
    ns: &str,
    n: usize,
    start: Instant,
    done: F,
) -> (Duration, usize)
where
    K: Resource<Scope = kube::core::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
    F: Fn(&K) -> bool,
{
    let api = Api::<K>::namespaced(client.clone(), ns);
    let mut count = 0;
    while start.elapsed() < DONE_TIMEOUT {
        let list = api.list(&ListParams::default()).await.unwrap();
        count = list.items.iter().filter(|o| done(o)).count();
        if count >= n {
            return (start.elapsed(), count);
        }
        tokio::time::sleep(POLL).await;
    }
    (start.elapsed(), count)
}

/// Checks that the namespace's IPAddresses are `n` with `n` distinct addresses; a complaint if
/// not.
async fn distinct_addresses(client: &Client, ns: &str, n: usize) -> Option<String> {
    let items = Api::<IPAddress>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    let distinct: BTreeSet<&str> = items.iter().map(|a| a.spec.address.as_str()).collect();
    (items.len() != n || distinct.len() != n).then(|| {
        format!(
            "ERROR: {} IPAddresses holding {} distinct addresses, expected {n}",
            items.len(),
            distinct.len()
        )
    })
}

fn header() {
    println!(
        "{:<34} {:>7} {:>12} {:>12} {:>14}  writes",
        "case", "claims", "done after", "claims/s", "writes/claim"
    );
}

/// One printed row, then the writes per claim by resource and verb, then any complaints.
fn report(
    case: &str,
    n: usize,
    done: usize,
    elapsed: Duration,
    writes: &ApiRequests,
    errors: &[String],
) {
    let rate = done as f64 / elapsed.as_secs_f64().max(1e-9);
    let per = |w: f64| w / (n.max(1) as f64);
    println!(
        "{case:<34} {n:>7} {:>10.3} s {rate:>10.1} /s {:>14.1}  {} ({} not 2xx)",
        elapsed.as_secs_f64(),
        per(writes.total()),
        writes.total(),
        writes.refused()
    );
    println!("    per claim: {}", writes.per(n));
    if done < n {
        println!(
            "    ERROR: only {done} of {n} done after {}s",
            DONE_TIMEOUT.as_secs()
        );
    }
    for e in errors {
        println!("    {e}");
    }
}

async fn ipam_only(env: &TestEnv, n: usize) {
    let client = env.client();
    let ns = env.create_namespace("bench-ipam").await.unwrap();
    pool(&client, &ns, 20, n.max(256)).await;
    let before = settled(&client, &ApiRequests::default()).await;
    let start = Instant::now();
    all_at_once(n, |i| {
        let (client, ns) = (client.clone(), ns.clone());
        async move {
            let claim = IPAddressClaim::new(
                &format!("c{i}"),
                IPAddressClaimSpec {
                    pool_ref: IPPoolReference::maas_ip_pool("prov"),
                    cluster_name: None,
                },
            );
            Api::<IPAddressClaim>::namespaced(client, &ns)
                .create(&PostParams::default(), &claim)
                .await
                .unwrap();
        }
    })
    .await;
    let (elapsed, done) =
        wait_done::<IPAddressClaim, _>(&client, &ns, n, start, |c| c.address_ref().is_some()).await;
    let writes = settled(&client, &before)
        .await
        .minus("ipaddressclaims", "POST", n as f64);
    let errors: Vec<String> = distinct_addresses(&client, &ns, n)
        .await
        .into_iter()
        .collect();
    report(
        &format!("IPAM only (pool of {})", n.max(256)),
        n,
        done,
        elapsed,
        &writes,
        &errors,
    );
}

fn mac(i: usize) -> String {
    format!(
        "52:54:00:{:02x}:{:02x}:{:02x}",
        (i >> 16) & 0xff,
        (i >> 8) & 0xff,
        i & 0xff
    )
}

fn rendered(claim: &MaasDataClaim) -> bool {
    claim.status.as_ref().is_some_and(|s| {
        s.rendered_data.is_some()
            && s.conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "Ready" && c.status == "True")
    })
}

async fn data_templates(env: &TestEnv, n: usize) {
    let client = env.client();
    let ns = env.create_namespace("bench-data").await.unwrap();
    pool(&client, &ns, 30, n.max(1) + 16).await;
    create::<MaasDataTemplate>(
        &client,
        &ns,
        json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
            "kind": "MaasDataTemplate",
            "metadata": {"name": "workers"},
            "spec": {
                "metaData": {
                    "indexes": [{"key": "local-hostname", "offset": 0, "step": 1, "prefix": "node-"}],
                    "ipAddressesFromPool": [{"key": "address", "name": "prov"}]
                },
                "networkData": {
                    "links": {"ethernets": [{"type": "phy", "id": "eth0", "macAddress": {"fromHostInterface": "eno1"}}]},
                    "networks": {"ipv4": [{"id": "prov", "link": "eth0", "ipAddressFromPool": {"name": "prov"}}]}
                }
            }
        }),
    )
    .await;
    all_at_once(n, |i| {
        let (client, ns) = (client.clone(), ns.clone());
        async move {
            let name = format!("h{i}");
            create::<MaasHost>(
                &client,
                &ns,
                json!({
                    "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                    "kind": "MaasHost",
                    "metadata": {"name": name},
                    "spec": {"systemID": name}
                }),
            )
            .await;
            Api::<MaasHost>::namespaced(client, &ns)
                .patch_status(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(
                        json!({"status": {"interfaces": [{"name": "eno1", "mac": mac(i)}]}}),
                    ),
                )
                .await
                .unwrap();
        }
    })
    .await;
    let before = settled(&client, &ApiRequests::default()).await;
    let start = Instant::now();
    all_at_once(n, |i| {
        let (client, ns) = (client.clone(), ns.clone());
        async move {
            create::<MaasDataClaim>(
                &client,
                &ns,
                json!({
                    "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                    "kind": "MaasDataClaim",
                    "metadata": {"name": format!("m{i}"), "finalizers": [keys::FINALIZER_MAAS_MACHINE]},
                    "spec": {"template": {"name": "workers"}, "hostRef": {"name": format!("h{i}")}}
                }),
            )
            .await;
        }
    })
    .await;
    let (elapsed, done) = wait_done::<MaasDataClaim, _>(&client, &ns, n, start, rendered).await;
    let writes = settled(&client, &before)
        .await
        .minus("maasdataclaims", "POST", n as f64);
    let mut errors: Vec<String> = distinct_addresses(&client, &ns, n)
        .await
        .into_iter()
        .collect();
    let (data, indexes) = support::data_and_indexes(&client, &ns).await;
    if data.len() != n || indexes.len() != n {
        errors.push(format!(
            "ERROR: {} MaasData holding {} distinct indexes, expected {n}",
            data.len(),
            indexes.len()
        ));
    }
    report(
        "data templates (MaasDataClaim)",
        n,
        done,
        elapsed,
        &writes,
        &errors,
    );
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    capmaas_testenv::bench::log_to_stderr_if_asked();
    let ipam_claims = env_or("BENCH_IPAM_CLAIMS", 200);
    let data_claims = env_or("BENCH_DATA_CLAIMS", 100);
    let (profile, cores) = capmaas_testenv::bench::profile_and_cores();
    println!(
        "data-controller against a real kube-apiserver: {profile} build, {cores} cores, \
         controller in-process with --concurrency={}, BENCH_IPAM_CLAIMS={ipam_claims}, \
         BENCH_DATA_CLAIMS={data_claims}, {CREATE_CONCURRENCY} creates in flight",
        data_controller::DEFAULT_CONCURRENCY
    );
    let env = TestEnv::without_controller_manager().await.unwrap();
    println!(
        "API server with CRDs up after {:.1} s",
        env.startup_duration().as_secs_f64()
    );
    let concurrency = format!("--concurrency={}", data_controller::DEFAULT_CONCURRENCY);
    let config = env.kube_config().await.unwrap();
    let controller = Running::start(BINARY, config, &[&concurrency], move |term| {
        data_controller::run(term, ControllerArgs::default())
    })
    .await
    .unwrap();
    header();
    ipam_only(&env, ipam_claims).await;
    data_templates(&env, data_claims).await;
    let (bench, apiserver) = capmaas_testenv::bench::peak_rss_mib(&env);
    println!(
        "bench process peak RSS (controller, bench and client; API server excluded): {bench} MiB; \
         kube-apiserver peak RSS: {apiserver} MiB",
    );
    let _ = controller.stop(Duration::from_secs(10)).await;
}
