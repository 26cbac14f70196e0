use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use maas_sim::{NodeStatus, StatusChange};
use serde_json::json;

use super::super::deletion::{Old, late_count, late_deployment, look};
use super::super::metrics::RateLimitWait;
use super::super::release_steps::ReleaseStep;
use super::super::timeline::{Kind, Milestone, MilestoneRow, Recorder};
use super::*;
use crate::objects::ClusterSpec;

fn at(base: Instant, ms: u64) -> Instant {
    base + Duration::from_millis(ms)
}

/// 200 machines deleted, 10 provisioned: 500 releases, 200 list reads, 200 single reads, and
/// the 10 late provisionings' allocate and deploy calls.
fn made_up() -> DeletionResult {
    DeletionResult {
        machines: 200,
        late: 10,
        deploy: DeployTime::fast(),
        release: Duration::from_secs(5),
        provisioning: Duration::from_secs(60),
        provisioning_deployed_to_running: vec![1.0, 2.0, 3.0],
        gone: Duration::from_secs(40),
        servers_ready: Duration::from_millis(30_500),
        hosts_free: Duration::from_secs(32),
        late_running: Duration::from_secs(20),
        counters: Counters {
            maas_calls: BTreeMap::from([
                ("machine.release".to_owned(), 200),
                ("machine.read".to_owned(), 200),
                ("machines.read".to_owned(), 100),
                ("machines.allocate".to_owned(), 10),
                ("machine.deploy".to_owned(), 10),
            ]),
            maas_rate_limit_wait: Some(RateLimitWait {
                seconds: 26.0,
                calls: 520.0,
            }),
            our_kind_writes: 1000.0,
            all_writes: 3000.0,
            reconciles: Some(BTreeMap::from([
                ("machine-controller/machine".to_owned(), 900.0),
                ("maas-client/host".to_owned(), 300.0),
            ])),
            peak_rss_mib: BTreeMap::from([("maas-client".to_owned(), 41.0)]),
            cpu_seconds: BTreeMap::from([
                ("maas-client".to_owned(), 4.0),
                ("kube-apiserver".to_owned(), 12.0),
            ]),
            audit: None,
        },
        late_timeline: TimelineSummary {
            machines: 10,
            rows: vec![MilestoneRow {
                milestone: Milestone::MachineRunning,
                seen: 10,
                since_declared: Some((12.0, 20.0)),
                since_created: Some((11.0, 19.0)),
                hop: Some((0.5, 1.5)),
            }],
            deployed_to_running: (1..=10).map(f64::from).collect(),
        },
        late_claim_to_deployed: vec![2.0, 4.0],
        release_steps: vec![ReleaseStepRow {
            step: ReleaseStep::MaasReady,
            seen: 200,
            since_start: Some((20.0, 30.5)),
            hop: Some((5.0, 5.0)),
        }],
    }
}

#[test]
fn the_release_steps_have_a_row_each() {
    let table = release_steps_table(&made_up().release_steps, 200);
    assert!(
        table.contains("| MAAS Ready | 200 of 200 | 20.0 s | 30.5 s | 5.00 s | 5.00 s |"),
        "{table}"
    );
}

#[test]
fn releases_are_all_calls_but_the_provisioning_ones_per_deleted_machine() {
    let r = made_up();
    assert_eq!(r.maas_calls(), 520);
    assert_eq!(r.release_calls(), 500);
    assert!((r.per_release(count_u64(r.release_calls())) - 2.5).abs() < 1e-9);
    assert_eq!(r.elapsed(), Duration::from_secs(40));
    let table = maas_table(&r);
    assert!(
        table.contains("| machine.release | 200 | 1.00 |"),
        "{table}"
    );
    assert!(table.contains("| machines.read | 100 | 0.50 |"), "{table}");
    assert!(
        table.contains("| machines.allocate | 10 | – (late provisionings) |"),
        "{table}"
    );
    assert!(
        table.contains(
            "| **releases** (all but the provisioning operations) | 500 | 2.50 |\n| **all** | 520 | |"
        ),
        "{table}"
    );
}

