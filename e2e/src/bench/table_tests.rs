use std::time::Duration;

use super::super::audit::WriteKey;
use super::super::metrics::RateLimitWait;
use super::super::timeline::{Milestone, MilestoneRow};
use super::*;

fn result(
    provider: Provider,
    machines: usize,
    deploy: Option<DeployTime>,
    secs: u64,
) -> BenchResult {
    BenchResult {
        provider,
        machines,
        deploy,
        elapsed: Duration::from_secs(secs),
        maas_calls: BTreeMap::new(),
        maas_rate_limit_wait: None,
        our_kind_writes: 0.0,
        all_writes: 0.0,
        reconciles: None,
        peak_rss_mib: BTreeMap::new(),
        cpu_seconds: BTreeMap::new(),
        timeline: TimelineSummary::default(),
        audit: None,
    }
}

fn ours_50() -> BenchResult {
    let mut r = result(Provider::Ours, 50, Some(DeployTime::fast()), 10);
    r.maas_calls = BTreeMap::from([
        ("machine.deploy".to_owned(), 50),
        ("machines.allocate".to_owned(), 50),
        ("machines.read".to_owned(), 25),
    ]);
    r.maas_rate_limit_wait = Some(RateLimitWait {
        seconds: 50.0,
        calls: 125.0,
    });
    r.our_kind_writes = 600.0;
    r.all_writes = 1500.0;
    r.reconciles = Some(BTreeMap::from([
        ("machine-controller/machine".to_owned(), 250.0),
        ("maas-client/host".to_owned(), 100.0),
    ]));
    r.peak_rss_mib = BTreeMap::from([("maas-client".to_owned(), 40.0)]);
    r.timeline = TimelineSummary {
        machines: 50,
        rows: vec![MilestoneRow {
            milestone: Milestone::MachineRunning,
            seen: 50,
            since_declared: Some((6.0, 11.0)),
            since_created: Some((4.0, 9.5)),
            hop: Some((0.25, 12.0)),
        }],
        deployed_to_running: (1..=100).map(|i| f64::from(i) / 10.0).collect(),
    };
    r
}

#[test]
fn a_run_row_shows_rates_ceiling_share_latency_and_writes_per_machine() {
    let results = [
        result(Provider::Null, 50, None, 4),
        ours_50(),
        result(
            Provider::Ours,
            200,
            Some(DeployTime::parse("30").unwrap()),
            100,
        ),
    ];
    let table = runs_table(&results);
    assert!(
        table.contains(
            "| ours | 50 | 0–2 s | 10.0 s | 5.00 | 40 % | 2.5 | 5.00 s | 9.90 s | 12.0 | 30.0 | 7.0 |"
        ),
        "{table}"
    );
    assert!(
        table.contains("| null provider (ceiling) | 50 | – | 4.0 s | 12.50 | 100 % | – | – | – | 0.0 | 0.0 | – |"),
        "{table}"
    );
    // No ceiling measured at 200: no share.
    assert!(
        table.contains("| ours | 200 | 30 s ± 30 % | 100.0 s | 2.00 | – |"),
        "{table}"
    );
}

#[test]
fn maas_calls_and_memory_have_a_column_each() {
    let results = [ours_50(), result(Provider::Null, 50, None, 4)];
    let maas = maas_table(&results);
    assert!(
        maas.contains(
            "| machines | deploy | all | calls/s | rate-limit wait per call | machine.deploy | machines.allocate | machines.read |"
        ),
        "{maas}"
    );
    assert!(
        maas.contains("| 50 | 0–2 s | 2.50 | 12.5 | 0.40 s | 1.00 | 1.00 | 0.50 |"),
        "{maas}"
    );
    assert!(
        !maas.contains("null"),
        "the null provider calls no MAAS: {maas}"
    );
    let rss = rss_table(&results);
    assert!(rss.contains("| ours | 50 | 0–2 s | 40 |"), "{rss}");
    assert!(
        rss.contains("| null provider (ceiling) | 50 | – | – |"),
        "{rss}"
    );
}

#[test]
fn the_detail_run_is_the_largest_with_fast_deployments() {
    let mut big_fast = ours_50();
    big_fast.machines = 200;
    let results = [
        result(Provider::Null, 200, None, 10),
        result(
            Provider::Ours,
            300,
            Some(DeployTime::parse("30").unwrap()),
            100,
        ),
        ours_50(),
        big_fast,
    ];
    assert_eq!(detail_run(&results).map(|r| r.machines), Some(200));
    let slow_only = [result(
        Provider::Ours,
        20,
        Some(DeployTime::parse("5").unwrap()),
        9,
    )];
    assert_eq!(detail_run(&slow_only).map(|r| r.machines), Some(20));
    assert!(detail_run(&[result(Provider::Null, 20, None, 1)]).is_none());
}

