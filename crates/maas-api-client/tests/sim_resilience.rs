//! The client against the MAAS simulator under stress: retries with strict nonce checking,
//! Retry-After, fault injection to every typed error, timeouts, the concurrency limit, TLS and
//! the metrics hook.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use maas_api_client::{
    AllocateRequest, ApiKey, CaMode, Config, ConfigBuilder, DeployRequest, MaasClient, MaasError,
    MachineFilter, MachineStatus, RequestEvent, RequestObserver, RetryPolicy, TagSpec,
};
use maas_sim::{FaultConfig, SimConfig};
use support::{
    Recorder, build, builder, fast_retries, fault, first_id, instant, latency, start,
    wait_for_status,
};

#[tokio::test]
async fn retries_use_fresh_nonces_under_strict_auth() {
    let sim = start(SimConfig {
        strict_auth: true,
        ..instant(3)
    })
    .await;
    let recorder = Arc::new(Recorder::default());
    let client = build(
        builder(&sim)
            .retry_policy(fast_retries(50))
            .observer(recorder.clone()),
    );
    let id = first_id(&client).await;

    // Every read fails with 503 until the faults are lifted; the client keeps retrying.
    sim.state()
        .set_faults(fault("machine.read", 503, None))
        .unwrap();
    let pending = {
        let client = client.clone();
        let id = id.clone();
        tokio::spawn(async move { client.get_machine(&id).await })
    };
    let failed_attempts = || {
        recorder
            .events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.operation == "machines.get" && e.outcome == "unavailable")
            .count()
    };
    for _ in 0..200 {
        if failed_attempts() >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(failed_attempts() >= 3, "the client did not retry");
    sim.state().set_faults(FaultConfig::default()).unwrap();
    let machine = pending.await.unwrap().unwrap();
    assert_eq!(machine.system_id, id);
    let events = recorder.events.lock().unwrap().clone();
    let last = events
        .iter()
        .rev()
        .find(|e| e.operation == "machines.get")
        .unwrap();
    assert_eq!(last.outcome, "ok");
    assert!(last.attempt >= 4);
    // Any reused nonce would have been a 401 under strict_auth.
    assert!(events.iter().all(|e| e.outcome != "unauthorized"));

    // A non-idempotent call is never retried.
    sim.state()
        .set_faults(fault("machines.allocate", 503, None))
        .unwrap();
    let before = events.len();
    let err = client
        .allocate(&AllocateRequest::default())
        .await
        .unwrap_err();
    assert!(matches!(err, MaasError::Unavailable { status: 503, .. }));
    let allocations = recorder.events.lock().unwrap()[before..]
        .iter()
        .filter(|e| e.operation == "machines.allocate")
        .count();
    assert_eq!(allocations, 1);
}

#[tokio::test]
async fn retry_after_is_honoured_and_retries_are_bounded() {
    let sim = start(instant(2)).await;
    let attempts = Arc::new(Recorder::default());
    let client = build(
        builder(&sim)
            .retry_policy(RetryPolicy {
                max_attempts: 3,
                base_delay: Duration::from_millis(1),
                max_delay: Duration::from_millis(2),
                max_retry_after: Duration::from_millis(300),
            })
            .observer(attempts.clone()),
    );
    sim.state()
        .set_faults(fault("zones.read", 409, None))
        .unwrap();
    let started = std::time::Instant::now();
    let err = client.list_zones().await.unwrap_err();
    // Two waits of Retry-After 5 s capped at 300 ms.
    assert!(
        started.elapsed() >= Duration::from_millis(550),
        "{:?}",
        started.elapsed()
    );
    assert!(
        matches!(err, MaasError::Unavailable { status: 409, retry_after: Some(d), .. } if d == Duration::from_secs(5))
    );
    assert_eq!(attempts.events.lock().unwrap().len(), 3);
}

