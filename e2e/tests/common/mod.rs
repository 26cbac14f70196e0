//! What the end-to-end scenarios share: typed access to the management cluster's objects,
//! declaring a cluster, waiting for Machines, and counts from the simulator.
#![allow(dead_code, unreachable_pub)] // Each test binary uses its own subset.

use std::collections::BTreeMap;
use std::time::Duration;

use capmaas_e2e::{ClusterSpec, Harness, apply, dynamic_api, kubeconfig_secret, wait_for};
use kube::api::{Api, DynamicObject, ListParams};
use maas_sim::NodeStatus;

/// One harness at a time in a test binary (each is two API servers and six processes).
pub static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A MAAS API client of the simulator (what an operator would use to look).
pub fn maas_client(h: &Harness) -> maas_api_client::MaasClient {
    sim_client(&h.sim)
}

/// A MAAS API client of `sim`.
pub fn sim_client(sim: &maas_sim::RunningSim) -> maas_api_client::MaasClient {
    capmaas_e2e::first_day::sim_client(sim).unwrap()
}

/// The addresses MAAS serves for `fqdn`, through the MAAS API (None: no such record).
pub async fn maas_dns(
    sim: &maas_sim::RunningSim,
    fqdn: &str,
) -> Option<std::collections::BTreeSet<String>> {
    let records = sim_client(sim)
        .list_dns_resources(&maas_api_client::DnsResourceFilter::default())
        .await
        .unwrap();
    records.into_iter().find(|r| r.fqdn == fqdn).map(|r| {
        r.ip_addresses
            .iter()
            .filter_map(|a| a.ip.map(|ip| ip.to_string()))
            .collect()
    })
}

pub const LONG: Duration = Duration::from_secs(240);
pub const POLL: Duration = Duration::from_millis(500);

pub async fn api(
    client: &kube::Client,
    ns: &str,
    group: &str,
    version: &str,
    kind: &str,
) -> Api<DynamicObject> {
    dynamic_api(client, ns, group, version, kind).await.unwrap()
}

pub async fn infra(h: &Harness, ns: &str, kind: &str) -> Api<DynamicObject> {
    api(
        &h.management.client(),
        ns,
        "infrastructure.cluster.x-k8s.io",
        "v1beta1",
        kind,
    )
    .await
}

/// Every object of our `kind` in `ns`.
pub async fn list_infra(h: &Harness, ns: &str, kind: &str) -> Vec<DynamicObject> {
    infra(h, ns, kind)
        .await
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
}

pub async fn capi(h: &Harness, ns: &str, kind: &str) -> Api<DynamicObject> {
    api(
        &h.management.client(),
        ns,
        "cluster.x-k8s.io",
        "v1beta2",
        kind,
    )
    .await
}

/// Every CAPI core object of `kind` in `ns`.
pub async fn list_capi(h: &Harness, ns: &str, kind: &str) -> Vec<DynamicObject> {
    capi(h, ns, kind)
        .await
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
}

/// Whether `object`'s name contains `part` (`workers`, `control-plane`: which of a cluster's
/// Machines it is).
pub fn name_contains(object: &DynamicObject, part: &str) -> bool {
    object
        .metadata
        .name
        .as_deref()
        .is_some_and(|n| n.contains(part))
}

pub async fn declare(h: &Harness, spec: &ClusterSpec) {
    let kubeconfig = h.workload.kubeconfig_yaml().unwrap();
    apply(
        &h.management.client(),
        &kubeconfig_secret(&spec.name, &spec.namespace, &kubeconfig),
    )
    .await
    .unwrap();
    for object in spec.objects() {
        apply(&h.management.client(), &object).await.unwrap();
    }
}

/// Machines of the cluster that are Running with a nodeRef.
pub async fn running_machines(h: &Harness, ns: &str) -> Vec<DynamicObject> {
    let machines = list_capi(h, ns, "Machine").await;
    machines
        .into_iter()
        .filter(|m| {
            m.data["status"]["phase"] == "Running"
                && m.data["status"]["nodeRef"]["name"].is_string()
        })
        .collect()
}

pub async fn wait_running(h: &mut Harness, ns: &str, count: usize) -> Vec<DynamicObject> {
    let result = wait_for(
        &format!("{count} Machines Running with a nodeRef"),
        LONG,
        POLL,
        || async {
            let running = running_machines(h, ns).await;
            let total = list_capi(h, ns, "Machine").await.len();
            Ok((running.len() == count && total == count).then_some(running))
        },
    )
    .await;
    h.ensure_running().unwrap();
    result.unwrap_or_else(|e| panic!("{e}\n{}", h.logs(40)))
}

