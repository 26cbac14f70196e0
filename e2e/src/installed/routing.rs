//! What the management cluster's infrastructure would do for the installed providers, done
//! here by the test: cert-manager's issuing (a Secret for each Certificate, signed as its
//! Issuer says, `crate::cert_manager`; each webhook client given the CA of the Certificate it
//! names in `cert-manager.io/inject-ca-from`, as cainjector would), and the Service routing a pod
//! network would give (each admission and conversion webhook that names a Service pointed at
//! the local port of the process behind it, over `https://127.0.0.1`, which the issued
//! certificates also name).

use std::collections::BTreeMap;

use base64::Engine as _;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use super::PROVIDER_LABEL;
use super::launch::Launch;
use crate::cert_manager::{CertManager, Issued as IssuedPair};
use crate::error::{Error, Result};

/// Field manager of what this module writes.
const MANAGER: &str = "e2e-cluster-infrastructure";

/// The `ca.crt` of every issued Certificate, by `namespace/name` (what the CA injector reads
/// for `cert-manager.io/inject-ca-from`).
#[derive(Debug, Clone, Default)]
pub struct Issued {
    /// PEM of each Certificate's CA.
    pub ca_by_certificate: BTreeMap<String, String>,
}

impl Issued {
    /// The `caBundle` for an object annotated `inject-ca-from` (or, without the annotation, the
    /// one CA every Certificate shares, if they do).
    fn ca_for(&self, inject_ca_from: Option<&str>) -> Option<&String> {
        if let Some(from) = inject_ca_from {
            return self.ca_by_certificate.get(from);
        }
        let mut all = self.ca_by_certificate.values();
        let first = all.next()?;
        all.all(|ca| ca == first).then_some(first)
    }
}

/// The cert-manager kinds, as the API server serves them.
fn cert_manager_resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: "cert-manager.io".into(),
        version: "v1".into(),
        api_version: "cert-manager.io/v1".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// Writes the Secret of every cert-manager Certificate in the cluster, as cert-manager would
/// from its Issuer (`crate::cert_manager`): `tls.crt`, `tls.key` and `ca.crt`, serving
/// certificates also naming `localhost` and `127.0.0.1` (where the webhooks are routed).
pub async fn issue_certificates(client: &kube::Client) -> Result<Issued> {
    let mut documents = Vec::new();
    for (kind, plural) in [("Issuer", "issuers"), ("Certificate", "certificates")] {
        let listed =
            Api::<DynamicObject>::all_with(client.clone(), &cert_manager_resource(kind, plural))
                .list(&ListParams::default())
                .await
                .map_err(Error::kube(format!("listing the {plural}")))?;
        for mut object in listed.items {
            object.types = Some(kube::core::TypeMeta {
                api_version: "cert-manager.io/v1".into(),
                kind: kind.into(),
            });
            documents.push(serde_json::to_value(&object).map_err(|e| Error::Manifest {
                name: kind.to_owned(),
                message: e.to_string(),
            })?);
        }
    }
    let mut cert_manager = CertManager::from_documents(&documents).serving_locally();
    let mut issued = Issued::default();
    for (namespace, name) in cert_manager.certificates() {
        // A CA is issued once, when the first certificate it signs needs it.
        let pair = match cert_manager.issued(&namespace, &name) {
            Some(pair) => pair.clone(),
            None => cert_manager.issue(&namespace, &name)?,
        };
        write_secret(client, &documents, &namespace, &name, &pair).await?;
        issued
            .ca_by_certificate
            .insert(format!("{namespace}/{name}"), pair.ca_pem);
    }
    Ok(issued)
}

async fn write_secret(
    client: &kube::Client,
    documents: &[Value],
    namespace: &str,
    name: &str,
    pair: &IssuedPair,
) -> Result<()> {
    let Some(secret_name) = documents
        .iter()
        .find(|d| {
            d["kind"] == "Certificate"
                && d["metadata"]["namespace"] == namespace
                && d["metadata"]["name"] == name
        })
        .and_then(|d| d["spec"]["secretName"].as_str())
    else {
        return Ok(());
    };
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": secret_name, "namespace": namespace,
                     "annotations": {"cert-manager.io/certificate-name": name}},
        "type": "kubernetes.io/tls",
        "stringData": {"tls.crt": pair.cert_pem, "tls.key": pair.key_pem, "ca.crt": pair.ca_pem}
    }))
    .map_err(|e| Error::Manifest {
        name: secret_name.to_owned(),
        message: e.to_string(),
    })?;
    Api::<Secret>::namespaced(client.clone(), namespace)
        .patch(
            secret_name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&secret),
        )
        .await
        .map_err(Error::kube(format!(
            "writing Secret {namespace}/{secret_name}"
        )))?;
    Ok(())
}

