//! Switching from CAPMAAS in place, as an operator does it: the real CAPMAAS v0.9.0 (built from
//! its source, `hack/capmaas`) is installed with `clusterctl init --infrastructure maas:v0.9.0`
//! beside Cluster API's core and kubeadm providers, and provisions a cluster from its own
//! template (`clusterctl generate cluster`, CAPMAAS's variables); its servers boot the workload
//! cluster (`capmaas_e2e::workload`). Then the commands of docs/install.md "Switching from
//! CAPMAAS" run as written: CAPMAAS is stopped and `clusterctl upgrade apply` puts this provider
//! in its place.
//!
//! What it shows: every object CAPMAAS stored stays readable under our CRDs; each MaasMachine
//! keeps its server, taken over with no allocate, deploy, release or power call (the
//! simulator's counts); CAPMAAS's `<cluster>-<6 hex>` DNS resource is adopted; then a worker
//! is added, a worker is replaced by a template change, and deleting the cluster leaves no
//! allocation, DNS record or object behind.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::time::Duration;

mod common;

use capmaas_e2e::first_day::{self, Steps, UserShell, UserWorld};
use capmaas_e2e::installed::Installation;
use capmaas_e2e::user_cluster::{list_in, wait_for_machines};
use capmaas_e2e::wait_for;
use kube::ResourceExt;
use kube::api::DynamicObject;
use maas_sim::NodeStatus;

const NAMESPACE: &str = "default";
const CLUSTER: &str = "t-cluster";
const KUBERNETES: &str = "v1.33.1";
const INFRA: (&str, &str) = ("infrastructure.cluster.x-k8s.io", "v1beta1");

fn words(command: &[String]) -> Vec<&str> {
    command[1..].iter().map(String::as_str).collect()
}

async fn infra(client: &kube::Client, kind: &str) -> Vec<DynamicObject> {
    list_in(client, NAMESPACE, INFRA.0, INFRA.1, kind).await
}

/// The `sh` block of docs/install.md that holds `marker`, one command (its words) per line.
fn documented_block(marker: &str) -> Vec<Vec<String>> {
    let guide =
        std::fs::read_to_string(capmaas_testenv::repo_root().join("docs/install.md")).unwrap();
    first_day::sh_block_commands(&guide, marker).unwrap()
}

