//! `deploy/` against a real API server: every overlay renders with kubectl's kustomize and is
//! accepted by a server-side dry run (with cert-manager's CRDs installed from its Go module);
//! the overlays differ as `docs/install.md` says; the base hardens every Deployment; its
//! NetworkPolicies isolate every pod and open only the ports `docs/install.md` lists.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};

use capmaas_e2e::overlay::{OverlayAccess, render_overlay};
use capmaas_testenv::{TestEnv, cache_dir, repo_root};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

const OVERLAYS: [&str; 3] = ["dev", "staging", "production"];
use capmaas_e2e::overlay::COMPONENTS;

/// Who may `get` Secrets (the kubeconfig and user-data readers of docs/rbac.md).
const SECRET_READERS: [&str; 4] = [
    "maas-client",
    "cluster-controller",
    "machine-controller",
    "remediation-controller",
];
/// Who holds Leases in the provider's namespace (leader election; the gateway's host bindings).
const LEASE_HOLDERS: [&str; 5] = [
    "maas-client",
    "cluster-controller",
    "machine-controller",
    "data-controller",
    "remediation-controller",
];

/// Creates the namespaces `names` (a dry run or a RoleBinding needs its namespace to exist).
async fn create_namespaces(env: &TestEnv, names: impl IntoIterator<Item = impl AsRef<str>>) {
    let namespaces: Api<Namespace> = Api::all(env.client());
    for name in names {
        namespaces
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": name.as_ref()}})).unwrap(),
            )
            .await
            .unwrap();
    }
}

fn render(overlay: &str) -> Vec<Value> {
    render_overlay(overlay).unwrap()
}

/// A renewal of the webhook's serving certificate, issued as cert-manager issues the shipped
/// manifests: the CA injector hands the API server the new `ca.crt` at once, while
/// webhook-server keeps serving the old certificate until the kubelet refreshes the mounted
/// Secret. Both must verify against the new bundle, or every admission call fails meanwhile
/// (a self-signed serving certificate, its own CA, fails this). Checked in every overlay.
#[test]
fn a_serving_certificate_renewal_keeps_the_old_certificate_trusted() {
    use capmaas_e2e::cert_manager::{CertManager, trusted};
    for overlay in ["dev", "staging", "production"] {
        let docs = render(overlay);
        let serving = docs
            .iter()
            .find(|d| {
                d["kind"] == "Certificate"
                    && d["spec"]["secretName"] == "capmaas-webhook-service-cert"
            })
            .unwrap_or_else(|| panic!("{overlay}: no serving Certificate"));
        let namespace = serving["metadata"]["namespace"].as_str().unwrap();
        let name = serving["metadata"]["name"].as_str().unwrap();
        let service_name = serving["spec"]["dnsNames"][0].as_str().unwrap();
        // The webhook configurations take their CA from this very Certificate.
        let injected_from = format!("{namespace}/{name}");
        assert!(
            docs.iter()
                .filter(|d| d["kind"] == "ValidatingWebhookConfiguration"
                    || d["kind"] == "MutatingWebhookConfiguration")
                .all(
                    |d| d["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
                        == injected_from.as_str()
                ),
            "{overlay}: every webhook configuration injects the CA of {injected_from}"
        );
        let mut cert_manager = CertManager::from_documents(&docs);
        let first = cert_manager.issue(namespace, name).unwrap();
        trusted(&first.ca_pem, &first.cert_pem, service_name).unwrap();
        let renewed = cert_manager.issue(namespace, name).unwrap();
        assert_ne!(
            renewed.cert_pem, first.cert_pem,
            "a renewal is a new certificate"
        );
        trusted(&renewed.ca_pem, &renewed.cert_pem, service_name).unwrap();
        trusted(&renewed.ca_pem, &first.cert_pem, service_name).unwrap_or_else(|e| {
            panic!("{overlay}: the certificate still served after a renewal is refused: {e}")
        });
    }
}

/// Per Deployment: replicas, args, env (name -> value) and the resources of `manager`.
struct Rendered {
    replicas: i64,
    args: Vec<String>,
    env: BTreeMap<String, String>,
    resources: Value,
    pod: Value,
    pod_labels: serde_json::Map<String, Value>,
    container: Value,
}

fn deployments(docs: &[Value]) -> BTreeMap<String, Rendered> {
    docs.iter()
        .filter(|d| d["kind"] == "Deployment")
        .map(|d| {
            let pod = d["spec"]["template"]["spec"].clone();
            let c = pod["containers"][0].clone();
            assert_eq!(
                c["name"], "manager",
                "clusterctl wants the container named manager"
            );
            let env = c["env"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|e| {
                    Some((
                        e["name"].as_str()?.to_owned(),
                        e["value"].as_str()?.to_owned(),
                    ))
                })
                .collect();
            let args = c["args"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|a| a.as_str().unwrap().to_owned())
                .collect();
            let name = d["metadata"]["name"]
                .as_str()
                .unwrap()
                .trim_start_matches("capmaas-")
                .to_owned();
            (
                name,
                Rendered {
                    replicas: d["spec"]["replicas"].as_i64().unwrap(),
                    args,
                    env,
                    resources: c["resources"].clone(),
                    pod,
                    pod_labels: d["spec"]["template"]["metadata"]["labels"]
                        .as_object()
                        .cloned()
                        .unwrap_or_default(),
                    container: c,
                },
            )
        })
        .collect()
}

#[tokio::test]
async fn every_overlay_is_accepted_by_a_server_side_dry_run() {
    let env = TestEnv::api_server_only().await.unwrap();
    env.install_crd_dir(&cache_dir().join("cert-manager-crds"))
        .await
        .unwrap();
    // A dry run creates nothing, so the namespaces the objects go into must exist: the
    // provider's, and the one a namespaced overlay serves (docs/install.md creates it first).
    let mut needed = vec!["capmaas-system".to_owned()];
    for overlay in OVERLAYS {
        needed.extend(OverlayAccess::from_rendering(&render(overlay)).served_namespaces());
    }
    needed.sort();
    needed.dedup();
    create_namespaces(&env, needed).await;
    for overlay in OVERLAYS {
        let path = repo_root().join("deploy/overlays").join(overlay);
        let out = env
            .kubectl()
            .args(["apply", "--dry-run=server", "-k"])
            .arg(&path)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{overlay}: {}\n{stdout}",
            String::from_utf8_lossy(&out.stderr)
        );
        for component in COMPONENTS {
            assert!(
                stdout.contains(&format!(
                    "deployment.apps/capmaas-{component} created (server dry run)"
                )),
                "{overlay}: {stdout}"
            );
            assert!(
                stdout.contains(&format!(
                    "networkpolicy.networking.k8s.io/capmaas-{component} created (server dry run)"
                )),
                "{overlay}: {stdout}"
            );
        }
        assert!(
            stdout.contains(
                "networkpolicy.networking.k8s.io/capmaas-default-deny-ingress created (server dry run)"
            ),
            "{overlay}: {stdout}"
        );
    }
}

