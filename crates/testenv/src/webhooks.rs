//! Admission webhooks served by a local process: serving certificates for it, and
//! webhook configurations rewritten to point at `https://127.0.0.1:<port>`.

use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use kube::api::{Api, PostParams};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::pki::{Authority, CertPair};
use crate::ports::free_port;

/// Where a local webhook server should listen and the certificate it should serve.
#[derive(Debug, Clone)]
pub struct WebhookServing {
    /// Loopback port chosen for the webhook server.
    pub port: u16,
    /// Serving certificate and key for `localhost` / `127.0.0.1`.
    pub serving: CertPair,
    /// The CA that signed `serving`; placed in every `caBundle`.
    pub ca_pem: String,
}

impl WebhookServing {
    /// A fresh CA, serving certificate and free port.
    pub fn generate() -> Result<Self> {
        let ca = Authority::new("capmaas-testenv-webhook-ca")?;
        Ok(Self {
            port: free_port()?,
            serving: ca.serving_cert()?,
            ca_pem: ca.cert_pem().to_owned(),
        })
    }

    /// `https://127.0.0.1:<port>`.
    pub fn base_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// Writes the serving pair as `tls.crt` and `tls.key` into `dir` (created if needed), the
    /// layout of a mounted `kubernetes.io/tls` Secret; returns `dir`.
    pub fn write_files(&self, dir: &std::path::Path) -> Result<std::path::PathBuf> {
        std::fs::create_dir_all(dir).map_err(Error::io(format!("creating {}", dir.display())))?;
        std::fs::write(dir.join("tls.crt"), &self.serving.cert_pem)
            .map_err(Error::io("writing tls.crt"))?;
        std::fs::write(dir.join("tls.key"), &self.serving.key_pem)
            .map_err(Error::io("writing tls.key"))?;
        Ok(dir.to_path_buf())
    }
}

/// Points a webhook client config at `base_url` + its service path, with `ca_pem`.
fn rewrite(config: &mut WebhookClientConfig, base_url: &str, ca_pem: &str) {
    let path = config
        .service
        .as_ref()
        .and_then(|s| s.path.clone())
        .or_else(|| {
            config.url.as_ref().and_then(|u| {
                u.find("://")
                    .and_then(|i| u[i + 3..].find('/').map(|j| u[i + 3 + j..].to_owned()))
            })
        })
        .unwrap_or_default();
    config.service = None;
    config.url = Some(format!("{}{}", base_url.trim_end_matches('/'), path));
    config.ca_bundle = Some(ByteString(ca_pem.as_bytes().to_vec()));
}

/// Creates (or replaces) the given Mutating/ValidatingWebhookConfigurations with every
/// webhook pointed at `base_url`, then waits until each exists.
pub(crate) async fn register(
    client: &kube::Client,
    configurations: &[Value],
    base_url: &str,
    ca_pem: &str,
) -> Result<()> {
    for doc in configurations {
        match doc.get("kind").and_then(Value::as_str) {
            Some("MutatingWebhookConfiguration") => {
                let mut config: MutatingWebhookConfiguration = decode(doc)?;
                for webhook in config.webhooks.iter_mut().flatten() {
                    rewrite(&mut webhook.client_config, base_url, ca_pem);
                }
                apply(Api::all(client.clone()), config).await?;
            }
            Some("ValidatingWebhookConfiguration") => {
                let mut config: ValidatingWebhookConfiguration = decode(doc)?;
                for webhook in config.webhooks.iter_mut().flatten() {
                    rewrite(&mut webhook.client_config, base_url, ca_pem);
                }
                apply(Api::all(client.clone()), config).await?;
            }
            other => {
                return Err(Error::Manifest {
                    path: "<webhook configuration>".into(),
                    message: format!("expected a webhook configuration, got kind {other:?}"),
                });
            }
        }
    }
    Ok(())
}

fn decode<T: serde::de::DeserializeOwned>(doc: &Value) -> Result<T> {
    serde_json::from_value(doc.clone()).map_err(|e| Error::Manifest {
        path: "<webhook configuration>".into(),
        message: e.to_string(),
    })
}

async fn apply<K>(api: Api<K>, object: K) -> Result<()>
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let name = object.meta().name.clone().unwrap_or_default();
    match api.create(&PostParams::default(), &object).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {
            let existing = api
                .get(&name)
                .await
                .map_err(Error::kube(format!("reading {name}")))?;
            let mut updated = object.clone();
            updated
                .meta_mut()
                .resource_version
                .clone_from(&existing.meta().resource_version);
            api.replace(&name, &PostParams::default(), &updated)
                .await
                .map_err(Error::kube(format!("updating {name}")))?;
        }
        Err(e) => return Err(Error::kube(format!("creating {name}"))(e)),
    }
    for _ in 0..100 {
        if api
            .get_opt(&name)
            .await
            .map_err(Error::kube(format!("reading {name}")))?
            .is_some()
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(Error::Timeout {
        what: format!("webhook configuration {name}"),
        seconds: 10,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::admissionregistration::v1::ServiceReference;

    #[test]
    fn service_reference_becomes_a_local_url() {
        let mut config = WebhookClientConfig {
            service: Some(ServiceReference {
                name: "webhook-service".into(),
                namespace: "system".into(),
                path: Some("/validate-maasmachine".into()),
                port: None,
            }),
            ..WebhookClientConfig::default()
        };
        rewrite(&mut config, "https://127.0.0.1:9443/", "CA");
        assert_eq!(
            config.url.as_deref(),
            Some("https://127.0.0.1:9443/validate-maasmachine")
        );
        assert!(config.service.is_none());
        assert_eq!(config.ca_bundle, Some(ByteString(b"CA".to_vec())));
    }

    #[test]
    fn url_keeps_its_path() {
        let mut config = WebhookClientConfig {
            url: Some("https://webhook.example:8443/mutate".into()),
            ..WebhookClientConfig::default()
        };
        rewrite(&mut config, "https://127.0.0.1:1234", "CA");
        assert_eq!(config.url.as_deref(), Some("https://127.0.0.1:1234/mutate"));
    }
}
