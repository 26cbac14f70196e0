//! The webhook server's limits, against the server as `webhook-server` builds it (its flags'
//! defaults, its TLS configuration, its handler) on a real listener in this process, with raw
//! TLS clients that misbehave on purpose: slow heads, slow bodies, oversized and costly bodies,
//! and more connections than the cap. Each test fails without the limit it names: the client
//! would be served, buffered or kept waiting. An ordinary review is still answered, over
//! HTTP/2 and HTTP/1.1.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use capmaas_runtime::tls::{CertFiles, ReloadingCert};
use capmaas_testenv::WebhookServing;
use capmaas_testenv::slow_client::trickle;
use clap::Parser;
use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tokio_util::sync::CancellationToken;
use webhook_server::WebhookArgs;
use webhook_server::metrics::AdmissionMetrics;
use webhook_server::server::{self, Admission, AdmissionLimits, MAX_BODY_BYTES};
use webhook_server::validate::StaticLookups;

const MUTATE_CLUSTER: &str = "/mutate-infrastructure-cluster-x-k8s-io-v1beta1-maascluster";

#[derive(Parser)]
struct Flags {
    #[command(flatten)]
    webhook: WebhookArgs,
}

struct Server {
    addr: SocketAddr,
    ca_pem: String,
    limits: AdmissionLimits,
    _shutdown: tokio_util::sync::DropGuard,
    _dir: tempfile::TempDir,
}

/// The webhook server with `flags` on top of its defaults.
async fn start(flags: &[&str]) -> Server {
    webhook_server::install_crypto();
    let serving = WebhookServing::generate().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cert = Arc::new(
        ReloadingCert::load(&CertFiles::in_dir(
            &serving.write_files(&dir.path().join("certs")).unwrap(),
        ))
        .unwrap(),
    );
    let args =
        Flags::parse_from(std::iter::once("webhook-server").chain(flags.iter().copied())).webhook;
    let (limits, admission_limits) = args.limits();
    let metrics = AdmissionMetrics::register(&mut prometheus_client::registry::Registry::default());
    let admission = Arc::new(Admission::new(
        Arc::new(StaticLookups::default()),
        metrics,
        admission_limits.clone(),
    ));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let acceptor = tokio_rustls::TlsAcceptor::from(cert.server_config());
    tokio::spawn({
        let shutdown = shutdown.clone();
        async move { server::serve(listener, acceptor, admission, &limits, shutdown).await }
    });
    Server {
        addr,
        ca_pem: serving.ca_pem,
        limits: admission_limits,
        _shutdown: shutdown.drop_guard(),
        _dir: dir,
    }
}

impl Server {
    /// A TLS connection speaking HTTP/1.1 (ALPN), handshake done.
    async fn connect(&self) -> TlsStream<TcpStream> {
        let tcp = TcpStream::connect(self.addr).await.unwrap();
        self.handshake(tcp).await
    }

    async fn handshake(&self, tcp: TcpStream) -> TlsStream<TcpStream> {
        handshake(self.connector(), self.addr, tcp).await
    }

    /// Trusts the server's CA; offers HTTP/1.1 only (ALPN), for raw requests.
    fn connector(&self) -> TlsConnector {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(self.ca_pem.as_bytes()).unwrap())
            .unwrap();
        let mut config = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        TlsConnector::from(Arc::new(config))
    }

    fn client(&self, http1: bool) -> reqwest::Client {
        let builder = reqwest::Client::builder()
            .tls_certs_only([reqwest::Certificate::from_pem(self.ca_pem.as_bytes()).unwrap()]);
        let builder = if http1 { builder.http1_only() } else { builder };
        builder.build().unwrap()
    }

    fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.addr)
    }

    /// Nothing is left reserved of the budget for buffered bodies.
    #[track_caller]
    fn assert_buffered_free(&self) {
        assert_eq!(
            self.limits.buffered.available(),
            self.limits.buffered.total()
        );
    }

    /// Nothing is left reserved of the budget for decoding reviews.
    #[track_caller]
    fn assert_decoding_free(&self) {
        assert_eq!(
            self.limits.decoding.available(),
            self.limits.decoding.total()
        );
    }
}