#[test]
fn the_report_holds_every_table_of_the_detail_run() {
    let mut ours = ours_50();
    let key = |writer: &str, resource: &str, verb: &str| WriteKey {
        writer: writer.into(),
        resource: resource.into(),
        verb: verb.into(),
    };
    ours.audit = Some(AuditCounts(BTreeMap::from([
        (
            key("maas-client", "maashosts/status", "patch"),
            WriteCount {
                all: 150,
                refused: 5,
            },
        ),
        (
            key("CAPI core", "machines/status", "patch"),
            WriteCount {
                all: 200,
                refused: 0,
            },
        ),
    ])));
    let mut null = result(Provider::Null, 50, None, 4);
    null.audit = Some(AuditCounts(BTreeMap::from([(
        key("CAPI core", "machines/status", "patch"),
        WriteCount {
            all: 100,
            refused: 0,
        },
    )])));
    let context = ReportContext {
        binaries: "release build".into(),
        cores: 2,
        generated: "2026-12-01T10:00:00Z".into(),
        maas_latency: None,
        gateway_args: None,
    };
    let slow = ReportContext {
        maas_latency: Some("region".into()),
        ..context.clone()
    };
    let heading = report(&[null.clone(), ours.clone()], &slow);
    assert!(
        heading.starts_with("# Provisioning benchmark, MAAS with the `region` latency profile\n"),
        "{heading}"
    );
    let flagged = ReportContext {
        gateway_args: Some("--maas-workload-annotations".into()),
        ..slow.clone()
    };
    let heading = report(&[null.clone(), ours.clone()], &flagged);
    assert!(
        heading.starts_with("# Provisioning benchmark, MAAS with the `region` latency profile, the gateway run with `--maas-workload-annotations`\n"),
        "{heading}"
    );
    let text = report(&[null, ours], &context);
    assert!(text.starts_with(HEADING), "{text}");
    assert!(text.contains("release build; 2 cores"), "{text}");
    assert!(
        text.contains("Runs: 50 with the null provider, 50 × 0–2 s."),
        "{text}"
    );
    assert!(
        text.contains("## Where a machine spends its time (50 × 0–2 s)"),
        "{text}"
    );
    assert!(
        text.contains("| CAPI Machine Running | 50 of 50 | 6.00 s | 11.0 s | 4.00 s | 9.50 s | 0.25 s | 12.0 s |"),
        "{text}"
    );
    assert!(
        text.contains("| machine-controller/machine | 5.00 |"),
        "{text}"
    );
    // Writers, most first, ours beside the null provider's, then the total.
    assert!(text.contains("| CAPI core | 4.00 | 0.00 | 2.00 |\n| maas-client | 3.00 | 0.10 | 0.00 |\n| **all** | 7.00 | 0.10 | 2.00 |"), "{text}");
    assert!(
        text.contains("| maas-client | maashosts/status | patch | 3.00 | 0.10 | 0.00 |"),
        "{text}"
    );
}

#[test]
fn the_other_sections_of_the_results_file_are_kept() {
    let old = "# Provisioning benchmark\n\nold numbers\n\n## old sub\n\n# Chaos run\n\nchaos\n\n# data-controller\n\ndata\n";
    let merged = merge_report("# Provisioning benchmark\n\nnew\n", old);
    assert_eq!(
        merged,
        "# Provisioning benchmark\n\nnew\n\n# Chaos run\n\nchaos\n\n# data-controller\n\ndata\n"
    );
    assert_eq!(
        merge_report("# Provisioning benchmark\n\nnew", ""),
        "# Provisioning benchmark\n\nnew\n"
    );
    // A file whose first section is another one keeps everything.
    assert_eq!(
        merge_report("new", "# Chaos run\nx\n"),
        "new\n\n# Chaos run\nx\n"
    );
    // A run against a slow MAAS has its own section, after the other provisioning one; each
    // run replaces only its own.
    let slow = "# Provisioning benchmark, MAAS with the `region` latency profile\n\nslow\n";
    let both = merge_report(slow, old);
    assert_eq!(
        both,
        format!(
            "# Provisioning benchmark\n\nold numbers\n\n## old sub\n\n{slow}\n# Chaos run\n\nchaos\n\n# data-controller\n\ndata\n"
        )
    );
    let again = merge_report("# Provisioning benchmark\n\nnew\n", &both);
    assert_eq!(
        again,
        format!(
            "# Provisioning benchmark\n\nnew\n\n{slow}\n# Chaos run\n\nchaos\n\n# data-controller\n\ndata\n"
        )
    );
}

#[test]
fn the_cpu_table_sums_the_processes_and_relates_them_to_the_cores_time() {
    let mut ours = ours_50();
    ours.cpu_seconds = BTreeMap::from([
        ("kube-apiserver".to_owned(), 9.0),
        ("maas-client".to_owned(), 3.0),
    ]);
    let results = [result(Provider::Null, 50, None, 4), ours];
    let table = cpu_table(&results, 2);
    assert!(
        table.contains("| ours | 50 | 0–2 s | 9.0 | 3.0 |"),
        "{table}"
    );
    assert!(
        table.contains("| null provider (ceiling) | 50 | – | – | – |"),
        "{table}"
    );
    // 12 s of CPU in a 10 s run on 2 cores: 60 % of the cores' time, 0.24 s per machine.
    assert!(
        table.contains("| ours | 50 | 0–2 s | 12.0 | 0.240 | 60 % |"),
        "{table}"
    );
}