/// `(namespace, service, port)` → the local port of the process behind it.
type Routes = BTreeMap<(String, String, i32), u16>;

/// The local port behind each port of each provider Service: the Deployment whose pod labels
/// match the Service's selector, its container port named (or numbered) by `targetPort`.
pub fn routes(services: &[Service], deployments: &[Deployment], launches: &[Launch]) -> Routes {
    let mut routes = Routes::new();
    for service in services {
        let namespace = service.metadata.namespace.clone().unwrap_or_default();
        let name = service.metadata.name.clone().unwrap_or_default();
        let Some(spec) = &service.spec else { continue };
        let Some(selector) = spec.selector.as_ref().filter(|s| !s.is_empty()) else {
            continue;
        };
        let backend = deployments.iter().zip(launches).find(|(d, _)| {
            d.metadata.namespace.as_deref() == Some(namespace.as_str())
                && d.spec
                    .as_ref()
                    .and_then(|s| s.template.metadata.as_ref())
                    .and_then(|m| m.labels.as_ref())
                    .is_some_and(|labels| selector.iter().all(|(k, v)| labels.get(k) == Some(v)))
        });
        let Some((deployment, launch)) = backend else {
            continue;
        };
        let container_ports = deployment
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .and_then(|p| p.containers.first())
            .and_then(|c| c.ports.clone())
            .unwrap_or_default();
        for port in spec.ports.iter().flatten() {
            let target = port
                .target_port
                .clone()
                .unwrap_or(IntOrString::Int(port.port));
            let local = match target {
                IntOrString::String(named) => launch.ports.get(&named).copied(),
                IntOrString::Int(number) => container_ports
                    .iter()
                    .find(|p| p.container_port == number)
                    .map(|p| p.name.clone().unwrap_or_else(|| number.to_string()))
                    .and_then(|n| launch.ports.get(&n).copied()),
            };
            if let Some(local) = local {
                routes.insert((namespace.clone(), name.clone(), port.port), local);
            }
        }
    }
    routes
}

/// The local URL for a webhook client config (JSON) that names a routed `service`.
fn url_for(routes: &Routes, client_config: &Value) -> Option<String> {
    let service = client_config.get("service")?;
    let namespace = service["namespace"].as_str()?.to_owned();
    let name = service["name"].as_str()?.to_owned();
    let port = service["port"]
        .as_i64()
        .and_then(|p| i32::try_from(p).ok())
        .unwrap_or(443);
    let local = routes.get(&(namespace, name, port))?;
    Some(format!(
        "https://127.0.0.1:{local}{}",
        service["path"].as_str().unwrap_or("")
    ))
}

