//! A cluster declared through ClusterClass, the way docs/install.md shows it: `CLUSTER_TOPOLOGY=true
//! clusterctl init` of Cluster API core, the kubeadm providers and ours, then `clusterctl generate
//! cluster --flavor clusterclass | kubectl apply -f -`, which carries the ClusterClass
//! `maas-default` (`clusterclass-maas-default.yaml`) along with a Cluster that names it in
//! `spec.topology`, with the variables of CAPMAAS's README as topology variables.
//!
//! What it shows: Cluster API's topology controller (the real one, in CAPI core with the
//! ClusterTopology feature on) stamps out the MaasCluster, the KubeadmControlPlane, the
//! MachineDeployment and the MaasMachineTemplates from the class with the variables patched in;
//! our controllers provision them on the README's pools; the worker class scales by
//! `spec.topology.workers.machineDeployments[0].replicas`; a Kubernetes upgrade by
//! `spec.topology.version` (with the new image in the machine variables) rolls the control plane
//! and the workers onto rotated templates (webhook-server lets the topology controller's dry runs
//! of the changed templates through); deleting the Cluster leaves no server allocated, no DNS
//! record and none of the objects the topology made. The kubectl commands are docs/install.md's,
//! run by bash as written.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::time::Duration;

mod common;

use capmaas_e2e::first_day::{self, Steps, UserShell, UserWorld};
use capmaas_e2e::installed::Installation;
use capmaas_e2e::user_cluster::{list_in, wait_for_machines};
use capmaas_e2e::wait_for;
use kube::ResourceExt;
use kube::api::DynamicObject;

const NAMESPACE: &str = "default";
const CLUSTER: &str = "t-cluster";
const KUBERNETES: &str = "v1.33.1";
const UPGRADED: &str = "v1.33.2";
const INFRA: (&str, &str) = ("infrastructure.cluster.x-k8s.io", "v1beta1");
/// The label the topology controller puts on every object it made for a Cluster.
const TOPOLOGY_OWNED: &str = "topology.cluster.x-k8s.io/owned";

async fn infra(client: &kube::Client, kind: &str) -> Vec<DynamicObject> {
    list_in(client, NAMESPACE, INFRA.0, INFRA.1, kind).await
}

/// The MaasMachineTemplates the topology controller made for the cluster: name → image.
async fn topology_templates(client: &kube::Client) -> Vec<(String, DynamicObject)> {
    infra(client, "MaasMachineTemplate")
        .await
        .into_iter()
        .filter(|t| t.labels().contains_key(TOPOLOGY_OWNED))
        .map(|t| (t.name_any(), t))
        .collect()
}

/// The install guide's `sh` block holding `marker`.
fn documented_sh(marker: &str) -> String {
    let guide =
        std::fs::read_to_string(capmaas_testenv::repo_root().join("docs/install.md")).unwrap();
    first_day::sh_block(&guide, marker).unwrap().to_owned()
}