#[test]
fn every_deployment_is_hardened_and_only_the_gateway_sees_the_maas_key() {
    for overlay in OVERLAYS {
        let docs = render(overlay);
        let deployments = deployments(&docs);
        assert_eq!(deployments.len(), 6, "{overlay}");
        for (name, d) in &deployments {
            let sc = &d.container["securityContext"];
            assert_eq!(sc["readOnlyRootFilesystem"], true, "{overlay}/{name}");
            assert_eq!(sc["allowPrivilegeEscalation"], false, "{overlay}/{name}");
            assert_eq!(
                sc["capabilities"]["drop"],
                json!(["ALL"]),
                "{overlay}/{name}"
            );
            assert_eq!(
                d.pod["securityContext"]["runAsNonRoot"], true,
                "{overlay}/{name}"
            );
            assert_eq!(
                d.pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault",
                "{overlay}/{name}"
            );
            assert_eq!(
                d.pod["serviceAccountName"],
                format!("capmaas-{name}"),
                "{overlay}/{name}"
            );
            assert_eq!(
                d.container["livenessProbe"]["httpGet"]["path"], "/healthz",
                "{overlay}/{name}"
            );
            assert_eq!(
                d.container["readinessProbe"]["httpGet"]["path"], "/readyz",
                "{overlay}/{name}"
            );
            assert!(
                d.resources["requests"]["memory"].is_string()
                    && d.resources["limits"]["memory"].is_string(),
                "{overlay}/{name}"
            );
            let mounts_key = d.pod["volumes"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|v| v["secret"]["secretName"] == "capmaas-manager-bootstrap-credentials");
            let env_key = d
                .container
                .to_string()
                .contains("capmaas-manager-bootstrap-credentials");
            assert_eq!(
                mounts_key || env_key,
                name == "maas-client",
                "{overlay}/{name}: only maas-client gets the MAAS credentials"
            );
        }
        // Every object carries the provider label clusterctl and selectors use.
        for doc in &docs {
            assert_eq!(
                doc["metadata"]["labels"]["cluster.x-k8s.io/provider"], "infrastructure-maas",
                "{overlay}: {}",
                doc["metadata"]["name"]
            );
        }
    }
}

#[test]
fn the_overlays_differ_as_documented() {
    let dev = deployments(&render("dev"));
    let staging = deployments(&render("staging"));
    let production = deployments(&render("production"));
    for (name, d) in &dev {
        assert_eq!(d.replicas, 1, "dev/{name}");
        assert_eq!(
            d.env.get("CAPMAAS_LOG_FORMAT").map(String::as_str),
            Some("text")
        );
        assert!(d.env["RUST_LOG"].contains("debug"));
        if name != "webhook-server" {
            assert_eq!(d.env["CAPMAAS_LEADER_ELECT"], "false", "dev/{name}");
            assert_eq!(d.env["CAPMAAS_SYNC_PERIOD"], "10m", "dev/{name}");
        }
    }
    for (name, d) in &staging {
        assert_eq!(d.replicas, 2, "staging/{name}");
        assert_eq!(d.env["CAPMAAS_LOG_FORMAT"], "json");
        assert_eq!(d.env["CAPMAAS_SYNC_PERIOD"], "60m");
        assert!(d.env.contains_key("OTEL_EXPORTER_OTLP_ENDPOINT"));
        assert_eq!(
            d.env.get("CAPMAAS_LEADER_ELECT").map(String::as_str),
            (name != "webhook-server").then_some("true"),
            "staging/{name}"
        );
    }
    for (name, d) in &production {
        let replicas = if name == "webhook-server" { 3 } else { 2 };
        assert_eq!(d.replicas, replicas, "production/{name}");
        assert!(
            !d.env.contains_key("CAPMAAS_SYNC_PERIOD"),
            "production keeps the 2 h default"
        );
        let concurrency = d.args.iter().any(|a| a == "--concurrency=16");
        assert_eq!(
            concurrency,
            name == "machine-controller",
            "only machine-controller is scaled on its own"
        );
    }
    // Production serves one namespace (deploy/components/namespaced), not the provider's own;
    // dev and staging watch all. The webhook answers for every namespace everywhere.
    for (overlay, rendered, served) in [
        ("dev", &dev, None),
        ("staging", &staging, None),
        ("production", &production, Some("capmaas-clusters")),
    ] {
        for (name, d) in rendered {
            let expected = served.filter(|_| name != "webhook-server");
            assert_eq!(
                d.env.get("CAPMAAS_WATCH_NAMESPACE").map(String::as_str),
                expected,
                "{overlay}/{name}"
            );
        }
    }
    assert_eq!(
        production["machine-controller"].resources["limits"]["memory"],
        "1Gi"
    );
    assert_eq!(
        production["cluster-controller"].resources["limits"]["memory"],
        "512Mi"
    );
    // Plain-http MAAS: accepted in dev and staging, refused in production unless the
    // operator's own overlay opts in; nowhere else does any Deployment carry the setting.
    for (overlay, rendered, accepted) in [
        ("dev", &dev, "true"),
        ("staging", &staging, "true"),
        ("production", &production, "false"),
    ] {
        for (name, d) in rendered {
            let expected = (name == "maas-client").then_some(accepted);
            assert_eq!(
                d.env.get("MAAS_ALLOW_INSECURE_HTTP").map(String::as_str),
                expected,
                "{overlay}/{name}"
            );
        }
    }
    assert!(
        !render("dev")
            .iter()
            .any(|d| d["kind"] == "PodDisruptionBudget")
    );
}

/// Where CAPI core runs, ours run: the control-plane tolerations CAPI core's managers have;
/// in every overlay with more than one replica, a PodDisruptionBudget per component that
/// keeps one replica through a drain and replicas spread over nodes; and a priority class that
/// exists in the rendering (no `system-*` class, refused outside kube-system under a quota).
#[test]
fn every_overlay_schedules_where_capi_core_does_and_survives_a_drain() {
    for overlay in OVERLAYS {
        let docs = render(overlay);
        let classes: BTreeSet<&str> = docs
            .iter()
            .filter(|d| d["kind"] == "PriorityClass")
            .map(|d| d["metadata"]["name"].as_str().unwrap())
            .collect();
        for (name, d) in deployments(&docs) {
            let tolerated: BTreeSet<(&str, &str)> = d.pod["tolerations"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|t| (t["key"].as_str().unwrap(), t["effect"].as_str().unwrap()))
                .collect();
            for key in [
                "node-role.kubernetes.io/control-plane",
                "node-role.kubernetes.io/master",
            ] {
                assert!(
                    tolerated.contains(&(key, "NoSchedule")),
                    "{overlay}/{name}: {tolerated:?}"
                );
            }
            if let Some(class) = d.pod["priorityClassName"].as_str() {
                assert!(
                    classes.contains(class) && !class.starts_with("system-"),
                    "{overlay}/{name}: priority class {class} is not shipped"
                );
            }
            if d.replicas < 2 {
                continue;
            }
            let labels = &d.pod_labels;
            let budgets: Vec<&Value> = docs
                .iter()
                .filter(|p| p["kind"] == "PodDisruptionBudget")
                .filter(|p| {
                    p["spec"]["selector"]["matchLabels"]
                        .as_object()
                        .unwrap()
                        .iter()
                        .all(|(k, v)| labels.get(k) == Some(v))
                })
                .collect();
            assert_eq!(
                budgets.len(),
                1,
                "{overlay}/{name}: one PodDisruptionBudget"
            );
            assert_eq!(budgets[0]["spec"]["minAvailable"], 1, "{overlay}/{name}");
            let spread = d.pod["topologySpreadConstraints"].as_array();
            assert!(
                spread.is_some_and(|s| s
                    .iter()
                    .any(|c| c["topologyKey"] == "kubernetes.io/hostname"
                        && c["whenUnsatisfiable"] == "DoNotSchedule")),
                "{overlay}/{name}: replicas spread over nodes"
            );
        }
    }
}

