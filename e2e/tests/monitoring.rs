//! `deploy/monitoring` against the binaries: every PromQL expression of the Grafana dashboard and
//! of the PrometheusRule (as `kubectl kustomize deploy/monitoring` renders them) parses with
//! `promql-parser`, and every metric it names is exported under that name.
//!
//! Exported means scraped from the running binaries: the end-to-end harness starts all six as
//! processes from `target/debug` against the management API server, each with its own metrics
//! port (`Harness::metrics_url`), and their `/metrics` is read until every referenced name is
//! there. prometheus-client (0.26) leaves a registered family out of the exposition until it
//! has a sample, so the test gives each one an event: it creates a MaasInventory (admission
//! reviews, reconciles, MAAS calls through the rate limiter) while MAAS refuses every call
//! (failed reconciles). The families computed from a leader's caches
//! (`capmaas_hosts`, `capmaas_machines`, `capmaas_ippool_*`) are always declared once the
//! binary's leadership term has started. The scrape is polled until then. Scraping rather than
//! encoding each crate's registry in-process proves what a Prometheus really sees: a family
//! registered by a function `main` never calls, or renamed in one place, would pass an
//! in-process check and fail here.
//!
//! A `# TYPE` line names the family; the series Prometheus stores are the family for gauges,
//! `<family>_total` for counters and `<family>_bucket`, `_sum` and `_count` for histograms
//! ([`exported_names`]). No promtool is needed: the parser is a Rust crate.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::{Duration, Instant};

use capmaas_e2e::harness::CONTROLLERS;
use capmaas_e2e::{ClusterSpec, Harness, HarnessConfig};
use capmaas_testenv::{kubectl, repo_root};
use maas_sim::{FaultConfig, OpFault};
use promql_parser::parser::{Expr, parse};
use promql_parser::util::{ExprVisitor, walk_expr};
use serde_json::Value;

const DASHBOARD_FILE: &str = "deploy/monitoring/capmaas-dashboard.json";
const RULES_FILE: &str = "deploy/monitoring/prometheusrule.yaml";

/// Grafana's built-in interval variables, replaced by a duration of the same kind, and the
/// dashboard's own filter variables, replaced by their "All" value, so the expression is plain
/// PromQL.
const GRAFANA_VARIABLES: [(&str, &str); 7] = [
    ("$__rate_interval", "5m"),
    ("$__interval", "1m"),
    ("$__range", "6h"),
    ("${__rate_interval}", "5m"),
    ("$cluster", ".*"),
    ("$namespace", ".*"),
    ("$job", ".*"),
];

/// The dashboard's filter variables and the metrics each applies to: every panel narrows to
/// one management cluster and one binary; the inventory panels also to the namespace of the
/// objects they count.
const FILTERS: [(&str, &str); 3] = [
    ("cluster", "capmaas_"),
    ("job", "capmaas_"),
    (
        "namespace",
        "capmaas_hosts|capmaas_host_state_oldest_seconds|capmaas_machines|capmaas_ippool_",
    ),
];

