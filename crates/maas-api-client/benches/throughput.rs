//! Throughput benchmark against an instant maas-sim.
//!
//! (a) simulator throughput: N machine GETs through the client with concurrency 16 →
//!     requests/s, p50/p99 latency;
//! (b) client overhead: sequential GETs of the same URL through the client vs raw reqwest
//!     (with and without decoding) → µs/request spent in the client.
//!
//! Run: `cargo bench -p maas-api-client --bench throughput` (about 10 s).

#![allow(clippy::print_stdout, clippy::cast_precision_loss)]

use std::time::{Duration, Instant};

use futures::StreamExt;
use maas_api_client::{ApiKey, Config, MaasClient, Machine, MachineFilter};

const REQUESTS: usize = 2000;
const CONCURRENCY: usize = 16;
/// Sequential requests per mode and round in (b), and the counted rounds.
const PER_ROUND: usize = 200;
const ROUNDS: usize = 5;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((sorted.len() - 1) as f64 * p).round();
    // rank is within 0..len by construction.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let index = rank as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let sim = maas_sim::Simulator::start(maas_sim::SimConfig {
        machines: 20,
        ..maas_sim::SimConfig::instant()
    })
    .await?;
    let key = ApiKey::parse(&sim.api_key())?;
    let client = MaasClient::new(
        Config::builder(&sim.url(), key.clone())
            .max_concurrent_requests(CONCURRENCY)
            .build()?,
    )?;
    let ids: Vec<String> = client
        .list_machines(&MachineFilter::new())
        .await?
        .into_iter()
        .map(|m| m.system_id)
        .collect();
    anyhow::ensure!(!ids.is_empty(), "simulator has no machines");

    // Warm up connections.
    for id in &ids {
        client.get_machine(id).await?;
    }

    // (a) throughput with concurrency 16.
    let started = Instant::now();
    let mut latencies: Vec<Duration> = futures::stream::iter(0..REQUESTS)
        .map(|i| {
            let client = client.clone();
            let id = ids[i % ids.len()].clone();
            async move {
                let t = Instant::now();
                client.get_machine(&id).await.map(|_| t.elapsed())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
    let elapsed = started.elapsed();
    latencies.sort();

    // (b) per-request overhead, sequential, same URL. The three modes alternate in rounds
    // and the median round counts, so warm-up and background noise hit them alike.
    let id = &ids[0];
    let url = format!("{}machines/{id}/", client.api_root());
    let raw = reqwest::Client::new();
    let mut modes: [Vec<Duration>; 3] = [Vec::new(), Vec::new(), Vec::new()];
    let mut nonce = 0_u64;
    for round in 0..=ROUNDS {
        let t = Instant::now();
        for _ in 0..PER_ROUND {
            client.get_machine(id).await?;
        }
        let client_time = t.elapsed();

        let raw_time = raw_round(&raw, &url, &key, &mut nonce, "raw", |body| {
            anyhow::ensure!(!body.is_empty());
            Ok(())
        })
        .await?;
        let raw_decode_time = raw_round(&raw, &url, &key, &mut nonce, "dec", |body| {
            let _machine: Machine = serde_json::from_slice(body)?;
            Ok(())
        })
        .await?;
        // Round 0 warms up the raw client's connection; it is not counted.
        if round > 0 {
            modes[0].push(client_time);
            modes[1].push(raw_time);
            modes[2].push(raw_decode_time);
        }
    }
    let median = |times: &mut Vec<Duration>| {
        times.sort();
        times[times.len() / 2]
    };
    let client_time = median(&mut modes[0]);
    let raw_time = median(&mut modes[1]);
    let raw_decode_time = median(&mut modes[2]);
    let sequential = PER_ROUND;

    let per = |d: Duration| micros(d) / sequential as f64;
    println!(
        "maas-api-client throughput benchmark (maas-sim instant, {} machines)",
        ids.len()
    );
    println!("{:-<64}", "");
    println!("(a) {REQUESTS} GET /machines/{{id}}/, concurrency {CONCURRENCY}");
    println!(
        "    requests/s            {:>10.0}",
        REQUESTS as f64 / elapsed.as_secs_f64()
    );
    println!(
        "    p50 latency (µs)      {:>10.0}",
        micros(percentile(&latencies, 0.50))
    );
    println!(
        "    p99 latency (µs)      {:>10.0}",
        micros(percentile(&latencies, 0.99))
    );
    println!("(b) sequential GETs of one machine, median of {ROUNDS} rounds of {sequential}");
    println!(
        "    maas-api-client (µs/req)        {:>8.1}",
        per(client_time)
    );
    println!("    raw reqwest, bytes (µs/req)   {:>8.1}", per(raw_time));
    println!(
        "    raw reqwest + decode (µs/req) {:>8.1}",
        per(raw_decode_time)
    );
    println!(
        "    client overhead vs raw (µs)   {:>8.1}",
        per(client_time) - per(raw_time)
    );
    println!(
        "    overhead beyond decode (µs)   {:>8.1}",
        per(client_time) - per(raw_decode_time)
    );
    Ok(())
}

/// The time of [`PER_ROUND`] plain reqwest GETs of `url`, each body handed to `check`; the
/// nonces go on from `nonce`, prefixed so that two modes never send the same one.
async fn raw_round(
    raw: &reqwest::Client,
    url: &str,
    key: &ApiKey,
    nonce: &mut u64,
    prefix: &str,
    check: impl Fn(&[u8]) -> anyhow::Result<()>,
) -> anyhow::Result<Duration> {
    let t = Instant::now();
    for _ in 0..PER_ROUND {
        *nonce += 1;
        let resp = signed_get(raw, url, key, &format!("{prefix}{nonce}")).await?;
        check(&resp.bytes().await?)?;
    }
    Ok(t.elapsed())
}

/// A GET of `url` through plain reqwest, signed afresh with `nonce`.
async fn signed_get(
    raw: &reqwest::Client,
    url: &str,
    key: &ApiKey,
    nonce: &str,
) -> reqwest::Result<reqwest::Response> {
    let header = key.authorization_header(nonce, unix_now());
    raw.get(url).header("authorization", header).send().await
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