/// The pods of every overlay are admitted by the API server's Pod Security admission with the
/// `restricted` level enforced (the label deploy/base/namespace.yaml puts on capmaas-system):
/// each Deployment's pod template is created as a Pod in a dry run. A pod that breaks the
/// level is refused in the same namespace, so the enforcement is shown to be on.
#[tokio::test]
async fn every_overlays_pods_pass_the_restricted_pod_security_standard() {
    let env = TestEnv::api_server_only().await.unwrap();
    let namespaces: Api<Namespace> = Api::all(env.client());
    let provider_ns = render("dev")
        .into_iter()
        .find(|d| d["kind"] == "Namespace")
        .unwrap();
    assert_eq!(
        provider_ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
        "restricted"
    );
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {
                "name": "capmaas-system",
                "labels": provider_ns["metadata"]["labels"]
            }}))
            .unwrap(),
        )
        .await
        .unwrap();
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let pods: Api<k8s_openapi::api::core::v1::Pod> =
        Api::namespaced(env.client(), "capmaas-system");
    let classes: Api<kube::api::DynamicObject> = Api::all_with(
        env.client(),
        &kube::api::ApiResource::erase::<k8s_openapi::api::scheduling::v1::PriorityClass>(&()),
    );
    for overlay in OVERLAYS {
        let docs = render(overlay);
        for class in docs.iter().filter(|d| d["kind"] == "PriorityClass") {
            // The Priority admission plugin resolves the pod's class: it must exist.
            let _ = classes
                .create(
                    &PostParams::default(),
                    &serde_json::from_value(class.clone()).unwrap(),
                )
                .await;
        }
        for (name, d) in deployments(&docs) {
            let pod = json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("{overlay}-{name}"), "labels": d.pod_labels},
                "spec": d.pod
            });
            pods.create(&dry_run, &serde_json::from_value(pod).unwrap())
                .await
                .unwrap_or_else(|e| panic!("{overlay}/{name} refused: {e}"));
        }
    }
    let mut breaking = deployments(&render("dev"))
        .remove("maas-client")
        .unwrap()
        .pod;
    breaking["containers"][0]["securityContext"]["allowPrivilegeEscalation"] = json!(true);
    let refused = pods
        .create(
            &dry_run,
            &serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "breaking"}, "spec": breaking
            }))
            .unwrap(),
        )
        .await
        .unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("violates PodSecurity \"restricted:latest\""),
        "{refused}"
    );
    env.stop().await;
}

/// Our ServiceAccount for `component`, for `kubectl auth can-i --as`.
fn service_account(component: &str) -> String {
    format!("system:serviceaccount:capmaas-system:capmaas-{component}")
}

