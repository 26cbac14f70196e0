//! A kubelet stand-in: when a simulated MAAS machine finishes deploying, register a Ready
//! Node named after its hostname in the workload API server; when it is released, the
//! Node goes. This is what real kubelets would do after cloud-init joined the cluster. The Node
//! reports the server's addresses as MAAS has them (`InternalIP`) and its hostname.
//!
//! A test can make a kubelet go silent ([`Silence`]): its Node turns `Ready=Unknown` (what the
//! node lifecycle controller reports when heartbeats stop), and, unless silenced for good, it
//! comes back `Ready` once the server has been powered on again in the simulator (a reboot).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use maas_sim::{NodeStatus, SimHandle};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};
use crate::objects::KUBERNETES_VERSION;

/// The kubelet's port, which each Node reports (where `kubelet-portforward` listens on each
/// workload node's address).
pub const KUBELET_PORT: u16 = 10250;

const POLL: Duration = Duration::from_millis(250);

/// Kubelets that have gone silent, by hostname; shared between the stand-in and a test.
#[derive(Debug, Clone, Default)]
pub struct Silence(Arc<Mutex<BTreeMap<String, Silent>>>);

/// How long a kubelet stays silent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Silent {
    /// Until the server's power-on count passes `power_ons` (it was power-cycled).
    UntilPowerCycle { power_ons: u64, reported: bool },
    /// For good (a server that does not recover from a reboot).
    Forever { reported: bool },
}

impl Silence {
    /// The kubelet on `hostname` stops reporting until the server is power-cycled, i.e. powered
    /// on again after `power_ons` power-ons (its count now).
    pub fn until_power_cycle(&self, hostname: &str, power_ons: u64) {
        self.lock().insert(
            hostname.to_owned(),
            Silent::UntilPowerCycle {
                power_ons,
                reported: false,
            },
        );
    }

    /// The kubelet on `hostname` never reports again.
    pub fn forever(&self, hostname: &str) {
        self.lock()
            .insert(hostname.to_owned(), Silent::Forever { reported: false });
    }

    /// Whether the kubelet on `hostname` is silent now.
    pub fn is_silent(&self, hostname: &str) -> bool {
        self.lock().contains_key(hostname)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Silent>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What the kubelet of a deployed `server` posts now: `Some(true)` when it comes back
    /// (booted again after the power cycle it waited for: it registers again and reports
    /// Ready), `Some(false)` when it has just gone silent (its Node turns `Ready=Unknown`, as
    /// the node lifecycle controller reports it), `None` otherwise.
    pub fn next_post(&self, server: &maas_sim::MachineView) -> Option<bool> {
        let mut silent = self.lock();
        match silent.get_mut(&server.hostname)? {
            Silent::UntilPowerCycle { power_ons, .. }
                if server.power_on_count > *power_ons
                    && server.power_state == maas_sim::PowerState::On =>
            {
                silent.remove(&server.hostname);
                Some(true)
            }
            Silent::UntilPowerCycle { reported, .. } | Silent::Forever { reported }
                if !*reported =>
            {
                *reported = true;
                Some(false)
            }
            Silent::UntilPowerCycle { .. } | Silent::Forever { .. } => None,
        }
    }
}

/// Runs until `cancel` fires.
pub async fn run(
    sim: SimHandle,
    workload: kube::Client,
    silence: Silence,
    cancel: CancellationToken,
) {
    let nodes: Api<Node> = Api::all(workload);
    let mut registered: BTreeSet<String> = BTreeSet::new();
    loop {
        if let Err(e) = sync_once(&sim, &nodes, &silence, &mut registered).await {
            tracing::warn!(error = %e, "kubelet stand-in: sync failed, retrying");
        }
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(POLL) => {}
        }
    }
}

async fn sync_once(
    sim: &SimHandle,
    nodes: &Api<Node>,
    silence: &Silence,
    registered: &mut BTreeSet<String>,
) -> Result<()> {
    let servers: Vec<_> = sim
        .machines()
        .into_iter()
        .filter(|m| m.status == NodeStatus::Deployed)
        .collect();
    let deployed: BTreeMap<String, Vec<String>> = servers
        .iter()
        .map(|m| (m.hostname.clone(), m.ip_addresses.clone()))
        .collect();
    for server in &servers {
        let hostname = &server.hostname;
        match silence.next_post(server) {
            // Booted again: the kubelet registers (again, if the Node was deleted) and
            // reports Ready.
            Some(true) => {
                register(nodes, hostname, &server.ip_addresses, None).await?;
                registered.insert(hostname.clone());
            }
            Some(false) => report(nodes, hostname, &server.ip_addresses, false).await?,
            None if !registered.contains(hostname) && !silence.is_silent(hostname) => {
                register(nodes, hostname, &server.ip_addresses, None).await?;
                registered.insert(hostname.clone());
            }
            // Silent and reported, or registered and healthy: nothing to post.
            None => {}
        }
    }
    let gone: Vec<String> = registered
        .iter()
        .filter(|h| !deployed.contains_key(*h))
        .cloned()
        .collect();
    for hostname in &gone {
        match nodes.delete(hostname, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(Error::kube(format!("deleting Node {hostname}"))(e)),
        }
        registered.remove(hostname);
    }
    Ok(())
}

