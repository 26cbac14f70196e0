//! What a user's cluster looks like from the management cluster, read as `kubectl get` would:
//! its objects of one kind, a condition's status, and the wait until its Machines run.

use std::time::Duration;

use kube::ResourceExt;
use kube::api::{DynamicObject, ListParams};

use crate::api::dynamic_api;

/// Every object of `group/version, kind` in `namespace`.
pub async fn list_in(
    client: &kube::Client,
    namespace: &str,
    group: &str,
    version: &str,
    kind: &str,
) -> Vec<DynamicObject> {
    match dynamic_api(client, namespace, group, version, kind).await {
        Ok(api) => api
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default(),
        Err(_) => Vec::new(),
    }
}

/// The status (`True`, `False`, `Unknown`) of the condition `kind` of `object`.
pub fn condition_status(object: &DynamicObject, kind: &str) -> Option<String> {
    object.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)?["status"]
        .as_str()
        .map(str::to_owned)
}

/// Waits until exactly `control_planes` control-plane and `workers` worker Machines exist in
/// `namespace`, all of `version`, Running with a Node, and the KubeadmControlPlane counts them
/// ready and up to date. An error says what was seen last.
pub async fn wait_for_machines(
    client: &kube::Client,
    namespace: &str,
    version: &str,
    control_planes: usize,
    workers: usize,
) -> Result<(), String> {
    let mut last = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(420);
    while tokio::time::Instant::now() < deadline {
        let machines = list_in(client, namespace, "cluster.x-k8s.io", "v1beta2", "Machine").await;
        let is_control_plane =
            |m: &DynamicObject| m.labels().contains_key("cluster.x-k8s.io/control-plane");
        let ready = |m: &&&DynamicObject| {
            m.data["spec"]["version"] == version
                && m.data["status"]["phase"] == "Running"
                && m.data["status"]["nodeRef"]["name"].is_string()
                && m.metadata.deletion_timestamp.is_none()
        };
        let (cp, worker): (Vec<_>, Vec<_>) = machines.iter().partition(|m| is_control_plane(m));
        let kcp = list_in(
            client,
            namespace,
            "controlplane.cluster.x-k8s.io",
            "v1beta2",
            "KubeadmControlPlane",
        )
        .await;
        let kcp_status = kcp
            .first()
            .map(|k| k.data["status"].clone())
            .unwrap_or_default();
        let counted = |key: &str| {
            usize::try_from(kcp_status[key].as_u64().unwrap_or(0)).unwrap_or(usize::MAX)
        };
        if cp.len() == control_planes
            && worker.len() == workers
            && cp.iter().filter(ready).count() == control_planes
            && worker.iter().filter(ready).count() == workers
            && counted("readyReplicas") == control_planes
            && counted("upToDateReplicas") == control_planes
        {
            return Ok(());
        }
        last = format!(
            "machines: {:#?}\nKubeadmControlPlane status: {kcp_status:#?}",
            machines
                .iter()
                .map(|m| (
                    m.name_any(),
                    m.data["spec"]["version"].clone(),
                    m.data["status"]["phase"].clone(),
                    m.data["status"]["nodeRef"]["name"].clone(),
                ))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    Err(format!(
        "{control_planes} control-plane and {workers} worker Machines of {version} not all Running: {last}"
    ))
}
