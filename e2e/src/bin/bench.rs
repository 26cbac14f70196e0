//! `just bench` (provisioning part): 200 machines with 0–2 s, 30 s ± 30 % and
//! 120 s ± 30 % simulated deployments, 50 with instant ones and 1,000 with 0–2 s, each size
//! also with the null
//! provider (the ceiling of the test world). Prints the report and writes it to
//! `e2e/bench-results.md`, keeping the file's other sections.
//!
//! `CAPMAAS_BENCH_SIZES=50,200` and `CAPMAAS_BENCH_DEPLOYS=0,30,120` narrow it (every size
//! with every deployment time; `0` is 0–2 s, `N` is N s ± 30 %, `N:P` is N s ± P %, `0:0`
//! instant). `CAPMAAS_BENCH_TIMEOUT` (seconds, default 1800) bounds each run.
//! `CAPMAAS_BENCH_GATEWAY_ARGS` (flags separated by spaces, e.g. `--maas-workload-annotations`;
//! the section is then its own) runs
//! the gateway with flags other than its defaults, for what-if measurements; the report names
//! them. `CAPMAAS_BENCH_MAAS` (`none`, `region`, or a JSON profile file; see docs/maas-sim.md)
//! makes the simulated MAAS answer as slowly as a real region does; the report names it.
#![allow(clippy::print_stdout)]

use std::time::Duration;

use capmaas_e2e::bench::{
    BenchResult, RunPlan, describe_binaries, merge_report, plan, report, run, run_ceiling,
};

#[tokio::main]
async fn main() -> Result<(), capmaas_e2e::Error> {
    let sizes = std::env::var("CAPMAAS_BENCH_SIZES").ok();
    let deploys = std::env::var("CAPMAAS_BENCH_DEPLOYS").ok();
    let plan = plan(sizes.as_deref(), deploys.as_deref())?;
    let timeout = Duration::from_secs(
        std::env::var("CAPMAAS_BENCH_TIMEOUT")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(1800),
    );
    let gateway_args: Vec<String> = std::env::var("CAPMAAS_BENCH_GATEWAY_ARGS")
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let maas = std::env::var("CAPMAAS_BENCH_MAAS").unwrap_or_else(|_| "none".to_owned());
    let maas_latency = maas_sim::LatencyProfile::named(&maas)?;
    let binaries = capmaas_e2e::harness::bin_dir();
    let mut results = Vec::new();
    let mut ceilings_done = Vec::new();
    for RunPlan { machines, deploy } in plan.iter().copied() {
        // The ceiling of each size once, measured like the runs it is compared with.
        if !ceilings_done.contains(&machines) {
            println!("provisioning {machines} machines with the null provider (ceiling) ...");
            let result = run_ceiling(machines, timeout).await?;
            print_done(&result);
            results.push(result);
            ceilings_done.push(machines);
        }
        println!(
            "provisioning {machines} machines, {} simulated deployments ...",
            deploy.label()
        );
        let plan = RunPlan { machines, deploy };
        let result = run(plan, &gateway_args, &maas_latency, timeout).await?;
        print_done(&result);
        results.push(result);
    }
    let mut setup = vec![describe_binaries(&binaries, &capmaas_testenv::repo_root())];
    if !gateway_args.is_empty() {
        let flags = gateway_args.join(" ");
        setup.push(format!(
            "the gateway run with `{flags}` (`CAPMAAS_BENCH_GATEWAY_ARGS`)"
        ));
    }
    let context = capmaas_e2e::bench::ReportContext {
        binaries: setup.join(", "),
        maas_latency: (!maas_latency.is_none()).then(|| maas.clone()),
        gateway_args: (!gateway_args.is_empty()).then(|| gateway_args.join(" ")),
        cores: std::thread::available_parallelism().map_or(0, std::num::NonZero::get),
        generated: k8s_openapi::jiff::Timestamp::now()
            .round(k8s_openapi::jiff::Unit::Second)
            .map_or_else(|_| "?".to_owned(), |t| t.to_string()),
    };
    let report = report(&results, &context);
    println!("\n{report}");
    let path = capmaas_testenv::repo_root().join("e2e/bench-results.md");
    let old = std::fs::read_to_string(&path).unwrap_or_default();
    std::fs::write(&path, merge_report(&report, &old)).map_err(|e| capmaas_e2e::Error::Io {
        context: format!("writing {}", path.display()),
        source: e,
    })?;
    println!("written to e2e/bench-results.md");
    Ok(())
}

fn print_done(result: &BenchResult) {
    println!(
        "  all running after {:.1}s ({:.2} machines/s)",
        result.elapsed.as_secs_f64(),
        result.rate()
    );
}