/// `kubectl auth can-i <question> --as <component's ServiceAccount> -n <namespace>`.
fn ask(env: &TestEnv, component: &str, question: &[String], namespace: &str) -> bool {
    let out = env
        .kubectl()
        .args(["auth", "can-i"])
        .args(question)
        .args(["--as", &service_account(component), "-n", namespace])
        .output()
        .unwrap();
    match String::from_utf8_lossy(&out.stdout).trim() {
        "yes" => true,
        "no" => false,
        other => panic!(
            "can-i {question:?}: {other:?} {}",
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

/// Whether `component` may `verb` the `resource` (`kind` or `kind/subresource`) in `namespace`.
fn can_i(env: &TestEnv, component: &str, verb: &str, resource: &str, namespace: &str) -> bool {
    let mut question = vec![verb.to_owned()];
    match resource.split_once('/') {
        Some((resource, subresource)) => {
            question.push(resource.to_owned());
            question.push(format!("--subresource={subresource}"));
        }
        None => question.push(resource.to_owned()),
    }
    ask(env, component, &question, namespace)
}

/// Which components may do `verb` on `resource` in namespace `ns`.
fn allowed(env: &TestEnv, verb: &str, resource: &str, ns: &str) -> Vec<&'static str> {
    COMPONENTS
        .into_iter()
        .filter(|c| can_i(env, c, verb, resource, ns))
        .collect()
}

/// An API server with our CRDs and CAPI's, to ask `kubectl auth can-i` in.
async fn rbac_env() -> TestEnv {
    TestEnv::builder()
        .capi_crds(true)
        .controller_manager(false)
        .start()
        .await
        .unwrap()
}

#[tokio::test]
async fn the_rbac_of_deploy_base_is_minimal() {
    let env = rbac_env().await;
    let documents = capmaas_testenv::objects::deploy_base_rbac(&COMPONENTS).unwrap();
    for document in &documents {
        capmaas_e2e::apply(&env.client(), document).await.unwrap();
    }
    let tenant = "team-a";
    let mut failures = Vec::new();
    let mut expect = |verb: &str, resource: &str, ns: &str, who: &[&str]| {
        let got = allowed(&env, verb, resource, ns);
        if got != who {
            failures.push(format!(
                "{verb} {resource} in {ns}: expected {who:?}, got {got:?}"
            ));
        }
    };
    // One writer per status (the design's table); maasippools/status has two, on disjoint
    // conditions: data-controller's counts and maas-client's MAASRangesReserved.
    expect("patch", "maashosts/status", tenant, &["maas-client"]);
    expect("patch", "maasinventories/status", tenant, &["maas-client"]);
    expect("patch", "maasdnsrecords/status", tenant, &["maas-client"]);
    expect(
        "patch",
        "maasclusters/status",
        tenant,
        &["cluster-controller"],
    );
    expect(
        "patch",
        "maasmachines/status",
        tenant,
        &["machine-controller"],
    );
    expect(
        "patch",
        "maasdataclaims/status",
        tenant,
        &["data-controller"],
    );
    expect("patch", "maasdata/status", tenant, &["data-controller"]);
    expect(
        "patch",
        "maasmachinetemplates/status",
        tenant,
        &["machine-controller"],
    );
    expect(
        "patch",
        "maasdatatemplates/status",
        tenant,
        &["data-controller"],
    );
    expect(
        "patch",
        "maasippools/status",
        tenant,
        &["maas-client", "data-controller"],
    );
    expect(
        "patch",
        "maasremediations/status",
        tenant,
        &["remediation-controller"],
    );
    // Who creates what.
    expect("create", "maashosts", tenant, &["maas-client"]);
    expect("delete", "maashosts", tenant, &["maas-client"]);
    expect("create", "maasdnsrecords", tenant, &["cluster-controller"]);
    expect("create", "maasdataclaims", tenant, &["machine-controller"]);
    expect("create", "maasdata", tenant, &["data-controller"]);
    expect(
        "create",
        "ipaddresses.ipam.cluster.x-k8s.io",
        tenant,
        &["data-controller"],
    );
    // The installation-wide address lock (cluster-scoped): data-controller's alone.
    expect("create", "maasipaddresslocks", tenant, &["data-controller"]);
    expect("delete", "maasipaddresslocks", tenant, &["data-controller"]);
    // User objects: nobody creates or deletes them.
    for kind in [
        "maasclusters",
        "maasmachines",
        "maasinventories",
        "maasippools",
        "maasdatatemplates",
        "maasremediations",
        "maasmachinetemplates",
    ] {
        expect("create", kind, tenant, &[]);
        expect("delete", kind, tenant, &[]);
    }
    // Pools imported on demand: an inventory created in the provider's namespace only.
    expect(
        "create",
        "maasinventories",
        "capmaas-system",
        &["machine-controller"],
    );
    expect("patch", "maasmachines", tenant, &["machine-controller"]);
    // Secrets: nobody enumerates them; only data-controller writes (rendered data); the
    // webhook server reads none. Who can `get` is in docs/rbac.md (the kubeconfig readers).
    expect("list", "secrets", tenant, &[]);
    expect("watch", "secrets", tenant, &[]);
    expect("delete", "secrets", tenant, &[]);
    expect("create", "secrets", tenant, &["data-controller"]);
    expect("get", "secrets", tenant, &SECRET_READERS);
    // Cluster-wide, the readers reach the provider's namespace too, the MAAS credentials
    // Secret included: what the namespaced install (production) takes away.
    expect("get", "secrets", "capmaas-system", &SECRET_READERS);
    // Nothing outside the provider's lane: RBAC, CRDs, webhooks, workloads, CAPI specs.
    for (verb, resource) in [
        ("create", "clusterroles.rbac.authorization.k8s.io"),
        ("create", "rolebindings.rbac.authorization.k8s.io"),
        ("patch", "customresourcedefinitions.apiextensions.k8s.io"),
        (
            "patch",
            "validatingwebhookconfigurations.admissionregistration.k8s.io",
        ),
        ("create", "pods"),
        ("patch", "deployments.apps"),
        ("patch", "machines.cluster.x-k8s.io"),
        ("patch", "clusters.cluster.x-k8s.io"),
        ("create", "leases.coordination.k8s.io"),
    ] {
        expect(verb, resource, tenant, &[]);
    }
    // Leases only in the provider's namespace; the gateway's host bindings are Leases too.
    expect(
        "create",
        "leases.coordination.k8s.io",
        "capmaas-system",
        &LEASE_HOLDERS,
    );
    expect(
        "delete",
        "leases.coordination.k8s.io",
        "capmaas-system",
        &["maas-client"],
    );
    // remediation-controller adds one condition to a Machine; nobody else writes Machines.
    expect(
        "patch",
        "machines.cluster.x-k8s.io/status",
        tenant,
        &["remediation-controller"],
    );
    // The webhook server reads two kinds and writes nothing.
    expect(
        "list",
        "maasippools",
        tenant,
        &["maas-client", "data-controller", "webhook-server"],
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The MAAS credentials as the production overlay (the namespaced install,
/// `deploy/components/namespaced`) leaves them: its RBAC applied to a real API server, asked
/// with `kubectl auth can-i --as` each ServiceAccount. No ServiceAccount of the provider may
/// read, change or delete the Secret (maas-client gets it from the kubelet as environment),
/// nor any Secret of `capmaas-system` or of a namespace it does not serve; in the served
/// namespace each keeps what it needs (the scenario
/// `a_namespaced_install_serves_its_namespace_and_nothing_else` runs them with these rights).
#[tokio::test]
async fn under_the_production_overlay_no_service_account_reaches_the_maas_credentials() {
    let env = rbac_env().await;
    let access = OverlayAccess::from_rendering(&render("production"));
    let served = access.served_namespaces();
    assert_eq!(
        served,
        ["capmaas-clusters"],
        "production serves one namespace"
    );
    let served = served[0].as_str();
    create_namespaces(&env, [served, "team-a"]).await;
    for document in &access.documents {
        capmaas_e2e::apply(&env.client(), document).await.unwrap();
    }
    let credentials = "capmaas-manager-bootstrap-credentials";
    let mut failures = Vec::new();
    for verb in ["get", "list", "watch", "patch", "update", "delete"] {
        let question = [verb.to_owned(), format!("secrets/{credentials}")];
        let got: Vec<&str> = COMPONENTS
            .into_iter()
            .filter(|c| ask(&env, c, &question, "capmaas-system"))
            .collect();
        if !got.is_empty() {
            failures.push(format!("{verb} secret {credentials}: {got:?}"));
        }
    }
    let mut expect = |verb: &str, resource: &str, ns: &str, who: &[&str]| {
        let got = allowed(&env, verb, resource, ns);
        if got != who {
            failures.push(format!(
                "{verb} {resource} in {ns}: expected {who:?}, got {got:?}"
            ));
        }
    };
    for ns in ["capmaas-system", "team-a"] {
        for verb in ["get", "create", "patch", "update"] {
            expect(verb, "secrets", ns, &[]);
        }
        // Nor anything of the provider's kinds outside the served namespace.
        expect("list", "maashosts", ns, &[]);
        expect("patch", "maasmachines", ns, &[]);
    }
    // In the served namespace, the rights of deploy/base.
    expect("get", "secrets", served, &SECRET_READERS);
    expect("create", "secrets", served, &["data-controller"]);
    expect("create", "maashosts", served, &["maas-client"]);
    expect(
        "patch",
        "maasmachines/status",
        served,
        &["machine-controller"],
    );
    expect("create", "maasinventories", served, &["machine-controller"]);
    expect(
        "list",
        "maasippools",
        served,
        &["maas-client", "data-controller", "webhook-server"],
    );
    // What stays cluster-wide: the address locks (cluster-scoped) and the webhook's caches.
    expect(
        "create",
        "maasipaddresslocks",
        "team-a",
        &["data-controller"],
    );
    expect("list", "maasippools", "team-a", &["webhook-server"]);
    // Leader election and the gateway's host bindings, in the provider's namespace.
    expect(
        "create",
        "leases.coordination.k8s.io",
        "capmaas-system",
        &LEASE_HOLDERS,
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A pod as a NetworkPolicy sees it: its namespace, its namespace's labels, its own labels.
struct Peer {
    namespace: &'static str,
    namespace_labels: BTreeMap<String, String>,
    labels: BTreeMap<String, String>,
}

impl Peer {
    fn new(namespace: &'static str, labels: &[(&str, &str)]) -> Self {
        Self {
            namespace,
            // The API server labels every namespace with its name.
            namespace_labels: [(
                "kubernetes.io/metadata.name".to_owned(),
                namespace.to_owned(),
            )]
            .into(),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }

    fn component(component: &str) -> Self {
        Self::new(
            "capmaas-system",
            &[
                ("app.kubernetes.io/name", component),
                ("app.kubernetes.io/part-of", "capmaas"),
            ],
        )
    }
}

/// Whether a label selector selects `labels` (`{}` selects everything).
fn selects(selector: &Value, labels: &BTreeMap<String, String>) -> bool {
    let equal = selector["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .all(|(k, v)| labels.get(k).map(String::as_str) == v.as_str());
    let expressions = selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|e| {
            let value = labels.get(e["key"].as_str().unwrap());
            let values: Vec<&str> = e["values"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|v| v.as_str().unwrap())
                .collect();
            match e["operator"].as_str().unwrap() {
                "In" => value.is_some_and(|v| values.contains(&v.as_str())),
                "NotIn" => !value.is_some_and(|v| values.contains(&v.as_str())),
                "Exists" => value.is_some(),
                "DoesNotExist" => value.is_none(),
                other => panic!("operator {other}"),
            }
        });
    equal && expressions
}

/// The container ports `from` may connect to on a pod of `target` (its Deployment), by number,
/// as NetworkPolicy's ingress rules decide; `None` when no policy isolates the pod (everything
/// is allowed). A named port is looked up in the pod's containers.
fn reachable(docs: &[Value], target: &Value, from: &Peer) -> Option<BTreeSet<i64>> {
    let namespace = target["metadata"]["namespace"].as_str().unwrap();
    let pod = &target["spec"]["template"];
    let labels: BTreeMap<String, String> =
        serde_json::from_value(pod["metadata"]["labels"].clone()).unwrap();
    let named: BTreeMap<&str, i64> = pod["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["ports"].as_array().into_iter().flatten())
        .map(|p| {
            (
                p["name"].as_str().unwrap(),
                p["containerPort"].as_i64().unwrap(),
            )
        })
        .collect();
    let isolating: Vec<&Value> = docs
        .iter()
        .filter(|d| {
            d["kind"] == "NetworkPolicy"
                && d["metadata"]["namespace"] == namespace
                && selects(&d["spec"]["podSelector"], &labels)
                && d["spec"]["policyTypes"]
                    .as_array()
                    .is_none_or(|t| t.iter().any(|t| t == "Ingress"))
        })
        .collect();
    if isolating.is_empty() {
        return None;
    }
    let mut ports = BTreeSet::new();
    for rule in isolating
        .iter()
        .flat_map(|p| p["spec"]["ingress"].as_array().into_iter().flatten())
    {
        let admitted = match rule["from"].as_array() {
            None => true,
            Some(peers) if peers.is_empty() => true,
            Some(peers) => peers.iter().any(|peer| {
                assert!(peer["ipBlock"].is_null(), "an ipBlock peer: {peer}");
                let namespace_ok = match peer.get("namespaceSelector") {
                    Some(selector) => selects(selector, &from.namespace_labels),
                    None => from.namespace == namespace,
                };
                let pod_ok = peer
                    .get("podSelector")
                    .is_none_or(|selector| selects(selector, &from.labels));
                namespace_ok && pod_ok
            }),
        };
        if !admitted {
            continue;
        }
        let listed = rule["ports"].as_array().filter(|p| !p.is_empty());
        let Some(listed) = listed else {
            // Every port.
            ports.extend(named.values().copied());
            continue;
        };
        for port in listed {
            assert_eq!(port["protocol"], "TCP", "{port}");
            let number = match &port["port"] {
                Value::String(name) => *named
                    .get(name.as_str())
                    .unwrap_or_else(|| panic!("no container port named {name}")),
                other => other.as_i64().unwrap(),
            };
            ports.insert(number);
        }
    }
    Some(ports)
}

/// In every overlay each binary serves /metrics securely, as docs/observability.md says: over
/// HTTPS on the Service's port 8443 with the certificate cert-manager issues for the metrics
/// Services (mounted where --metrics-cert-dir points), with no flag turning the review off; its
/// ServiceAccount may ask the API server to review a scrape; and the ServiceMonitor scrapes
/// with a token and verifies that certificate.
#[test]
fn every_binary_serves_metrics_over_https_to_reviewed_tokens_only() {
    for overlay in OVERLAYS {
        let docs = render(overlay);
        let find = |kind: &str, name: &str| {
            docs.iter()
                .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
                .unwrap_or_else(|| panic!("{overlay}: no {kind} {name}"))
        };
        let certificate = find("Certificate", "capmaas-metrics-cert");
        let names: Vec<&str> = certificate["spec"]["dnsNames"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let reviewers = &find("ClusterRoleBinding", "capmaas-metrics-auth")["subjects"];
        for component in COMPONENTS {
            let at = format!("{overlay}/{component}");
            let pod =
                &find("Deployment", &format!("capmaas-{component}"))["spec"]["template"]["spec"];
            let manager = &pod["containers"][0];
            let args: Vec<&str> = manager["args"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(Value::as_str)
                .collect();
            assert!(
                args.contains(&"--diagnostics-address=:8443"),
                "{at}: {args:?}"
            );
            assert!(
                !args.iter().any(|a| a.starts_with("--metrics-bind-addr")
                    || a.starts_with("--insecure-diagnostics")),
                "{at}: metrics served in plain HTTP: {args:?}"
            );
            let cert_dir = args
                .iter()
                .find_map(|a| a.strip_prefix("--metrics-cert-dir="))
                .unwrap_or_else(|| panic!("{at}: no --metrics-cert-dir"));
            let mount = manager["volumeMounts"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["mountPath"] == cert_dir)
                .unwrap_or_else(|| panic!("{at}: nothing mounted at {cert_dir}"));
            let volume = pod["volumes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|v| v["name"] == mount["name"])
                .unwrap();
            assert_eq!(
                volume["secret"]["secretName"], certificate["spec"]["secretName"],
                "{at}"
            );
            let service = find("Service", &format!("capmaas-{component}-metrics"));
            assert_eq!(service["spec"]["ports"][0]["port"], 8443, "{at}");
            assert!(
                names.contains(&format!("capmaas-{component}-metrics.capmaas-system.svc").as_str()),
                "{at}: the certificate does not name the Service: {names:?}"
            );
            assert!(
                reviewers
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|s| s["name"] == format!("capmaas-{component}")
                        && s["namespace"] == "capmaas-system"),
                "{at}: its ServiceAccount may not review scrapes"
            );
        }
    }
    let monitoring =
        capmaas_e2e::overlay::render_kustomization(&repo_root().join("deploy/monitoring")).unwrap();
    let monitor = monitoring
        .iter()
        .find(|d| d["kind"] == "ServiceMonitor")
        .unwrap();
    let endpoint = &monitor["spec"]["endpoints"][0];
    assert_eq!(endpoint["scheme"], "https");
    assert_eq!(
        endpoint["bearerTokenFile"],
        "/var/run/secrets/kubernetes.io/serviceaccount/token"
    );
    assert_eq!(
        endpoint["tlsConfig"]["ca"]["secret"]["name"],
        "capmaas-metrics-cert"
    );
    assert_eq!(
        endpoint["tlsConfig"]["serverName"],
        "capmaas-metrics.capmaas-system.svc"
    );
    assert!(endpoint["tlsConfig"]["insecureSkipVerify"].is_null());
}

#[test]
fn every_pod_is_isolated_and_only_metrics_and_the_webhook_are_reachable() {
    const METRICS: i64 = 8443;
    const WEBHOOK: i64 = 9443;
    let prometheus = Peer::new("monitoring", &[("app.kubernetes.io/name", "prometheus")]);
    let tenant = Peer::new("team-a", &[("app", "anything")]);
    let stranger = Peer::new("capmaas-system", &[("app", "debug")]);
    for overlay in OVERLAYS {
        let docs = render(overlay);
        for deployment in docs.iter().filter(|d| d["kind"] == "Deployment") {
            let name = deployment["metadata"]["name"]
                .as_str()
                .unwrap()
                .trim_start_matches("capmaas-");
            let at = format!("{overlay}/{name}");
            let own = docs
                .iter()
                .find(|d| {
                    d["kind"] == "NetworkPolicy"
                        && d["metadata"]["name"] == format!("capmaas-{name}")
                })
                .unwrap_or_else(|| panic!("{at}: no NetworkPolicy of its own"));
            let labels: BTreeMap<String, String> = serde_json::from_value(
                deployment["spec"]["template"]["metadata"]["labels"].clone(),
            )
            .unwrap();
            assert!(
                selects(&own["spec"]["podSelector"], &labels),
                "{at}: its policy selects other pods"
            );

            let open_to_all: BTreeSet<i64> = if name == "webhook-server" {
                [WEBHOOK].into()
            } else {
                BTreeSet::new()
            };
            let from_monitoring: BTreeSet<i64> =
                open_to_all.iter().copied().chain([METRICS]).collect();
            assert_eq!(
                reachable(&docs, deployment, &prometheus),
                Some(from_monitoring),
                "{at}: from the monitoring namespace"
            );
            for other in [&tenant, &stranger] {
                assert_eq!(
                    reachable(&docs, deployment, other).as_ref(),
                    Some(&open_to_all),
                    "{at}: from {:?} in {}",
                    other.labels,
                    other.namespace
                );
            }
            for component in COMPONENTS {
                assert_eq!(
                    reachable(&docs, deployment, &Peer::component(component)).as_ref(),
                    Some(&open_to_all),
                    "{at}: from {component}"
                );
            }
        }
        // The gateway holding the MAAS key serves the controllers nothing (they reach it only
        // through Kubernetes objects): no pod of the provider may connect to it on any port.
        let gateway = docs
            .iter()
            .find(|d| d["kind"] == "Deployment" && d["metadata"]["name"] == "capmaas-maas-client")
            .unwrap();
        for component in COMPONENTS {
            assert_eq!(
                reachable(&docs, gateway, &Peer::component(component)),
                Some(BTreeSet::new()),
                "{overlay}: {component} -> maas-client"
            );
        }
        // The same selection by a pod that appears later: the default deny isolates it.
        let later = json!({
            "metadata": {"namespace": "capmaas-system", "name": "capmaas-later"},
            "spec": {"template": {
                "metadata": {"labels": {"app.kubernetes.io/name": "later", "app.kubernetes.io/part-of": "capmaas"}},
                "spec": {"containers": [{"name": "manager", "ports": [{"name": "metrics", "containerPort": 8443}]}]}
            }}
        });
        assert_eq!(
            reachable(&docs, &later, &prometheus),
            Some(BTreeSet::new()),
            "{overlay}: a Deployment without a policy of its own"
        );
    }
}

/// A controller that runs without leader election has nothing to keep two of its pods from
/// acting at once, so its rollouts must not overlap them: every such Deployment, in any
/// overlay, uses the Recreate strategy.
#[test]
fn controllers_without_leader_election_never_overlap_during_a_rollout() {
    let mut seen = 0;
    for overlay in OVERLAYS {
        for doc in render(overlay) {
            if doc["kind"] != "Deployment" {
                continue;
            }
            let unelected = doc["spec"]["template"]["spec"]["containers"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|c| c["env"].as_array().into_iter().flatten())
                .any(|e| e["name"] == "CAPMAAS_LEADER_ELECT" && e["value"] == "false");
            if unelected {
                seen += 1;
                assert_eq!(
                    doc["spec"]["strategy"]["type"], "Recreate",
                    "{overlay}/{}: no leader election, so no overlapping rollout",
                    doc["metadata"]["name"]
                );
                assert!(doc["spec"]["strategy"]["rollingUpdate"].is_null());
            }
        }
    }
    assert!(
        seen >= 5,
        "the dev overlay's controllers run without election"
    );
}

/// An API server with `components`' RBAC from `deploy/base`, its admission policies and
/// `extra` documents applied.
async fn under_the_admission_policies(components: &[&str], extra: Vec<Value>) -> TestEnv {
    let env = TestEnv::our_crds_only().await.unwrap();
    let mut documents = capmaas_testenv::objects::deploy_base_rbac(components).unwrap();
    documents.extend(
        capmaas_testenv::objects::load_yaml_documents(
            &repo_root().join("deploy/base/admission-policies.yaml"),
        )
        .unwrap(),
    );
    documents.extend(extra);
    for document in &documents {
        capmaas_e2e::apply(&env.client(), document).await.unwrap();
    }
    env
}

/// Repeats `attempt` until the API server refuses it with 403 (a policy takes effect once the
/// API server has loaded it), and returns that refusal.
async fn until_refused<F, Fut>(mut attempt: F) -> kube::core::Status
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = Result<(), kube::Error>>,
{
    for n in 0..50 {
        match attempt(n).await {
            Err(kube::Error::Api(status)) if status.code == 403 => return *status,
            Err(e) => panic!("unexpected error: {e}"),
            Ok(()) => tokio::time::sleep(std::time::Duration::from_millis(200)).await,
        }
    }
    panic!("the policy never refused it");
}

/// Creates `object(n)` through `api`, n = 0, 1, …, until the API server refuses one with 403,
/// and returns that refusal.
async fn creation_refused<K>(api: &Api<K>, object: impl Fn(usize) -> K) -> kube::core::Status
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    until_refused(|n| {
        let (api, object) = (api.clone(), object(n));
        async move { api.create(&PostParams::default(), &object).await.map(drop) }
    })
    .await
}

/// `deploy/base/admission-policies.yaml`, enforced by the API server itself: a tenant allowed
/// by RBAC to create MaasHosts, MaasDNSRecords and MaasIPAddressLocks is refused, naming who
/// may; maas-client's (hosts), cluster-controller's (records) and data-controller's (locks)
/// ServiceAccounts and an administrator are not.
#[tokio::test]
async fn only_the_gateway_and_cluster_administrators_create_maashosts() {
    use capmaas_api::{MaasDNSRecord, MaasHost, MaasIPAddressLock};
    let tenant = "team-a";
    let env = under_the_admission_policies(
        &["maas-client", "cluster-controller", "data-controller"],
        vec![
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": tenant}}),
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": "host-maker", "namespace": tenant},
                "rules": [{"apiGroups": ["infrastructure.cluster.x-k8s.io"],
                           "resources": ["maashosts", "maasdnsrecords"],
                           "verbs": ["create", "get"]}]
            }),
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "alice-makes-hosts", "namespace": tenant},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                            "name": "host-maker"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                              "name": "alice"}]
            }),
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": "lock-maker"},
                "rules": [{"apiGroups": ["infrastructure.cluster.x-k8s.io"],
                           "resources": ["maasipaddresslocks"],
                           "verbs": ["create", "get"]}]
            }),
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": "alice-makes-locks"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                            "name": "lock-maker"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                              "name": "alice"}]
            }),
        ],
    )
    .await;
    let admin = env.client();
    let host = |name: &str| -> MaasHost {
        serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasHost",
            "metadata": {"name": name, "annotations": {"maas.cluster.x-k8s.io/hand-made": "true"}},
            "spec": {"systemID": name}
        }))
        .unwrap()
    };
    let alice: Api<MaasHost> = Api::namespaced(
        env.user_client("alice", &["system:authenticated"])
            .await
            .unwrap(),
        tenant,
    );
    let refused = creation_refused(&alice, |n| host(&format!("h{n}"))).await;
    assert!(
        refused
            .message
            .contains("MaasHosts are created by maas-client")
            && refused.message.contains("alice"),
        "{}",
        refused.message
    );
    let gateway: Api<MaasHost> = Api::namespaced(
        env.service_account_client("capmaas-system", "capmaas-maas-client")
            .await
            .unwrap(),
        tenant,
    );
    gateway
        .create(&PostParams::default(), &host("imported"))
        .await
        .unwrap();
    Api::<MaasHost>::namespaced(admin.clone(), tenant)
        .create(&PostParams::default(), &host("by-hand"))
        .await
        .unwrap();

    let record = |name: &str| -> MaasDNSRecord {
        serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasDNSRecord",
            "metadata": {"name": name},
            "spec": {"name": name, "domain": "maas", "addresses": ["10.0.0.1"]}
        }))
        .unwrap()
    };
    let alice_records: Api<MaasDNSRecord> = Api::namespaced(
        env.user_client("alice", &["system:authenticated"])
            .await
            .unwrap(),
        tenant,
    );
    let refused = creation_refused(&alice_records, |n| record(&format!("squat{n}"))).await;
    assert!(
        refused
            .message
            .contains("MaasDNSRecords are created by cluster-controller"),
        "{}",
        refused.message
    );
    Api::<MaasDNSRecord>::namespaced(
        env.service_account_client("capmaas-system", "capmaas-cluster-controller")
            .await
            .unwrap(),
        tenant,
    )
    .create(&PostParams::default(), &record("api"))
    .await
    .unwrap();
    Api::<MaasDNSRecord>::namespaced(admin.clone(), tenant)
        .create(&PostParams::default(), &record("moved"))
        .await
        .unwrap();

    // Address locks: data-controller's, whatever RBAC gives a tenant.
    let lock = |n: usize| -> MaasIPAddressLock {
        MaasIPAddressLock::for_address(
            std::net::IpAddr::from([10, 99, 0, u8::try_from(n % 250).unwrap() + 1]),
            capmaas_api::LockHolder {
                namespace: tenant.into(),
                name: "claim".into(),
                uid: format!("uid-{n}"),
            },
            "pool",
        )
    };
    let alice_locks: Api<MaasIPAddressLock> = Api::all(
        env.user_client("alice", &["system:authenticated"])
            .await
            .unwrap(),
    );
    let refused = creation_refused(&alice_locks, lock).await;
    assert!(
        refused
            .message
            .contains("MaasIPAddressLocks are written by data-controller"),
        "{}",
        refused.message
    );
    Api::<MaasIPAddressLock>::all(
        env.service_account_client("capmaas-system", "capmaas-data-controller")
            .await
            .unwrap(),
    )
    .create(&PostParams::default(), &lock(200))
    .await
    .unwrap();
    Api::<MaasIPAddressLock>::all(admin)
        .create(&PostParams::default(), &lock(201))
        .await
        .unwrap();
}