/// The kinds whose objects hold webhook client configs, and where: admission webhooks in
/// `webhooks[*].clientConfig`, CRD conversion in `spec.conversion.webhook.clientConfig`.
fn webhook_clients() -> [(ApiResource, Option<&'static str>); 3] {
    let resource = |group: &str, kind: &str, plural: &str| ApiResource {
        group: group.into(),
        version: "v1".into(),
        api_version: format!("{group}/v1"),
        kind: kind.into(),
        plural: plural.into(),
    };
    [
        (
            resource(
                "admissionregistration.k8s.io",
                "MutatingWebhookConfiguration",
                "mutatingwebhookconfigurations",
            ),
            None,
        ),
        (
            resource(
                "admissionregistration.k8s.io",
                "ValidatingWebhookConfiguration",
                "validatingwebhookconfigurations",
            ),
            None,
        ),
        (
            resource(
                "apiextensions.k8s.io",
                "CustomResourceDefinition",
                "customresourcedefinitions",
            ),
            Some("/spec/conversion/webhook/clientConfig"),
        ),
    ]
}

/// Points every admission webhook and CRD conversion webhook naming a provider Service at the
/// process behind it, with the issuing CA as `caBundle`.
pub async fn route_webhooks(
    client: &kube::Client,
    deployments: &[Deployment],
    launches: &[Launch],
    issued: &Issued,
) -> Result<()> {
    let services = Api::<Service>::all(client.clone())
        .list(&ListParams::default().labels(PROVIDER_LABEL))
        .await
        .map_err(Error::kube("listing the provider Services"))?
        .items;
    let routes = routes(&services, deployments, launches);
    let point_at_process = |client_config: &mut Value, ca: Option<&String>| -> bool {
        let Some(url) = url_for(&routes, client_config) else {
            return false;
        };
        client_config["url"] = json!(url);
        if let Some(ca) = ca {
            client_config["caBundle"] = json!(base64::engine::general_purpose::STANDARD.encode(ca));
        }
        if let Some(map) = client_config.as_object_mut() {
            map.remove("service");
        }
        true
    };
    for (resource, pointer) in webhook_clients() {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let objects = api
            .list(&ListParams::default())
            .await
            .map_err(Error::kube(format!("listing {}", resource.plural)))?;
        for mut object in objects.items {
            let ca = issued.ca_for(
                object
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get("cert-manager.io/inject-ca-from"))
                    .map(String::as_str),
            );
            let changed = match pointer {
                Some(pointer) => object
                    .data
                    .pointer_mut(pointer)
                    .is_some_and(|c| point_at_process(c, ca)),
                None => object.data["webhooks"]
                    .as_array_mut()
                    .into_iter()
                    .flatten()
                    .filter_map(|w| w.get_mut("clientConfig"))
                    .map(|c| point_at_process(c, ca))
                    .fold(false, |any, one| any | one),
            };
            if changed {
                let name = object.metadata.name.clone().unwrap_or_default();
                api.replace(&name, &kube::api::PostParams::default(), &object)
                    .await
                    .map_err(Error::kube(format!("routing the webhooks of {name}")))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn launch_with_ports(ports: &[(&str, u16)]) -> Launch {
        Launch {
            deployment: "ns/d".into(),
            image: String::new(),
            args: Vec::new(),
            env: Vec::new(),
            files: Vec::new(),
            mounts: Vec::new(),
            service_account: "default".into(),
            ports: ports.iter().map(|(n, p)| ((*n).to_owned(), *p)).collect(),
            readiness_url: None,
        }
    }

    #[test]
    fn a_service_routes_to_the_port_of_the_deployment_its_selector_matches() {
        let deployment: Deployment = serde_json::from_value(json!({
            "metadata": {"name": "capi-controller-manager", "namespace": "capi-system"},
            "spec": {"selector": {}, "template": {
                "metadata": {"labels": {"cluster.x-k8s.io/provider": "cluster-api", "control-plane": "controller-manager"}},
                "spec": {"containers": [{"name": "manager", "ports": [{"name": "webhook-server", "containerPort": 9443}]}]}
            }}
        }))
        .unwrap();
        let other: Deployment = serde_json::from_value(json!({
            "metadata": {"name": "other", "namespace": "capi-system"},
            "spec": {"selector": {}, "template": {"metadata": {"labels": {"app": "other"}}, "spec": {"containers": []}}}
        }))
        .unwrap();
        let service: Service = serde_json::from_value(json!({
            "metadata": {"name": "capi-webhook-service", "namespace": "capi-system"},
            "spec": {"selector": {"cluster.x-k8s.io/provider": "cluster-api"},
                     "ports": [{"port": 443, "targetPort": "webhook-server"}, {"port": 8443, "targetPort": 9443}]}
        }))
        .unwrap();
        let routes = routes(
            &[service],
            &[other, deployment],
            &[
                launch_with_ports(&[]),
                launch_with_ports(&[("webhook-server", 40123)]),
            ],
        );
        let key = |port| {
            (
                "capi-system".to_owned(),
                "capi-webhook-service".to_owned(),
                port,
            )
        };
        assert_eq!(routes.get(&key(443)), Some(&40123));
        assert_eq!(
            routes.get(&key(8443)),
            Some(&40123),
            "a numbered target port"
        );
        let config = json!({"service": {"namespace": "capi-system", "name": "capi-webhook-service", "path": "/convert"}});
        assert_eq!(
            url_for(&routes, &config).as_deref(),
            Some("https://127.0.0.1:40123/convert")
        );
        let elsewhere = json!({"service": {"namespace": "x", "name": "capi-webhook-service"}});
        assert_eq!(url_for(&routes, &elsewhere), None);
    }
}
