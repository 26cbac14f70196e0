//! `just chaos`: the chaos run at full size — 200 machines (3 control plane +
//! 197 workers) on 220 simulated servers, a random controller SIGKILLed and restarted every
//! 5 s, 10 % 5xx, 2 % timeouts, 2 % commit-then-fail, a 60 s MAAS outage, scale to 100,
//! delete everything. Prints the report; exits 1 when any harm was counted.
//!
//! Environment: `CHAOS_MACHINES` (then 10 % spare servers and a scale-down to half),
//! `CHAOS_CONTROL_PLANE`, `CHAOS_SCALE_TO`, `CHAOS_KILL_SECONDS`, `CHAOS_OUTAGE_SECONDS`,
//! `CHAOS_SEED` change the size. Process logs are copied to `target/chaos-logs/`.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::process::ExitCode;
use std::time::Duration;

use capmaas_e2e::chaos::{ChaosConfig, run};

fn env<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

#[tokio::main]
async fn main() -> ExitCode {
    let mut config = ChaosConfig::default();
    if let Some(machines) = env::<usize>("CHAOS_MACHINES") {
        config.machines = machines;
        config.spare_servers = (machines / 10).max(2);
        config.scale_to = machines / 2;
    }
    if let Some(n) = env("CHAOS_CONTROL_PLANE") {
        config.control_plane = n;
    }
    config.scale_to = env("CHAOS_SCALE_TO").unwrap_or(config.scale_to.max(config.control_plane));
    if let Some(seconds) = env("CHAOS_KILL_SECONDS") {
        config.kill_interval = Duration::from_secs(seconds);
    }
    if let Some(seconds) = env("CHAOS_OUTAGE_SECONDS") {
        config.outage = Duration::from_secs(seconds);
    }
    if let Some(seed) = env("CHAOS_SEED") {
        config.seed = seed;
    }
    if config.control_plane > config.scale_to || config.scale_to > config.machines {
        eprintln!(
            "chaos: need control plane ({}) <= scale-to ({}) <= machines ({})",
            config.control_plane, config.scale_to, config.machines
        );
        return ExitCode::from(2);
    }
    println!(
        "chaos: {} machines ({} control plane) on {} servers, a kill every {} s, {:.0} % 5xx, \
         {:.0} % timeouts, {:.0} % commit-then-fail, a {} s outage, then {} machines, then none; \
         binaries from {}",
        config.machines,
        config.control_plane,
        config.machines + config.spare_servers,
        config.kill_interval.as_secs(),
        config.error_rate * 100.0,
        config.timeout_rate * 100.0,
        config.lost_answer_rate * 100.0,
        config.outage.as_secs(),
        config.scale_to,
        capmaas_e2e::harness::bin_dir().display(),
    );
    match run(config).await {
        Ok(report) => {
            println!("\n{}", report.table());
            let incomplete = report.incomplete_phases();
            if report.harm() > 0 {
                println!("HARM: {} (must be 0)", report.harm());
                ExitCode::FAILURE
            } else if !incomplete.is_empty() {
                println!("no harm counted, but phases timed out: {incomplete:?}");
                ExitCode::FAILURE
            } else {
                println!("no harm");
                ExitCode::SUCCESS
            }
        }
        Err(e) => {
            eprintln!("chaos run failed: {e}");
            ExitCode::FAILURE
        }
    }
}
