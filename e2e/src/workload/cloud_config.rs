//! What a server's first boot reads from the user data MAAS deployed: the files of a kubeadm
//! bootstrap provider's cloud-config (`write_files`) and which kubeadm command it runs.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde::Deserialize;

/// What the cloud-config asks kubeadm to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `kubeadm init`: the first control-plane node.
    Init,
    /// `kubeadm join` with a `controlPlane` section: another control-plane node.
    ControlPlaneJoin,
    /// `kubeadm join` without one: a worker.
    WorkerJoin,
}

/// The parts of a kubeadm cloud-config that a first boot acts on.
#[derive(Debug, Clone)]
pub struct BootData {
    /// `write_files`, by path, decoded.
    pub files: BTreeMap<String, Vec<u8>>,
    /// The kubeadm command's role.
    pub role: Role,
    /// The kubeadm configuration file the command names, its YAML documents as JSON.
    pub kubeadm_config: Vec<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
struct CloudConfig {
    #[serde(default)]
    write_files: Vec<WriteFile>,
    #[serde(default)]
    runcmd: Vec<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
struct WriteFile {
    path: String,
    #[serde(default)]
    content: String,
    #[serde(default)]
    encoding: Option<String>,
}

impl BootData {
    /// Parses `user_data`, rendering cloud-init's `{{ v1.local_hostname }}` as `hostname` (CABPK
    /// marks its cloud-config `## template: jinja`). An error names what is missing.
    pub fn parse(user_data: &str, hostname: &str) -> Result<Self, String> {
        let rendered = user_data.replace("{{ v1.local_hostname }}", hostname);
        let config: CloudConfig = serde_saphyr::from_str(&rendered)
            .map_err(|e| format!("user data is not a cloud-config: {e}"))?;
        let mut files = BTreeMap::new();
        for file in config.write_files {
            let bytes = match file.encoding.as_deref() {
                None | Some("" | "text/plain") => file.content.into_bytes(),
                Some("b64" | "base64") => base64::engine::general_purpose::STANDARD
                    .decode(file.content.trim())
                    .map_err(|e| format!("{}: bad base64: {e}", file.path))?,
                Some(other) => return Err(format!("{}: encoding {other} not handled", file.path)),
            };
            files.insert(file.path, bytes);
        }
        let command = config
            .runcmd
            .iter()
            .filter_map(|c| match c {
                serde_json::Value::String(s) => Some(s.clone()),
                serde_json::Value::Array(words) => Some(
                    words
                        .iter()
                        .filter_map(|w| w.as_str())
                        .collect::<Vec<_>>()
                        .join(" "),
                ),
                _ => None,
            })
            .find(|c| c.contains("kubeadm init") || c.contains("kubeadm join"))
            .ok_or("runcmd runs neither kubeadm init nor kubeadm join")?;
        let config_path = command
            .split_whitespace()
            .skip_while(|w| *w != "--config")
            .nth(1)
            .ok_or_else(|| format!("`{command}` names no --config file"))?;
        let config_text = files
            .get(config_path)
            .ok_or_else(|| format!("{config_path} is not among write_files"))?;
        let config_text = String::from_utf8_lossy(config_text);
        let kubeadm_config: Vec<serde_json::Value> = serde_saphyr::from_multiple(&config_text)
            .map_err(|e| format!("{config_path}: {e}"))?
            .into_iter()
            .filter(|d: &serde_json::Value| !d.is_null())
            .collect();
        let role = if command.contains("kubeadm init") {
            Role::Init
        } else if kubeadm_config
            .iter()
            .any(|d| d["kind"] == "JoinConfiguration" && d.get("controlPlane").is_some())
        {
            Role::ControlPlaneJoin
        } else {
            Role::WorkerJoin
        };
        Ok(Self {
            files,
            role,
            kubeadm_config,
        })
    }

    /// The kubeadm document of `kind`.
    pub fn document(&self, kind: &str) -> Option<&serde_json::Value> {
        self.kubeadm_config.iter().find(|d| d["kind"] == kind)
    }

    /// A written file as text.
    pub fn text(&self, path: &str) -> Result<String, String> {
        self.files
            .get(path)
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .ok_or_else(|| format!("{path} is not among write_files"))
    }