#[test]
fn the_dashboard_filters_by_cluster_binary_and_namespace() {
    let docs = render("deploy/monitoring");
    let dashboard = rendered_dashboard(&docs);
    let variables: Vec<&str> = dashboard["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    for (variable, _) in FILTERS {
        assert!(variables.contains(&variable), "{variables:?}");
    }
    let queries = dashboard_queries(&dashboard, DASHBOARD_FILE);
    for (variable, metrics) in FILTERS {
        let prefixes: Vec<&str> = metrics.split('|').collect();
        for q in &queries {
            // Every selector of a metric the variable applies to carries its matcher.
            for (at, _) in q.expr.match_indices("capmaas_") {
                let name: String = q.expr[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !prefixes.iter().any(|p| name.starts_with(p)) {
                    continue;
                }
                let selector = &q.expr[at + name.len()..];
                let matcher = format!("{variable}=~\"${variable}\"");
                assert!(
                    selector.starts_with('{')
                        && selector[..selector.find('}').unwrap()].contains(&matcher),
                    "{}: {name} without {matcher}: {}",
                    q.place,
                    q.expr
                );
            }
        }
    }
}

/// One PromQL expression and where it is written.
#[derive(Debug, Clone)]
struct Query {
    /// `<file>: panel "<title>"` or `<file>: alert <name>`.
    place: String,
    expr: String,
}

fn render(dir: &str) -> Vec<Value> {
    let out = Command::new(kubectl())
        .arg("kustomize")
        .arg(repo_root().join(dir))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl kustomize {dir}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(&String::from_utf8(out.stdout).unwrap()).unwrap();
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

fn of_kind<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

/// The dashboard as the rendered ConfigMap carries it.
fn rendered_dashboard(docs: &[Value]) -> Value {
    let maps = of_kind(docs, "ConfigMap");
    assert_eq!(maps.len(), 1, "one dashboard ConfigMap");
    assert_eq!(
        maps[0]["metadata"]["labels"]["grafana_dashboard"], "1",
        "Grafana's sidecar finds dashboards by this label"
    );
    serde_json::from_str(maps[0]["data"]["capmaas.json"].as_str().unwrap()).unwrap()
}

/// Every `targets[].expr` of the dashboard's panels, rows' nested panels included.
fn dashboard_queries(dashboard: &Value, file: &str) -> Vec<Query> {
    fn walk(panels: &Value, file: &str, out: &mut Vec<Query>) {
        for panel in panels.as_array().into_iter().flatten() {
            let title = panel["title"].as_str().unwrap_or("<untitled>");
            for target in panel["targets"].as_array().into_iter().flatten() {
                if let Some(expr) = target["expr"].as_str() {
                    out.push(Query {
                        place: format!("{file}: panel \"{title}\""),
                        expr: expr.to_owned(),
                    });
                }
            }
            walk(&panel["panels"], file, out);
        }
    }
    let mut out = Vec::new();
    walk(&dashboard["panels"], file, &mut out);
    out
}

/// Every rule's `expr` of the PrometheusRule.
fn rule_queries(rule: &Value, file: &str) -> Vec<Query> {
    let mut out = Vec::new();
    for group in rule["spec"]["groups"].as_array().into_iter().flatten() {
        for r in group["rules"].as_array().into_iter().flatten() {
            let name = r["alert"]
                .as_str()
                .map(|a| format!("alert {a}"))
                .or_else(|| r["record"].as_str().map(|a| format!("record {a}")))
                .unwrap_or_else(|| "<unnamed rule>".into());
            out.push(Query {
                place: format!("{file}: {name}"),
                expr: r["expr"].as_str().unwrap_or_default().to_owned(),
            });
        }
    }
    out
}

/// `expr` with Grafana's interval variables replaced; an error for any other variable.
fn plain_promql(expr: &str) -> Result<String, String> {
    let mut plain = expr.to_owned();
    for (variable, value) in GRAFANA_VARIABLES {
        plain = plain.replace(variable, value);
    }
    match plain.find('$') {
        Some(at) => Err(format!(
            "unknown dashboard variable at `{}`",
            &plain[at..plain.len().min(at + 24)]
        )),
        None => Ok(plain),
    }
}

struct Names(BTreeSet<String>);

impl ExprVisitor for Names {
    type Error = std::convert::Infallible;

    fn pre_visit(&mut self, expr: &Expr) -> Result<bool, Self::Error> {
        let selector = match expr {
            Expr::VectorSelector(vs) => Some(vs),
            Expr::MatrixSelector(ms) => Some(&ms.vs),
            _ => None,
        };
        if let Some(vs) = selector {
            self.0.extend(vs.name.clone());
            self.0.extend(
                vs.matchers
                    .matchers
                    .iter()
                    .filter(|m| m.name == "__name__")
                    .map(|m| m.value.clone()),
            );
        }
        Ok(true)
    }
}

/// Parses every query; the metric names referenced, each with the places that reference it,
/// or one message per expression that does not parse (place, parser message, expression).
fn referenced_metrics(queries: &[Query]) -> Result<BTreeMap<String, BTreeSet<String>>, String> {
    let mut names: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut errors = Vec::new();
    for q in queries {
        let parsed = plain_promql(&q.expr).and_then(|plain| parse(&plain));
        match parsed {
            Ok(ast) => {
                let mut found = Names(BTreeSet::new());
                let Ok(_) = walk_expr(&mut found, &ast);
                if found.0.is_empty() {
                    errors.push(format!("{}: names no metric: {}", q.place, q.expr));
                }
                for name in found.0 {
                    names.entry(name).or_default().insert(q.place.clone());
                }
            }
            Err(message) => errors.push(format!("{}: {message}\n    {}", q.place, q.expr)),
        }
    }
    if errors.is_empty() {
        Ok(names)
    } else {
        Err(errors.join("\n"))
    }
}

/// The series names an OpenMetrics exposition makes queryable, from its `# TYPE` lines.
fn exported_names(exposition: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in exposition.lines() {
        let mut words = line.split_whitespace();
        let (Some("#"), Some("TYPE"), Some(family), Some(kind)) =
            (words.next(), words.next(), words.next(), words.next())
        else {
            continue;
        };
        let suffixes: &[&str] = match kind {
            "counter" => &["_total", "_created"],
            "histogram" | "gaugehistogram" => &["_bucket", "_sum", "_count", "_created"],
            "summary" => &["", "_sum", "_count", "_created"],
            "info" => &["_info"],
            _ => &[""],
        };
        out.extend(suffixes.iter().map(|s| format!("{family}{s}")));
    }
    out
}

/// The series names of the samples of a Prometheus text exposition (client_golang, as the API
/// server serves it, names a counter's series as its family: no `_total` is added).
fn sample_names(exposition: &str) -> BTreeSet<String> {
    exposition
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.split(['{', ' ']).next())
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The referenced names nothing exports, each with where it is used.
fn unknown_metrics(
    referenced: &BTreeMap<String, BTreeSet<String>>,
    exported: &BTreeSet<String>,
) -> Vec<String> {
    referenced
        .iter()
        .filter(|(name, _)| !exported.contains(*name))
        .map(|(name, places)| {
            let places: Vec<&str> = places.iter().map(String::as_str).collect();
            format!("{name} (in {})", places.join("; "))
        })
        .collect()
}

fn all_queries() -> Vec<Query> {
    let docs = render("deploy/monitoring");
    let dashboard = rendered_dashboard(&docs);
    let rules = of_kind(&docs, "PrometheusRule");
    assert_eq!(rules.len(), 1, "one PrometheusRule");
    let mut queries = dashboard_queries(&dashboard, DASHBOARD_FILE);
    let panels = queries.len();
    queries.extend(rule_queries(rules[0], RULES_FILE));
    assert!(
        panels >= 10 && queries.len() > panels,
        "expressions found: {} in the dashboard, {} in the rules",
        panels,
        queries.len() - panels
    );
    queries
}

/// The metrics the alerts read that the provider does not export, with who exports them. The
/// kube-state-metrics names are checked against its source, the API server's against a running
/// kube-apiserver; `up` is Prometheus's own.
const EXTERNAL_METRICS: [(&str, Source); 5] = [
    ("up", Source::Prometheus),
    (
        "kube_deployment_status_replicas_available",
        Source::KubeStateMetrics,
    ),
    (
        "kube_pod_container_status_waiting_reason",
        Source::KubeStateMetrics,
    ),
    (
        "apiserver_admission_webhook_rejection_count",
        Source::ApiServer,
    ),
    (
        "apiserver_admission_webhook_admission_duration_seconds_bucket",
        Source::ApiServer,
    ),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Prometheus,
    KubeStateMetrics,
    ApiServer,
}

fn external(source: Source) -> impl Iterator<Item = &'static str> {
    EXTERNAL_METRICS
        .into_iter()
        .filter(move |(_, s)| *s == source)
        .map(|(name, _)| name)
}

/// kube-state-metrics as kube-prometheus and kube-prometheus-stack deploy it today.
const KUBE_STATE_METRICS: &str = "k8s.io/kube-state-metrics/v2@v2.16.0";

#[test]
fn every_dashboard_and_alert_expression_parses() {
    let referenced = referenced_metrics(&all_queries()).unwrap_or_else(|e| panic!("{e}"));
    let others: Vec<&String> = referenced
        .keys()
        .filter(|n| !n.starts_with("capmaas_"))
        .filter(|n| !EXTERNAL_METRICS.iter().any(|(e, _)| e == n))
        .collect();
    assert!(
        others.is_empty(),
        "neither the provider's nor a known exporter's: {others:?}"
    );
}

/// The kube-state-metrics names the alerts use are in its source (fetched from the Go module
/// proxy into the module cache): a renamed or misspelled one fails here.
#[test]
fn kube_state_metrics_exports_the_names_the_alerts_use() {
    let out = Command::new("go")
        .args(["mod", "download", "-json", KUBE_STATE_METRICS])
        .output()
        .unwrap();
    let info: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("go mod download {KUBE_STATE_METRICS}: {e}"));
    let dir = std::path::PathBuf::from(
        info["Dir"]
            .as_str()
            .unwrap_or_else(|| panic!("go mod download {KUBE_STATE_METRICS}: {info}")),
    );
    let mut source = String::new();
    for entry in std::fs::read_dir(dir.join("internal/store")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let go = path.extension().is_some_and(|e| e == "go");
        if go && !name.ends_with("_test.go") {
            source.push_str(&std::fs::read_to_string(&path).unwrap());
        }
    }
    let referenced = referenced_metrics(&all_queries()).unwrap();
    for name in external(Source::KubeStateMetrics) {
        assert!(referenced.contains_key(name), "{name} is not used any more");
        assert!(
            source.contains(&format!("\"{name}\"")),
            "{KUBE_STATE_METRICS} has no metric {name}"
        );
    }
}

