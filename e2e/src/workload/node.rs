//! What kubeadm and the kubelet write into the workload cluster when a node boots: the Node
//! (registered, Ready, with the control-plane label and taint on control-plane nodes), the
//! mirror pods of the static control-plane pods with their status, and on `kubeadm init` the
//! `kubeadm-config` ConfigMap.

use std::net::IpAddr;

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use super::pki::Pair;

/// A client of the workload cluster at `server` (`https://<address>:<port>`), verifying the
/// serving certificate as issued for `server_name` (the control-plane endpoint's host), with a
/// client certificate.
pub async fn client(
    server: &str,
    server_name: &str,
    ca: &str,
    identity: &Pair,
) -> Result<kube::Client, String> {
    use base64::Engine as _;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let kubeconfig = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "workload", "cluster": {
            "server": server,
            "certificate-authority-data": b64(ca),
            "tls-server-name": server_name,
        }}],
        "users": [{"name": "stand-in", "user": {
            "client-certificate-data": b64(&identity.cert),
            "client-key-data": b64(&identity.key),
        }}],
        "contexts": [{"name": "workload", "context": {"cluster": "workload", "user": "stand-in"}}],
        "current-context": "workload",
    });
    let kubeconfig: kube::config::Kubeconfig =
        serde_json::from_value(kubeconfig).map_err(|e| e.to_string())?;
    let config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .map_err(|e| e.to_string())?;
    kube::Client::try_from(config).map_err(|e| e.to_string())
}

/// The Node as the kubelet registers and reports it: Ready, or (`ready` false) `Ready=Unknown`
/// as the node lifecycle controller reports a Node whose kubelet stopped posting.
pub async fn register(
    client: &kube::Client,
    name: &str,
    address: IpAddr,
    kubelet_version: &str,
    control_plane: bool,
    ready: bool,
) -> Result<(), String> {
    let nodes: Api<Node> = Api::all(client.clone());
    let mut labels = json!({
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
    });
    let mut spec = json!({});
    if control_plane {
        labels["node-role.kubernetes.io/control-plane"] = json!("");
        labels["node.kubernetes.io/exclude-from-external-load-balancers"] = json!("");
        spec["taints"] =
            json!([{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]);
    }
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
    }))
    .map_err(|e| e.to_string())?;
    match nodes.create(&PostParams::default(), &node).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => return Err(format!("registering Node {name}: {e}")),
    }
    let status = crate::kubelet::node_status(name, &[address.to_string()], ready, kubelet_version);
    nodes
        .patch_status(
            name,
            &PatchParams::apply("kubelet-stand-in").force(),
            &Patch::Apply(&status),
        )
        .await
        .map_err(|e| format!("reporting Node {name}: {e}"))?;
    Ok(())
}

/// The control-plane components kubeadm runs as static pods.
pub const COMPONENTS: [&str; 4] = [
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
];

/// The mirror pods of the node's static control-plane pods, Running and Ready, with the
/// annotations kubeadm puts on them.
pub async fn mirror_static_pods(
    client: &kube::Client,
    node: &str,
    address: IpAddr,
    version: &str,
) -> Result<(), String> {
    // A server deployed again under the same name finds its earlier incarnation's pods.
    delete_mirror_pods(client, node).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "kube-system");
    for component in COMPONENTS {
        let name = format!("{component}-{node}");
        let mut annotations =
            json!({"kubernetes.io/config.mirror": name, "kubernetes.io/config.source": "file"});
        match component {
            "etcd" => {
                annotations["kubeadm.kubernetes.io/etcd.advertise-client-urls"] = json!(format!(
                    "https://{address}:{}",
                    super::control_plane::ETCD_CLIENT_PORT
                ));
            }
            "kube-apiserver" => {
                annotations["kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint"] = json!(
                    format!("{address}:{}", super::control_plane::API_SERVER_PORT)
                );
            }
            _ => {}
        }
        let image = if component == "etcd" {
            "registry.k8s.io/etcd:3.6.16-0".to_owned()
        } else {
            format!("registry.k8s.io/{component}:{version}")
        };
        let pod: Pod = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "kube-system", "annotations": annotations,
                         "labels": {"component": component, "tier": "control-plane"}},
            "spec": {"nodeName": node, "hostNetwork": true, "priorityClassName": "system-node-critical",
                     "containers": [{"name": component, "image": image}]},
        }))
        .map_err(|e| e.to_string())?;
        match pods.create(&PostParams::default(), &pod).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(format!("creating Pod {name}: {e}")),
        }
        let now = k8s_openapi::jiff::Timestamp::now().to_string();
        let condition =
            |kind: &str| json!({"type": kind, "status": "True", "lastTransitionTime": now});
        let status = json!({
            "apiVersion": "v1", "kind": "Pod",
            "status": {
                "phase": "Running",
                "hostIP": address.to_string(), "podIP": address.to_string(),
                "podIPs": [{"ip": address.to_string()}],
                "startTime": now,
                "conditions": [condition("Initialized"), condition("Ready"),
                               condition("ContainersReady"), condition("PodScheduled")],
                "containerStatuses": [{"name": component, "ready": true, "restartCount": 0,
                    "image": pod_image(&pod), "imageID": "", "started": true,
                    "state": {"running": {"startedAt": now}}}],
            }
        });
        pods.patch_status(
            &name,
            &PatchParams::apply("kubelet-stand-in").force(),
            &Patch::Apply(&status),
        )
        .await
        .map_err(|e| format!("reporting Pod {name}: {e}"))?;
    }
    Ok(())
}

