//! A CAPMAAS user's first day, run the way the user runs it: `clusterctl init` of
//! Cluster API core, the kubeadm bootstrap and control-plane providers and ours, from the local
//! repository `just clusterctl-repo` renders, with the variables of CAPMAAS's README (its
//! plain-http endpoint included); every installed Deployment started as a process from what
//! clusterctl installed (`capmaas_e2e::installed`: args, env, Secrets, ServiceAccount token);
//! then `clusterctl generate cluster t-cluster ... | kubectl apply -f -`.
//!
//! What it shows: the real KubeadmControlPlane asks for its first machine, the real kubeadm
//! bootstrap provider renders its `kubeadm init` cloud-config, our controllers take a server of
//! the README's pool and tag, and MAAS deploys it with that cloud-config under the
//! control-plane endpoint's DNS name. The server's first boot does what kubeadm would with that
//! user data (`capmaas_e2e::workload`: etcd and kube-apiserver from the cluster's CAs on the
//! server's address, the Node and the static pods), so KCP reaches the workload control plane
//! through the DNS record we publish in MAAS, scales to 3 (etcd members added and checked through
//! pod port-forwarding), and the workers join with CABPK's bootstrap token. Then a Kubernetes
//! upgrade as a user does it (new image and version on the KubeadmControlPlane and the
//! MachineDeployment) rolls every machine, the workers scale 3 → 5 → 2, and deleting the cluster
//! releases every server and removes the DNS record. No request of any of the nine processes is
//! refused by the RBAC clusterctl installed. Nothing but what clusterctl printed is created: the
//! pool the template names is imported on demand into the installation's namespace, open to
//! every namespace, and the cluster's machines claim its hosts from `default` (decision record
//! 0003).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

mod common;

use capmaas_e2e::first_day::{self, Steps, UserShell, UserWorld};
use capmaas_e2e::installed::Installation;
use capmaas_e2e::user_cluster::{self, condition_status, list_in};
use capmaas_e2e::wait_for;
use kube::ResourceExt;
use kube::api::DynamicObject;
use kube::api::ListParams;
use maas_sim::NodeStatus;
use serde_json::json;

const NAMESPACE: &str = "default";
const CLUSTER: &str = "t-cluster";
const KUBERNETES: &str = "v1.33.1";

fn args(words: &[String]) -> Vec<&str> {
    words.iter().map(String::as_str).collect()
}

async fn list(client: &kube::Client, group: &str, version: &str, kind: &str) -> Vec<DynamicObject> {
    list_in(client, NAMESPACE, group, version, kind).await
}

/// Where clusterctl installed the provider, and where pools are imported on demand.
const INSTALLATION_NAMESPACE: &str = "capmaas-system";

/// The Kubernetes version of the upgrade.
const UPGRADED: &str = "v1.33.2";

/// `/metrics` of an installed binary, as kube-prometheus's Prometheus scrapes it: over HTTPS,
/// verifying the certificate cert-manager issued (the CA in the Secret the ServiceMonitor names),
/// with the token of its ServiceAccount `monitoring/prometheus-k8s`, bound here to the shipped
/// ClusterRole capmaas-metrics-reader (kube-prometheus's own role holds the same rule). Before
/// that binding the same token is refused, and no token at all is refused too.
async fn scrape_as_prometheus(management: &capmaas_testenv::TestEnv, port: u16) -> String {
    use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
    let client = management.client();
    let ca = kube::Api::<Secret>::namespaced(client.clone(), INSTALLATION_NAMESPACE)
        .get("capmaas-metrics-cert")
        .await
        .unwrap()
        .data
        .unwrap()["ca.crt"]
        .0
        .clone();
    let https = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&ca).unwrap())
        .build()
        .unwrap();
    let url = format!("https://localhost:{port}/metrics");
    let scrape = |token: Option<&str>| {
        let mut request = https.get(&url);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        async move {
            let response = request.send().await.unwrap();
            (response.status().as_u16(), response.text().await.unwrap())
        }
    };
    assert_eq!(scrape(None).await.0, 401, "a scrape without a token");
    let monitoring = "monitoring";
    for doc in [
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": monitoring}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": "prometheus-k8s", "namespace": monitoring}}),
    ] {
        capmaas_e2e::apply(&client, &doc).await.unwrap();
    }
    let _: ServiceAccount = kube::Api::namespaced(client.clone(), monitoring)
        .get("prometheus-k8s")
        .await
        .unwrap();
    let token = management
        .service_account_token(monitoring, "prometheus-k8s", 1)
        .await
        .unwrap();
    let (status, body) = scrape(Some(&token)).await;
    assert_eq!(status, 403, "a ServiceAccount not allowed /metrics: {body}");
    capmaas_e2e::apply(
        &client,
        &json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "prometheus-k8s-capmaas-metrics"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "capmaas-metrics-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": monitoring}]
        }),
    )
    .await
    .unwrap();
    // The refusal above is remembered for up to ten seconds.
    let mut served = scrape(Some(&token)).await;
    for _ in 0..30 {
        if served.0 == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        served = scrape(Some(&token)).await;
    }
    assert_eq!(served.0, 200, "{}", served.1);
    served.1
}

