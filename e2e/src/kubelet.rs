//! A kubelet stand-in: when a simulated MAAS machine finishes deploying, register a Ready
//! Node named after its hostname in the workload API server; when it is released, the
//! Node goes. This is what real kubelets would do after cloud-init joined the cluster. The Node
//! reports the server's addresses as MAAS has them (`InternalIP`) and its hostname.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use maas_sim::{NodeStatus, SimHandle};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};
use crate::objects::KUBERNETES_VERSION;

const POLL: Duration = Duration::from_millis(250);

/// Runs until `cancel` fires.
pub async fn run(sim: SimHandle, workload: kube::Client, cancel: CancellationToken) {
    let nodes: Api<Node> = Api::all(workload);
    let mut registered: BTreeSet<String> = BTreeSet::new();
    loop {
        if let Err(e) = sync_once(&sim, &nodes, &mut registered).await {
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
    registered: &mut BTreeSet<String>,
) -> Result<()> {
    let deployed: BTreeMap<String, Vec<String>> = sim
        .machines()
        .into_iter()
        .filter(|m| m.status == NodeStatus::Deployed)
        .map(|m| (m.hostname, m.ip_addresses))
        .collect();
    for (hostname, addresses) in &deployed {
        if !registered.contains(hostname) {
            register(nodes, hostname, addresses).await?;
            registered.insert(hostname.clone());
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

async fn register(nodes: &Api<Node>, hostname: &str, addresses: &[String]) -> Result<()> {
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": hostname, "labels": {"kubernetes.io/hostname": hostname}},
    }))
    .map_err(|e| Error::Manifest {
        name: hostname.into(),
        message: e.to_string(),
    })?;
    match nodes.create(&PostParams::default(), &node).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => return Err(Error::kube(format!("creating Node {hostname}"))(e)),
    }
    let now =
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now());
    let mut node_addresses: Vec<serde_json::Value> = addresses
        .iter()
        .map(|ip| json!({"type": "InternalIP", "address": ip}))
        .collect();
    node_addresses.push(json!({"type": "Hostname", "address": hostname}));
    let status = json!({
        "apiVersion": "v1",
        "kind": "Node",
        "status": {
            "addresses": node_addresses,
            // CAPI's NodeHealthy needs the pressure conditions reported, not only Ready.
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady",
                 "message": "kubelet stand-in is posting ready status",
                 "lastHeartbeatTime": now, "lastTransitionTime": now},
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory",
                 "message": "", "lastHeartbeatTime": now, "lastTransitionTime": now},
                {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure",
                 "message": "", "lastHeartbeatTime": now, "lastTransitionTime": now},
                {"type": "PIDPressure", "status": "False", "reason": "KubeletHasSufficientPID",
                 "message": "", "lastHeartbeatTime": now, "lastTransitionTime": now}
            ],
            "nodeInfo": {
                "architecture": "amd64", "bootID": "", "containerRuntimeVersion": "containerd://2.0.0",
                "kernelVersion": "6.8.0", "kubeProxyVersion": "", "kubeletVersion": KUBERNETES_VERSION,
                "machineID": hostname, "operatingSystem": "linux", "osImage": "Ubuntu 24.04 LTS",
                "systemUUID": hostname
            }
        }
    });
    nodes
        .patch_status(
            hostname,
            &PatchParams::apply("kubelet-stand-in").force(),
            &Patch::Apply(&status),
        )
        .await
        .map_err(Error::kube(format!("reporting Node {hostname} Ready")))?;
    Ok(())
}