    /// The control-plane endpoint (`host:port`) the node serves or joins.
    pub fn endpoint(&self) -> Option<String> {
        let endpoint = match self.role {
            Role::Init => &self.document("ClusterConfiguration")?["controlPlaneEndpoint"],
            Role::ControlPlaneJoin | Role::WorkerJoin => {
                &self.document("JoinConfiguration")?["discovery"]["bootstrapToken"]["apiServerEndpoint"]
            }
        };
        endpoint
            .as_str()
            .filter(|e| !e.is_empty())
            .map(str::to_owned)
    }

    /// The node name kubeadm registers (`nodeRegistration.name`, else the hostname).
    pub fn node_name(&self, hostname: &str) -> String {
        let kind = match self.role {
            Role::Init => "InitConfiguration",
            Role::ControlPlaneJoin | Role::WorkerJoin => "JoinConfiguration",
        };
        self.document(kind)
            .and_then(|d| d["nodeRegistration"]["name"].as_str())
            .filter(|n| !n.is_empty())
            .unwrap_or(hostname)
            .to_owned()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const INIT: &str = "## template: jinja\n#cloud-config\n\nwrite_files:\n-   path: /etc/kubernetes/pki/ca.crt\n    owner: root:root\n    permissions: '0640'\n    content: |\n      CERT\n-   path: /etc/kubernetes/pki/sa.pub\n    encoding: base64\n    content: UFVC\n-   path: /run/kubeadm/kubeadm.yaml\n    content: |\n      ---\n      apiVersion: kubeadm.k8s.io/v1beta4\n      controlPlaneEndpoint: t.maas.domain:6443\n      kind: ClusterConfiguration\n      kubernetesVersion: v1.33.1\n      \n      ---\n      apiVersion: kubeadm.k8s.io/v1beta4\n      kind: InitConfiguration\n      nodeRegistration:\n        name: '{{ v1.local_hostname }}'\n      \nruncmd:\n  - \"swapoff -a\"\n  - 'kubeadm init --config /run/kubeadm/kubeadm.yaml  && echo success > /run/cluster-api/bootstrap-success.complete'\n";

    #[test]
    fn an_init_cloud_config_gives_its_files_role_and_configuration() {
        let boot = BootData::parse(INIT, "able-ant").unwrap();
        assert_eq!(boot.role, Role::Init);
        assert_eq!(boot.text("/etc/kubernetes/pki/ca.crt").unwrap(), "CERT\n");
        assert_eq!(boot.files["/etc/kubernetes/pki/sa.pub"], b"PUB");
        assert_eq!(
            boot.document("ClusterConfiguration").unwrap()["controlPlaneEndpoint"],
            "t.maas.domain:6443"
        );
        assert_eq!(boot.node_name("other"), "able-ant");
        assert_eq!(boot.endpoint().as_deref(), Some("t.maas.domain:6443"));
    }

    #[test]
    fn a_join_is_a_control_plane_join_only_with_a_control_plane_section() {
        let join = |control_plane: &str| {
            format!(
                "#cloud-config\nwrite_files:\n- path: /run/kubeadm/kubeadm-join-config.yaml\n  content: |\n    apiVersion: kubeadm.k8s.io/v1beta4\n    kind: JoinConfiguration\n{control_plane}    nodeRegistration:\n      name: n1\nruncmd:\n- kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml\n"
            )
        };
        let worker = BootData::parse(&join(""), "h").unwrap();
        assert_eq!(worker.role, Role::WorkerJoin);
        assert_eq!(worker.node_name("h"), "n1");
        let control_plane = BootData::parse(
            &join("    controlPlane:\n      localAPIEndpoint: {}\n"),
            "h",
        )
        .unwrap();
        assert_eq!(control_plane.role, Role::ControlPlaneJoin);
    }

    #[test]
    fn user_data_without_kubeadm_says_what_is_missing() {
        let error = BootData::parse("#cloud-config\nruncmd: [ls]\n", "h").unwrap_err();
        assert!(
            error.contains("neither kubeadm init nor kubeadm join"),
            "{error}"
        );
        let error = BootData::parse("#cloud-config\nruncmd: ['kubeadm init --config /x']\n", "h")
            .unwrap_err();
        assert!(error.contains("/x is not among write_files"), "{error}");
    }
}
