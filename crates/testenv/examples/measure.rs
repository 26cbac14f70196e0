//! Prints how long one test control plane takes to become ready (with all CRDs served)
//! and the resident memory of its processes. Run by `just bench`.
#![allow(clippy::print_stdout)]

use std::time::Duration;

fn mib(kib: u64) -> f64 {
    f64::from(u32::try_from(kib).unwrap_or(u32::MAX)) / 1024.0
}

#[tokio::main]
async fn main() -> Result<(), capmaas_testenv::Error> {
    const RUNS: usize = 3;
    let mut startups = Vec::new();
    for run in 0..RUNS {
        let env = capmaas_testenv::TestEnv::start().await?;
        startups.push(env.startup_duration());
        if run == RUNS - 1 {
            // Let the controller-manager finish its first discovery and GC sync.
            tokio::time::sleep(Duration::from_secs(5)).await;
            println!("testenv: resident memory after start (all CRDs installed):");
            let mut total = 0;
            for process in env.processes() {
                let rss = process.resident_memory_kib().unwrap_or(0);
                total += rss;
                println!("  {:<26} {:>7.1} MiB", process.name(), mib(rss));
            }
            println!("  {:<26} {:>7.1} MiB", "total", mib(total));
        }
        env.stop().await;
    }
    let ms: Vec<u128> = startups.iter().map(Duration::as_millis).collect();
    println!("testenv: start-to-ready with CRDs served, {RUNS} runs: {ms:?} ms");
    Ok(())
}