/// `deploy/base/admission-policies.yaml`: data-controller's ServiceAccount, whose RBAC allows
/// create and patch on every Secret, can write only the Secrets its MaasData own; the MAAS
/// credentials Secret can be neither rewritten nor read through a patch's answer.
#[tokio::test]
async fn data_controller_writes_only_the_secrets_it_renders() {
    use k8s_openapi::api::core::v1::Secret;
    use kube::api::{Patch, PatchParams};
    let env = under_the_admission_policies(&["data-controller"], Vec::new()).await;
    let admin = env.client();
    let credentials: Secret = serde_json::from_value(json!({
        "metadata": {"name": "capmaas-manager-bootstrap-credentials"},
        "stringData": {"MAAS_ENDPOINT": "https://maas.example:5443/MAAS", "MAAS_API_KEY": "a:b:c"}
    }))
    .unwrap();
    Api::<Secret>::namespaced(admin.clone(), "capmaas-system")
        .create(&PostParams::default(), &credentials)
        .await
        .unwrap();
    let as_data_controller = env
        .service_account_client("capmaas-system", "capmaas-data-controller")
        .await
        .unwrap();
    let secrets = Api::<Secret>::namespaced(as_data_controller.clone(), "capmaas-system");
    let rewrite = json!({"stringData": {"MAAS_ENDPOINT": "https://attacker.example/MAAS"}});
    let refused = until_refused(|_| {
        let (secrets, admin, rewrite) = (secrets.clone(), admin.clone(), rewrite.clone());
        async move {
            secrets
                .patch(
                    "capmaas-manager-bootstrap-credentials",
                    &PatchParams::default(),
                    &Patch::Merge(&rewrite),
                )
                .await?;
            // Not loaded yet: put the endpoint back before the next try.
            let restore =
                json!({"stringData": {"MAAS_ENDPOINT": "https://maas.example:5443/MAAS"}});
            Api::<Secret>::namespaced(admin, "capmaas-system")
                .patch(
                    "capmaas-manager-bootstrap-credentials",
                    &PatchParams::default(),
                    &Patch::Merge(&restore),
                )
                .await
                .map(drop)
        }
    })
    .await;
    assert!(
        refused
            .message
            .contains("data-controller writes only the Secrets its MaasData own"),
        "{}",
        refused.message
    );
    // An empty patch answers with the whole object: refused too, so nothing is read.
    let read = secrets
        .patch(
            "capmaas-manager-bootstrap-credentials",
            &PatchParams::default(),
            &Patch::Merge(&json!({})),
        )
        .await;
    assert!(
        matches!(read, Err(kube::Error::Api(ref s)) if s.code == 403),
        "{read:?}"
    );
    // A Secret of its own kind, owned by a MaasData: allowed.
    let tenant = env.create_namespace("team").await.unwrap();
    let rendered: Secret = serde_json::from_value(json!({
        "metadata": {"name": "m1-metadata", "ownerReferences": [{
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasData",
            "name": "m1", "uid": "00000000-0000-0000-0000-000000000001", "controller": true}]},
        "type": "infrastructure.cluster.x-k8s.io/secret",
        "stringData": {"metaData": "local-hostname: m1"}
    }))
    .unwrap();
    Api::<Secret>::namespaced(as_data_controller.clone(), &tenant)
        .create(&PostParams::default(), &rendered)
        .await
        .unwrap();
    // Any other Secret: refused.
    let opaque: Secret =
        serde_json::from_value(json!({"metadata": {"name": "other"}, "stringData": {"k": "v"}}))
            .unwrap();
    let other = Api::<Secret>::namespaced(as_data_controller, &tenant)
        .create(&PostParams::default(), &opaque)
        .await;
    assert!(
        matches!(other, Err(kube::Error::Api(ref s)) if s.code == 403),
        "{other:?}"
    );
}

