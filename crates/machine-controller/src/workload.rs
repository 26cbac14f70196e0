//! The workload Node: find it by the host's hostname and set its `spec.providerID`.
//!
//! Clients of workload clusters come from the kit
//! ([`capmaas_runtime::controller::workload::WorkloadClients`]), which refuses kubeconfigs that
//! run commands or read files.

use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;

use crate::error::{Error, Result, is_not_found};

/// What happened to the workload Node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeLink {
    /// The Node now carries our providerID (we set it or it was already set).
    Linked {
        /// Node name.
        node: String,
        /// Whether this call patched it.
        patched: bool,
    },
    /// No Node with this hostname exists yet (the kubelet has not registered).
    NodeNotFound,
    /// The Node carries another providerID; the field is immutable, a person must look.
    ProviderIdMismatch {
        /// Node name.
        node: String,
        /// The providerID the Node has.
        existing: String,
    },
}

/// Names to try for the Node of a host: the hostname lower-cased, then its short form
/// (kubelets register the short name or the FQDN depending on the image).
pub fn node_name_candidates(hostname: &str) -> Vec<String> {
    let lower = hostname.trim().to_ascii_lowercase();
    let mut names = Vec::new();
    if !lower.is_empty() {
        names.push(lower.clone());
    }
    if let Some((short, _)) = lower.split_once('.')
        && !short.is_empty()
    {
        names.push(short.to_owned());
    }
    names
}

/// Sets `spec.providerID` on the Node registered under `hostname`, unless it has it already.
pub async fn link_node(
    workload: &Client,
    cluster: &str,
    hostname: &str,
    provider_id: &str,
) -> Result<NodeLink> {
    let nodes: Api<Node> = Api::all(workload.clone());
    for name in node_name_candidates(hostname) {
        let node = match nodes.get_opt(&name).await {
            Ok(Some(node)) => node,
            Ok(None) => continue,
            Err(e) if is_not_found(&e) => continue,
            Err(e) => return Err(Error::workload(cluster, format!("reading Node {name}"))(e)),
        };
        let existing = node.spec.as_ref().and_then(|s| s.provider_id.clone());
        return match existing.as_deref() {
            Some(p) if p == provider_id => Ok(NodeLink::Linked {
                node: name,
                patched: false,
            }),
            Some(p) if !p.is_empty() => Ok(NodeLink::ProviderIdMismatch {
                node: name,
                existing: p.to_owned(),
            }),
            _ => {
                let patch = json!({"spec": {"providerID": provider_id}});
                nodes
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(Error::workload(
                        cluster,
                        format!("setting providerID on Node {name}"),
                    ))?;
                Ok(NodeLink::Linked {
                    node: name,
                    patched: true,
                })
            }
        };
    }
    Ok(NodeLink::NodeNotFound)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_names_try_full_then_short() {
        assert_eq!(
            node_name_candidates("Node-1.maas"),
            ["node-1.maas", "node-1"]
        );
        assert_eq!(node_name_candidates("node-1"), ["node-1"]);
        assert!(node_name_candidates("  ").is_empty());
    }
}
