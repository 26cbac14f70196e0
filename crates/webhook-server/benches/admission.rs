//! Admission latency and throughput of webhook-server, directly and through a real
//! kube-apiserver (capmaas-testenv). Prints numbers, asserts nothing but setup
//! (`cargo bench -p webhook-server --bench admission`, part of `just bench`).
//!
//! The server runs as a process (the release binary `cargo bench` builds), registered with the
//! configurations of `deploy/`, with `BENCH_POOLS` (200) MaasIPPools already in its cache so
//! the cross-pool overlap rule has real work. Each measured request validates a MaasIPPool
//! create (two ranges, exclusions, compared against every pool of the namespace):
//! - **direct**: AdmissionReviews POSTed over HTTPS (HTTP/2, one connection pool) at
//!   `BENCH_WEBHOOK_RATE` (500) requests/s for `BENCH_WEBHOOK_SECONDS` (10), open loop: latency
//!   counts from the moment a request was due, so a stall is not hidden by sending less;
//! - **closed loop**: 16 requests in flight for 5 s, the most the server answers per second;
//! - **through the API server**: dry-run creates (`dryRun=All`: defaulting webhook, schema,
//!   CEL, validating webhook, nothing stored) at the same rate and at a fifth of it, latency as
//!   the client sees it; and, for scale, dry-run ConfigMap creates (no webhook) at the full
//!   rate: what this API server manages on its own on the same cores.
//!
//! Peak memory is the process's VmHWM after all of it.
#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use capmaas_testenv::env_or;
use capmaas_testenv::objects::kind_api;
use common::{API_VERSION, object, serve};
use kube::api::PostParams;
use kube::core::DynamicObject;
use serde_json::{Value, json};

fn pool(name: &str, third_octet: u64) -> Value {
    let base = format!("10.{}.{}", 100 + third_octet / 256, third_octet % 256);
    object(
        "MaasIPPool",
        name,
        json!({
            "namePrefix": name,
            "pools": [
                {"start": format!("{base}.10"), "end": format!("{base}.99"), "prefix": 24, "gateway": format!("{base}.1")},
                {"start": format!("{base}.110"), "end": format!("{base}.199"), "prefix": 24, "gateway": format!("{base}.1")}
            ],
            "exclusions": [format!("{base}.50"), format!("{base}.60-{base}.69")]
        }),
    )
}

fn review(object: &Value, uid: u64) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": format!("bench-{uid}"),
            "kind": {"group": "infrastructure.cluster.x-k8s.io", "version": "v1beta1", "kind": "MaasIPPool"},
            "resource": {"group": "infrastructure.cluster.x-k8s.io", "version": "v1beta1", "resource": "maasippools"},
            "name": object["metadata"]["name"],
            "namespace": "bench",
            "operation": "CREATE",
            "userInfo": {"username": "bench"},
            "object": object,
            "dryRun": false
        }
    }))
    .unwrap()
}

#[derive(Default)]
struct Samples {
    latencies: Vec<Duration>,
    errors: u64,
}

fn report(label: &str, samples: &Samples, elapsed: Duration) {
    let mut l = samples.latencies.clone();
    l.sort();
    let pct = |p: f64| {
        l.get(((l.len() as f64 * p).ceil() as usize).saturating_sub(1))
            .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    };
    println!(
        "{label:<34} {:>6} ok {:>4} errors {:>8.1} req/s   p50 {:>6.2} ms   p99 {:>6.2} ms   max {:>7.2} ms",
        l.len(),
        samples.errors,
        l.len() as f64 / elapsed.as_secs_f64(),
        pct(0.50),
        pct(0.99),
        pct(1.0),
    );
}