#[tokio::test]
async fn a_cluster_capmaas_provisioned_is_taken_over_in_place() {
    let mut steps = Steps::default();
    steps.step("management cluster and MAAS");
    let dir = tempfile::Builder::new()
        .prefix("capmaas-takeover-")
        .tempdir()
        .unwrap();
    let world = UserWorld::start(dir.path(), 2, 4).await.unwrap();
    let (management, sim, boots) = (&world.management, &world.sim, &world.boots);
    let state = sim.state();
    let client = management.client();
    let shell = UserShell::render_with(
        &dir.path().join("repository"),
        management.kubeconfig_path(),
        &first_day::capmaas_readme_variables(&sim.url(), &sim.api_key(), KUBERNETES),
        &[first_day::capmaas_releases()],
    )
    .await
    .unwrap();

    steps.step("clusterctl init --infrastructure maas:v0.9.0 (CAPMAAS) and its Deployments");
    shell
        .clusterctl(&[
            "init",
            "--core",
            "cluster-api",
            "--bootstrap",
            "kubeadm",
            "--control-plane",
            "kubeadm",
            "--infrastructure",
            "maas:v0.9.0",
        ])
        .await
        .unwrap();
    let mut capmaas = Installation::start(
        management,
        &dir.path().join("capmaas"),
        Some(&boots.hosts_file()),
    )
    .await
    .unwrap_or_else(|e| panic!("starting CAPMAAS's installation: {e}"));
    let programs: Vec<&str> = capmaas.running.iter().map(|r| r.program).collect();
    assert!(programs.contains(&"capmaas-manager"), "{programs:?}");

    steps.step("CAPMAAS provisions its default template: 1 control plane, 1 worker");
    let manifest = shell
        .clusterctl(&[
            "generate",
            "cluster",
            CLUSTER,
            "--infrastructure",
            "maas:v0.9.0",
            "--kubernetes-version",
            KUBERNETES,
            "--control-plane-machine-count=1",
            "--target-namespace",
            NAMESPACE,
        ])
        .await
        .unwrap();
    let fail = |what: &str, installation: &Installation| -> String {
        format!(
            "{what}\nfirst boots: {:#?}\n{}",
            boots.report(),
            installation.logs(60)
        )
    };
    // CAPMAAS's Deployment has no readiness probe: its pod is Ready before its webhook serves,
    // so the first apply may be refused, as a user sees it; they apply again.
    wait_for(
        "the cluster applied through CAPMAAS's webhooks",
        Duration::from_secs(60),
        Duration::from_secs(1),
        || async {
            Ok(shell
                .kubectl(&["apply", "-f", "-"], Some(&manifest))
                .await
                .ok())
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{}", fail(&e.to_string(), &capmaas)));
    wait_for_machines(&client, NAMESPACE, KUBERNETES, 1, 1)
        .await
        .unwrap_or_else(|e| panic!("{}", fail(&e, &capmaas)));
    let servers = common::servers_by_machine(&client, NAMESPACE).await;
    assert_eq!(servers.len(), 2, "{servers:?}");
    for system_id in servers.values() {
        let server = state.machine(system_id).unwrap();
        assert_eq!(server.status, NodeStatus::Deployed);
        assert_eq!(
            server.agent_name, "",
            "CAPMAAS allocates without an agent_name"
        );
    }
    let dns_name = infra(&client, "MaasCluster").await[0].data["status"]["network"]["dnsName"]
        .as_str()
        .unwrap()
        .to_owned();
    let suffix = dns_name
        .strip_prefix(&format!("{CLUSTER}-"))
        .and_then(|rest| rest.strip_suffix(&format!(".{}", first_day::DNS_DOMAIN)))
        .unwrap_or_else(|| panic!("CAPMAAS's endpoint name: {dns_name}"));
    assert_eq!(suffix.len(), 6, "{dns_name}");
    let capmaas_dns = common::maas_dns(sim, &dns_name).await.unwrap();
    assert_eq!(capmaas_dns.len(), 1, "{capmaas_dns:?}");

    steps
        .step("docs/install.md \"Switching from CAPMAAS\": stop CAPMAAS, clusterctl upgrade apply");
    state.reset_counts();
    let mut capmaas_stored = Vec::new();
    for kind in ["maasclusters", "maasmachines", "maasmachinetemplates"] {
        let listed = shell
            .kubectl(&["-n", NAMESPACE, "get", kind, "-o", "json"], None)
            .await
            .unwrap();
        let mut list: serde_json::Value = serde_json::from_str(&listed).unwrap();
        let items = list["items"].as_array_mut().unwrap();
        assert!(!items.is_empty(), "CAPMAAS stored no {kind}");
        for item in items {
            item["metadata"]
                .as_object_mut()
                .unwrap()
                .remove("resourceVersion");
        }
        capmaas_stored.push((kind, list.to_string()));
    }
    let commands = documented_block("scale deployment capmaas-controller-manager");
    assert_eq!(commands.len(), 2, "{commands:?}");
    assert_eq!(commands[0][0], "kubectl");
    shell.kubectl(&words(&commands[0]), None).await.unwrap();
    // Scaled to 0, CAPMAAS's pod stops: here, its process.
    capmaas.running.retain(|r| r.program != "capmaas-manager");
    assert_eq!(commands[1][0], "clusterctl");
    shell.clusterctl(&words(&commands[1])).await.unwrap();
    // CAPMAAS's scaled-down pod is gone (its Deployment too, now); ours start, Cluster API's
    // keep running.
    let mut ours = capmaas;
    ours.follow_upgrade(
        management,
        &dir.path().join("ours"),
        Some(&boots.hosts_file()),
    )
    .await
    .unwrap_or_else(|e| panic!("starting our installation: {e}"));
    let programs: Vec<&str> = ours.running.iter().map(|r| r.program).collect();
    assert_eq!(programs.len(), 9, "{programs:?}");
    assert!(!programs.contains(&"capmaas-manager"), "{programs:?}");
    // What CAPMAAS stored is valid under our CRDs and webhooks, as it is. Our controllers are
    // already updating these objects, so the snapshot is replaced without its resourceVersion
    // (an unconditional update, dry run) rather than racing them.
    for (kind, stored) in &capmaas_stored {
        shell
            .kubectl(&["replace", "--dry-run=server", "-f", "-"], Some(stored))
            .await
            .unwrap_or_else(|e| panic!("CAPMAAS's {kind} under our schema: {e}"));
    }

    steps.step("every server taken over, the DNS resource adopted, nothing redeployed");
    let taken = wait_for(
        "both hosts taken over and both MaasMachines ready",
        Duration::from_secs(120),
        Duration::from_millis(500),
        || async {
            let hosts = list_in(&client, "capmaas-system", INFRA.0, INFRA.1, "MaasHost").await;
            let taken: Vec<String> = hosts
                .iter()
                .filter(|h| h.data["status"]["allocation"]["takenOver"] == true)
                .map(|h| {
                    h.data["spec"]["systemID"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned()
                })
                .collect();
            let ready = infra(&client, "MaasMachine")
                .await
                .iter()
                .filter(|m| {
                    m.data["status"]["ready"] == true && m.data["status"]["hostRef"].is_object()
                })
                .count();
            Ok((taken.len() == 2 && ready == 2).then_some(taken))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{}", fail(&e.to_string(), &ours)));
    let mut expected: Vec<String> = servers.values().cloned().collect();
    let mut taken = taken;
    expected.sort();
    taken.sort();
    assert_eq!(taken, expected, "each MaasMachine keeps its server");
    let record = dns_name.trim_end_matches(&format!(".{}", first_day::DNS_DOMAIN));
    wait_for(
        "CAPMAAS's DNS resource adopted",
        Duration::from_secs(60),
        Duration::from_millis(500),
        || async {
            let records = infra(&client, "MaasDNSRecord").await;
            Ok(records
                .iter()
                .find(|r| r.name_any() == record)
                .filter(|r| r.data["status"]["ready"] == true)
                .map(|r| r.data["status"]["dnsResourceID"].clone()))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{}", fail(&e.to_string(), &ours)));
    assert_eq!(common::maas_dns(sim, &dns_name).await.unwrap(), capmaas_dns);
    assert_eq!(
        common::server_operations(&state.call_counts()),
        BTreeMap::new(),
        "no allocate, deploy, release or power operation during the takeover"
    );
    for system_id in servers.values() {
        let server = state.machine(system_id).unwrap();
        assert_eq!(server.status, NodeStatus::Deployed);
        assert_eq!(
            server
                .owner_data
                .get("capmaas.installation")
                .map(String::as_str),
            Some("capmaas-capmaas-system"),
            "our identity: {:?}",
            server.owner_data
        );
    }
    wait_for_machines(&client, NAMESPACE, KUBERNETES, 1, 1)
        .await
        .unwrap_or_else(|e| panic!("{}", fail(&e, &ours)));

    steps.step("a worker added");
    common::scale_machine_deployment(&shell, NAMESPACE, &format!("{CLUSTER}-md-0"), 2).await;
    wait_for_machines(&client, NAMESPACE, KUBERNETES, 1, 2)
        .await
        .unwrap_or_else(|e| panic!("{}", fail(&e, &ours)));

    steps.step("the workers replaced by a template change");
    let template = list_in(&client, NAMESPACE, INFRA.0, INFRA.1, "MaasMachineTemplate")
        .await
        .into_iter()
        .find(|t| t.name_any() == format!("{CLUSTER}-md-0"))
        .unwrap();
    let mut replacement = serde_json::json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "MaasMachineTemplate",
        "metadata": {"name": format!("{CLUSTER}-md-1"), "namespace": NAMESPACE},
        "spec": template.data["spec"].clone(),
    });
    replacement["spec"]["template"]["spec"]["minMemory"] = serde_json::json!(4096);
    shell
        .kubectl(&["apply", "-f", "-"], Some(&replacement.to_string()))
        .await
        .unwrap();
    shell
        .kubectl(
            &[
                "-n",
                NAMESPACE,
                "patch",
                "machinedeployment",
                &format!("{CLUSTER}-md-0"),
                "--type=merge",
                "-p",
                &format!(
                    r#"{{"spec":{{"template":{{"spec":{{"infrastructureRef":{{"name":"{CLUSTER}-md-1"}}}}}}}}}}"#
                ),
            ],
            None,
        )
        .await
        .unwrap();
    wait_for(
        "both workers on the new template",
        Duration::from_secs(300),
        Duration::from_secs(1),
        || async {
            let workers: Vec<DynamicObject> = infra(&client, "MaasMachine")
                .await
                .into_iter()
                .filter(|m| !m.labels().contains_key("cluster.x-k8s.io/control-plane"))
                .collect();
            let renewed = workers.iter().all(|m| {
                m.annotations()
                    .get("cluster.x-k8s.io/cloned-from-name")
                    .is_some_and(|n| *n == format!("{CLUSTER}-md-1"))
                    && m.data["status"]["ready"] == true
            });
            Ok((workers.len() == 2 && renewed).then_some(()))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{}", fail(&e.to_string(), &ours)));
    wait_for_machines(&client, NAMESPACE, KUBERNETES, 1, 2)
        .await
        .unwrap_or_else(|e| panic!("{}", fail(&e, &ours)));
    // The control plane's server was never touched; the replaced workers' were released.
    let control_plane_server = infra(&client, "MaasMachine")
        .await
        .into_iter()
        .find(|m| m.labels().contains_key("cluster.x-k8s.io/control-plane"))
        .map(|m| m.data["spec"]["systemID"].as_str().unwrap().to_owned())
        .unwrap();
    assert!(servers.values().any(|s| *s == control_plane_server));

    steps.step("the workers scaled down to one");
    common::scale_machine_deployment(&shell, NAMESPACE, &format!("{CLUSTER}-md-0"), 1).await;
    wait_for_machines(&client, NAMESPACE, KUBERNETES, 1, 1)
        .await
        .unwrap_or_else(|e| panic!("{}", fail(&e, &ours)));
    wait_for(
        "the scaled-down worker's server released",
        Duration::from_secs(60),
        Duration::from_millis(500),
        || async {
            let owned = state
                .machines()
                .into_iter()
                .filter(|m| m.owner.is_some())
                .count();
            Ok((owned == 2).then_some(()))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{}", fail(&e.to_string(), &ours)));

    steps.step("kubectl delete cluster: nothing left");
    common::delete_cluster_leaving_nothing(
        &shell,
        &client,
        sim,
        NAMESPACE,
        CLUSTER,
        &dns_name,
        || async { 0 },
    )
    .await
    .unwrap_or_else(|e| panic!("{}", fail(&e, &ours)));
    let refused = ours.forbidden_requests();
    assert!(
        refused.is_empty(),
        "refused by the installed RBAC: {refused:#?}"
    );
    steps.done();
}
