//! A latency profile: calls take their service time, a machine listing a time per machine it
//! returns, and the region serves no more calls at once than it has workers. Only lower bounds
//! are checked: a profile may never make the simulator answer sooner than it says.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::start;
use maas_sim::{LatencyProfile, SimConfig};
use reqwest::Method;

fn profile(ops: &[(&str, u64)], list_per_machine_us: u64, workers: usize) -> LatencyProfile {
    LatencyProfile {
        ops: ops
            .iter()
            .map(|(op, ms)| ((*op).to_owned(), *ms))
            .collect::<BTreeMap<_, _>>(),
        list_per_machine_us,
        workers,
    }
}

async fn sim_with(latency: LatencyProfile, machines: usize) -> common::TestSim {
    start(SimConfig {
        machines,
        latency,
        ..SimConfig::instant()
    })
    .await
}

#[tokio::test]
async fn a_listing_takes_a_time_per_machine_it_returns() {
    let t = sim_with(profile(&[("*", 0)], 30_000, 0), 10).await;
    let started = Instant::now();
    let listed = t
        .signed(&t.client, Method::GET, "machines/")
        .send()
        .await
        .unwrap();
    assert_eq!(listed.status(), 200);
    assert_eq!(
        listed.json::<Vec<serde_json::Value>>().await.unwrap().len(),
        10
    );
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "10 machines × 30 ms"
    );
}

#[tokio::test]
async fn calls_wait_for_one_of_the_region_workers() {
    let t = sim_with(profile(&[("machine.read", 200), ("*", 0)], 0, 1), 2).await;
    let id = t.first_id();
    let path = format!("machines/{id}/");
    let started = Instant::now();
    let (first, second) = tokio::join!(
        t.signed(&t.client, Method::GET, &path).send(),
        t.signed(&t.client, Method::GET, &path).send(),
    );
    assert_eq!(first.unwrap().status(), 200);
    assert_eq!(second.unwrap().status(), 200);
    assert!(
        started.elapsed() >= Duration::from_millis(400),
        "one worker serves the two reads one after the other"
    );
}

#[test]
fn the_region_profile_is_built_in_and_files_are_read() {
    assert_eq!(
        LatencyProfile::named("region").unwrap(),
        LatencyProfile::region()
    );
    assert!(LatencyProfile::named("none").unwrap().is_none());
    let file = std::env::temp_dir().join(format!("latency-{}.json", std::process::id()));
    std::fs::write(&file, r#"{"ops": {"machine.deploy": 900}, "workers": 4}"#).unwrap();
    let read = LatencyProfile::named(file.to_str().unwrap()).unwrap();
    std::fs::remove_file(&file).unwrap();
    assert_eq!(read.ops["machine.deploy"], 900);
    assert_eq!(read.workers, 4);
}