async fn wait_for_machines(
    client: &kube::Client,
    version: &str,
    control_planes: usize,
    workers: usize,
) -> Result<(), String> {
    user_cluster::wait_for_machines(client, NAMESPACE, version, control_planes, workers).await
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
    let world = UserWorld::start(dir.path(), 4, 6).await.unwrap();
    let (management, sim, boots) = (&world.management, &world.sim, &world.boots);
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
    let installation = Installation::start(
        management,
        &dir.path().join("installed"),
        Some(&boots.hosts_file()),
    )
    .await;
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
            let served = common::maas_dns(sim, &fqdn).await.unwrap_or_default();
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

    // CAPMAAS's http:// endpoint is accepted, and the risk shown where an operator looks: the
    // gateway's gauge and every inventory's condition.
    let gateway = installation.process("maas-client").unwrap();
    let metrics = scrape_as_prometheus(management, gateway.launch.ports["metrics"]).await;
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

    steps
        .step("the control plane initialised, KubeadmControlPlane scaled to 3, the workers joined");
    let fail = |what: &str| -> String {
        format!(
            "{what}\nfirst boots: {:#?}\n{}",
            boots.report(),
            installation.logs(40)
        )
    };
    wait_for_machines(&client, KUBERNETES, 3, 3)
        .await
        .unwrap_or_else(|e| panic!("{}", fail(&e)));
    let kcp = &list(
        &client,
        "controlplane.cluster.x-k8s.io",
        "v1beta2",
        "KubeadmControlPlane",
    )
    .await[0];
    for condition in [
        "EtcdClusterHealthy",
        "ControlPlaneComponentsHealthy",
        "Available",
    ] {
        assert_eq!(
            condition_status(kcp, condition).as_deref(),
            Some("True"),
            "KubeadmControlPlane {condition}: {:#?}",
            kcp.data["status"]
        );
    }
    let cluster = &list(&client, "cluster.x-k8s.io", "v1beta2", "Cluster").await[0];
    assert_eq!(
        condition_status(cluster, "Available").as_deref(),
        Some("True"),
        "{:#?}",
        cluster.data["status"]
    );
    // The workload cluster, reached as the user reaches it: the kubeconfig KCP generated, the
    // endpoint's name as MAAS's DNS serves it. Every Node carries its Machine's providerID.
    let workload = first_day::workload_client(&client, NAMESPACE, CLUSTER, &boots.resolve(&fqdn))
        .await
        .unwrap();
    let nodes = kube::Api::<k8s_openapi::api::core::v1::Node>::all(workload.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    let machines = list(&client, "cluster.x-k8s.io", "v1beta2", "Machine").await;
    assert_eq!(
        nodes.len(),
        6,
        "{:?}",
        nodes.iter().map(ResourceExt::name_any).collect::<Vec<_>>()
    );
    for machine in &machines {
        let node = machine.data["status"]["nodeRef"]["name"].as_str().unwrap();
        let node = nodes.iter().find(|n| n.name_any() == node).unwrap();
        assert_eq!(
            node.spec.as_ref().and_then(|s| s.provider_id.as_deref()),
            machine.data["spec"]["providerID"].as_str()
        );
    }
    // The DNS record holds exactly the three control-plane servers.
    let served = common::maas_dns(sim, &fqdn).await.unwrap();
    assert_eq!(served.len(), 3, "{served:?}");

    steps.step("Kubernetes upgrade: a new image and version on the KubeadmControlPlane and the MachineDeployment");
    first_day::upgrade(
        &shell,
        NAMESPACE,
        CLUSTER,
        UPGRADED,
        &format!("custom/{}", first_day::UPGRADE_IMAGE),
    )
    .await
    .unwrap();
    wait_for_machines(&client, UPGRADED, 3, 3)
        .await
        .unwrap_or_else(|e| panic!("{}", fail(&e)));
    let upgraded_servers = state
        .machines()
        .into_iter()
        .filter(|m| m.status == NodeStatus::Deployed)
        .filter(|m| m.distro_series == first_day::UPGRADE_IMAGE)
        .count();
    assert_eq!(upgraded_servers, 6, "every server runs the new image");
    // The workload's static pods are those of the three new control-plane nodes, none left
    // over from a node that is gone.
    let control_plane_nodes: std::collections::BTreeSet<String> =
        list(&client, "cluster.x-k8s.io", "v1beta2", "Machine")
            .await
            .iter()
            .filter(|m| m.labels().contains_key("cluster.x-k8s.io/control-plane"))
            .filter_map(|m| {
                m.data["status"]["nodeRef"]["name"]
                    .as_str()
                    .map(str::to_owned)
            })
            .collect();
    // Through MAAS's DNS again: the record now holds the new servers.
    let seen = std::sync::Mutex::new(String::new());
    let pods = wait_for(
        "the workload's static pods on the new control-plane nodes only",
        Duration::from_secs(60),
        Duration::from_millis(500),
        || async {
            let addresses = boots.resolve(&fqdn);
            let listed =
                match first_day::workload_client(&client, NAMESPACE, CLUSTER, &addresses).await {
                    Ok(workload) => kube::Api::<k8s_openapi::api::core::v1::Pod>::namespaced(
                        workload,
                        "kube-system",
                    )
                    .list(&ListParams::default())
                    .await
                    .map_err(|e| e.to_string()),
                    Err(e) => Err(e.to_string()),
                };
            let pods = match listed {
                Ok(pods) => pods.items,
                Err(e) => {
                    *seen.lock().unwrap() = format!("{addresses:?}: {e}");
                    return Ok(None);
                }
            };
            let pod_nodes: std::collections::BTreeSet<String> = pods
                .iter()
                .filter_map(|p| p.spec.as_ref()?.node_name.clone())
                .collect();
            *seen.lock().unwrap() = format!("{addresses:?}: pods on {pod_nodes:?}");
            Ok((pod_nodes == control_plane_nodes).then_some(pods))
        },
    )
    .await
    .unwrap_or_else(|e| {
        panic!(
            "{}",
            fail(&format!(
                "{e}; control-plane nodes {control_plane_nodes:?}, last seen {}",
                seen.lock().unwrap()
            ))
        )
    });
    assert_eq!(
        pods.len(),
        12,
        "{:?}",
        pods.iter().map(ResourceExt::name_any).collect::<Vec<_>>()
    );

    for workers in [5, 2] {
        steps.step(&format!("workers scaled to {workers}"));
        shell
            .kubectl(
                &[
                    "scale",
                    "machinedeployment",
                    &format!("{CLUSTER}-md-0"),
                    "-n",
                    NAMESPACE,
                    &format!("--replicas={workers}"),
                ],
                None,
            )
            .await
            .unwrap();
        wait_for_machines(&client, UPGRADED, 3, workers)
            .await
            .unwrap_or_else(|e| panic!("{}", fail(&e)));
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
            let record = common::maas_dns(sim, &fqdn).await;
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
