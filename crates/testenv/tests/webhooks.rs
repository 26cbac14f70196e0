//! Admission webhooks served by a local process are called by the real API server.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use bytes::Bytes;
use capmaas_testenv::{TestEnv, WebhookServing};
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::json;

/// Denies ConfigMaps labelled `deny=yes`, naming the field, like our webhook-server will.
fn review(body: &[u8]) -> serde_json::Value {
    let review: AdmissionReview<DynamicObject> = serde_json::from_slice(body).unwrap();
    let request: AdmissionRequest<DynamicObject> = review.try_into().unwrap();
    let denied = request
        .object
        .as_ref()
        .and_then(|o| o.metadata.labels.as_ref())
        .is_some_and(|l| l.get("deny").map(String::as_str) == Some("yes"));
    let response = AdmissionResponse::from(&request);
    let response = if denied {
        response.deny("metadata.labels.deny: must not be \"yes\"")
    } else {
        response
    };
    serde_json::to_value(response.into_review()).unwrap()
}

async fn serve(serving: WebhookServing) {
    let certs = vec![CertificateDer::from_pem_slice(serving.serving.cert_pem.as_bytes()).unwrap()];
    let key = PrivateKeyDer::from_pem_slice(serving.serving.key_pem.as_bytes()).unwrap();
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", serving.port))
        .await
        .unwrap();
    loop {
        let (stream, _) = listener.accept().await.unwrap();
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(stream).await else {
                return;
            };
            let service = service_fn(|req: hyper::Request<hyper::body::Incoming>| async move {
                let body = req.into_body().collect().await?.to_bytes();
                let answer = serde_json::to_vec(&review(&body)).unwrap();
                Ok::<_, hyper::Error>(
                    hyper::Response::builder()
                        .header("content-type", "application/json")
                        .body(Full::new(Bytes::from(answer)))
                        .unwrap(),
                )
            });
            let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(tls), service)
                .await;
        });
    }
}

#[tokio::test]
async fn a_local_validating_webhook_is_called_by_the_api_server() {
    let env = TestEnv::api_server_only().await.unwrap();
    let serving = WebhookServing::generate().unwrap();
    tokio::spawn(serve(serving.clone()));

    let configuration = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "test-validating"},
        "webhooks": [{
            "name": "configmaps.test.capmaas.dev",
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Fail",
            "clientConfig": {"service": {"name": "webhook", "namespace": "system", "path": "/validate-configmap"}},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}],
            "objectSelector": {"matchExpressions": [{"key": "webhook-test", "operator": "Exists"}]}
        }]
    });
    env.register_webhooks(&[configuration], &serving)
        .await
        .unwrap();

    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let allowed: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "ok", "labels": {"webhook-test": "1"}}}),
    )
    .unwrap();
    // The configuration may take a moment to reach the API server's webhook cache.
    let mut denied_message = None;
    for _ in 0..50 {
        let denied: ConfigMap = serde_json::from_value(
            json!({"metadata": {"name": "no", "labels": {"webhook-test": "1", "deny": "yes"}}}),
        )
        .unwrap();
        match api.create(&PostParams::default(), &denied).await {
            Err(kube::Error::Api(status)) => {
                denied_message = Some(status.message);
                break;
            }
            Ok(_) => {
                api.delete("no", &kube::api::DeleteParams::default())
                    .await
                    .unwrap();
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
            Err(other) => panic!("unexpected error {other:?}"),
        }
    }
    let message = denied_message.expect("the webhook denied the object");
    assert!(message.contains("metadata.labels.deny"), "{message}");
    api.create(&PostParams::default(), &allowed).await.unwrap();
}
