//! `just bench` (provisioning part): 50, 200 and 500 machines with zero and 2 s simulated
//! deployment time. Prints a table and writes it to `e2e/bench-results.md`.
//! `CAPMAAS_BENCH_SIZES=50,200` limits the sizes.
#![allow(clippy::print_stdout)]

use std::time::Duration;

use capmaas_e2e::bench::{describe_binaries, run, table};

/// Heading of the chaos run's section of `e2e/bench-results.md`.
const CHAOS_SECTION: &str = "# Chaos run";

#[tokio::main]
async fn main() -> Result<(), capmaas_e2e::Error> {
    let sizes: Vec<usize> = std::env::var("CAPMAAS_BENCH_SIZES").ok().map_or_else(
        || vec![50, 200, 500],
        |s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect(),
    );
    let binaries = capmaas_e2e::harness::bin_dir();
    let mut results = Vec::new();
    for &machines in &sizes {
        for deploy in [Duration::ZERO, Duration::from_secs(2)] {
            println!(
                "provisioning {machines} machines, {}s simulated deployment ...",
                deploy.as_secs()
            );
            let result = run(machines, deploy, Duration::from_secs(1800)).await?;
            println!("  all running after {:.1}s", result.elapsed.as_secs_f64());
            results.push(result);
        }
    }
    let report = format!(
        "# Provisioning benchmark\n\nBinaries: {}. One MachineDeployment, no control plane; servers = machines; \
         writes are counted by the management API server (`apiserver_request_total`).\n\n{}",
        describe_binaries(&binaries, &capmaas_testenv::repo_root()),
        table(&results)
    );
    println!("\n{report}");
    let path = capmaas_testenv::repo_root().join("e2e/bench-results.md");
    // The chaos run's section (written by hand from `just chaos`) is kept.
    let kept = std::fs::read_to_string(&path)
        .ok()
        .and_then(|old| old.find(CHAOS_SECTION).map(|at| old[at..].to_owned()))
        .unwrap_or_default();
    let report = if kept.is_empty() {
        report
    } else {
        format!(
            "{}

{kept}",
            report.trim_end()
        )
    };
    std::fs::write(&path, &report).map_err(|e| capmaas_e2e::Error::Io {
        context: format!("writing {}", path.display()),
        source: e,
    })?;
    println!("written to {}", path.display());
    Ok(())
}