const RUNBOOKS: &str = "https://github.com/capmaas-rs/capmaas-rs/blob/main/docs/runbooks.md#";

/// Every alert links its own section of docs/runbooks.md (a `## <alert>` heading, whose anchor
/// is the lower-cased name).
#[test]
fn every_alert_links_its_runbook_section() {
    let runbooks = std::fs::read_to_string(repo_root().join("docs/runbooks.md")).unwrap();
    let docs = render("deploy/monitoring");
    let rule = of_kind(&docs, "PrometheusRule")[0];
    let mut alerts = 0;
    for group in rule["spec"]["groups"].as_array().unwrap() {
        for r in group["rules"].as_array().unwrap() {
            let Some(alert) = r["alert"].as_str() else {
                continue;
            };
            alerts += 1;
            assert_eq!(
                r["annotations"]["runbook_url"],
                format!("{RUNBOOKS}{}", alert.to_lowercase()),
                "{alert}"
            );
            assert!(
                runbooks.lines().any(|l| l == format!("## {alert}")),
                "docs/runbooks.md has no section {alert}"
            );
        }
    }
    assert!(alerts >= 12, "{alerts} alerts");
}

/// kube-prometheus's Prometheus may discover the targets in the provider's namespace, and the
/// overlay docs/observability.md shows for kube-prometheus-stack labels what its Prometheus
/// selects.
#[test]
fn kube_prometheus_and_kube_prometheus_stack_find_the_monitors() {
    let docs = render("deploy/monitoring");
    let role = of_kind(&docs, "Role")[0];
    let mut granted = BTreeSet::new();
    for rule in role["rules"].as_array().unwrap() {
        assert_eq!(rule["verbs"], serde_json::json!(["get", "list", "watch"]));
        let group = rule["apiGroups"][0].as_str().unwrap();
        for resource in rule["resources"].as_array().unwrap() {
            granted.insert(format!("{group}/{}", resource.as_str().unwrap()));
        }
    }
    for wanted in [
        "/services",
        "/endpoints",
        "/pods",
        "discovery.k8s.io/endpointslices",
    ] {
        assert!(granted.contains(wanted), "{wanted}: {granted:?}");
    }
    let binding = of_kind(&docs, "RoleBinding")[0];
    assert_eq!(binding["roleRef"]["name"], role["metadata"]["name"]);
    assert_eq!(
        binding["subjects"][0],
        serde_json::json!({"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"})
    );

    let doc = std::fs::read_to_string(repo_root().join("docs/observability.md")).unwrap();
    let snippet = doc
        .split("```yaml\n")
        .filter_map(|block| block.split("```").next())
        .find(|block| block.contains("release: kube-prometheus-stack"))
        .expect("the kube-prometheus-stack overlay in docs/observability.md");
    let dir = tempfile::tempdir().unwrap();
    let overlay = dir.path().join("overlays/env");
    std::fs::create_dir_all(&overlay).unwrap();
    for linked in ["base", "monitoring", "crds"] {
        std::os::unix::fs::symlink(
            repo_root().join("deploy").join(linked),
            dir.path().join(linked),
        )
        .unwrap();
    }
    std::fs::write(overlay.join("kustomization.yaml"), snippet).unwrap();
    let out = Command::new(kubectl())
        .arg("kustomize")
        .arg(&overlay)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rendered: Vec<Value> =
        serde_saphyr::from_multiple(&String::from_utf8(out.stdout).unwrap()).unwrap();
    for kind in ["ServiceMonitor", "PrometheusRule"] {
        let object = rendered.iter().find(|d| d["kind"] == kind).unwrap();
        assert_eq!(
            object["metadata"]["labels"]["release"], "kube-prometheus-stack",
            "{kind}"
        );
    }
}