#[tokio::test]
async fn a_clusterclass_cluster_is_provisioned_scaled_upgraded_and_deleted() {
    let mut steps = Steps::default();
    steps.step("management cluster and MAAS");
    let dir = tempfile::Builder::new()
        .prefix("capmaas-clusterclass-")
        .tempdir()
        .unwrap();
    let world = UserWorld::start(dir.path(), 3, 4).await.unwrap();
    let (management, sim, boots) = (&world.management, &world.sim, &world.boots);
    let client = management.client();
    let shell = UserShell::render(
        &dir.path().join("repository"),
        management.kubeconfig_path(),
        &first_day::capmaas_readme_variables(&sim.url(), &sim.api_key(), KUBERNETES),
    )
    .await
    .unwrap();
    let guide =
        std::fs::read_to_string(capmaas_testenv::repo_root().join("docs/install.md")).unwrap();
    let commands = first_day::documented_block(&guide, "--flavor clusterclass").unwrap();
    let [init, generate] = commands.as_slice() else {
        panic!("docs/install.md: expected clusterctl init, then generate: {commands:?}");
    };
    assert_eq!(
        init.env,
        [("CLUSTER_TOPOLOGY".to_owned(), "true".to_owned())]
    );
    assert_eq!(init.args[0], "init");
    assert!(!init.piped && generate.piped);

    steps.step("CLUSTER_TOPOLOGY=true clusterctl init, and the installed Deployments");
    let init_args: Vec<&str> = init.args.iter().map(String::as_str).collect();
    shell
        .clusterctl_with_env(&init_args, &init.env)
        .await
        .unwrap();
    let installation = Installation::start(
        management,
        &dir.path().join("installed"),
        Some(&boots.hosts_file()),
    )
    .await
    .unwrap_or_else(|e| panic!("starting the installed Deployments: {e}"));
    let fail = |what: &str| -> String {
        format!(
            "{what}\nfirst boots: {:#?}\n{}",
            boots.report(),
            installation.logs(60)
        )
    };

    steps.step("clusterctl generate cluster --flavor clusterclass | kubectl apply -f -");
    let mut generate_args: Vec<&str> = generate.args.iter().map(String::as_str).collect();
    assert_eq!(generate_args[..3], ["generate", "cluster", CLUSTER]);
    generate_args.extend(["--target-namespace", NAMESPACE]);
    let manifest = shell
        .clusterctl_with_env(&generate_args, &generate.env)
        .await
        .unwrap();
    assert!(
        manifest.contains("kind: ClusterClass"),
        "clusterctl added clusterclass-maas-default.yaml: {manifest}"
    );
    shell
        .kubectl(&["apply", "-f", "-"], Some(&manifest))
        .await
        .unwrap();

    steps.step("the topology's control plane and worker provisioned");
    wait_for_machines(&client, NAMESPACE, KUBERNETES, 1, 1)
        .await
        .unwrap_or_else(|e| panic!("{}", fail(&e)));
    let cluster = infra(&client, "MaasCluster").await;
    assert_eq!(cluster.len(), 1);
    assert!(cluster[0].labels().contains_key(TOPOLOGY_OWNED));
    assert_eq!(cluster[0].data["spec"]["dnsDomain"], first_day::DNS_DOMAIN);
    let dns_name = format!("{CLUSTER}.{}", first_day::DNS_DOMAIN);
    assert_eq!(
        cluster[0].data["spec"]["controlPlaneEndpoint"]["host"],
        dns_name
    );
    let templates = topology_templates(&client).await;
    assert_eq!(templates.len(), 2, "{templates:#?}");
    let pools: BTreeSet<String> = templates
        .iter()
        .map(|(_, t)| {
            let spec = &t.data["spec"]["template"]["spec"];
            assert_eq!(spec["image"], format!("custom/{}", first_day::IMAGE));
            assert_eq!(spec["minCPU"], 4);
            assert_eq!(spec["tags"], serde_json::json!([first_day::TAG]));
            spec["resourcePool"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(
        pools,
        BTreeSet::from([
            first_day::CONTROL_PLANE_POOL.to_owned(),
            first_day::WORKER_POOL.to_owned()
        ])
    );
    assert!(common::maas_dns(sim, &dns_name).await.is_some());

    steps.step("the worker class scaled to 2 (docs/install.md's kubectl patch)");
    shell
        .sh(&documented_sh("machineDeployments/0/replicas"))
        .await
        .unwrap();
    wait_for_machines(&client, NAMESPACE, KUBERNETES, 1, 2)
        .await
        .unwrap_or_else(|e| panic!("{}", fail(&e)));

    steps.step("Kubernetes upgraded by spec.topology.version (docs/install.md's kubectl patch)");
    let before: BTreeSet<String> = topology_templates(&client)
        .await
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    let upgrade = documented_sh("/spec/topology/version");
    assert!(upgrade.contains(UPGRADED) && upgrade.contains(first_day::UPGRADE_IMAGE));
    shell.sh(&upgrade).await.unwrap();
    wait_for_machines(&client, NAMESPACE, UPGRADED, 1, 2)
        .await
        .unwrap_or_else(|e| panic!("{}", fail(&e)));
    // Both templates were rotated: new copies with the new image, the machines on them.
    let after = topology_templates(&client).await;
    let upgraded_image = format!("custom/{}", first_day::UPGRADE_IMAGE);
    let current: Vec<&String> = after
        .iter()
        .filter(|(_, t)| t.data["spec"]["template"]["spec"]["image"] == upgraded_image.as_str())
        .map(|(name, _)| name)
        .collect();
    assert_eq!(current.len(), 2, "{after:#?}");
    assert!(current.iter().all(|name| !before.contains(*name)));
    wait_for(
        "every MaasMachine on the upgraded image",
        Duration::from_secs(60),
        Duration::from_millis(500),
        || async {
            let machines = infra(&client, "MaasMachine").await;
            let upgraded = machines.len() == 3
                && machines
                    .iter()
                    .all(|m| m.data["spec"]["image"] == upgraded_image.as_str());
            Ok(upgraded.then_some(()))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{}", fail(&e.to_string())));

    steps.step("kubectl delete cluster: nothing left");
    common::delete_cluster_leaving_nothing(
        &shell,
        &client,
        sim,
        NAMESPACE,
        CLUSTER,
        &dns_name,
        || async { topology_templates(&client).await.len() },
    )
    .await
    .unwrap_or_else(|e| panic!("{}", fail(&e)));
    let refused = installation.forbidden_requests();
    assert!(
        refused.is_empty(),
        "refused by the installed RBAC: {refused:#?}"
    );
    steps.done();
}
