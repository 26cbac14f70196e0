//! How the provider is packaged for Argo CD and clusterctl, against the real tools: the Argo CD
//! health checks run in Argo CD's Lua (gopher-lua) on their test cases; the Applications,
//! ApplicationSet and health-check ConfigMap pass a server-side dry run with Argo CD's CRDs;
//! clusterctl (built from the test control plane's Cluster API release) reads the rendered
//! repository, takes a CAPMAAS user's variables unchanged, and what it generates passes a
//! server-side dry run with the CAPI, kubeadm and our CRDs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use capmaas_testenv::{TestEnv, cache_dir, kubectl, repo_root};
use serde_json::Value;

const VERSION: &str = "v0.10.0";
const FLAVORS: [&str; 3] = ["", "ipam", "remediation"];

/// A CAPMAAS user's clusterctl variables, as CAPMAAS documents them (its README and
/// `templates/cluster-template.yaml`): they must work here unchanged.
const CAPMAAS_VARIABLES: &str = "\
MAAS_ENDPOINT: http://maas.example:5240/MAAS
MAAS_API_KEY: consumer:token:secret
MAAS_DNS_DOMAIN: maas.example
KUBERNETES_VERSION: v1.34.1
CONTROL_PLANE_MACHINE_COUNT: 3
CONTROL_PLANE_MACHINE_MINCPU: 4
CONTROL_PLANE_MACHINE_MINMEMORY: 8192
CONTROL_PLANE_MACHINE_IMAGE: custom/u-2204-0-k-1341-0
CONTROL_PLANE_MACHINE_RESOURCEPOOL: control-plane
CONTROL_PLANE_MACHINE_TAG: control-plane
WORKER_MACHINE_MINCPU: 2
WORKER_MACHINE_MINMEMORY: 4096
WORKER_MACHINE_IMAGE: custom/u-2204-0-k-1341-0
WORKER_MACHINE_RESOURCEPOOL: workers
WORKER_MACHINE_TAG: worker
";