#[tokio::test]
async fn faults_and_refusals_map_to_typed_errors() {
    let user = maas_sim::ApiKey::generate("alice", false);
    let mut config = instant(3);
    config.api_keys.push(user.clone());
    let sim = start(config).await;
    let client = build(builder(&sim).retry_policy(RetryPolicy::none()));
    let id = first_id(&client).await;

    let cases: Vec<(FaultConfig, &str)> = vec![
        (fault("machine.read", 503, Some(10)), "unavailable"),
        (fault("machine.read", 504, None), "unavailable"),
        (fault("machine.read", 500, None), "server"),
        (fault("machine.read", 409, None), "unavailable"),
    ];
    for (faults, category) in cases {
        sim.state().set_faults(faults).unwrap();
        let err = client.get_machine(&id).await.unwrap_err();
        assert_eq!(err.category(), category, "{err:?}");
        assert!(err.is_retryable());
    }
    sim.state()
        .set_faults(fault("machine.read", 503, Some(10)))
        .unwrap();
    assert_eq!(
        client.get_machine(&id).await.unwrap_err().retry_after(),
        Some(Duration::from_secs(10))
    );
    sim.state().set_faults(FaultConfig::default()).unwrap();

    assert!(matches!(
        client.get_machine("nosuch").await,
        Err(MaasError::NotFound { .. })
    ));
    match client
        .list_machines(&MachineFilter::new().zone("no-such-zone"))
        .await
    {
        Err(MaasError::BadRequest { fields, .. }) => {
            assert!(fields.contains_key("zone"), "{fields:?}");
        }
        other => panic!("expected BadRequest, got {other:?}"),
    }
    match client
        .allocate(&AllocateRequest {
            system_id: Some("nosuch".to_owned()),
            ..AllocateRequest::default()
        })
        .await
    {
        Err(MaasError::NoMatchingMachine { message }) => {
            assert!(message.contains("nosuch"), "{message}");
        }
        other => panic!("expected NoMatchingMachine, got {other:?}"),
    }
    // Deploying a deployed machine is a state conflict.
    client.deploy(&id, &DeployRequest::default()).await.unwrap();
    wait_for_status(&client, &id, MachineStatus::Deployed).await;
    assert!(matches!(
        client.deploy(&id, &DeployRequest::default()).await,
        Err(MaasError::Conflict { .. })
    ));

    // A non-admin key: admin-only calls are forbidden.
    let alice = MaasClient::new(
        Config::builder(&sim.url(), ApiKey::parse(&user.credential()).unwrap())
            .retry_policy(RetryPolicy::none())
            .build()
            .unwrap(),
    )
    .unwrap();
    let err = alice
        .create_tag(&TagSpec {
            name: "nope".to_owned(),
            ..TagSpec::default()
        })
        .await
        .unwrap_err();
    assert!(matches!(err, MaasError::Forbidden { .. }), "{err:?}");

    // A wrong secret.
    let key = ApiKey::parse(&sim.api_key()).unwrap();
    let wrong = format!("{}:{}:wrongsecret", key.consumer_key(), key.token_key());
    let bad = MaasClient::new(
        Config::builder(&sim.url(), ApiKey::parse(&wrong).unwrap())
            .build()
            .unwrap(),
    )
    .unwrap();
    let err = bad.list_zones().await.unwrap_err();
    assert!(matches!(err, MaasError::Unauthorized { .. }), "{err:?}");
    assert!(!err.to_string().contains("wrongsecret"));
}

#[tokio::test]
async fn timeouts_and_transport_errors() {
    let sim = start(instant(1)).await;
    sim.state()
        .set_faults(latency("zones.read", 2_000))
        .unwrap();
    let attempts = Arc::new(Recorder::default());
    let client = build(
        builder(&sim)
            .request_timeout(Duration::from_millis(200))
            .retry_policy(fast_retries(2))
            .observer(attempts.clone()),
    );
    assert!(matches!(client.list_zones().await, Err(MaasError::Timeout)));
    assert_eq!(attempts.events.lock().unwrap().len(), 2);

    // Nothing listens on a just-closed port.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let closed = MaasClient::new(
        Config::builder(
            &format!("http://127.0.0.1:{port}/MAAS/"),
            ApiKey::parse("a:b:c").unwrap(),
        )
        .retry_policy(RetryPolicy::none())
        .build()
        .unwrap(),
    )
    .unwrap();
    let err = closed.list_zones().await.unwrap_err();
    assert!(matches!(err, MaasError::Transport { .. }), "{err:?}");
    assert!(err.is_retryable());
}

