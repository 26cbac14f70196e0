//! An upgrade between two of our releases, as an operator runs it: the earlier release
//! (`hack/previous-release.sh`: the programs and clusterctl release of an earlier commit,
//! labelled `v0.10.0-rc.0`) is installed with `clusterctl init --infrastructure
//! maas:v0.10.0-rc.0` beside Cluster API's core and kubeadm providers and provisions a cluster
//! from its own template; then the commands of docs/install.md "Upgrading" run as written:
//! `clusterctl upgrade plan` offers this tree's release, and `clusterctl upgrade apply` moves
//! to it. Each Deployment whose pod template changed is replaced, as a rollout replaces its
//! pod, by this tree's program.
//!
//! What it shows: no MAAS allocate, deploy, release or power operation during the upgrade (the
//! simulator's counts); every MaasMachine keeps its server and its readiness; what the earlier
//! release stored stays valid; then the new release adds a worker and deletes the cluster
//! leaving nothing behind, and no request of the installed processes is refused by the RBAC.
//!
//! Ignored in `cargo test`: building the earlier release's programs takes minutes. `just
//! upgrade-test` builds them (once) and runs it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::time::Duration;

mod common;

use capmaas_e2e::first_day::{self, Steps, UserShell, UserWorld};
use capmaas_e2e::installed::{Installation, previous_release_dir};
use capmaas_e2e::user_cluster::{list_in, wait_for_machines};
use kube::api::DynamicObject;

