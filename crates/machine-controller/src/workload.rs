//! Workload clusters: one cached client per cluster, built from the `<cluster>-kubeconfig`
//! Secret (key `value`), and the Node `spec.providerID` patch.
//!
//! The cache key includes the Secret's resourceVersion, so a rotated kubeconfig replaces the
//! client; the kubeconfig's content never reaches a log line or an error.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use k8s_openapi::api::core::v1::{Node, Secret};
use kube::api::{Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};
use serde_json::json;

use crate::error::{Error, Result, is_not_found};

/// Key of the kubeconfig in the `<cluster>-kubeconfig` Secret (CAPI convention).
pub const KUBECONFIG_KEY: &str = "value";

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

/// Per-cluster client cache; cheap to clone.
#[derive(Clone, Default)]
pub struct WorkloadClients {
    clients: Arc<Mutex<ClientCache>>,
}

/// `(namespace, cluster)` → `(kubeconfig Secret resourceVersion, client)`.
type ClientCache = HashMap<(String, String), (String, Client)>;

impl std::fmt::Debug for WorkloadClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkloadClients")
            .field("clusters", &self.lock().len())
            .finish()
    }
}

impl WorkloadClients {
    fn lock(&self) -> std::sync::MutexGuard<'_, ClientCache> {
        // Entries are replaced whole; a panic elsewhere cannot leave one half-written.
        self.clients.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The client of `namespace/cluster`, built or reused.
    pub async fn client(
        &self,
        management: &Client,
        namespace: &str,
        cluster: &str,
    ) -> Result<Client> {
        let label = format!("{namespace}/{cluster}");
        let secret_name = format!("{cluster}-kubeconfig");
        let secrets: Api<Secret> = Api::namespaced(management.clone(), namespace);
        let secret = secrets
            .get_opt(&secret_name)
            .await
            .map_err(Error::kube(format!("reading Secret {secret_name}")))?
            .ok_or_else(|| Error::WorkloadKubeconfig {
                cluster: label.clone(),
                reason: format!("Secret {secret_name} not found"),
            })?;
        let version = secret.metadata.resource_version.clone().unwrap_or_default();
        let key = (namespace.to_owned(), cluster.to_owned());
        if let Some((cached_version, client)) = self.lock().get(&key)
            && *cached_version == version
        {
            return Ok(client.clone());
        }
        let bytes = secret
            .data
            .as_ref()
            .and_then(|d| d.get(KUBECONFIG_KEY))
            .ok_or_else(|| Error::WorkloadKubeconfig {
                cluster: label.clone(),
                reason: format!("Secret {secret_name} has no key {KUBECONFIG_KEY}"),
            })?;
        let client = client_from_kubeconfig(&bytes.0, &label).await?;
        self.lock().insert(key, (version, client.clone()));
        Ok(client)
    }

    /// Forgets a cluster's client (after its API calls failed, so the next try rebuilds it).
    pub fn forget(&self, namespace: &str, cluster: &str) {
        self.lock()
            .remove(&(namespace.to_owned(), cluster.to_owned()));
    }
}

async fn client_from_kubeconfig(bytes: &[u8], label: &str) -> Result<Client> {
    let invalid = |what: &str| Error::WorkloadKubeconfig {
        cluster: label.to_owned(),
        // Only the kind of problem: parser messages can quote the file's content.
        reason: format!("kubeconfig is {what}"),
    };
    let text = std::str::from_utf8(bytes).map_err(|_| invalid("not UTF-8"))?;
    let kubeconfig = Kubeconfig::from_yaml(text).map_err(|_| invalid("not valid YAML"))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|_| invalid("unusable (no current context, cluster or credentials)"))?;
    Client::try_from(capmaas_runtime::client::api_config(config))
        .map_err(|_| invalid("unusable for a client (TLS settings)"))
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
            Err(source) => {
                return Err(Error::Workload {
                    cluster: cluster.to_owned(),
                    action: format!("reading Node {name}"),
                    source,
                });
            }
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
                    .map_err(|source| Error::Workload {
                        cluster: cluster.to_owned(),
                        action: format!("setting providerID on Node {name}"),
                        source,
                    })?;
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

    #[tokio::test]
    async fn bad_kubeconfig_errors_do_not_quote_content() {
        let secret_text =
            "apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user: {token: SECRET-TOKEN}\n: [";
        let Err(err) = client_from_kubeconfig(secret_text.as_bytes(), "ns/c").await else {
            panic!("a broken kubeconfig must be rejected");
        };
        let text = capmaas_runtime::error_chain(&err);
        assert!(!text.contains("SECRET-TOKEN"), "{text}");
        assert!(text.contains("ns/c"), "{text}");
        let Err(err) = client_from_kubeconfig(&[0xff, 0xfe], "ns/c").await else {
            panic!("non-UTF-8 must be rejected");
        };
        assert!(err.to_string().contains("not UTF-8"));
    }
}