/// The namespace docs/install.md "Another namespace" moves the provider to.
const MOVED_TO: &str = "platform-capi";

/// `overlay` moved to [`MOVED_TO`] by the two kustomizations of docs/install.md "Another
/// namespace", written as the page shows them (with this repository's `deploy/` beside them).
fn render_moved(overlay: &str) -> Vec<Value> {
    let doc = std::fs::read_to_string(repo_root().join("docs/install.md")).unwrap();
    let section = doc
        .split("### Another namespace")
        .nth(1)
        .expect("docs/install.md: Another namespace");
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(repo_root().join("deploy"), dir.path().join("deploy")).unwrap();
    let mut written = 0;
    for block in section.split("```yaml\n").skip(1) {
        let block = block.split("```").next().unwrap();
        let Some(folder) = block
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("# "))
            .and_then(|l| l.strip_suffix("/kustomization.yaml"))
        else {
            continue;
        };
        assert!(block.contains(MOVED_TO) || folder == "env", "{block}");
        std::fs::create_dir_all(dir.path().join(folder)).unwrap();
        std::fs::write(
            dir.path().join(folder).join("kustomization.yaml"),
            block.replace(
                "deploy/overlays/staging",
                &format!("deploy/overlays/{overlay}"),
            ),
        )
        .unwrap();
        written += 1;
    }
    assert_eq!(written, 2, "moved/ and env/");
    capmaas_e2e::overlay::render_kustomization(&dir.path().join("env")).unwrap()
}