#[test]
fn the_summary_has_the_four_times_the_costs_and_the_late_latencies() {
    let table = summary_table(&made_up());
    for row in [
        "| Machines deleted | 200 |",
        "| late provisionings (declared with the deletion) | 10 |",
        "| time to all deleted Machines gone | 40.0 s |",
        "| time to all their servers Ready in MAAS | 30.5 s |",
        "| time to all their MaasHosts free (`Available`) | 32.0 s |",
        "| time to the late Machines all Running | 20.0 s |",
        "| MAAS calls, all | 520 |",
        "| MAAS calls per release (all but allocate, deploy, workload annotations) | 2.50 |",
        "| MAAS calls/s | 13.0 |",
        "| rate-limit wait per call | 0.05 s |",
        "| late machines: MaasHost claimed → MAAS Deployed, p50 / p99 | 2.00 s / 4.00 s |",
        "| late machines: MAAS Deployed → Machine Running, p50 / p99 | 5.00 s / 10.0 s |",
        "| the same of the 200 provisioned before (no deletion), p50 / p99 | 2.00 s / 3.00 s |",
        "| writes per released machine (maas* kinds) | 5.0 |",
        "| writes per released machine (all) | 15.0 |",
        "| reconciles per released machine | 6.0 |",
    ] {
        assert!(table.contains(row), "{row} missing from\n{table}");
    }
}

#[test]
fn the_section_has_its_own_heading_and_every_table() {
    let context = ReportContext {
        binaries: "release build".into(),
        cores: 2,
        generated: "2026-12-01T10:00:00Z".into(),
        maas_latency: None,
        gateway_args: None,
    };
    let text = deletion_report(&made_up(), &context);
    assert!(text.starts_with("# Mass deletion benchmark\n"), "{text}");
    assert!(
        text.contains("200 workers of one MachineDeployment on 210 simulated servers (0–2 s deployments) were provisioned (not measured: 60.0 s)"),
        "{text}"
    );
    assert!(text.contains("Simulated MAAS release: 5 s"), "{text}");
    assert!(
        text.contains("| CAPI Machine Running | 10 of 10 | 12.0 s | 20.0 s |"),
        "{text}"
    );
    assert!(text.contains("| maas-client | 41 | 4.0 |"), "{text}");
    assert!(text.contains("| kube-apiserver | – | 12.0 |"), "{text}");
    // 16 CPU seconds in 40 s on 2 cores.
    assert!(
        text.contains("16.0 s, 0.080 s per released machine, 20 % of the cores' time"),
        "{text}"
    );
    let flagged = ReportContext {
        gateway_args: Some("--maas-rate-limit=40".into()),
        maas_latency: Some("region".into()),
        ..context
    };
    let text = deletion_report(&made_up(), &flagged);
    assert!(
        text.starts_with("# Mass deletion benchmark, MAAS with the `region` latency profile, the gateway run with `--maas-rate-limit=40`\n"),
        "{text}"
    );
    // Merged after the provisioning sections, the others kept.
    let old = "# Provisioning benchmark\n\np\n\n# Chaos run\n\nc\n";
    let merged = super::super::merge_report("# Mass deletion benchmark\n\nd\n", old);
    assert_eq!(
        merged,
        "# Provisioning benchmark\n\np\n\n# Mass deletion benchmark\n\nd\n\n# Chaos run\n\nc\n"
    );
}