#[test]
fn a_syntax_error_names_the_file_and_panel() {
    let queries = [
        Query {
            place: "dash.json: panel \"Broken\"".into(),
            expr: "sum by (phase (capmaas_machines)".into(),
        },
        Query {
            place: "dash.json: panel \"Variable\"".into(),
            expr: "sum(capmaas_hosts{namespace=\"$tenant\"})".into(),
        },
    ];
    let error = referenced_metrics(&queries).unwrap_err();
    assert!(error.contains("dash.json: panel \"Broken\": "), "{error}");
    assert!(
        error.contains("dash.json: panel \"Variable\": unknown dashboard variable"),
        "{error}"
    );
}

#[test]
fn a_misspelled_metric_is_flagged() {
    let exposition = "\
# TYPE capmaas_reconcile counter
# TYPE capmaas_reconcile_duration_seconds histogram
# TYPE capmaas_hosts gauge
# EOF
";
    let exported = exported_names(exposition);
    let queries = [Query {
        place: "dash.json: panel \"Reconciles\"".into(),
        expr: "sum(rate(capmaas_reconcile_total[$__rate_interval])) + sum(capmaas_hosts) \
               + histogram_quantile(0.9, rate(capmaas_reconcile_duration_seconds_bucket[5m])) \
               + sum(rate(capmaas_reconcile_erors_total[5m])) + sum(capmaas_reconcile)"
            .into(),
    }];
    let referenced = referenced_metrics(&queries).unwrap();
    let unknown = unknown_metrics(&referenced, &exported);
    assert_eq!(
        unknown,
        [
            "capmaas_reconcile (in dash.json: panel \"Reconciles\")",
            "capmaas_reconcile_erors_total (in dash.json: panel \"Reconciles\")",
        ],
        "a counter is queried as <name>_total, never by its bare family name"
    );
}

