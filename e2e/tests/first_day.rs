//! A CAPMAAS user's first day (issue #26), run the way the user runs it: `clusterctl init` of
//! Cluster API core, the kubeadm bootstrap and control-plane providers and ours, from the local
//! repository `just clusterctl-repo` renders, with the variables of CAPMAAS's README (its
//! plain-http endpoint included); every installed Deployment started as a process from what
//! clusterctl installed (`capmaas_e2e::installed`: args, env, Secrets, ServiceAccount token);
//! then `clusterctl generate cluster t-cluster ... | kubectl apply -f -`.
//!
//! What it shows today: the real KubeadmControlPlane asks for its first machine, the real
//! kubeadm bootstrap provider renders its `kubeadm init` cloud-config, our controllers take a
//! server of the README's pool and tag, and MAAS deploys it with that cloud-config under the
//! control-plane endpoint's DNS name; the workers wait for the control plane, as kubeadm's
//! join requires; no request of any of the nine processes is refused by the RBAC clusterctl
//! installed; deleting the cluster releases every server and removes the DNS record. Not yet:
//! a workload control plane that KCP can reach (the first machine stays Provisioned, the
//! scale to 3 + 3, the upgrade and the scaling, `docs/e2e.md`). Nothing but what clusterctl
//! printed is created: the pool the template names is imported on demand into the
//! installation's namespace, open to every namespace, and the cluster's machines claim its hosts
//! from `default` (decision record 0003).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

mod common;

use capmaas_e2e::first_day::{self, Steps, UserShell};
use capmaas_e2e::installed::Installation;
use capmaas_e2e::{dynamic_api, wait_for};
use capmaas_testenv::{TestEnv, cache_dir};
use kube::ResourceExt;
use kube::api::ListParams;
use maas_sim::{NodeStatus, SimConfig, Timings};
use serde_json::json;

const NAMESPACE: &str = "default";
const CLUSTER: &str = "t-cluster";
const KUBERNETES: &str = "v1.33.1";

fn args(words: &[String]) -> Vec<&str> {
    words.iter().map(String::as_str).collect()
}

async fn list(
    client: &kube::Client,
    group: &str,
    version: &str,
    kind: &str,
) -> Vec<kube::api::DynamicObject> {
    list_in(client, NAMESPACE, group, version, kind).await
}

/// Where clusterctl installed the provider, and where pools are imported on demand.
const INSTALLATION_NAMESPACE: &str = "capmaas-system";

async fn list_in(
    client: &kube::Client,
    namespace: &str,
    group: &str,
    version: &str,
    kind: &str,
) -> Vec<kube::api::DynamicObject> {
    dynamic_api(client, namespace, group, version, kind)
        .await
        .unwrap()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
}

