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
//!
//! `CAPMAAS_BENCH_RUN=deletion` runs only the mass-deletion run instead (docs/e2e.md, "Mass
//! deletion benchmark"): the first size of `CAPMAAS_BENCH_SIZES` (default 200) deleted at once
//! while a few new machines are provisioned; its own section in `e2e/bench-results.md`.
#![allow(clippy::print_stdout)]

use std::time::Duration;

use capmaas_e2e::Error;
use capmaas_e2e::bench::{
    BenchResult, ReportContext, RunPlan, deletion_report, deletion_size, describe_binaries,
    late_count, merge_report, plan, report, run, run_ceiling, run_deletion,
};
use maas_sim::LatencyProfile;

#[tokio::main]
async fn main() -> Result<(), Error> {
    let sizes = std::env::var("CAPMAAS_BENCH_SIZES").ok();
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
    let maas_latency = LatencyProfile::named(&maas)?;
    // Dated when the runs are done, as before.
    let context = || context(&gateway_args, &maas, &maas_latency);
    let which = std::env::var("CAPMAAS_BENCH_RUN").unwrap_or_default();
    let report = match which.as_str() {
        "" | "provisioning" => {
            let deploys = std::env::var("CAPMAAS_BENCH_DEPLOYS").ok();
            let plan = plan(sizes.as_deref(), deploys.as_deref())?;
            let results = provisioning(&plan, &gateway_args, &maas_latency, timeout).await?;
            report(&results, &context())
        }
        "deletion" => {
            let machines = deletion_size(sizes.as_deref())?;
            println!(
                "provisioning {machines} machines (0–2 s deployments), then deleting them all at \
                 once while {} more are provisioned ...",
                late_count(machines)
            );
            let result = run_deletion(machines, &gateway_args, &maas_latency, timeout, |r| {
                println!(
                    "  provisioned (not measured): all running after {:.1}s; deleting",
                    r.elapsed.as_secs_f64()
                );
            })
            .await?;
            println!(
                "  deleted after {:.1}s (servers Ready in MAAS after {:.1}s)",
                result.gone.as_secs_f64(),
                result.servers_ready.as_secs_f64()
            );
            deletion_report(&result, &context())
        }
        other => {
            return Err(Error::BenchConfig {
                name: "CAPMAAS_BENCH_RUN".into(),
                message: format!("{other:?} is not a run (`deletion`, or unset)"),
            });
        }
    };
    println!("\n{report}");
    let path = capmaas_testenv::repo_root().join("e2e/bench-results.md");
    let old = std::fs::read_to_string(&path).unwrap_or_default();
    std::fs::write(&path, merge_report(&report, &old)).map_err(|e| Error::Io {
        context: format!("writing {}", path.display()),
        source: e,
    })?;
    println!("written to e2e/bench-results.md");
    Ok(())
}

/// The provisioning runs of `plan`, each size's ceiling first.
async fn provisioning(
    plan: &[RunPlan],
    gateway_args: &[String],
    maas_latency: &LatencyProfile,
    timeout: Duration,
) -> Result<Vec<BenchResult>, Error> {
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
        let result = run(plan, gateway_args, maas_latency, timeout).await?;
        print_done(&result);
        results.push(result);
    }
    Ok(results)
}

/// Where and how the runs are measured, for the report.
fn context(gateway_args: &[String], maas: &str, maas_latency: &LatencyProfile) -> ReportContext {
    let binaries = capmaas_e2e::harness::bin_dir();
    let mut setup = vec![describe_binaries(&binaries, &capmaas_testenv::repo_root())];
    if !gateway_args.is_empty() {
        let flags = gateway_args.join(" ");
        setup.push(format!(
            "the gateway run with `{flags}` (`CAPMAAS_BENCH_GATEWAY_ARGS`)"
        ));
    }
    ReportContext {
        binaries: setup.join(", "),
        maas_latency: (!maas_latency.is_none()).then(|| maas.to_owned()),
        gateway_args: (!gateway_args.is_empty()).then(|| gateway_args.join(" ")),
        cores: std::thread::available_parallelism().map_or(0, std::num::NonZero::get),
        generated: k8s_openapi::jiff::Timestamp::now()
            .round(k8s_openapi::jiff::Unit::Second)
            .map_or_else(|_| "?".to_owned(), |t| t.to_string()),
    }
}

fn print_done(result: &BenchResult) {
    println!(
        "  all running after {:.1}s ({:.2} machines/s)",
        result.elapsed.as_secs_f64(),
        result.rate()
    );
}