#[test]
fn the_service_monitor_scrapes_the_six_metrics_services_of_deploy_base() {
    let monitoring = render("deploy/monitoring");
    let monitors = of_kind(&monitoring, "ServiceMonitor");
    assert_eq!(monitors.len(), 1);
    let spec = &monitors[0]["spec"];
    let port = spec["endpoints"][0]["port"].as_str().unwrap();
    let selector = spec["selector"]["matchLabels"].as_object().unwrap();
    let base = render("deploy/base");
    let mut scraped: Vec<String> = of_kind(&base, "Service")
        .into_iter()
        .filter(|s| {
            selector
                .iter()
                .all(|(k, v)| s["metadata"]["labels"][k.as_str()] == *v)
                && s["spec"]["ports"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|p| p["name"] == port)
        })
        .map(|s| s["metadata"]["name"].as_str().unwrap().to_owned())
        .collect();
    scraped.sort();
    let mut expected: Vec<String> = CONTROLLERS
        .iter()
        .map(|b| format!("capmaas-{b}-metrics"))
        .collect();
    expected.sort();
    assert_eq!(scraped, expected);
    for doc in &monitoring {
        assert_eq!(doc["metadata"]["namespace"], "capmaas-system", "{doc}");
    }
}

#[test]
fn the_observability_doc_lists_every_panel_and_alert() {
    let doc = std::fs::read_to_string(repo_root().join("docs/observability.md")).unwrap();
    let docs = render("deploy/monitoring");
    let dashboard = rendered_dashboard(&docs);
    let mut missing = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        let title = panel["title"].as_str().unwrap();
        if panel["type"] != "row" && !doc.contains(title) {
            missing.push(format!("panel \"{title}\""));
        }
    }
    for q in rule_queries(of_kind(&docs, "PrometheusRule")[0], RULES_FILE) {
        let alert = q.place.rsplit(' ').next().unwrap().to_owned();
        if !doc.contains(&alert) {
            missing.push(alert);
        }
    }
    assert!(
        missing.is_empty(),
        "not in docs/observability.md: {missing:?}"
    );
}