#[test]
fn the_late_deployment_is_the_workers_one_under_its_own_name() {
    let mut spec = ClusterSpec::story("ns");
    spec.name = "bench".into();
    let late = late_deployment(&spec, 10);
    let workers = spec.machine_deployment(&spec.image);
    assert_eq!(late["metadata"]["name"], "bench-late");
    assert_eq!(late["spec"]["replicas"], 10);
    assert_eq!(
        late["spec"]["selector"]["matchLabels"]["cluster.x-k8s.io/deployment-name"],
        "bench-late"
    );
    assert_eq!(
        late["spec"]["template"]["metadata"]["labels"],
        late["spec"]["selector"]["matchLabels"]
    );
    assert_eq!(
        late["spec"]["template"]["spec"],
        workers["spec"]["template"]["spec"]
    );
    assert_eq!(late_count(200), 10);
    assert_eq!(late_count(20), 5);
    assert_eq!(late_count(1000), 50);
}

#[test]
fn the_deletion_ends_when_machines_servers_hosts_and_late_machines_are_all_there() {
    let base = Instant::now();
    let mut r = Recorder::default();
    let running = json!({"status": {"phase": "Running", "nodeRef": {"name": "n"}}});
    let claimed = |state: &str| json!({"spec": {"systemID": "abc", "consumerRef": {"name": "mm-old"}}, "status": {"provisioningState": state}});
    // Before the start: the old Machine runs on host h-0 (abc).
    r.observe(Kind::Machine, "m-old", &running, at(base, 0));
    r.observe(Kind::Host, "h-0", &claimed("Deployed"), at(base, 0));
    let old = Old::of(&r);
    assert_eq!(old.machines, ["m-old"]);
    assert_eq!(
        old.hosts,
        BTreeMap::from([("h-0".to_owned(), Some("abc".to_owned()))])
    );
    let started = at(base, 100);
    let mut history = BTreeMap::from([(
        "abc".to_owned(),
        vec![StatusChange {
            status: NodeStatus::Ready,
            at: at(base, 50),
        }],
    )]);
    let now = look(&r, &history, &old, 1, started);
    assert_eq!(now.ends(), None);
    assert_eq!(now.gone, (0, None));
    assert_eq!(now.servers_ready, (0, None), "a Ready before the start");
    // The release: Releasing, then Available (the late machine claims it right after), the
    // server Ready; the old Machine goes; a late one runs.
    r.observe(Kind::Host, "h-0", &claimed("Releasing"), at(base, 200));
    r.observe(Kind::Host, "h-0", &claimed("Available"), at(base, 900));
    r.observe(
        Kind::Host,
        "h-0",
        &json!({"spec": {"systemID": "abc", "consumerRef": {"name": "mm-new"}}, "status": {"provisioningState": "Allocating"}}),
        at(base, 1000),
    );
    history
        .get_mut("abc")
        .unwrap()
        .extend(
            [NodeStatus::Releasing, NodeStatus::Ready].map(|status| StatusChange {
                status,
                at: at(
                    base,
                    if status == NodeStatus::Ready {
                        800
                    } else {
                        200
                    },
                ),
            }),
        );
    r.forget(Kind::Machine, "m-old", at(base, 1200));
    r.observe(Kind::Machine, "m-new", &json!({}), at(base, 300));
    let now = look(&r, &history, &old, 1, started);
    assert_eq!(now.late_running, (0, None));
    r.observe(Kind::Machine, "m-new", &running, at(base, 1500));
    let ends = look(&r, &history, &old, 1, started).ends().unwrap();
    assert_eq!(ends.gone, at(base, 1200));
    assert_eq!(ends.servers_ready, at(base, 800));
    assert_eq!(ends.hosts_free, at(base, 900));
    assert_eq!(ends.late_running, at(base, 1500));
}

#[test]
fn the_size_is_the_first_of_the_sizes() {
    use super::super::deletion_size;
    assert_eq!(deletion_size(None).unwrap(), 200);
    assert_eq!(deletion_size(Some("20, 200")).unwrap(), 20);
    assert!(deletion_size(Some("0")).is_err());
    assert!(deletion_size(Some(" ")).is_err());
}