/// What the ipam flavor needs on top.
const IPAM_VARIABLES: &str = "\
WORKER_IP_POOL_START: 10.20.0.100
WORKER_IP_POOL_END: 10.20.0.149
WORKER_IP_POOL_PREFIX: 24
WORKER_IP_POOL_GATEWAY: 10.20.0.1
WORKER_IP_POOL_MAAS_SUBNET: 10.20.0.0/24
";

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn documents(yaml: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(yaml)
        .unwrap()
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

fn kustomize(dir: &Path) -> Vec<Value> {
    documents(&run(Command::new(kubectl()).arg("kustomize").arg(dir)))
}

fn tool(name: &str) -> PathBuf {
    let path = cache_dir().join("bin").join(name);
    assert!(
        path.is_file(),
        "{} is missing: run `just testenv`",
        path.display()
    );
    path
}

fn argocd() -> PathBuf {
    repo_root().join("deploy/argocd")
}

fn name_of(doc: &Value) -> &str {
    doc["metadata"]["name"].as_str().unwrap()
}

#[test]
fn argocd_health_checks_give_the_expected_health_in_argocds_lua() {
    let out = run(Command::new(tool("argocd-health"))
        .arg("test")
        .arg(argocd().join("health")));
    assert!(out.contains("cases passed"), "{out}");
}

/// Every kind whose status has conditions gets the health script under its argocd-cm key, and
/// the templates get none: they have no status, or (MaasMachineTemplate) only the autoscaler's
/// node shape and `CapacityKnown`, which say nothing of the template's health; without a
/// script Argo CD counts them healthy.
#[test]
fn argocd_cm_carries_the_health_check_of_every_kind_with_status() {
    let script = std::fs::read_to_string(argocd().join("health/health.lua")).unwrap();
    let rendered = kustomize(&argocd().join("health"));
    assert_eq!(rendered.len(), 1, "{rendered:?}");
    let cm = &rendered[0];
    assert_eq!(cm["kind"], "ConfigMap");
    assert_eq!(name_of(cm), "argocd-cm");
    assert_eq!(cm["metadata"]["namespace"], "argocd");
    assert_eq!(
        cm["metadata"]["labels"]["app.kubernetes.io/part-of"], "argocd",
        "Argo CD reads only the argocd-cm labelled as its own"
    );
    let data = cm["data"].as_object().unwrap();
    let mut with_status = BTreeSet::new();
    for crd in kustomize(&repo_root().join("deploy/crds")) {
        let group = crd["spec"]["group"].as_str().unwrap();
        let kind = crd["spec"]["names"]["kind"].as_str().unwrap();
        let is_template = kind.ends_with("Template") && kind != "MaasDataTemplate";
        let has_conditions = !is_template
            && crd["spec"]["versions"].as_array().unwrap().iter().any(|v| {
                !v["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]["conditions"]
                    .is_null()
            });
        let key = format!("resource.customizations.health.{group}_{kind}");
        if has_conditions {
            with_status.insert(kind.to_owned());
            assert!(
                data.get(&key).and_then(Value::as_str) == Some(script.as_str()),
                "{key} is missing or is not health.lua"
            );
        } else {
            assert!(
                !data.contains_key(&key),
                "{key}: {kind} gets no health check"
            );
        }
    }
    assert_eq!(data.len(), with_status.len(), "{:?}", data.keys());
    for kind in ["MaasMachine", "MaasCluster", "MaasHost", "MaasIPPool"] {
        assert!(with_status.contains(kind), "{kind}");
    }
}

/// Replaces the ApplicationSet's `{{key}}` placeholders as its list generator does.
fn instantiate(template: &Value, element: &serde_json::Map<String, Value>) -> Value {
    let mut text = serde_json::to_string(template).unwrap();
    for (key, value) in element {
        text = text.replace(&format!("{{{{{key}}}}}"), value.as_str().unwrap());
    }
    serde_json::from_str(&text).unwrap()
}

#[test]
fn the_applicationset_generates_exactly_the_applications() {
    let set = kustomize(&argocd().join("applicationset"));
    let apps = kustomize(&argocd().join("applications"));
    let projects = |docs: &[Value]| -> Vec<Value> {
        docs.iter()
            .filter(|d| d["kind"] == "AppProject")
            .cloned()
            .collect()
    };
    assert_eq!(projects(&set), projects(&apps));
    let appset = set.iter().find(|d| d["kind"] == "ApplicationSet").unwrap();
    let template = &appset["spec"]["template"];
    let elements = appset["spec"]["generators"][0]["list"]["elements"]
        .as_array()
        .unwrap();
    let expected: BTreeMap<String, &Value> = apps
        .iter()
        .filter(|d| d["kind"] == "Application")
        .map(|d| (name_of(d).to_owned(), d))
        .collect();
    assert_eq!(elements.len(), expected.len());
    for element in elements {
        let generated = instantiate(template, element.as_object().unwrap());
        let name = name_of(&generated).to_owned();
        let app = expected
            .get(&name)
            .unwrap_or_else(|| panic!("{name} not in applications/"));
        assert_eq!(generated["spec"], app["spec"], "{name}");
        assert_eq!(
            generated["metadata"]["labels"], app["metadata"]["labels"],
            "{name}"
        );
        let env = element["env"].as_str().unwrap();
        assert_eq!(
            app["spec"]["source"]["path"],
            format!("deploy/overlays/{env}")
        );
        assert!(
            repo_root().join("deploy/overlays").join(env).is_dir(),
            "{env}"
        );
    }
}

/// Argo CD refuses to sync an object its AppProject does not admit: a namespaced one outside
/// the project's destinations, a cluster-scoped kind outside `clusterResourceWhitelist`.
/// Every object of every overlay must be admitted (every namespaced object of `deploy/` names
/// its namespace, so one without is cluster-scoped).
#[test]
fn the_argocd_project_admits_every_object_of_every_overlay() {
    let project = kustomize(&argocd().join("project"))
        .into_iter()
        .find(|d| d["kind"] == "AppProject")
        .unwrap();
    let destinations: BTreeSet<String> = project["spec"]["destinations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["namespace"].as_str().unwrap().to_owned())
        .collect();
    let cluster_kinds: BTreeSet<(String, String)> = project["spec"]["clusterResourceWhitelist"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["group"].as_str().unwrap().to_owned(),
                k["kind"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let mut refused = Vec::new();
    for overlay in ["dev", "staging", "production"] {
        for doc in kustomize(&repo_root().join("deploy/overlays").join(overlay)) {
            let kind = doc["kind"].as_str().unwrap().to_owned();
            let group = doc["apiVersion"]
                .as_str()
                .unwrap()
                .rsplit_once('/')
                .map_or("", |(group, _)| group)
                .to_owned();
            let admitted = match doc["metadata"]["namespace"].as_str() {
                Some(ns) => destinations.contains(ns),
                None => cluster_kinds.contains(&(group.clone(), kind.clone())),
            };
            if !admitted {
                refused.push(format!(
                    "{overlay}: {group}/{kind} {} in {:?}",
                    name_of(&doc),
                    doc["metadata"]["namespace"]
                ));
            }
        }
    }
    assert!(refused.is_empty(), "{}", refused.join("\n"));
}

fn wave(doc: &Value) -> i64 {
    doc["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"]
        .as_str()
        .map_or(0, |w| w.parse().unwrap())
}

/// CRDs before the webhook server, the webhook server (and its certificate) before the webhook
/// configurations, those before the controllers; Argo CD never prunes or deletes a CRD.
#[test]
fn sync_waves_land_crds_then_the_webhook_then_the_controllers() {
    let docs = kustomize(&repo_root().join("deploy/base"));
    let waves_of = |pick: &dyn Fn(&Value) -> bool| -> BTreeSet<i64> {
        docs.iter().filter(|d| pick(d)).map(wave).collect()
    };
    let kind = |k: &'static str| move |d: &Value| d["kind"] == k;
    let component = |d: &Value| {
        d["metadata"]["labels"]["app.kubernetes.io/name"]
            .as_str()
            .map(str::to_owned)
    };
    let crds = waves_of(&kind("CustomResourceDefinition"));
    let webhook_server = waves_of(&|d| component(d).as_deref() == Some("webhook-server"));
    let certificate = waves_of(&|d| d["apiVersion"] == "cert-manager.io/v1");
    let webhooks = waves_of(&|d| {
        d["apiVersion"]
            .as_str()
            .is_some_and(|a| a.starts_with("admissionregistration.k8s.io/"))
    });
    let controllers = waves_of(&|d| {
        d["kind"] == "Deployment" && component(d).as_deref() != Some("webhook-server")
    });
    let one = |set: &BTreeSet<i64>, what: &str| -> i64 {
        assert_eq!(set.len(), 1, "{what}: {set:?}");
        *set.first().unwrap()
    };
    let (crds, server, cert, hooks, ctrl) = (
        one(&crds, "CRDs"),
        one(&webhook_server, "webhook-server"),
        one(&certificate, "certificate"),
        one(&webhooks, "webhook configurations"),
        one(&controllers, "controllers"),
    );
    assert!(crds < server && server == cert && server < hooks && hooks < ctrl);
    for crd in docs
        .iter()
        .filter(|d| d["kind"] == "CustomResourceDefinition")
    {
        assert_eq!(
            crd["metadata"]["annotations"]["argocd.argoproj.io/sync-options"],
            "Prune=false,Delete=false",
            "{}",
            name_of(crd)
        );
    }
}

/// The clusterctl repository, rendered as a release would be, with a clusterctl configuration
/// naming it and holding `variables` (top-level keys, as in `~/.config/cluster-api/clusterctl.yaml`).
struct Repository {
    dir: tempfile::TempDir,
}

impl Repository {
    fn render(variables: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        run(Command::new("bash")
            .arg(repo_root().join("hack/clusterctl-repo.sh"))
            .arg(dir.path())
            .arg(VERSION)
            .env("KUBECTL", kubectl()));
        let config = dir.path().join("clusterctl.yaml");
        let mut text = std::fs::read_to_string(&config).unwrap();
        text.push_str(variables);
        std::fs::write(&config, text).unwrap();
        Self { dir }
    }

    /// clusterctl with this repository's configuration, nothing from the user's home and no
    /// management cluster.
    fn clusterctl(&self, args: &[&str]) -> String {
        run(Command::new(tool("clusterctl"))
            .args(args)
            .arg("--config")
            .arg(self.dir.path().join("clusterctl.yaml"))
            .env("HOME", self.dir.path())
            .env("XDG_CONFIG_HOME", self.dir.path())
            .env_remove("KUBECONFIG"))
    }

    fn generate_cluster(&self, flavor: &str, extra: &[&str]) -> String {
        let infrastructure = format!("maas:{VERSION}");
        let mut args = vec![
            "generate",
            "cluster",
            "prod",
            "--infrastructure",
            &infrastructure,
            "--target-namespace",
            "team-a",
        ];
        if !flavor.is_empty() {
            args.extend(["--flavor", flavor]);
        }
        args.extend(extra);
        self.clusterctl(&args)
    }
}

fn required_variables(listing: &str) -> BTreeSet<String> {
    listing
        .lines()
        .skip_while(|l| !l.starts_with("Required Variables"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .map(|l| l.trim().trim_start_matches("- ").to_owned())
        .collect()
}

#[test]
fn a_capmaas_variables_file_generates_every_flavor_unchanged() {
    let repo = Repository::render(CAPMAAS_VARIABLES);
    let capmaas: BTreeSet<String> = CAPMAAS_VARIABLES
        .lines()
        .map(|l| l.split(':').next().unwrap().to_owned())
        .collect();
    let listing = repo.clusterctl(&[
        "generate",
        "cluster",
        "prod",
        "--infrastructure",
        &format!("maas:{VERSION}"),
        "--target-namespace",
        "team-a",
        "--list-variables",
    ]);
    let required = required_variables(&listing);
    assert!(!required.is_empty(), "{listing}");
    assert!(
        required.is_subset(&capmaas),
        "the default template needs what CAPMAAS's does not: {:?}",
        required.difference(&capmaas).collect::<Vec<_>>()
    );

    let docs = documents(&repo.generate_cluster("", &["--worker-machine-count", "4"]));
    for doc in &docs {
        assert_eq!(doc["metadata"]["namespace"], "team-a", "{}", name_of(doc));
    }
    let by_name = |kind: &str, name: &str| {
        docs.iter()
            .find(|d| d["kind"] == kind && name_of(d) == name)
            .unwrap_or_else(|| panic!("{kind} {name}"))
    };
    let cp = &by_name("MaasMachineTemplate", "prod-control-plane")["spec"]["template"]["spec"];
    assert_eq!(cp["minCPU"], 4);
    assert_eq!(cp["minMemory"], 8192);
    assert_eq!(cp["resourcePool"], "control-plane");
    assert_eq!(cp["tags"][0], "control-plane");
    let workers = &by_name("MaasMachineTemplate", "prod-md-0")["spec"]["template"]["spec"];
    assert_eq!(workers["image"], "custom/u-2204-0-k-1341-0");
    assert_eq!(workers["tags"][0], "worker");
    assert_eq!(
        by_name("MaasCluster", "prod")["spec"]["dnsDomain"],
        "maas.example"
    );
    assert_eq!(
        by_name("KubeadmControlPlane", "prod-control-plane")["spec"]["replicas"],
        3
    );
    assert_eq!(
        by_name("MachineDeployment", "prod-md-0")["spec"]["replicas"],
        4
    );

    // Without --worker-machine-count, clusterctl's own default: no workers.
    let docs = documents(&repo.generate_cluster("", &[]));
    let workers = docs
        .iter()
        .find(|d| d["kind"] == "MachineDeployment")
        .unwrap();
    assert_eq!(workers["spec"]["replicas"], 0);

    // The ipam flavor needs only the pool on top; the remediation flavor nothing.
    let ipam = Repository::render(&format!("{CAPMAAS_VARIABLES}{IPAM_VARIABLES}"));
    let docs = documents(&ipam.generate_cluster("ipam", &[]));
    let template = docs
        .iter()
        .find(|d| d["kind"] == "MaasMachineTemplate" && name_of(d) == "prod-md-0")
        .unwrap();
    assert_eq!(
        template["spec"]["template"]["spec"]["dataTemplate"]["name"],
        "prod-workers"
    );
    assert!(docs.iter().any(|d| d["kind"] == "MaasIPPool"));
    let docs = documents(&repo.generate_cluster("remediation", &[]));
    let check = docs
        .iter()
        .find(|d| d["kind"] == "MachineHealthCheck")
        .unwrap();
    assert_eq!(
        check["spec"]["remediation"]["templateRef"]["kind"],
        "MaasRemediationTemplate"
    );
}

/// maas-client's settings in rendered components: the flags that take a value (but the
/// base's addresses and key file) and the environment variables set by value (but leader
/// election).
/// The `--import-pools-on-demand` value machine-controller's Deployment gets.
fn import_pools_on_demand(docs: &[Value]) -> Option<String> {
    let deployment = docs
        .iter()
        .find(|d| d["kind"] == "Deployment" && name_of(d) == "capmaas-machine-controller")
        .expect("machine-controller's Deployment");
    deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()?
        .iter()
        .filter_map(|a| a.as_str()?.strip_prefix("--import-pools-on-demand="))
        .map(ToOwned::to_owned)
        .next()
}

fn maas_client_settings(docs: &[Value]) -> BTreeMap<String, String> {
    let deployment = docs
        .iter()
        .find(|d| d["kind"] == "Deployment" && name_of(d) == "capmaas-maas-client")
        .expect("maas-client's Deployment");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let flags = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a.as_str()?.split_once('='))
        .filter(|(flag, _)| {
            !matches!(
                *flag,
                "--diagnostics-address"
                    | "--metrics-cert-dir"
                    | "--health-addr"
                    | "--maas-api-key-file"
            )
        })
        .map(|(flag, value)| (flag.to_owned(), value.to_owned()));
    let env = container["env"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| {
            Some((
                e["name"].as_str()?.to_owned(),
                e["value"].as_str()?.to_owned(),
            ))
        })
        .filter(|(name, _)| name != "CAPMAAS_LEADER_ELECT");
    flags.chain(env).collect()
}

fn settings(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn dry_run(env: &TestEnv, path: &Path, kustomization: bool) -> String {
    let mut cmd = env.kubectl();
    cmd.args(["apply", "--server-side", "--dry-run=server"])
        .arg(if kustomization { "-k" } else { "-f" })
        .arg(path);
    run(&mut cmd)
}

/// One API server for every dry run: Argo CD's manifests, clusterctl's processed components,
/// and each generated flavor.
#[tokio::test]
async fn argocd_and_clusterctl_output_pass_server_side_dry_runs() {
    let env = TestEnv::builder()
        .controller_manager(false)
        .crd_dir(cache_dir().join("cert-manager-crds"))
        .crd_dir(cache_dir().join("argocd-crds"))
        .crd_dir(cache_dir().join("kubeadm-crds"))
        .start()
        .await
        .unwrap();
    for ns in ["argocd", "capmaas-system", "team-a"] {
        run(env.kubectl().args(["create", "namespace", ns]));
    }
    for dir in ["applications", "applicationset", "health"] {
        let out = dry_run(&env, &argocd().join(dir), true);
        assert!(out.contains("serverside-applied (server dry run)"), "{out}");
    }

    let repo = Repository::render(&format!("{CAPMAAS_VARIABLES}{IPAM_VARIABLES}"));
    let components = repo.clusterctl(&[
        "generate",
        "provider",
        "--infrastructure",
        &format!("maas:{VERSION}"),
    ]);
    let docs = documents(&components);
    let namespaces: Vec<_> = docs.iter().filter(|d| d["kind"] == "Namespace").collect();
    assert_eq!(
        namespaces.len(),
        1,
        "clusterctl wants exactly one Namespace"
    );
    for doc in &docs {
        assert_eq!(
            doc["metadata"]["labels"]["cluster.x-k8s.io/provider"],
            "infrastructure-maas",
            "{} {}",
            doc["kind"],
            name_of(doc)
        );
    }
    let secret = docs
        .iter()
        .find(|d| d["kind"] == "Secret" && name_of(d) == "capmaas-manager-bootstrap-credentials")
        .expect("the MAAS credentials Secret");
    assert_eq!(
        secret["stringData"]["MAAS_ENDPOINT"],
        "http://maas.example:5240/MAAS"
    );
    assert_eq!(
        secret["stringData"]["MAAS_API_KEY"],
        "consumer:token:secret"
    );
    // A CAPMAAS user sets nothing else: every other setting has a default that lets the
    // gateway start with CAPMAAS's http:// endpoint.
    assert_eq!(
        secret["data"]["MAAS_CA_CERT"], "",
        "no private CA by default"
    );
    // The installation id's empty default leaves the variable without a value (unset).
    assert_eq!(
        maas_client_settings(&docs),
        settings(&[
            ("--deploy-retries", "2"),
            ("--maas-allow-insecure-http", "true"),
            ("--maas-max-concurrency", "8"),
            ("--maas-rate-limit", "20"),
            ("--maas-workload-annotations", "false"),
            ("CAPMAAS_LOG_FORMAT", "auto"),
            ("CAPMAAS_SYNC_PERIOD", "120m"),
            ("MAAS_CA_FILE", "/etc/capmaas/maas/ca.crt"),
            ("RUST_LOG", "info"),
        ])
    );
    assert_eq!(import_pools_on_demand(&docs).as_deref(), Some("true"));
    let path = repo.dir.path().join("components.yaml");
    std::fs::write(&path, &components).unwrap();
    dry_run(&env, &path, false);

    // Each of them is a clusterctl variable.
    let configured = Repository::render(&format!(
        "{CAPMAAS_VARIABLES}MAAS_ALLOW_INSECURE_HTTP: \"false\"\nMAAS_CA_CERT_B64: Y2E=\nCAPMAAS_INSTALLATION_ID: lab-1\nMAAS_RATE_LIMIT: \"50\"\nMAAS_WORKLOAD_ANNOTATIONS: \"true\"\nCAPMAAS_LOG_LEVEL: debug\nMAAS_IMPORT_POOLS_ON_DEMAND: \"false\"\nMAAS_DNS_DOMAINS: maas,example.com\nCAPMAAS_LOG_FORMAT: text\nCAPMAAS_WATCH_NAMESPACE: tenants\nCAPMAAS_SYNC_PERIOD: 30m\nCAPMAAS_MACHINE_CONCURRENCY: \"32\"\nMAAS_MAX_CONCURRENCY: \"16\"\nMAAS_DEPLOY_RETRIES: \"5\"\n"
    ));
    let docs = documents(&configured.clusterctl(&[
        "generate",
        "provider",
        "--infrastructure",
        &format!("maas:{VERSION}"),
    ]));
    let secret = docs
        .iter()
        .find(|d| d["kind"] == "Secret" && name_of(d) == "capmaas-manager-bootstrap-credentials")
        .unwrap();
    assert_eq!(secret["data"]["MAAS_CA_CERT"], "Y2E=");
    assert_eq!(
        maas_client_settings(&docs),
        settings(&[
            ("--deploy-retries", "5"),
            ("--maas-allow-insecure-http", "false"),
            ("--maas-max-concurrency", "16"),
            ("--maas-rate-limit", "50"),
            ("--maas-workload-annotations", "true"),
            ("CAPMAAS_DNS_DOMAINS", "maas,example.com"),
            ("CAPMAAS_INSTALLATION_ID", "lab-1"),
            ("CAPMAAS_LOG_FORMAT", "text"),
            ("CAPMAAS_SYNC_PERIOD", "30m"),
            ("CAPMAAS_WATCH_NAMESPACE", "tenants"),
            ("MAAS_CA_FILE", "/etc/capmaas/maas/ca.crt"),
            ("RUST_LOG", "debug"),
        ])
    );
    // The five controllers watch the namespace and keep the sync period given; machine-controller
    // reconciles as many machines at once as asked; webhook-server answers for every namespace.
    for d in docs.iter().filter(|d| d["kind"] == "Deployment") {
        let container = &d["spec"]["template"]["spec"]["containers"][0];
        let env: BTreeMap<&str, &str> = container["env"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|e| Some((e["name"].as_str()?, e["value"].as_str()?)))
            .collect();
        let webhook = name_of(d) == "capmaas-webhook-server";
        assert_eq!(
            env.get("CAPMAAS_WATCH_NAMESPACE").copied(),
            (!webhook).then_some("tenants"),
            "{}",
            name_of(d)
        );
        assert_eq!(env.get("CAPMAAS_LOG_FORMAT").copied(), Some("text"));
        let concurrency = container["args"]
            .as_array()
            .into_iter()
            .flatten()
            .find_map(|a| a.as_str()?.strip_prefix("--concurrency="));
        assert_eq!(
            concurrency,
            (name_of(d) == "capmaas-machine-controller").then_some("32"),
            "{}",
            name_of(d)
        );
    }
    // The webhook refuses the other domains with the same list.
    let webhook = docs
        .iter()
        .find(|d| d["kind"] == "Deployment" && name_of(d) == "capmaas-webhook-server")
        .unwrap();
    assert!(
        webhook["spec"]["template"]["spec"]["containers"][0]["env"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "CAPMAAS_DNS_DOMAINS" && e["value"] == "maas,example.com"),
        "{webhook}"
    );
    assert_eq!(import_pools_on_demand(&docs).as_deref(), Some("false"));

    for flavor in FLAVORS {
        let generated = repo.generate_cluster(flavor, &[]);
        let path = repo.dir.path().join(format!("cluster-{flavor}.yaml"));
        std::fs::write(&path, generated).unwrap();
        let out = dry_run(&env, &path, false);
        assert!(
            out.contains("maasmachinetemplate.infrastructure.cluster.x-k8s.io/prod-md-0"),
            "{flavor}: {out}"
        );
    }
    env.stop().await;
}

/// The six Deployments, by component.
use capmaas_e2e::overlay::COMPONENTS as DEPLOYMENTS;

/// `target` as a path relative to the folder `from` (kustomize refuses absolute paths).
fn relative(from: &Path, target: &Path) -> PathBuf {
    let from = from.canonicalize().unwrap();
    let target = target.canonicalize().unwrap();
    let mut path: PathBuf = from.components().skip(1).map(|_| "..").collect();
    path.push(target.strip_prefix("/").unwrap());
    path
}

/// A user's kustomization: `base` (a folder of `deploy/`) plus the component
/// `deploy/components/capmaas-patches`, in a folder of its own.
fn with_capmaas_patches(base: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let deploy = repo_root().join("deploy");
    let text = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- {}\ncomponents:\n- {}\n",
        relative(dir.path(), &deploy.join(base)).display(),
        relative(dir.path(), &deploy.join("components/capmaas-patches")).display(),
    );
    std::fs::write(dir.path().join("kustomization.yaml"), text).unwrap();
    dir
}

fn env_value<'a>(container: &'a Value, name: &str) -> Option<&'a str> {
    container["env"]
        .as_array()?
        .iter()
        .find(|e| e["name"] == name)?["value"]
        .as_str()
}

/// `deploy/components/capmaas-patches`, included next to the base and next to the production
/// overlay: each of the six Deployments, every container, gets the registry, nodeSelector,
/// tolerations and resources; maas-client alone the proxy (the others' workload-cluster
/// clients would take HTTPS_PROXY and fail); nothing else changes; and the result passes a
/// server-side dry run.
#[tokio::test]
async fn the_capmaas_patches_component_patches_all_six_deployments() {
    const PROXY_VARS: [&str; 3] = ["HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"];
    let env = TestEnv::api_server_only().await.unwrap();
    env.install_crd_dir(&cache_dir().join("cert-manager-crds"))
        .await
        .unwrap();
    for ns in ["capmaas-system", "capmaas-clusters"] {
        run(env.kubectl().args(["create", "namespace", ns]));
    }
    for base in ["base", "overlays/production"] {
        let dir = with_capmaas_patches(base);
        let patched = kustomize(dir.path());
        let plain = kustomize(&repo_root().join("deploy").join(base));
        let others = |docs: &[Value]| -> Vec<Value> {
            docs.iter()
                .filter(|d| d["kind"] != "Deployment")
                .cloned()
                .collect()
        };
        assert_eq!(others(&patched), others(&plain), "{base}: not a Deployment");

        let deployments: BTreeMap<&str, &Value> = patched
            .iter()
            .filter(|d| d["kind"] == "Deployment")
            .map(|d| (name_of(d), d))
            .collect();
        let names: BTreeSet<String> = DEPLOYMENTS.iter().map(|c| format!("capmaas-{c}")).collect();
        assert_eq!(
            deployments
                .keys()
                .map(|n| (*n).to_owned())
                .collect::<BTreeSet<_>>(),
            names,
            "{base}"
        );
        for component in DEPLOYMENTS {
            let name = format!("capmaas-{component}");
            let pod = &deployments[name.as_str()]["spec"]["template"]["spec"];
            let before = plain
                .iter()
                .find(|d| d["kind"] == "Deployment" && name_of(d) == name)
                .unwrap();
            assert_eq!(
                pod["nodeSelector"],
                serde_json::json!({"node.example.com/pool": "management"}),
                "{base}: {name}"
            );
            assert_eq!(
                pod["tolerations"],
                serde_json::json!([{"key": "node.example.com/dedicated", "operator": "Equal",
                                    "value": "management", "effect": "NoSchedule"}]),
                "{base}: {name}"
            );
            let containers: Vec<&Value> = ["initContainers", "containers"]
                .iter()
                .filter_map(|k| pod[*k].as_array())
                .flatten()
                .collect();
            assert_eq!(
                containers.len(),
                1,
                "{base}: {name}: one container, manager"
            );
            for container in containers {
                let image = container["image"].as_str().unwrap();
                assert!(
                    image.starts_with(&format!("registry.example.com/capmaas-rs/{component}:")),
                    "{base}: {name}: {image}"
                );
                assert_eq!(
                    container["resources"],
                    serde_json::json!({"requests": {"cpu": "100m", "memory": "128Mi"},
                                       "limits": {"memory": "512Mi"}}),
                    "{base}: {name}"
                );
                // The base's settings stay: hardening, probes, every variable.
                let unpatched = &before["spec"]["template"]["spec"]["containers"][0];
                for key in ["securityContext", "livenessProbe", "readinessProbe", "args"] {
                    assert_eq!(container[key], unpatched[key], "{base}: {name}: {key}");
                }
                for var in unpatched["env"].as_array().unwrap() {
                    assert!(
                        container["env"].as_array().unwrap().contains(var),
                        "{base}: {name}: {var} lost"
                    );
                }
                if component == "maas-client" {
                    assert_eq!(
                        env_value(container, "HTTP_PROXY"),
                        Some("http://proxy.example.com:3128")
                    );
                    assert_eq!(
                        env_value(container, "HTTPS_PROXY"),
                        Some("http://proxy.example.com:3128")
                    );
                    // The API server stays reachable without the proxy; MAAS goes through it.
                    let no_proxy: BTreeSet<&str> = env_value(container, "NO_PROXY")
                        .unwrap()
                        .split(',')
                        .collect();
                    for kept in [".svc", ".cluster.local", "10.96.0.0/12"] {
                        assert!(no_proxy.contains(kept), "{base}: NO_PROXY {no_proxy:?}");
                    }
                    assert!(
                        !no_proxy.iter().any(|e| e.contains("maas")),
                        "{base}: NO_PROXY {no_proxy:?}"
                    );
                } else {
                    for var in PROXY_VARS {
                        assert!(
                            !container["env"]
                                .as_array()
                                .unwrap()
                                .iter()
                                .any(|e| e["name"].as_str().unwrap().eq_ignore_ascii_case(var)),
                            "{base}: {name} must not get {var}"
                        );
                    }
                }
            }
        }

        let out = dry_run(&env, dir.path(), true);
        for component in DEPLOYMENTS {
            assert!(
                out.contains(&format!(
                    "deployment.apps/capmaas-{component} serverside-applied (server dry run)"
                )),
                "{base}: {out}"
            );
        }
    }
    env.stop().await;
}