/// The head of a POST to the defaulting webhook announcing `content_length` bytes of body.
fn post_head(content_length: usize) -> String {
    format!(
        "POST {MUTATE_CLUSTER} HTTP/1.1\r\nHost: webhook\r\nContent-Length: {content_length}\r\n\r\n"
    )
}

async fn handshake(
    connector: TlsConnector,
    addr: SocketAddr,
    tcp: TcpStream,
) -> TlsStream<TcpStream> {
    connector
        .connect(ServerName::from(addr.ip()), tcp)
        .await
        .unwrap()
}

/// An AdmissionReview creating a MaasCluster without a port: the defaulting webhook adds 6443.
fn review(spec: &Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "e911857d-c318-4a6b-9b2a-000000000001",
            "kind": {"group": "infrastructure.cluster.x-k8s.io", "version": "v1beta1", "kind": "MaasCluster"},
            "resource": {"group": "infrastructure.cluster.x-k8s.io", "version": "v1beta1", "resource": "maasclusters"},
            "operation": "CREATE",
            "userInfo": {"username": "test"},
            "name": "prod",
            "namespace": "default",
            "object": {
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                "kind": "MaasCluster",
                "metadata": {"name": "prod", "namespace": "default"},
                "spec": spec,
            },
        },
    })
}

fn ordinary() -> Value {
    review(&json!({"dnsDomain": "maas", "controlPlaneEndpoint": {"host": "api.prod.maas"}}))
}

