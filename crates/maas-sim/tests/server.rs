//! Server features: TLS, strict auth (nonce replay, timestamp window), state file, inventory.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{plaintext_header, sent, start, status_text};
use maas_sim::{NodeStatus, SimConfig, Simulator, TlsFiles};

#[tokio::test]
async fn https_with_pem_files() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let cert =
        rcgen::generate_simple_self_signed(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
            .unwrap();
    let (cert_path, key_path) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&cert_path, cert.cert.pem()).unwrap();
    std::fs::write(&key_path, cert.signing_key.serialize_pem()).unwrap();
    let sim = Simulator::start(SimConfig {
        machines: 1,
        tls: Some(TlsFiles {
            cert: cert_path,
            key: key_path,
        }),
        ..SimConfig::instant()
    })
    .await
    .unwrap();
    assert!(sim.url().starts_with("https://127.0.0.1:"));
    let ca = reqwest::Certificate::from_pem(cert.cert.pem().as_bytes()).unwrap();
    let client = reqwest::Client::builder()
        .add_root_certificate(ca)
        .build()
        .unwrap();
    let resp = sent(
        client
            .get(format!("{}api/2.0/machines/", sim.url()))
            .header("Authorization", plaintext_header(&sim.api_key())),
    )
    .await;
    assert_eq!(resp.status(), 200);
    // The describe document advertises the https origin.
    let d: serde_json::Value = client
        .get(format!("{}api/2.0/describe/", sim.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        d["handlers"][0]["uri"]
            .as_str()
            .unwrap()
            .starts_with("https://")
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn strict_auth_refuses_replays_and_skewed_clocks() {
    let t = start(SimConfig {
        machines: 1,
        strict_auth: true,
        ..SimConfig::instant()
    })
    .await;
    let header = plaintext_header(&t.key);
    let url = t.api("machines/");
    assert_eq!(
        t.client
            .get(&url)
            .header("Authorization", &header)
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let (s, body) = status_text(
        t.client
            .get(&url)
            .header("Authorization", &header)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 401);
    assert!(
        body.starts_with("Authorization Error: 'Nonce already used:"),
        "{body}"
    );
    // A fresh nonce and timestamp on the retry works.
    assert_eq!(
        t.client
            .get(&url)
            .header("Authorization", plaintext_header(&t.key))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let parts: Vec<&str> = t.key.split(':').collect();
    let stale = format!(
        "OAuth oauth_consumer_key=\"{}\", oauth_token=\"{}\", oauth_signature_method=\"PLAINTEXT\", oauth_signature=\"%26{}\", oauth_nonce=\"old\", oauth_timestamp=\"1000\"",
        parts[0], parts[1], parts[2]
    );
    let (s, body) = status_text(
        t.client
            .get(&url)
            .header("Authorization", stale)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 401);
    assert!(body.contains("Expired timestamp"), "{body}");
}

#[tokio::test]
async fn state_file_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let state_file = dir.path().join("state.json");
    let cfg = SimConfig {
        machines: 4,
        state_file: Some(state_file.clone()),
        ..SimConfig::instant()
    };
    let t = start(cfg.clone()).await;
    let id = t.allocate(&[("agent_name", "keep-me")]).await;
    t.post_json("tags/", &[("name", "persisted")]).await;
    t.sim.shutdown().await;
    assert!(state_file.exists());
    let sim = Simulator::start(cfg).await.unwrap();
    let view = sim.state().machine(&id).unwrap();
    assert_eq!(
        (view.status, view.agent_name.as_str()),
        (NodeStatus::Allocated, "keep-me")
    );
    assert_eq!(sim.state().machines().len(), 4);
    sim.shutdown().await;
    std::fs::write(&state_file, "{not json").unwrap();
    let err = Simulator::start(SimConfig {
        state_file: Some(state_file),
        ..SimConfig::instant()
    })
    .await
    .unwrap_err();
    assert_eq!(err.category(), "state");
}

#[tokio::test]
async fn inventory_file_defines_the_machines() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("inventory.yaml");
    std::fs::write(
        &path,
        "zones: [az1, az2]\npools: [prod]\nmachines:\n  - {hostname: cp-a, system_id: aaa111, zone: az1, pool: prod, cpu_count: 8, memory: 16384, tags: [control-plane]}\n  - {hostname: wk-b, zone: az2, cpu_count: 16, memory: 65536}\n",
    )
    .unwrap();
    let t = start(SimConfig {
        inventory_file: Some(path),
        ..SimConfig::instant()
    })
    .await;
    let machines = t.sim.state().machines();
    assert_eq!(machines.len(), 2);
    assert_eq!(
        (
            machines[0].system_id.as_str(),
            machines[0].zone.as_str(),
            machines[0].pool.as_str()
        ),
        ("aaa111", "az1", "prod")
    );
    let m = t
        .post_json("machines/?op=allocate", &[("tags", "control-plane")])
        .await;
    assert_eq!(m["hostname"], "cp-a");
}

#[tokio::test]
async fn bad_configuration_is_an_error_not_a_panic() {
    let err = Simulator::start(SimConfig {
        api_keys: Vec::new(),
        ..SimConfig::instant()
    })
    .await
    .unwrap_err();
    assert_eq!(err.category(), "config");
    let err = Simulator::start(SimConfig {
        inventory_file: Some("/nonexistent/inv.yaml".into()),
        ..SimConfig::instant()
    })
    .await
    .unwrap_err();
    assert_eq!(err.category(), "io");
    assert!(maas_sim::ApiKey::parse("u", true, "only:two").is_err());
    let key = maas_sim::ApiKey::generate("u", false);
    assert!(!format!("{key:?}").contains(&key.token_secret));
}
