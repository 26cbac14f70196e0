//! Kubeconfig documents for the admin and for extra users, built with kube's own types.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use kube::config::{
    AuthInfo, Cluster, Context, KubeConfigOptions, Kubeconfig, NamedAuthInfo, NamedCluster,
    NamedContext,
};

use crate::error::{Error, Result};
use crate::pki::CertPair;

/// The name used for the cluster, user and context entries (as envtest does).
pub(crate) const CONTEXT_NAME: &str = "capmaas-testenv";

/// A kubeconfig for `server`, trusting `ca_pem` and authenticating with `client`.
pub(crate) fn kubeconfig(server: &str, ca_pem: &str, client: &CertPair) -> Kubeconfig {
    kubeconfig_as(
        server,
        ca_pem,
        AuthInfo {
            client_certificate_data: Some(STANDARD.encode(&client.cert_pem)),
            client_key_data: Some(STANDARD.encode(&client.key_pem).into()),
            ..AuthInfo::default()
        },
    )
}

/// A kubeconfig for `server`, trusting `ca_pem` and authenticating by bearer `token` (a
/// ServiceAccount token).
pub(crate) fn token_kubeconfig(server: &str, ca_pem: &str, token: &str) -> Kubeconfig {
    kubeconfig_as(
        server,
        ca_pem,
        AuthInfo {
            token: Some(token.to_owned().into()),
            ..AuthInfo::default()
        },
    )
}

fn kubeconfig_as(server: &str, ca_pem: &str, user: AuthInfo) -> Kubeconfig {
    Kubeconfig {
        api_version: Some("v1".into()),
        kind: Some("Config".into()),
        clusters: vec![NamedCluster {
            name: CONTEXT_NAME.into(),
            cluster: Some(Cluster {
                server: Some(server.into()),
                certificate_authority_data: Some(STANDARD.encode(ca_pem)),
                ..Cluster::default()
            }),
            other: std::collections::BTreeMap::default(),
        }],
        auth_infos: vec![NamedAuthInfo {
            name: CONTEXT_NAME.into(),
            auth_info: Some(user),
            other: std::collections::BTreeMap::default(),
        }],
        contexts: vec![NamedContext {
            name: CONTEXT_NAME.into(),
            context: Some(Context {
                cluster: CONTEXT_NAME.into(),
                user: Some(CONTEXT_NAME.into()),
                ..Context::default()
            }),
            other: std::collections::BTreeMap::default(),
        }],
        current_context: Some(CONTEXT_NAME.into()),
        ..Kubeconfig::default()
    }
}

/// The kubeconfig as YAML, for Go tools such as kubectl and the CAPI managers.
pub(crate) fn to_yaml(config: &Kubeconfig) -> Result<String> {
    serde_saphyr::to_string(config).map_err(|e| Error::Kubeconfig(e.to_string()))
}

/// The client configuration the kubeconfig describes.
pub(crate) async fn client_config(config: Kubeconfig) -> Result<kube::Config> {
    kube::Config::from_custom_kubeconfig(config, &KubeConfigOptions::default())
        .await
        .map_err(|e| Error::Kubeconfig(e.to_string()))
}

/// A kube client built from the kubeconfig.
pub(crate) async fn client(config: Kubeconfig) -> Result<kube::Client> {
    kube::Client::try_from(client_config(config).await?).map_err(Error::kube("building a client"))
}

/// `config` with its user authenticating through an exec credential plugin: a script written
/// to `dir` that creates the returned marker file when run. For tests proving that a guard
/// refuses such kubeconfigs and never runs the plugin.
pub(crate) fn with_exec_plugin(
    mut config: Kubeconfig,
    dir: &std::path::Path,
) -> Result<(Kubeconfig, std::path::PathBuf)> {
    use std::os::unix::fs::PermissionsExt as _;
    let marker = dir.join("exec-plugin-ran");
    let plugin = dir.join("exec-plugin.sh");
    let credential = r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"t"}}"#;
    let script = format!(
        "#!/bin/sh\ntouch '{}'\necho '{credential}'\n",
        marker.display()
    );
    std::fs::write(&plugin, script).map_err(Error::io("writing the exec plugin"))?;
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755))
        .map_err(Error::io("making the exec plugin executable"))?;
    let exec = serde_json::json!({
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": plugin.display().to_string(),
        "interactiveMode": "Never"
    });
    let exec = serde_json::from_value(exec).map_err(|e| Error::Kubeconfig(e.to_string()))?;
    if let Some(user) = config.auth_infos.first_mut() {
        user.auth_info = Some(AuthInfo {
            exec: Some(exec),
            ..AuthInfo::default()
        });
    }
    Ok((config, marker))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pki::Authority;

    #[tokio::test]
    async fn yaml_round_trips_and_builds_a_client() {
        let ca = Authority::new("ca").unwrap();
        let admin = ca.client_cert("admin", &["system:masters"]).unwrap();
        let config = kubeconfig("https://127.0.0.1:6443", ca.cert_pem(), &admin);
        let yaml = to_yaml(&config).unwrap();
        assert!(yaml.contains("https://127.0.0.1:6443"));
        let parsed = Kubeconfig::from_yaml(&yaml).unwrap();
        assert_eq!(parsed.current_context.as_deref(), Some(CONTEXT_NAME));
        client(parsed).await.unwrap();
    }
}