/// How many MaasHosts have a consumer.
pub async fn claimed_hosts(h: &Harness, ns: &str) -> usize {
    list_infra(h, ns, "MaasHost")
        .await
        .iter()
        .filter(|host| host.data["spec"]["consumerRef"].is_object())
        .count()
}

/// Every consumed host has one consumer and no consumer has two hosts.
pub async fn assert_no_double_claims(h: &Harness, ns: &str) {
    let hosts = list_infra(h, ns, "MaasHost").await;
    let mut consumers: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for host in &hosts {
        if let Some(name) = host.data["spec"]["consumerRef"]["name"].as_str() {
            consumers
                .entry(name.to_owned())
                .or_default()
                .push(host.metadata.name.clone().unwrap());
        }
    }
    for (consumer, hosts) in consumers {
        assert_eq!(hosts.len(), 1, "{consumer} holds several hosts: {hosts:?}");
    }
}

pub fn sim_counts(h: &Harness) -> BTreeMap<NodeStatus, usize> {
    h.sim.state().status_counts()
}

pub fn in_use(h: &Harness) -> usize {
    h.sim
        .state()
        .machines()
        .iter()
        .filter(|m| {
            matches!(
                m.status,
                NodeStatus::Allocated | NodeStatus::Deploying | NodeStatus::Deployed
            )
        })
        .count()
}

/// The MachineDeployment's status and each Machine's phase and conditions, for failures.
pub async fn describe_rollout(h: &Harness, ns: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    for md in list_capi(h, ns, "MachineDeployment").await {
        let _ = writeln!(
            out,
            "MachineDeployment {:?}: {}",
            md.metadata.name, md.data["status"]
        );
    }
    for m in list_capi(h, ns, "Machine").await {
        let _ = writeln!(
            out,
            "Machine {:?} phase {} conditions {}",
            m.metadata.name, m.data["status"]["phase"], m.data["status"]["conditions"]
        );
    }
    for m in list_infra(h, ns, "MaasMachine").await {
        let _ = writeln!(
            out,
            "MaasMachine {:?} status {}",
            m.metadata.name, m.data["status"]
        );
    }
    out
}

/// Every binary ran as its ServiceAccount with the RBAC of `deploy/base`: no request of any of
/// them (in any process's log, killed ones included) was refused.
pub fn assert_rbac_sufficient(h: &Harness) {
    let refused = h.forbidden_requests();
    assert!(
        refused.is_empty(),
        "requests refused by RBAC:\n{}",
        refused.join("\n")
    );
}

/// The Argo CD health (status, message) of every object of our `kind` in `ns`, by name, as
/// `deploy/argocd/health/health.lua` gives it in Argo CD's Lua (`argocd-health`, built by
/// `just testenv`).
pub async fn argocd_health(
    h: &Harness,
    ns: &str,
    kind: &str,
) -> BTreeMap<String, (String, String)> {
    use std::io::Write as _;
    let objects = list_infra(h, ns, kind).await;
    let tool = capmaas_testenv::cache_dir().join("bin/argocd-health");
    let script = capmaas_testenv::repo_root().join("deploy/argocd/health/health.lua");
    let mut child = std::process::Command::new(tool)
        .arg("eval")
        .arg(script)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let input: Vec<serde_json::Value> = objects
        .iter()
        .map(|o| {
            let mut value = serde_json::to_value(o).unwrap();
            value["kind"] = serde_json::json!(kind);
            value
        })
        .collect();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(&serde_json::to_vec(&input).unwrap())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "argocd-health eval failed");
    let health: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    objects
        .iter()
        .zip(health)
        .map(|(o, h)| {
            let text = |k: &str| h[k].as_str().unwrap_or_default().to_owned();
            (
                o.metadata.name.clone().unwrap(),
                (text("status"), text("message")),
            )
        })
        .collect()
}

/// What Argo CD would show other than Healthy among the objects of `kinds` in `ns`.
async fn argocd_unhealthy(h: &Harness, ns: &str, kinds: &[&str]) -> Vec<String> {
    let mut unhealthy = Vec::new();
    for kind in kinds {
        for (name, (status, message)) in argocd_health(h, ns, kind).await {
            if status != "Healthy" {
                unhealthy.push(format!("{kind} {name}: {status} {message}"));
            }
        }
    }
    unhealthy
}

