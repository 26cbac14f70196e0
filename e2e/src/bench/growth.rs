//! How cost grows with size: each figure of our smallest run of a deployment time beside the
//! largest run of the same deployment time, per machine, and by how much it changed.
//! The target is flat: a per-machine figure of the large run within 20 % of the small one's.

use std::fmt::Write as _;

use super::{BenchResult, Provider};

/// The smallest and the largest of our runs with the same deployment time, for every deployment
/// time measured at more than one size.
pub(super) fn pairs(results: &[BenchResult]) -> Vec<(&BenchResult, &BenchResult)> {
    let ours: Vec<&BenchResult> = results
        .iter()
        .filter(|r| r.provider == Provider::Ours && r.deploy.is_some())
        .collect();
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for run in &ours {
        if seen.contains(&run.deploy) {
            continue;
        }
        seen.push(run.deploy);
        let same = ours.iter().filter(|r| r.deploy == run.deploy);
        let small = same.clone().min_by_key(|r| r.machines);
        let large = same.max_by_key(|r| r.machines);
        if let (Some(small), Some(large)) = (small, large)
            && small.machines < large.machines
        {
            out.push((*small, *large));
        }
    }
    out
}

/// The figures compared, by name: per machine, except peak memory, which is per process for
/// the whole run.
fn figures(r: &BenchResult) -> Vec<(String, f64)> {
    let cpu: f64 = r.cpu_seconds.values().sum();
    let mut figures = vec![
        (
            "seconds to all Running, per machine".to_owned(),
            r.per_machine(r.elapsed.as_secs_f64()),
        ),
        (
            "MAAS calls per machine".to_owned(),
            r.per_machine(super::count_u64(r.maas_calls_total())),
        ),
        (
            "writes per machine (maas* kinds)".to_owned(),
            r.per_machine(r.our_kind_writes),
        ),
        (
            "writes per machine (all)".to_owned(),
            r.per_machine(r.all_writes),
        ),
        (
            "CPU seconds per machine, all processes".to_owned(),
            r.per_machine(cpu),
        ),
    ];
    for (process, seconds) in &r.cpu_seconds {
        figures.push((
            format!("CPU seconds per machine, {process}"),
            r.per_machine(*seconds),
        ));
    }
    for (process, mib) in &r.peak_rss_mib {
        figures.push((format!("peak RSS MiB, {process} (whole run)"), *mib));
    }
    figures
}

/// The growth table of each pair; empty when no deployment time was measured at two sizes.
pub(super) fn growth_tables(results: &[BenchResult]) -> String {
    let mut out = String::new();
    for (small, large) in pairs(results) {
        let deploy = small.deploy.map(|d| d.label()).unwrap_or_default();
        let _ = writeln!(
            out,
            "\n## How cost grows: {} → {} machines, {deploy}\n",
            small.machines, large.machines
        );
        let _ = writeln!(
            out,
            "| figure | {} machines | {} machines | change |\n|---|---|---|---|",
            small.machines, large.machines
        );
        let large_figures = figures(large);
        for (name, before) in figures(small) {
            let Some((_, after)) = large_figures.iter().find(|(n, _)| *n == name) else {
                continue;
            };
            let change = if before > 0.0 {
                format!("{:+.0} %", 100.0 * (after - before) / before)
            } else {
                "–".to_owned()
            };
            let _ = writeln!(out, "| {name} | {before:.3} | {after:.3} | {change} |");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::DeployTime;
    use super::*;

    fn run(machines: usize, deploy: DeployTime, seconds: u64, calls: u64) -> BenchResult {
        BenchResult {
            provider: Provider::Ours,
            machines,
            deploy: Some(deploy),
            elapsed: Duration::from_secs(seconds),
            maas_calls: [("machines.allocate".to_owned(), calls)].into(),
            maas_rate_limit_wait: None,
            our_kind_writes: 10.0 * super::super::count(machines),
            all_writes: 30.0 * super::super::count(machines),
            reconciles: None,
            peak_rss_mib: [("maas-client".to_owned(), 40.0)].into(),
            cpu_seconds: [(
                "maas-client".to_owned(),
                0.1 * super::super::count(machines),
            )]
            .into(),
            timeline: super::super::TimelineSummary::default(),
            audit: None,
        }
    }

    #[test]
    fn each_deployment_time_measured_at_two_sizes_gets_its_table() {
        let fast = DeployTime::fast();
        let results = [
            run(200, fast, 40, 440),
            run(200, DeployTime::spread(30), 80, 440),
            run(1000, fast, 250, 2_400),
        ];
        let pairs = pairs(&results);
        assert_eq!(pairs.len(), 1, "30 s was measured at one size only");
        assert_eq!((pairs[0].0.machines, pairs[0].1.machines), (200, 1000));
        let table = growth_tables(&results);
        assert!(
            table.contains("## How cost grows: 200 → 1000 machines, 0–2 s"),
            "{table}"
        );
        // 40 s / 200 = 0.2 s, 250 s / 1000 = 0.25 s: +25 %.
        assert!(
            table.contains("| seconds to all Running, per machine | 0.200 | 0.250 | +25 % |"),
            "{table}"
        );
        assert!(
            table.contains("| MAAS calls per machine | 2.200 | 2.400 | +9 % |"),
            "{table}"
        );
        assert!(table.contains("| writes per machine (maas* kinds) | 10.000 | 10.000 | +0 % |"));
        assert!(
            table.contains("| peak RSS MiB, maas-client (whole run) | 40.000 | 40.000 | +0 % |")
        );
        assert!(growth_tables(&results[..2]).is_empty());
    }
}