const NAMESPACE: &str = "default";
const CLUSTER: &str = "t-cluster";
const KUBERNETES: &str = "v1.33.1";
const INFRA: (&str, &str) = ("infrastructure.cluster.x-k8s.io", "v1beta1");
/// The earlier release (hack/previous-release.sh's default label).
const PREVIOUS: &str = "v0.10.0-rc.0";

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
#[ignore = "needs the earlier release's programs: `just upgrade-test` builds them and runs this"]
async fn an_upgrade_from_the_previous_release_redeploys_nothing() {
    let previous = previous_release_dir().join(PREVIOUS);
    assert!(
        previous.join(".stamp").is_file(),
        "{} is missing: run `bash hack/previous-release.sh` (or `just upgrade-test`)",
        previous.display()
    );
    let mut steps = Steps::default();
    steps.step("management cluster and MAAS");
    let dir = tempfile::Builder::new()
        .prefix("capmaas-upgrade-")
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
        &[previous.join("repository")],
    )
    .await
    .unwrap();

    steps.step(&format!(
        "clusterctl init --infrastructure maas:{PREVIOUS}, the earlier release"
    ));
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
            &format!("maas:{PREVIOUS}"),
        ])
        .await
        .unwrap();
    let mut installation = Installation::start(
        management,
        &dir.path().join("previous"),
        Some(&boots.hosts_file()),
    )
    .await
    .unwrap_or_else(|e| panic!("starting the earlier release: {e}"));
    let earlier: Vec<String> = installation
        .running
        .iter()
        .filter(|r| r.path.starts_with(&previous))
        .map(|r| r.program.to_owned())
        .collect();
    assert_eq!(
        earlier.len(),
        6,
        "the earlier release's six programs run: {earlier:?}"
    );

    steps.step("the earlier release provisions its default template: 1 control plane, 1 worker");
    let manifest = shell
        .clusterctl(&[
            "generate",
            "cluster",
            CLUSTER,
            "--infrastructure",
            &format!("maas:{PREVIOUS}"),
            "--kubernetes-version",
            KUBERNETES,
            "--control-plane-machine-count=1",
            "--worker-machine-count=1",
            "--target-namespace",
            NAMESPACE,
        ])
        .await
        .unwrap();
    shell
        .kubectl(&["apply", "-f", "-"], Some(&manifest))
        .await
        .unwrap();
    let fail = |what: &str, installation: &Installation| -> String {
        format!(
            "{what}\nfirst boots: {:#?}\n{}",
            boots.report(),
            installation.logs(60)
        )
    };
    wait_for_machines(&client, NAMESPACE, KUBERNETES, 1, 1)
        .await
        .unwrap_or_else(|e| panic!("{}", fail(&e, &installation)));
    let servers = common::servers_by_machine(&client, NAMESPACE).await;
    assert_eq!(servers.len(), 2, "{servers:?}");
    let dns_name =
        infra(&client, "MaasCluster").await[0].data["spec"]["controlPlaneEndpoint"]["host"]
            .as_str()
            .unwrap()
            .to_owned();

    steps.step("docs/install.md \"Upgrading\": clusterctl upgrade plan, clusterctl upgrade apply");
    state.reset_counts();
    let mut stored = Vec::new();
    for kind in [
        "maasclusters",
        "maasmachines",
        "maasmachinetemplates",
        "maashosts",
    ] {
        let listed = shell
            .kubectl(&["get", kind, "-A", "-o", "json"], None)
            .await
            .unwrap();
        let mut list: serde_json::Value = serde_json::from_str(&listed).unwrap();
        for item in list["items"].as_array_mut().unwrap() {
            item["metadata"]
                .as_object_mut()
                .unwrap()
                .remove("resourceVersion");
        }
        stored.push((kind, list.to_string()));
    }
    let commands = documented_block("clusterctl upgrade plan");
    assert_eq!(commands.len(), 2, "{commands:?}");
    assert_eq!(commands[0][..3], ["clusterctl", "upgrade", "plan"]);
    let plan = shell
        .clusterctl(
            &commands[0][1..]
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
        )
        .await
        .unwrap();
    let version = format!("v{}", env!("CARGO_PKG_VERSION"));
    assert!(
        plan.lines().any(|l| l.contains("infrastructure-maas")
            && l.contains(PREVIOUS)
            && l.contains(&version)),
        "clusterctl upgrade plan offers {PREVIOUS} -> {version}:\n{plan}"
    );
    assert_eq!(commands[1][..3], ["clusterctl", "upgrade", "apply"]);
    assert!(
        commands[1]
            .iter()
            .any(|w| w.ends_with(&format!("maas:{version}"))),
        "{commands:?}"
    );
    shell
        .clusterctl(
            &commands[1][1..]
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
        )
        .await
        .unwrap();
    installation
        .follow_upgrade(
            management,
            &dir.path().join("upgraded"),
            Some(&boots.hosts_file()),
        )
        .await
        .unwrap_or_else(|e| panic!("following the upgrade: {e}"));
    let still_earlier: Vec<&str> = installation
        .running
        .iter()
        .filter(|r| r.path.starts_with(&previous))
        .map(|r| r.program)
        .collect();
    assert!(
        still_earlier.is_empty(),
        "every Deployment of ours was rolled to this release: {still_earlier:?} still run the earlier programs"
    );
    assert_eq!(installation.running.len(), 9);
    // What the earlier release stored is valid under the new CRDs and webhooks, as it is.
    for (kind, stored) in &stored {
        shell
            .kubectl(&["replace", "--dry-run=server", "-f", "-"], Some(stored))
            .await
            .unwrap_or_else(|e| panic!("the earlier release's {kind} under the new schema: {e}"));
    }

    steps.step("every machine kept its server, nothing redeployed");
    // Every controller of the new release reconciles every object at its start; twenty seconds
    // covers that many times over (the whole upgrade's reconciles are done in a few).
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert_eq!(
        common::servers_by_machine(&client, NAMESPACE).await,
        servers,
        "each MaasMachine keeps its server"
    );
    assert_eq!(
        common::server_operations(&state.call_counts()),
        BTreeMap::new(),
        "no allocate, deploy, release or power operation"
    );
    wait_for_machines(&client, NAMESPACE, KUBERNETES, 1, 1)
        .await
        .unwrap_or_else(|e| panic!("{}", fail(&e, &installation)));

    steps.step("the new release adds a worker");
    common::scale_machine_deployment(&shell, NAMESPACE, &format!("{CLUSTER}-md-0"), 2).await;
    wait_for_machines(&client, NAMESPACE, KUBERNETES, 1, 2)
        .await
        .unwrap_or_else(|e| panic!("{}", fail(&e, &installation)));

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
    .unwrap_or_else(|e| panic!("{}", fail(&e, &installation)));
    let refused = installation.forbidden_requests();
    assert!(
        refused.is_empty(),
        "refused by the installed RBAC: {refused:#?}"
    );
    steps.done();
}