#[tokio::test]
async fn a_capmaas_users_first_day_runs_unchanged_through_clusterctl() {
    let mut steps = Steps::default();
    steps.step("management cluster (API server, controller-manager, cert-manager's CRDs) and MAAS");
    // Under /tmp, where the installed Deployments mount emptyDirs in their namespaces: the
    // sources are staged first (installed::pod_script).
    let dir = tempfile::Builder::new()
        .prefix("capmaas-first-day-")
        .tempdir()
        .unwrap();
    let management = TestEnv::builder()
        .our_crds(false)
        .capi_crds(false)
        .crd_dir(cache_dir().join("cert-manager-crds"))
        .start()
        .await
        .unwrap();
    let inventory_file = dir.path().join("maas-inventory.yaml");
    std::fs::write(&inventory_file, first_day::maas_inventory(4, 4)).unwrap();
    let sim = maas_sim::Simulator::start(SimConfig {
        inventory_file: Some(inventory_file),
        domain: first_day::DNS_DOMAIN.into(),
        timings: Timings {
            deploy: Duration::from_secs(2),
            release: Duration::from_millis(500),
            ..Timings::default()
        },
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let state = sim.state();

    steps.step("clusterctl init --core cluster-api --bootstrap kubeadm --control-plane kubeadm --infrastructure maas");
    let shell = UserShell::render(
        &dir.path().join("repository"),
        management.kubeconfig_path(),
        &first_day::capmaas_readme_variables(&sim.url(), &sim.api_key(), KUBERNETES),
    )
    .await
    .unwrap();
    // The commands docs/install.md shows, as it shows them (a test fails when they drift).
    let guide =
        std::fs::read_to_string(capmaas_testenv::repo_root().join("docs/install.md")).unwrap();
    let documented = first_day::documented_commands(&guide).unwrap();
    let [(init, false), (generate, true)] = documented.as_slice() else {
        panic!(
            "docs/install.md: expected clusterctl init, then clusterctl generate cluster | kubectl apply -f -: {documented:?}"
        );
    };
    assert_eq!(
        args(init),
        [
            "init",
            "--core",
            "cluster-api",
            "--bootstrap",
            "kubeadm",
            "--control-plane",
            "kubeadm",
            "--infrastructure",
            "maas"
        ]
    );
    shell.clusterctl(&args(init)).await.unwrap();

    steps.step("the nine installed Deployments started from what clusterctl installed");
    let installation = Installation::start(&management, &dir.path().join("installed")).await;
    let installation = match installation {
        Ok(i) => i,
        Err(e) => panic!("starting the installed Deployments: {e}"),
    };
    let programs: Vec<&str> = installation.running.iter().map(|r| r.program).collect();
    assert_eq!(programs.len(), 9, "{programs:?}");
    let client = management.client();

    steps.step("clusterctl generate cluster t-cluster | kubectl apply -f -");
    let mut generate = args(generate);
    assert_eq!(generate[..3], ["generate", "cluster", CLUSTER]);
    generate.extend(["--target-namespace", NAMESPACE]);
    let manifest = shell.clusterctl(&generate).await.unwrap();
    shell
        .kubectl(&["apply", "-f", "-"], Some(&manifest))
        .await
        .unwrap();

    steps.step("the first control-plane machine deployed by MAAS with kubeadm's init cloud-config");
    let fail = |what: &str| -> String { format!("{what}\n{}", installation.logs(40)) };
    let deployed = wait_for(
        "the first control-plane server Deployed",
        Duration::from_secs(180),
        Duration::from_millis(500),
        || async {
            Ok(state
                .machines()
                .into_iter()
                .find(|m| m.status == NodeStatus::Deployed))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{}", fail(&e.to_string())));
    assert_eq!(deployed.pool, first_day::CONTROL_PLANE_POOL);
    assert!(deployed.tags.iter().any(|t| t == first_day::TAG));
    assert_eq!(deployed.distro_series, first_day::IMAGE);
    let user_data =
        String::from_utf8_lossy(deployed.user_data.as_deref().unwrap_or_default()).into_owned();
    assert!(
        user_data.contains("kubeadm init"),
        "the user data MAAS received is CABPK's:\n{user_data}"
    );

    // The MaasMachine behind it is provisioned, with the providerID CAPMAAS would give.
    let machine = wait_for(
        "the Machine with the server's providerID",
        Duration::from_secs(60),
        Duration::from_millis(500),
        || async {
            Ok(list(&client, "cluster.x-k8s.io", "v1beta2", "Machine")
                .await
                .into_iter()
                .find(|m| {
                    m.data["spec"]["providerID"]
                        .as_str()
                        .is_some_and(|p| p.ends_with(&format!("/{}", deployed.system_id)))
                }))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{}", fail(&e.to_string())));
    assert!(
        machine
            .metadata
            .labels
            .as_ref()
            .unwrap()
            .contains_key("cluster.x-k8s.io/control-plane")
    );

    // The control-plane endpoint is the DNS name we publish in MAAS, with the server in it.
    let fqdn = format!("{CLUSTER}.{}", first_day::DNS_DOMAIN);
    wait_for(
        "the DNS record with the control-plane server",
        Duration::from_secs(60),
        Duration::from_millis(500),
        || async {
            let served = common::maas_dns(&sim, &fqdn).await.unwrap_or_default();
            Ok(deployed
                .ip_addresses
                .iter()
                .any(|ip| served.contains(ip))
                .then_some(()))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{}", fail(&e.to_string())));

    // Its host came from the inventory imported on demand for the README's control-plane pool,
    // in the installation's namespace, claimed from the cluster's.
    let inventories = list_in(
        &client,
        INSTALLATION_NAMESPACE,
        "infrastructure.cluster.x-k8s.io",
        "v1beta1",
        "MaasInventory",
    )
    .await;
    let on_demand = inventories
        .iter()
        .find(|i| i.data["spec"]["resourcePool"] == first_day::CONTROL_PLANE_POOL)
        .unwrap_or_else(|| panic!("no inventory of the control-plane pool: {inventories:#?}"));
    assert_eq!(
        on_demand
            .labels()
            .get("maas.cluster.x-k8s.io/imported-on-demand"),
        Some(&"true".to_owned())
    );
    let hosts = list_in(
        &client,
        INSTALLATION_NAMESPACE,
        "infrastructure.cluster.x-k8s.io",
        "v1beta1",
        "MaasHost",
    )
    .await;
    let host = hosts
        .iter()
        .find(|h| h.data["spec"]["systemID"] == deployed.system_id.as_str())
        .unwrap_or_else(|| panic!("no host of {}: {hosts:#?}", deployed.system_id));
    assert_eq!(
        host.data["spec"]["consumerRef"]["namespace"], NAMESPACE,
        "{host:#?}"
    );
    assert!(
        list(
            &client,
            "infrastructure.cluster.x-k8s.io",
            "v1beta1",
            "MaasInventory"
        )
        .await
        .is_empty(),
        "nothing of ours was created in the cluster's namespace"
    );

    // Workers wait for the control plane (kubeadm join needs it): nothing of theirs deployed.
    let worker_servers = state
        .machines()
        .into_iter()
        .filter(|m| m.pool == first_day::WORKER_POOL && m.status != NodeStatus::Ready)
        .count();
    assert_eq!(worker_servers, 0);
    // CAPMAAS's http:// endpoint is accepted, and the risk shown where an operator looks: the
    // gateway's gauge and every inventory's condition.
    let gateway = installation.process("maas-client").unwrap();
    let metrics_port = gateway.launch.ports["metrics"];
    let metrics = reqwest::get(format!("http://127.0.0.1:{metrics_port}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.lines().any(|l| l == "capmaas_maas_plain_http 1"),
        "{metrics}"
    );
    for inventory in &inventories {
        let secure = inventory.data["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == "MAASConnectionSecure")
            .cloned();
        assert_eq!(
            secure.as_ref().map(|c| (&c["status"], &c["reason"])),
            Some((&json!("False"), &json!("PlainHTTP"))),
            "{secure:?}"
        );
    }
    let refused = installation.forbidden_requests();
    assert!(
        refused.is_empty(),
        "refused by the installed RBAC: {refused:#?}"
    );

    steps.step("kubectl delete cluster t-cluster");
    shell
        .kubectl(
            &[
                "delete",
                "cluster",
                CLUSTER,
                "-n",
                NAMESPACE,
                "--wait=false",
            ],
            None,
        )
        .await
        .unwrap();
    wait_for(
        "every server released and the DNS record gone",
        Duration::from_secs(180),
        Duration::from_millis(500),
        || async {
            let busy = state
                .machines()
                .into_iter()
                .filter(|m| m.status != NodeStatus::Ready)
                .count();
            let record = common::maas_dns(&sim, &fqdn).await;
            let clusters = list(&client, "cluster.x-k8s.io", "v1beta2", "Cluster")
                .await
                .len();
            Ok((busy == 0 && record.is_none() && clusters == 0).then_some(()))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{}", fail(&e.to_string())));
    for kind in ["MaasMachine", "MaasCluster", "MaasDNSRecord"] {
        let left = list(&client, "infrastructure.cluster.x-k8s.io", "v1beta1", kind).await;
        assert!(left.is_empty(), "{kind} left: {left:?}");
    }
    assert!(
        state.machines().iter().all(|m| m.owner.is_none()),
        "no MAAS allocation left"
    );
    let refused = installation.forbidden_requests();
    assert!(
        refused.is_empty(),
        "refused by the installed RBAC: {refused:#?}"
    );
    steps.done();
}