/// Waits until Argo CD would show every object of each of `kinds` in `ns` Healthy.
pub async fn wait_argocd_healthy(h: &Harness, ns: &str, kinds: &[&str]) {
    let healthy = wait_for(
        "Argo CD health of every object Healthy",
        LONG,
        POLL,
        || async {
            Ok(argocd_unhealthy(h, ns, kinds)
                .await
                .is_empty()
                .then_some(()))
        },
    )
    .await;
    if let Err(e) = healthy {
        panic!("{e}: {:?}", argocd_unhealthy(h, ns, kinds).await);
    }
}

/// `kubectl delete cluster <cluster> --wait=false` as a user runs it, then the wait until the
/// deletion is complete: no MAAS server allocated, no DNS record `dns_name`, and no MaasCluster,
/// MaasMachine or MaasDNSRecord left in `namespace`, nor anything `also_left` counts. The error
/// says what was seen last.
pub async fn delete_cluster_leaving_nothing<F, Fut>(
    shell: &capmaas_e2e::first_day::UserShell,
    client: &kube::Client,
    sim: &maas_sim::RunningSim,
    namespace: &str,
    cluster: &str,
    dns_name: &str,
    also_left: F,
) -> Result<(), String>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = usize>,
{
    shell
        .kubectl(
            &[
                "-n",
                namespace,
                "delete",
                "cluster",
                cluster,
                "--wait=false",
            ],
            None,
        )
        .await
        .map_err(|e| e.to_string())?;
    let state = sim.state();
    wait_for(
        "every server released, the DNS record gone, no object left",
        LONG,
        Duration::from_secs(1),
        || async {
            let allocated = state
                .machines()
                .into_iter()
                .filter(|m| m.owner.is_some())
                .count();
            let dns = maas_dns(sim, dns_name).await;
            let mut left = also_left().await;
            for kind in ["MaasCluster", "MaasMachine", "MaasDNSRecord"] {
                left += capmaas_e2e::user_cluster::list_in(
                    client,
                    namespace,
                    "infrastructure.cluster.x-k8s.io",
                    "v1beta1",
                    kind,
                )
                .await
                .len();
            }
            Ok((allocated == 0 && dns.is_none() && left == 0).then_some(()))
        },
    )
    .await
    .map_err(|e| e.to_string())
}

/// The MAAS operations that touch a server already in use: none may be sent while a provider
/// takes a running cluster over, or is upgraded under it.
pub const SERVER_OPERATIONS: [&str; 5] = [
    "machines.allocate",
    "machine.deploy",
    "machine.release",
    "machine.power_on",
    "machine.power_off",
];

/// How often each of [`SERVER_OPERATIONS`] was sent, of the simulator's counts (those sent).
pub fn server_operations(counts: &BTreeMap<String, u64>) -> BTreeMap<&'static str, u64> {
    SERVER_OPERATIONS
        .iter()
        .filter_map(|op| counts.get(*op).filter(|n| **n > 0).map(|n| (*op, *n)))
        .collect()
}

/// `kubectl -n <namespace> scale machinedeployment <name> --replicas=<replicas>`, as the user.
pub async fn scale_machine_deployment(
    shell: &capmaas_e2e::first_day::UserShell,
    namespace: &str,
    name: &str,
    replicas: usize,
) {
    shell
        .kubectl(
            &[
                "-n",
                namespace,
                "scale",
                "machinedeployment",
                name,
                &format!("--replicas={replicas}"),
            ],
            None,
        )
        .await
        .unwrap_or_else(|e| panic!("scaling {namespace}/{name} to {replicas}: {e}"));
}

/// The server (`spec.systemID`) of each MaasMachine of `namespace`, by MaasMachine name.
pub async fn servers_by_machine(
    client: &kube::Client,
    namespace: &str,
) -> BTreeMap<String, String> {
    capmaas_e2e::user_cluster::list_in(
        client,
        namespace,
        "infrastructure.cluster.x-k8s.io",
        "v1beta1",
        "MaasMachine",
    )
    .await
    .iter()
    .map(|m| {
        (
            kube::ResourceExt::name_any(m),
            m.data["spec"]["systemID"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        )
    })
    .collect()
}