/// The names every binary exports, and the binaries that could not be scraped.
async fn scrape_all(harness: &Harness, http: &reqwest::Client) -> (BTreeSet<String>, String) {
    let mut exported = BTreeSet::new();
    let mut problems = Vec::new();
    for binary in CONTROLLERS {
        let Some(url) = harness.metrics_url(binary) else {
            problems.push(format!("{binary}: not started"));
            continue;
        };
        match http.get(&url).send().await {
            Ok(response) => exported.extend(exported_names(&response.text().await.unwrap())),
            Err(e) => problems.push(format!("{binary}: {url}: {e}")),
        }
    }
    (exported, problems.join("\n"))
}

#[tokio::test]
async fn every_metric_the_dashboard_and_alerts_use_is_exported_by_the_binaries() {
    let referenced = referenced_metrics(&all_queries()).unwrap_or_else(|e| panic!("{e}"));
    let harness = Harness::start(HarnessConfig {
        machines: 2,
        ..HarnessConfig::default()
    })
    .await
    .unwrap();
    // prometheus-client leaves a family without samples out of the exposition, so each one the
    // queries name must have seen an event: a MaasInventory (admission reviews, reconciles, MAAS
    // calls through the rate limiter) whose syncs MAAS refuses (reconcile errors).
    let ns = harness
        .management
        .create_namespace("monitoring")
        .await
        .unwrap();
    // 400, which the client does not retry: the inventory sync fails at once.
    harness
        .sim
        .state()
        .set_faults(FaultConfig {
            ops: vec![OpFault {
                op: "*".into(),
                error_rate: 1.0,
                status: 400,
                latency_ms: 0,
                retry_after: None,
                body: None,
            }],
            ..FaultConfig::default()
        })
        .unwrap();
    harness
        .apply(&ClusterSpec::story(&ns).inventory())
        .await
        .unwrap();
    // One write the webhook refuses, so the API server has counted a webhook rejection.
    let refused = harness
        .apply(&serde_json::json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasMachine",
            "metadata": {"name": "refused", "namespace": ns},
            "spec": {"image": "ubuntu/jammy", "minCPU": 1, "minMemory": 1024, "hweKernel": "HWE 22.04"}
        }))
        .await;
    assert!(refused.is_err(), "the webhook refuses the kernel name");
    let (ours, api_server): (BTreeMap<_, _>, BTreeMap<_, _>) = referenced
        .into_iter()
        .filter(|(name, _)| {
            name.starts_with("capmaas_") || external(Source::ApiServer).any(|e| e == name)
        })
        .partition(|(name, _)| name.starts_with("capmaas_"));
    assert_eq!(api_server.len(), external(Source::ApiServer).count());
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let metrics = harness
            .management
            .client()
            .request_text(http::Request::get("/metrics").body(Vec::new()).unwrap())
            .await
            .unwrap();
        let unknown = unknown_metrics(&api_server, &sample_names(&metrics));
        if unknown.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not exported by the API server:\n  {}",
            unknown.join("\n  ")
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let referenced = ours;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let (exported, problems) = scrape_all(&harness, &http).await;
        let unknown = unknown_metrics(&referenced, &exported);
        if unknown.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "referenced but exported by none of {CONTROLLERS:?}:\n  {}\n{problems}\n{}",
            unknown.join("\n  "),
            harness.logs(20)
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