/// A kustomize `namespace:` override, as docs/install.md does it, takes everything along: no
/// `capmaas-system` is left anywhere; the webhook configurations call the moved Service and take
/// their CA from the moved Certificate, which cert-manager issues for the moved Service's name
/// and the API server trusts; the rendering passes a server-side dry run; and the admission
/// policies admit the moved gateway while they still refuse a tenant.
#[tokio::test]
async fn a_namespace_override_takes_the_webhook_certificate_and_policies_along() {
    use capmaas_e2e::cert_manager::{CertManager, trusted};
    let env = TestEnv::our_crds_only().await.unwrap();
    env.install_crd_dir(&cache_dir().join("cert-manager-crds"))
        .await
        .unwrap();
    let mut namespaces = vec![MOVED_TO.to_owned(), "team-a".to_owned()];
    for overlay in OVERLAYS {
        namespaces.extend(OverlayAccess::from_rendering(&render(overlay)).served_namespaces());
    }
    namespaces.sort();
    namespaces.dedup();
    create_namespaces(&env, &namespaces).await;
    let service = format!("capmaas-webhook-service.{MOVED_TO}.svc");
    for overlay in OVERLAYS {
        let docs = render_moved(overlay);
        let text = serde_json::to_string(&docs).unwrap();
        assert!(
            !text.contains("capmaas-system"),
            "{overlay}: capmaas-system left in {}",
            docs.iter()
                .filter(|d| d.to_string().contains("capmaas-system"))
                .map(|d| format!("{} {}", d["kind"], d["metadata"]["name"]))
                .collect::<Vec<_>>()
                .join(", ")
        );
        for cluster_scoped in docs.iter().filter(|d| {
            d["kind"]
                .as_str()
                .is_some_and(|k| k.starts_with("ValidatingAdmissionPolicy"))
        }) {
            assert!(
                cluster_scoped["metadata"]["namespace"].is_null(),
                "{overlay}: {cluster_scoped}"
            );
        }
        for config in docs.iter().filter(|d| {
            d["kind"] == "ValidatingWebhookConfiguration"
                || d["kind"] == "MutatingWebhookConfiguration"
        }) {
            assert_eq!(
                config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
                format!("{MOVED_TO}/capmaas-serving-cert")
            );
            for webhook in config["webhooks"].as_array().unwrap() {
                assert_eq!(webhook["clientConfig"]["service"]["namespace"], MOVED_TO);
            }
        }
        let mut cert_manager = CertManager::from_documents(&docs);
        let issued = cert_manager
            .issue(MOVED_TO, "capmaas-serving-cert")
            .unwrap();
        trusted(&issued.ca_pem, &issued.cert_pem, &service)
            .unwrap_or_else(|e| panic!("{overlay}: {service}: {e}"));
        // The metrics certificate names the moved Services, and the ServiceMonitor (where the
        // overlay ships it) verifies the moved name.
        let metrics = format!("capmaas-metrics.{MOVED_TO}.svc");
        let issued = cert_manager
            .issue(MOVED_TO, "capmaas-metrics-cert")
            .unwrap();
        trusted(&issued.ca_pem, &issued.cert_pem, &metrics)
            .unwrap_or_else(|e| panic!("{overlay}: {metrics}: {e}"));
        for monitor in docs.iter().filter(|d| d["kind"] == "ServiceMonitor") {
            assert_eq!(
                monitor["spec"]["endpoints"][0]["tlsConfig"]["serverName"],
                metrics.as_str()
            );
        }

        let yaml: String = docs
            .iter()
            .map(|d| format!("---\n{}", serde_json::to_string(d).unwrap()))
            .collect::<Vec<_>>()
            .join("\n");
        server_side_dry_run(&env, &yaml).unwrap_or_else(|e| panic!("{overlay}: {e}"));
    }

    the_moved_policies_admit_the_moved_gateway(&env, &render_moved("dev")).await;
    env.stop().await;
}