/// Creates the Node `hostname` (unless it exists) and reports it Ready. A real kubelet knows
/// no providerID on MAAS (machine-controller sets it); a stand-in for a provider may give one.
pub(crate) async fn register(
    nodes: &Api<Node>,
    hostname: &str,
    addresses: &[String],
    provider_id: Option<&str>,
) -> Result<()> {
    let mut node = json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": hostname, "labels": {"kubernetes.io/hostname": hostname}},
    });
    if let Some(provider_id) = provider_id {
        node["spec"] = json!({"providerID": provider_id});
    }
    let node: Node = serde_json::from_value(node).map_err(|e| Error::Manifest {
        name: hostname.into(),
        message: e.to_string(),
    })?;
    match nodes.create(&PostParams::default(), &node).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => return Err(Error::kube(format!("creating Node {hostname}"))(e)),
    }
    report(nodes, hostname, addresses, true).await
}

/// Posts the Node's status: Ready, or Unknown as the node lifecycle controller reports a Node
/// whose kubelet stopped posting.
async fn report(
    nodes: &Api<Node>,
    hostname: &str,
    addresses: &[String],
    ready: bool,
) -> Result<()> {
    let mut status = node_status(hostname, addresses, ready, KUBERNETES_VERSION);
    // `status.addresses` is a list map keyed by `type` for server-side apply, so a dual-stack
    // Node (two `InternalIP`s) cannot be applied; the kubelet posts it with a patch, and so
    // does the stand-in: everything else applied, the addresses merged.
    let node_addresses = status["status"]
        .as_object_mut()
        .and_then(|s| s.remove("addresses"))
        .unwrap_or_default();
    nodes
        .patch_status(
            hostname,
            &PatchParams::apply("kubelet-stand-in").force(),
            &Patch::Apply(&status),
        )
        .await
        .map_err(Error::kube(format!("reporting Node {hostname} Ready")))?;
    let addresses_patch = json!({"status": {"addresses": node_addresses}});
    nodes
        .patch_status(
            hostname,
            &PatchParams {
                field_manager: Some("kubelet-stand-in".into()),
                ..PatchParams::default()
            },
            &Patch::Merge(&addresses_patch),
        )
        .await
        .map_err(Error::kube(format!(
            "reporting Node {hostname}'s addresses"
        )))?;
    Ok(())
}

/// A Node's status as a kubelet posts it (server-side apply body): its addresses (`InternalIP`
/// each, and the hostname), Ready or (`ready` false) `Ready=Unknown` as the node lifecycle
/// controller reports a Node whose kubelet stopped posting, the pressure conditions (CAPI's
/// NodeHealthy needs them reported), the kubelet's port and the node info.
pub(crate) fn node_status(
    hostname: &str,
    addresses: &[String],
    ready: bool,
    kubelet_version: &str,
) -> serde_json::Value {
    let (ready_status, ready_reason, ready_message) = if ready {
        (
            "True",
            "KubeletReady",
            "kubelet stand-in is posting ready status",
        )
    } else {
        (
            "Unknown",
            "NodeStatusUnknown",
            "Kubelet stopped posting node status.",
        )
    };
    let now =
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now());
    let condition = |kind: &str, status: &str, reason: &str, message: &str| {
        json!({"type": kind, "status": status, "reason": reason, "message": message,
               "lastHeartbeatTime": now, "lastTransitionTime": now})
    };
    let mut node_addresses: Vec<serde_json::Value> = addresses
        .iter()
        .map(|ip| json!({"type": "InternalIP", "address": ip}))
        .collect();
    node_addresses.push(json!({"type": "Hostname", "address": hostname}));
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "status": {
            "addresses": node_addresses,
            "daemonEndpoints": {"kubeletEndpoint": {"Port": KUBELET_PORT}},
            "conditions": [
                condition("Ready", ready_status, ready_reason, ready_message),
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory", ""),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure", ""),
                condition("PIDPressure", "False", "KubeletHasSufficientPID", ""),
            ],
            "nodeInfo": {
                "architecture": "amd64", "bootID": "", "containerRuntimeVersion": "containerd://2.0.0",
                "kernelVersion": "6.8.0", "kubeProxyVersion": "", "kubeletVersion": kubelet_version,
                "machineID": hostname, "operatingSystem": "linux", "osImage": "Ubuntu 24.04 LTS",
                "systemUUID": hostname
            }
        }
    })
}
