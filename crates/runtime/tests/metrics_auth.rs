//! Secure metrics against a real kube-apiserver: `/metrics` over HTTPS with a mounted
//! certificate, refused without a token or with one whose user may not read it, served to a
//! ServiceAccount bound to a ClusterRole allowing `get` on the non-resource URL `/metrics` (the
//! role a Prometheus holds for Cluster API's managers).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use capmaas_runtime::server::{AdminServer, MetricsSecurity};
use capmaas_runtime::{Health, ListenAddr, MetricsRegistry, ReconcileMetrics};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::Api;
use kube::api::PostParams;
use tokio_util::sync::CancellationToken;

fn object<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
    serde_json::from_value(value).unwrap()
}

#[tokio::test]
async fn metrics_are_served_over_https_to_authorized_scrapers_only() {
    capmaas_runtime::install_crypto_provider();
    let env = capmaas_testenv::TestEnv::api_server_only().await.unwrap();
    let client = env.client();
    let ns = env.create_namespace("metrics-auth").await.unwrap();
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &ns);
    for name in ["scraper", "stranger"] {
        accounts
            .create(
                &PostParams::default(),
                &object(serde_json::json!({"metadata": {"name": name}})),
            )
            .await
            .unwrap();
    }
    Api::<ClusterRole>::all(client.clone())
        .create(
            &PostParams::default(),
            &object(serde_json::json!({
                "metadata": {"name": "test-metrics-reader"},
                "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
            })),
        )
        .await
        .unwrap();
    Api::<ClusterRoleBinding>::all(client.clone())
        .create(
            &PostParams::default(),
            &object(serde_json::json!({
                "metadata": {"name": "test-metrics-reader"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "test-metrics-reader"},
                "subjects": [{"kind": "ServiceAccount", "name": "scraper", "namespace": ns}]
            })),
        )
        .await
        .unwrap();

    // The certificate as cert-manager mounts it; the scraper trusts its CA (here itself).
    let dir = tempfile::tempdir().unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    std::fs::write(dir.path().join("tls.crt"), cert.pem()).unwrap();
    std::fs::write(dir.path().join("tls.key"), key.serialize_pem()).unwrap();

    let registry = MetricsRegistry::new();
    registry
        .register(ReconcileMetrics::register)
        .controller("secured")
        .reconcile_succeeded();
    let security = MetricsSecurity::new(Some(dir.path()), client.clone()).unwrap();
    let loopback: ListenAddr = "127.0.0.1:0".parse().unwrap();
    let server = AdminServer::bind(
        &loopback,
        &loopback,
        registry,
        Health::new(),
        Some(security),
    )
    .await
    .unwrap();
    assert!(server.metrics_secure());
    let port = server.metrics_addr().unwrap().port();
    let health_port = server.health_addr().unwrap().port();
    let stop = CancellationToken::new();
    let serving = tokio::spawn(server.serve(stop.clone()));

    let https = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(cert.pem().as_bytes()).unwrap())
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let url = format!("https://localhost:{port}/metrics");
    let scrape = |token: Option<String>| {
        let mut request = https.get(&url);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        async move {
            let response = request.send().await.unwrap();
            (response.status().as_u16(), response.text().await.unwrap())
        }
    };

    let (status, body) = scrape(None).await;
    assert_eq!(status, 401, "no token: {body}");
    let (status, _) = scrape(Some("not-a-token".into())).await;
    assert_eq!(status, 401, "a token the API server does not know");
    let stranger = env.service_account_token(&ns, "stranger", 1).await.unwrap();
    let (status, body) = scrape(Some(stranger)).await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains("stranger"),
        "the refusal names the user: {body}"
    );
    let scraper = env.service_account_token(&ns, "scraper", 1).await.unwrap();
    let (status, body) = scrape(Some(scraper.clone())).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains(r#"capmaas_reconcile_total{controller="secured",result="success"} 1"#),
        "{body}"
    );
    // Cached: served again at once.
    assert_eq!(scrape(Some(scraper)).await.0, 200);

    // Plain HTTP gets nothing from the HTTPS port; health stays plain for the kubelet.
    let plain = reqwest::Client::new();
    assert!(
        !plain
            .get(format!("http://127.0.0.1:{port}/metrics"))
            .send()
            .await
            .is_ok_and(|r| r.status() == 200)
    );
    let health = plain
        .get(format!("http://127.0.0.1:{health_port}/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);

    stop.cancel();
    serving.await.unwrap();
}

#[tokio::test]
async fn secure_metrics_and_health_cannot_share_a_port() {
    capmaas_runtime::install_crypto_provider();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let shared: ListenAddr = format!("127.0.0.1:{port}").parse().unwrap();
    // Never asked: the refusal comes before any scrape.
    let client =
        kube::Client::try_from(kube::Config::new("https://127.0.0.1:1".parse().unwrap())).unwrap();
    let security = MetricsSecurity::new(None, client).unwrap();
    let err = AdminServer::bind(
        &shared,
        &shared,
        MetricsRegistry::new(),
        Health::new(),
        Some(security),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("--health-addr"), "{err}");
}