/// `clusterctl init --target-namespace`, the other way to move the provider: clusterctl moves
/// the objects, the binding subjects, the webhook references and the certificates' names
/// itself, and nothing of ours spells the namespace in a string clusterctl does not rewrite
/// (the admission policies know their writers by a ClusterRoleBinding). The components it
/// renders hold no `capmaas-system`, pass a server-side dry run, and their policies admit the
/// moved gateway and refuse a tenant.
#[tokio::test]
async fn clusterctl_target_namespace_takes_the_policies_along() {
    let repo = tempfile::tempdir().unwrap();
    let out = std::process::Command::new("bash")
        .arg(repo_root().join("hack/clusterctl-repo.sh"))
        .arg(repo.path())
        .env("KUBECTL", cache_dir().join("bin/kubectl"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = std::process::Command::new(cache_dir().join("bin/clusterctl"))
        .args(["generate", "provider", "--infrastructure"])
        .arg(format!("maas:v{}", env!("CARGO_PKG_VERSION")))
        .args(["--target-namespace", MOVED_TO, "--config"])
        .arg(repo.path().join("clusterctl.yaml"))
        .env("HOME", repo.path())
        .env("XDG_CONFIG_HOME", repo.path())
        .env_remove("KUBECONFIG")
        .env("MAAS_ENDPOINT", "http://maas.example:5240/MAAS")
        .env("MAAS_API_KEY", "consumer:token:secret")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let left: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("capmaas-system"))
        .collect();
    assert!(left.is_empty(), "capmaas-system left: {left:#?}");
    let docs: Vec<Value> = serde_saphyr::from_multiple::<Value>(&text)
        .unwrap()
        .into_iter()
        .filter(|d| !d.is_null())
        .collect();

    let env = TestEnv::our_crds_only().await.unwrap();
    env.install_crd_dir(&cache_dir().join("cert-manager-crds"))
        .await
        .unwrap();
    create_namespaces(&env, [MOVED_TO, "team-a"]).await;
    server_side_dry_run(&env, &text).unwrap_or_else(|e| panic!("{e}"));
    // clusterctl gives the cluster-scoped admission policies a namespace too (its list of
    // cluster-scoped kinds predates them); its client, like kubectl, leaves it out of the
    // request for a cluster-scoped kind, and this test's `apply` does not: take it off.
    let docs: Vec<Value> = docs
        .into_iter()
        .map(|mut d| {
            if d["kind"]
                .as_str()
                .is_some_and(|k| k.starts_with("ValidatingAdmissionPolicy"))
            {
                d["metadata"].as_object_mut().unwrap().remove("namespace");
            }
            d
        })
        .collect();
    the_moved_policies_admit_the_moved_gateway(&env, &docs).await;
    env.stop().await;
}

/// The moved admission policies, RBAC and ServiceAccounts of `moved`, applied for real: the
/// moved gateway creates a MaasHost, and a tenant allowed by RBAC is still refused.
async fn the_moved_policies_admit_the_moved_gateway(env: &TestEnv, moved: &[Value]) {
    for doc in moved.iter().filter(|d| {
        capmaas_e2e::overlay::ACCESS_KINDS
            .iter()
            .any(|k| d["kind"] == *k)
    }) {
        capmaas_e2e::apply(&env.client(), doc).await.unwrap();
    }
    for doc in [
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "host-maker", "namespace": "team-a"},
            "rules": [{"apiGroups": ["infrastructure.cluster.x-k8s.io"],
                       "resources": ["maashosts"], "verbs": ["create", "get"]}]
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "alice-makes-hosts", "namespace": "team-a"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "host-maker"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]
        }),
    ] {
        capmaas_e2e::apply(&env.client(), &doc).await.unwrap();
    }
    let host = |name: &str| -> capmaas_api::MaasHost {
        serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasHost",
            "metadata": {"name": name},
            "spec": {"systemID": name}
        }))
        .unwrap()
    };
    let alice: Api<capmaas_api::MaasHost> = Api::namespaced(
        env.user_client("alice", &["system:authenticated"])
            .await
            .unwrap(),
        "team-a",
    );
    let refused = creation_refused(&alice, |n| host(&format!("h{n}"))).await;
    assert!(
        refused
            .message
            .contains("MaasHosts are created by maas-client"),
        "{}",
        refused.message
    );
    Api::<capmaas_api::MaasHost>::namespaced(
        env.service_account_client(MOVED_TO, "capmaas-maas-client")
            .await
            .unwrap(),
        "team-a",
    )
    .create(&PostParams::default(), &host("imported"))
    .await
    .unwrap_or_else(|e| panic!("the moved gateway is refused: {e}"));
}

/// `kubectl apply --server-side --dry-run=server` of `yaml`; the error is kubectl's.
fn server_side_dry_run(env: &TestEnv, yaml: &str) -> Result<(), String> {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), yaml).unwrap();
    let out = env
        .kubectl()
        .args(["apply", "--server-side", "--dry-run=server", "-f"])
        .arg(file.path())
        .output()
        .unwrap();
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}