/// Fires `send(i)` at `rate` per second for `seconds`, each timed from when it was due.
async fn open_loop<F, Fut>(rate: u64, seconds: u64, send: F) -> (Samples, Duration)
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = bool> + Send + 'static,
{
    let samples = Arc::new(Mutex::new(Samples::default()));
    let send = Arc::new(send);
    let start = Instant::now();
    let total = rate * seconds;
    let mut tasks = Vec::with_capacity(total as usize);
    for i in 0..total {
        let due = start + Duration::from_secs_f64(i as f64 / rate as f64);
        tokio::time::sleep_until(due.into()).await;
        let (samples, send) = (samples.clone(), send.clone());
        tasks.push(tokio::spawn(async move {
            let ok = send(i).await;
            let latency = due.elapsed();
            let mut s = samples.lock().unwrap();
            if ok {
                s.latencies.push(latency);
            } else {
                s.errors += 1;
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let elapsed = start.elapsed();
    let samples = std::mem::take(&mut *samples.lock().unwrap());
    (samples, elapsed)
}

#[tokio::main]
async fn main() {
    webhook_server::install_crypto();
    let rate = env_or("BENCH_WEBHOOK_RATE", 500);
    let seconds = env_or("BENCH_WEBHOOK_SECONDS", 10);
    let pools = env_or("BENCH_POOLS", 200);
    let served = serve().await;
    let env = &served.env;
    let client = env.client();
    let ns = env.create_namespace("bench").await.unwrap();
    let api = kind_api(&client, &ns, API_VERSION, "MaasIPPool")
        .await
        .unwrap();
    for i in 0..pools {
        let object: DynamicObject = serde_json::from_value(pool(&format!("pool-{i}"), i)).unwrap();
        api.create(&PostParams::default(), &object).await.unwrap();
    }
    // Let the webhook's cache see them.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let http = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(served.serving.ca_pem.as_bytes()).unwrap()])
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let url = format!(
        "{}{}",
        served.serving.base_url(),
        webhook_server::kinds::Kind::MaasIPPool.path(webhook_server::kinds::Mode::Validate)
    );
    let body = Arc::new(review(&pool("candidate", pools + 1), 0));
    let direct = {
        let (http, url, body) = (http.clone(), url.clone(), body.clone());
        move |_i: u64| {
            let (http, url, body) = (http.clone(), url.clone(), body.clone());
            async move {
                match http
                    .post(&url)
                    .header("content-type", "application/json")
                    .body(body.to_vec())
                    .send()
                    .await
                {
                    Ok(r) if r.status().is_success() => r
                        .bytes()
                        .await
                        .is_ok_and(|b| b.windows(14).any(|w| w == b"\"allowed\":true")),
                    _ => false,
                }
            }
        }
    };
    println!(
        "webhook-server admission: {pools} pools in cache, MaasIPPool create validated, release build, {} cores",
        std::thread::available_parallelism().map_or(0, usize::from)
    );
    // Warm up connections and caches.
    let _ = open_loop(100, 1, direct.clone()).await;
    let (samples, elapsed) = open_loop(rate, seconds, direct.clone()).await;
    report(&format!("direct, {rate}/s open loop"), &samples, elapsed);

    let closed = Arc::new(Mutex::new(Samples::default()));
    let start = Instant::now();
    let workers: Vec<_> = (0..16)
        .map(|_| {
            let (closed, direct) = (closed.clone(), direct.clone());
            tokio::spawn(async move {
                while start.elapsed() < Duration::from_secs(5) {
                    let sent = Instant::now();
                    let ok = direct(0).await;
                    let mut s = closed.lock().unwrap();
                    if ok {
                        s.latencies.push(sent.elapsed());
                    } else {
                        s.errors += 1;
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.await.unwrap();
    }
    report(
        "direct, 16 in flight (max rate)",
        &closed.lock().unwrap(),
        start.elapsed(),
    );

    let through = {
        let api = api.clone();
        move |i: u64| {
            let api = api.clone();
            async move {
                let object: DynamicObject =
                    serde_json::from_value(pool(&format!("dry-{i}"), pools + 2 + i % 1000))
                        .unwrap();
                let pp = PostParams {
                    dry_run: true,
                    ..PostParams::default()
                };
                api.create(&pp, &object).await.is_ok()
            }
        }
    };
    let _ = open_loop(50, 1, through.clone()).await;
    let (samples, elapsed) = open_loop(rate, seconds, through.clone()).await;
    report(
        &format!("through the API server, {rate}/s"),
        &samples,
        elapsed,
    );
    let light = rate / 5;
    let (samples, elapsed) = open_loop(light, seconds, through).await;
    report(
        &format!("through the API server, {light}/s"),
        &samples,
        elapsed,
    );

    // The API server alone, for scale: dry-run ConfigMap creates call no webhook.
    let configmaps: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(client.clone(), &ns);
    let baseline = move |i: u64| {
        let configmaps = configmaps.clone();
        async move {
            let cm: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_value(
                json!({"metadata": {"name": format!("cm-{i}")}, "data": {"k": "v"}}),
            )
            .unwrap();
            let pp = PostParams {
                dry_run: true,
                ..PostParams::default()
            };
            configmaps.create(&pp, &cm).await.is_ok()
        }
    };
    let (samples, elapsed) = open_loop(rate, seconds, baseline).await;
    report(
        &format!("API server alone (ConfigMap), {rate}/s"),
        &samples,
        elapsed,
    );

    let peak = served.process.peak_resident_memory_kib().unwrap_or(0);
    let now = served.process.resident_memory_kib().unwrap_or(0);
    println!(
        "webhook-server memory: peak RSS {:.1} MiB, now {:.1} MiB",
        peak as f64 / 1024.0,
        now as f64 / 1024.0
    );
}