#[tokio::test]
async fn concurrency_limit_is_global_per_client() {
    let sim = start(instant(4)).await;
    sim.state().set_faults(latency("zones.read", 100)).unwrap();
    let client = build(builder(&sim).max_concurrent_requests(2));
    let started = std::time::Instant::now();
    let calls: Vec<_> = (0..6)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { client.list_zones().await })
        })
        .collect();
    for call in calls {
        call.await.unwrap().unwrap();
    }
    // 6 calls of 100 ms, two at a time: at least three rounds.
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "{:?}",
        started.elapsed()
    );
}

struct TestPki {
    ca_pem: String,
    _dir: tempfile::TempDir,
    files: maas_sim::TlsFiles,
}

fn test_pki() -> TestPki {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "maas-client test CA");
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&leaf_key, &ca)
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cert = dir.path().join("cert.pem");
    let key = dir.path().join("key.pem");
    std::fs::write(&cert, leaf.pem()).unwrap();
    std::fs::write(&key, leaf_key.serialize_pem()).unwrap();
    TestPki {
        ca_pem: ca.pem(),
        _dir: dir,
        files: maas_sim::TlsFiles { cert, key },
    }
}

#[tokio::test]
async fn tls_is_verified_by_default() {
    let pki = test_pki();
    let sim = start(SimConfig {
        tls: Some(pki.files.clone()),
        ..instant(1)
    })
    .await;
    assert!(sim.url().starts_with("https://"), "{}", sim.url());
    let no_retry = |b: ConfigBuilder| b.retry_policy(RetryPolicy::none());

    let default = MaasClient::new(no_retry(builder(&sim)).build().unwrap()).unwrap();
    let err = default.list_zones().await.unwrap_err();
    assert!(matches!(err, MaasError::Transport { .. }), "{err:?}");
    assert!(
        err.to_string().to_lowercase().contains("certificate"),
        "{err}"
    );

    // Each of these trusts the simulator's certificate.
    for (name, trusting) in [
        (
            "with_ca",
            no_retry(builder(&sim)).ca_bundle_pem(pki.ca_pem.clone(), CaMode::Only),
        ),
        (
            "additional",
            no_retry(builder(&sim)).ca_bundle_pem(pki.ca_pem.clone(), CaMode::Additional),
        ),
        (
            "insecure",
            no_retry(builder(&sim)).insecure_skip_tls_verify(true),
        ),
    ] {
        let client = MaasClient::new(trusting.build().unwrap()).unwrap();
        assert!(!client.list_zones().await.unwrap().is_empty(), "{name}");
    }

    let garbage = MaasClient::new(
        no_retry(builder(&sim))
            .ca_bundle_pem(b"not a pem".to_vec(), CaMode::Only)
            .build()
            .unwrap(),
    );
    assert!(matches!(garbage, Err(MaasError::Config(_))));
}

#[tokio::test]
async fn observer_sees_every_attempt() {
    let sim = start(instant(1)).await;
    let counter = Arc::new(CountingObserver::default());
    let client = build(builder(&sim).observer(counter.clone()));
    client.list_zones().await.unwrap();
    let _ = client.get_machine("nosuch").await;
    assert_eq!(counter.ok.load(Ordering::Relaxed), 1);
    assert_eq!(counter.failed.load(Ordering::Relaxed), 1);
}

#[derive(Debug, Default)]
struct CountingObserver {
    ok: AtomicUsize,
    failed: AtomicUsize,
}

impl RequestObserver for CountingObserver {
    fn observe(&self, event: &RequestEvent) {
        if event.outcome == "ok" {
            self.ok.fetch_add(1, Ordering::Relaxed);
        } else {
            assert_eq!(event.outcome, "not_found");
            assert_eq!(event.status, Some(404));
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
    }
}