fn pod_image(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default()
}

/// Deletes the mirror pods of `node`'s static control-plane pods.
pub async fn delete_mirror_pods(client: &kube::Client, node: &str) -> Result<(), String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "kube-system");
    for component in COMPONENTS {
        let name = format!("{component}-{node}");
        match pods
            .delete(&name, &kube::api::DeleteParams::default())
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(format!("deleting Pod {name}: {e}")),
        }
    }
    Ok(())
}

/// The pod garbage collector's rule for orphans: the pods bound to a Node that no longer exists
/// are deleted at once.
pub async fn delete_orphaned_pods(client: &kube::Client) -> Result<(), String> {
    let nodes: std::collections::BTreeSet<String> = Api::<Node>::all(client.clone())
        .list(&kube::api::ListParams::default())
        .await
        .map_err(|e| format!("listing Nodes: {e}"))?
        .items
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    let pods: Api<Pod> = Api::all(client.clone());
    let now = kube::api::DeleteParams {
        grace_period_seconds: Some(0),
        ..kube::api::DeleteParams::default()
    };
    for pod in pods
        .list(&kube::api::ListParams::default())
        .await
        .map_err(|e| format!("listing Pods: {e}"))?
        .items
    {
        let bound = pod.spec.as_ref().and_then(|s| s.node_name.clone());
        if bound.is_some_and(|n| !nodes.contains(&n)) {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let namespace = pod.metadata.namespace.clone().unwrap_or_default();
            match Api::<Pod>::namespaced(client.clone(), &namespace)
                .delete(&name, &now)
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(format!("deleting Pod {namespace}/{name}: {e}")),
            }
        }
    }
    Ok(())
}

/// `kubeadm init phase upload-config kubeadm`: the ClusterConfiguration in `kube-system/kubeadm-config`.
pub async fn upload_kubeadm_config(
    client: &kube::Client,
    cluster_configuration: &serde_json::Value,
) -> Result<(), String> {
    let yaml = serde_saphyr::to_string(cluster_configuration).map_err(|e| e.to_string())?;
    let config_map: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "kubeadm-config", "namespace": "kube-system"},
        "data": {"ClusterConfiguration": yaml},
    }))
    .map_err(|e| e.to_string())?;
    match Api::<ConfigMap>::namespaced(client.clone(), "kube-system")
        .create(&PostParams::default(), &config_map)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(format!("uploading kubeadm-config: {e}")),
    }
}

/// The ClusterConfiguration `kubeadm join` downloads from `kube-system/kubeadm-config`.
pub async fn download_kubeadm_config(client: &kube::Client) -> Result<serde_json::Value, String> {
    let config_map = Api::<ConfigMap>::namespaced(client.clone(), "kube-system")
        .get("kubeadm-config")
        .await
        .map_err(|e| format!("reading kubeadm-config: {e}"))?;
    let text = config_map
        .data
        .and_then(|d| d.get("ClusterConfiguration").cloned())
        .ok_or("kubeadm-config has no ClusterConfiguration")?;
    serde_saphyr::from_str(&text).map_err(|e| format!("kubeadm-config: {e}"))
}

/// The etcd members' client URLs, from the etcd pods' kubeadm annotation (what `kubeadm join`
/// reads to find etcd).
pub async fn etcd_client_urls(client: &kube::Client) -> Result<Vec<String>, String> {
    let pods = Api::<Pod>::namespaced(client.clone(), "kube-system")
        .list(&kube::api::ListParams::default().labels("component=etcd"))
        .await
        .map_err(|e| format!("listing etcd pods: {e}"))?;
    Ok(pods
        .items
        .iter()
        .filter_map(|p| {
            p.metadata
                .annotations
                .as_ref()?
                .get("kubeadm.kubernetes.io/etcd.advertise-client-urls")
                .cloned()
        })
        .collect())
}

/// Whether the bootstrap token `id.secret` exists (what `kubeadm join` authenticates with).
pub async fn bootstrap_token_valid(client: &kube::Client, token: &str) -> Result<bool, String> {
    let Some((id, secret)) = token.split_once('.') else {
        return Ok(false);
    };
    match Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client.clone(), "kube-system")
        .get_opt(&format!("bootstrap-token-{id}"))
        .await
        .map_err(|e| format!("reading bootstrap token {id}: {e}"))?
    {
        None => Ok(false),
        Some(s) => Ok(s
            .data
            .and_then(|d| d.get("token-secret").cloned())
            .is_some_and(|v| v.0 == secret.as_bytes())),
    }
}