async fn post_raw(stream: &mut TlsStream<TcpStream>, body: &[u8]) -> String {
    let head = format!(
        "POST {MUTATE_CLUSTER} HTTP/1.1\r\nHost: webhook\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
    stream.flush().await.unwrap();
    let mut buf = vec![0; 64 * 1024];
    let n = stream.read(&mut buf).await.unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[tokio::test]
async fn an_ordinary_review_is_answered_over_http2_and_http1() {
    let server = start(&[]).await;
    for http1 in [false, true] {
        let response = server
            .client(http1)
            .post(server.url(MUTATE_CLUSTER))
            .json(&ordinary())
            .send()
            .await
            .unwrap();
        let expected = if http1 {
            reqwest::Version::HTTP_11
        } else {
            reqwest::Version::HTTP_2
        };
        assert_eq!(response.version(), expected);
        assert_eq!(response.status(), 200);
        let answer: Value = response.json().await.unwrap();
        assert_eq!(answer["response"]["uid"], ordinary()["request"]["uid"]);
        assert_eq!(answer["response"]["allowed"], true);
        assert_eq!(answer["response"]["patchType"], "JSONPatch");
    }
    // Nothing is left reserved once answered.
    server.assert_buffered_free();
    server.assert_decoding_free();
}

#[tokio::test]
async fn a_head_sent_one_byte_a_second_is_cut_off_by_the_header_timeout() {
    let server = start(&[]).await;
    let stream = server.connect().await;
    let body = serde_json::to_vec(&ordinary()).unwrap();
    let head = post_head(body.len());
    // About 100 bytes: 100 s for the whole head; the header timeout is 5 s.
    let (got, closed) = trickle(stream, b"", head.as_bytes(), Duration::from_secs(1))
        .await
        .unwrap();
    let closed = closed.expect("the connection outlived its head's timeout");
    assert!(!got.contains("200 OK"), "{got}");
    // hyper's header timer, at 5 s; the accept loop's watchdog alone would drop it at 7 s.
    assert!(
        closed >= Duration::from_secs(4) && closed < Duration::from_millis(6500),
        "closed after {closed:?}"
    );
}

#[tokio::test]
async fn a_body_trickled_after_its_head_is_cut_off_by_the_request_timeout() {
    let server = start(&[]).await;
    let stream = server.connect().await;
    let body = serde_json::to_vec(&ordinary()).unwrap();
    let head = post_head(body.len());
    // A few hundred bytes, one a second; the request timeout is 10 s.
    let (got, closed) = trickle(stream, head.as_bytes(), &body, Duration::from_secs(1))
        .await
        .unwrap();
    let closed = closed.expect("the connection outlived its request's timeout");
    assert!(got.starts_with("HTTP/1.1 408"), "{got}");
    assert!(
        closed >= Duration::from_secs(9) && closed < Duration::from_secs(13),
        "closed after {closed:?}"
    );
    server.assert_buffered_free();
}

#[tokio::test]
async fn an_announced_body_over_the_cap_gets_413_before_it_is_sent() {
    let server = start(&[]).await;
    let mut stream = server.connect().await;
    // Only the head: a server that read the body would wait for it.
    let head = post_head(MAX_BODY_BYTES + 1);
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.flush().await.unwrap();
    let mut got = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(2), stream.read_to_end(&mut got))
        .await
        .expect("the server waited for the body");
    let got = String::from_utf8_lossy(&got);
    assert!(got.starts_with("HTTP/1.1 413"), "{got}");
    assert!(got.contains("larger than the limit"), "{got}");
    server.assert_buffered_free();
}

#[tokio::test]
async fn a_chunked_body_over_the_cap_is_refused_while_streaming() {
    let server = start(&[]).await;
    let stream = server.connect().await;
    let (mut rx, mut tx) = tokio::io::split(stream);
    let reader = tokio::spawn(async move {
        let mut got = Vec::new();
        let _ = rx.read_to_end(&mut got).await;
        String::from_utf8_lossy(&got).into_owned()
    });
    let head = format!(
        "POST {MUTATE_CLUSTER} HTTP/1.1\r\nHost: webhook\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    tx.write_all(head.as_bytes()).await.unwrap();
    // 64 KiB chunks, up to twice the cap, until the server stops taking them.
    let chunk = vec![b' '; 64 * 1024];
    let mut sent = 0;
    while sent < 2 * MAX_BODY_BYTES && !reader.is_finished() {
        let framed = [format!("{:x}\r\n", chunk.len()).as_bytes(), &chunk, b"\r\n"].concat();
        if tx.write_all(&framed).await.is_err() {
            break;
        }
        sent += chunk.len();
    }
    let got = tokio::time::timeout(Duration::from_secs(5), reader)
        .await
        .expect("the server kept the connection open")
        .unwrap();
    assert!(got.starts_with("HTTP/1.1 413"), "{got}");
    assert!(got.contains("larger than the limit"), "{got}");
    server.assert_buffered_free();
}

#[tokio::test]
async fn a_review_too_costly_to_decode_is_refused_without_decoding_it() {
    let server = start(&[]).await;
    // 3 MiB of zeros in the spec: under the body cap, but some 140 MiB once decoded and copied
    // (`webhook_server::cost`).
    let zeros = vec![0; 3 * 512 * 1024];
    let body = serde_json::to_vec(&review(&json!({"dnsDomain": "maas", "zeros": zeros}))).unwrap();
    assert!(body.len() < MAX_BODY_BYTES);
    let mut stream = server.connect().await;
    let got = post_raw(&mut stream, &body).await;
    assert!(got.starts_with("HTTP/1.1 413"), "{got}");
    assert!(got.contains("decoding this review would take"), "{got}");
    server.assert_decoding_free();
    server.assert_buffered_free();
}

#[tokio::test]
async fn over_the_connection_cap_a_connection_waits_for_a_free_slot() {
    let server = start(&["--max-connections=2"]).await;
    let body = serde_json::to_vec(&ordinary()).unwrap();
    let mut first = server.connect().await;
    assert!(
        post_raw(&mut first, &body)
            .await
            .starts_with("HTTP/1.1 200")
    );
    let second = server.connect().await;
    // The third connection's TCP handshake completes (listen backlog), but the server does not
    // accept it, so its TLS handshake cannot even start.
    let third = {
        let tcp = TcpStream::connect(server.addr).await.unwrap();
        let (connector, addr, body) = (server.connector(), server.addr, body.clone());
        tokio::spawn(async move {
            let mut third = handshake(connector, addr, tcp).await;
            post_raw(&mut third, &body).await
        })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!third.is_finished(), "a third connection was served");
    drop(second);
    let answer = tokio::time::timeout(Duration::from_secs(3), third)
        .await
        .expect("the third connection was not served once a slot was free")
        .unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

    // Connections that only hold a slot (a handshake and nothing else) are let go within the
    // header timeout, so a waiting connection is served even if nobody closes.
    drop(first);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let _idle = [server.connect().await, server.connect().await];
    let started = Instant::now();
    let mut fourth = server.connect().await;
    assert!(
        post_raw(&mut fourth, &body)
            .await
            .starts_with("HTTP/1.1 200")
    );
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(3) && waited < Duration::from_secs(8),
        "waited {waited:?}"
    );
}
