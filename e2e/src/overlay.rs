//! `deploy/` as kustomize renders it, and what the harness takes from a rendered overlay to run
//! our binaries as that overlay would: its RBAC and admission policies, and the namespace each
//! controller watches (`CAPMAAS_WATCH_NAMESPACE`, set by `deploy/components/namespaced`).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use capmaas_testenv::{kubectl, repo_root};
use serde_json::Value;

use crate::error::{Error, Result};

/// The six Deployments, by component (`capmaas-<component>`, image
/// `ghcr.io/capmaas-rs/<component>`, folder `deploy/base/<component>`).
pub const COMPONENTS: [&str; 6] = [
    "maas-client",
    "cluster-controller",
    "machine-controller",
    "data-controller",
    "remediation-controller",
    "webhook-server",
];

/// The kinds of a rendering that decide what a binary may do in the API server.
pub const ACCESS_KINDS: [&str; 8] = [
    "Namespace",
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
];

/// The documents `kubectl kustomize <dir>` renders (empty ones skipped).
pub fn render_kustomization(dir: &Path) -> Result<Vec<Value>> {
    let out = Command::new(kubectl())
        .arg("kustomize")
        .arg(dir)
        .output()
        .map_err(Error::io(format!(
            "running kubectl kustomize {}",
            dir.display()
        )))?;
    if !out.status.success() {
        return Err(Error::Command {
            what: format!("kubectl kustomize {}", dir.display()),
            output: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let documents: Vec<Value> =
        serde_saphyr::from_multiple(&text).map_err(|e| Error::Manifest {
            name: dir.display().to_string(),
            message: e.to_string(),
        })?;
    Ok(documents.into_iter().filter(|d| !d.is_null()).collect())
}

/// `deploy/overlays/<overlay>`, rendered.
pub fn render_overlay(overlay: &str) -> Result<Vec<Value>> {
    render_kustomization(&repo_root().join("deploy/overlays").join(overlay))
}

/// What an overlay gives our binaries, taken from its rendering.
#[derive(Debug, Clone, Default)]
pub struct OverlayAccess {
    /// Its ServiceAccounts, RBAC, Namespaces and admission policies, as rendered.
    pub documents: Vec<Value>,
    /// The namespace each binary watches (by binary name), for those that watch one.
    pub watch_namespaces: BTreeMap<String, String>,
}

impl OverlayAccess {
    /// Takes the access documents and the watched namespaces out of a rendering.
    pub fn from_rendering(documents: &[Value]) -> Self {
        let mut access = Self::default();
        for document in documents {
            let kind = document["kind"].as_str().unwrap_or_default();
            if ACCESS_KINDS.contains(&kind) {
                access.documents.push(document.clone());
            }
            if kind != "Deployment" {
                continue;
            }
            let labels = &document["metadata"]["labels"];
            if labels["app.kubernetes.io/part-of"] != "capmaas" {
                continue;
            }
            let Some(binary) = labels["app.kubernetes.io/name"].as_str() else {
                continue;
            };
            let containers = document["spec"]["template"]["spec"]["containers"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let watched = containers
                .iter()
                .filter(|c| c["name"] == "manager")
                .flat_map(|c| c["env"].as_array().cloned().unwrap_or_default())
                .find(|e| e["name"] == "CAPMAAS_WATCH_NAMESPACE")
                .and_then(|e| e["value"].as_str().map(str::to_owned))
                .filter(|ns| !ns.is_empty());
            if let Some(namespace) = watched {
                access.watch_namespaces.insert(binary.to_owned(), namespace);
            }
        }
        access
    }

    /// The namespaces the binaries watch, each once: they must exist before the RoleBindings
    /// that grant rights there (as `docs/install.md` has the operator create them).
    pub fn served_namespaces(&self) -> Vec<String> {
        let mut namespaces: Vec<String> = self.watch_namespaces.values().cloned().collect();
        namespaces.sort();
        namespaces.dedup();
        namespaces
    }
}

/// Where the access of our binaries comes from in a harness.
#[derive(Debug, Clone, Default)]
pub enum Access {
    /// `deploy/base`'s RBAC files and admission policies; every binary watches all namespaces.
    #[default]
    Base,
    /// An overlay's rendering.
    Overlay(OverlayAccess),
}

impl Access {
    /// `deploy/base`, or `deploy/overlays/<overlay>` rendered.
    pub fn of(overlay: Option<&str>) -> Result<Self> {
        Ok(match overlay {
            None => Self::Base,
            Some(overlay) => {
                Self::Overlay(OverlayAccess::from_rendering(&render_overlay(overlay)?))
            }
        })
    }

    /// The namespace `binary` watches, if it watches one.
    pub fn watch_namespace(&self, binary: &str) -> Option<&str> {
        match self {
            Self::Base => None,
            Self::Overlay(access) => access.watch_namespaces.get(binary).map(String::as_str),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(name: &str, env: &Value) -> Value {
        json!({
            "kind": "Deployment",
            "metadata": {"labels": {"app.kubernetes.io/part-of": "capmaas", "app.kubernetes.io/name": name}},
            "spec": {"template": {"spec": {"containers": [{"name": "manager", "env": env}]}}}
        })
    }

    #[test]
    fn the_watched_namespace_comes_from_the_manager_container() {
        let rendering = [
            deployment(
                "machine-controller",
                &json!([{"name": "CAPMAAS_WATCH_NAMESPACE", "value": "clusters"}]),
            ),
            deployment(
                "webhook-server",
                &json!([{"name": "RUST_LOG", "value": "info"}]),
            ),
            deployment(
                "data-controller",
                &json!([{"name": "CAPMAAS_WATCH_NAMESPACE", "value": ""}]),
            ),
            json!({"kind": "RoleBinding", "metadata": {"name": "x"}}),
            json!({"kind": "Service", "metadata": {"name": "y"}}),
        ];
        let access = OverlayAccess::from_rendering(&rendering);
        assert_eq!(
            access.watch_namespaces,
            BTreeMap::from([("machine-controller".to_owned(), "clusters".to_owned())])
        );
        assert_eq!(access.served_namespaces(), ["clusters"]);
        assert_eq!(access.documents.len(), 1);
    }
}
