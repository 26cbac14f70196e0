//! Bad or huge MAAS answers: the reply size cap (early from `Content-Length`, else while
//! streaming) and lenient machine listings, against a tiny loopback HTTP/1.1 server that
//! answers what each test scripts, and against the simulator.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use maas_api_client::{
    ApiKey, Config, DEFAULT_MAX_RESPONSE_BYTES, MaasClient, MaasError, MachineFilter, RetryPolicy,
};
use serde_json::{Value, json};
use support::{Recorder, build, builder, fast_retries, instant, start};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A loopback server: reads each request head, then lets `respond` write the answer on the
/// raw connection (closed afterwards). Returns the MAAS URL and the number of requests seen.
async fn fake_maas<F, Fut>(respond: F) -> (String, Arc<AtomicUsize>)
where
    F: Fn(TcpStream) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let requests = Arc::new(AtomicUsize::new(0));
    let seen = requests.clone();
    let respond = Arc::new(respond);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let seen = seen.clone();
            let respond = respond.clone();
            tokio::spawn(async move {
                if read_head(&mut stream).await {
                    seen.fetch_add(1, Ordering::SeqCst);
                    respond(stream).await;
                }
            });
        }
    });
    (format!("http://{addr}/MAAS/"), requests)
}

/// Reads until the end of the request head (our GETs have no body).
async fn read_head(stream: &mut TcpStream) -> bool {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    true
}

fn head(status: &str, framing: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\nconnection: close\r\n{framing}\r\n"
    )
}

/// Answers `body` with a `Content-Length`.
async fn answer(mut stream: TcpStream, status: &str, body: &[u8]) {
    let head = head(status, &format!("content-length: {}\r\n", body.len()));
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(body).await;
    let _ = stream.shutdown().await;
}

/// Streams `total` bytes of `fill` as chunked transfer encoding (no `Content-Length`), then
/// hangs instead of ending the body: a client must stop on its own once over its limit.
async fn stream_forever(mut stream: TcpStream, status: &str, fill: u8, total: usize) {
    let _ = stream
        .write_all(head(status, "transfer-encoding: chunked\r\n").as_bytes())
        .await;
    let chunk = vec![fill; 16 * 1024];
    let mut sent = 0;
    while sent < total {
        let n = chunk.len().min(total - sent);
        let frame = format!("{n:x}\r\n");
        if stream.write_all(frame.as_bytes()).await.is_err()
            || stream.write_all(&chunk[..n]).await.is_err()
            || stream.write_all(b"\r\n").await.is_err()
        {
            return;
        }
        sent += n;
    }
    tokio::time::sleep(Duration::from_secs(60)).await;
}

fn client(url: &str, limit: u64, retry: RetryPolicy) -> MaasClient {
    let config = Config::builder(url, ApiKey::parse("c:t:s").unwrap())
        .max_response_bytes(limit)
        .retry_policy(retry)
        .request_timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    MaasClient::new(config).unwrap()
}

/// The error of a strict listing of every machine, which these tests expect to fail.
async fn strict_listing_error(client: &MaasClient) -> MaasError {
    client
        .list_machines(&MachineFilter::new())
        .await
        .unwrap_err()
}

fn machine(id: &str) -> Value {
    json!({"system_id": id, "hostname": format!("h-{id}"), "status": 4, "power_state": "off"})
}

fn assert_too_large(err: &MaasError, limit: u64, content_length: Option<u64>, body_marker: &str) {
    match err {
        MaasError::ResponseTooLarge {
            operation,
            limit: l,
            content_length: c,
        } => {
            assert_eq!(*operation, "machines.list");
            assert_eq!(*l, limit);
            assert_eq!(*c, content_length);
        }
        other => panic!("expected ResponseTooLarge, got {other:?}"),
    }
    assert_eq!(err.category(), "response_too_large");
    assert!(!err.is_retryable());
    let text = err.to_string();
    assert!(
        text.contains("machines.list") && text.contains(&limit.to_string()),
        "{text}"
    );
    assert!(!text.contains(body_marker), "the body leaked: {text}");
}

#[tokio::test]
async fn declared_oversized_answer_is_refused_before_the_body_arrives() {
    // Announces 100 MB and then sends nothing: waiting for the body would time out.
    let (url, requests) = fake_maas(|mut stream| async move {
        let head = head("200 OK", "content-length: 100000000\r\n");
        let _ = stream.write_all(head.as_bytes()).await;
        tokio::time::sleep(Duration::from_secs(60)).await;
    })
    .await;
    let recorder = Arc::new(Recorder::default());
    let config = Config::builder(&url, ApiKey::parse("c:t:s").unwrap())
        .max_response_bytes(1024 * 1024)
        .retry_policy(fast_retries(4))
        .request_timeout(Duration::from_secs(20))
        .observer(recorder.clone())
        .build()
        .unwrap();
    let started = Instant::now();
    let err = MaasClient::new(config)
        .unwrap()
        .list_machines(&MachineFilter::new())
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_too_large(&err, 1024 * 1024, Some(100_000_000), "\0");
    assert_eq!(requests.load(Ordering::SeqCst), 1, "never retried");
    let events = recorder.events.lock().unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].outcome, "response_too_large");
}

#[tokio::test]
async fn streamed_oversized_answer_is_cut_at_the_limit() {
    // No Content-Length: 4 MiB of 'Z' then a body that never ends.
    let (url, requests) =
        fake_maas(|stream| stream_forever(stream, "200 OK", b'Z', 4 * 1024 * 1024)).await;
    let limit = 256 * 1024;
    let started = Instant::now();
    let err = client(&url, limit, fast_retries(4))
        .list_machines_lenient(&MachineFilter::new())
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_too_large(&err, limit, None, "ZZZZ");
    assert_eq!(requests.load(Ordering::SeqCst), 1, "never retried");
}

#[tokio::test]
async fn an_answer_exactly_at_the_limit_is_accepted() {
    let body = serde_json::to_vec(&vec![machine("aaaaaa"); 3]).unwrap();
    let size = body.len() as u64;
    let shared = Arc::new(body);
    let (url, _) = fake_maas(move |stream| {
        let body = shared.clone();
        async move { answer(stream, "200 OK", &body).await }
    })
    .await;
    let machines = client(&url, size, RetryPolicy::none())
        .list_machines(&MachineFilter::new())
        .await
        .unwrap();
    assert_eq!(machines.len(), 3);
    let err = client(&url, size - 1, RetryPolicy::none())
        .list_machines(&MachineFilter::new())
        .await
        .unwrap_err();
    assert_too_large(&err, size - 1, Some(size), "aaaaaa");
}

#[tokio::test]
async fn a_huge_error_page_keeps_its_status_meaning() {
    // A 503 with an endless HTML body: still Unavailable (retryable), its text cut.
    let (url, requests) =
        fake_maas(|stream| stream_forever(stream, "503 Service Unavailable", b'<', 1 << 20)).await;
    let err = client(&url, DEFAULT_MAX_RESPONSE_BYTES, RetryPolicy::none())
        .list_machines(&MachineFilter::new())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, MaasError::Unavailable { status: 503, .. }),
        "{err:?}"
    );
    assert!(err.is_retryable());
    assert!(err.to_string().len() < 1024);
    assert_eq!(requests.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn one_malformed_machine_of_a_hundred_is_skipped_and_reported() {
    let mut machines: Vec<Value> = (0..100).map(|i| machine(&format!("m{i:05}"))).collect();
    // A wrong type with a large value: reported, never quoted whole.
    machines[57]["memory"] = Value::String("9".repeat(100_000));
    machines[58]["interface_set"] = json!([{"id": "not-a-number"}]);
    machines[58]["system_id"] = Value::Null;
    let body = Arc::new(serde_json::to_vec(&machines).unwrap());
    let (url, _) = fake_maas(move |stream| {
        let body = body.clone();
        async move { answer(stream, "200 OK", &body).await }
    })
    .await;
    let client = client(&url, DEFAULT_MAX_RESPONSE_BYTES, RetryPolicy::none());

    let list = client
        .list_machines_lenient(&MachineFilter::new())
        .await
        .unwrap();
    assert_eq!(list.machines.len(), 98);
    assert!(
        list.machines
            .iter()
            .all(|m| m.system_id != "m00057" && !m.system_id.is_empty())
    );
    assert_eq!(list.skipped.len(), 2);
    assert_eq!(list.skipped[0].system_id.as_deref(), Some("m00057"));
    assert_eq!(list.skipped[0].index, 57);
    assert!(
        list.skipped[0].error.len() < 300,
        "{}",
        list.skipped[0].error
    );
    assert_eq!(list.skipped[1].system_id, None);
    assert_eq!(list.skipped[1].index, 58);

    // The strict listing refuses the whole answer, naming the operation.
    let err = strict_listing_error(&client).await;
    assert!(
        matches!(
            &err,
            MaasError::Decode {
                context: "machines.list",
                ..
            }
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn simulator_listing_over_a_small_limit_is_refused_and_fits_the_default() {
    let sim = start(instant(20)).await;
    let small = build(builder(&sim).max_response_bytes(1024));
    let err = strict_listing_error(&small).await;
    assert!(
        matches!(
            err,
            MaasError::ResponseTooLarge {
                operation: "machines.list",
                limit: 1024,
                ..
            }
        ),
        "{err:?}"
    );
    // Small answers still fit the small limit.
    assert!(small.version().await.is_ok());
    let default = support::client(&sim);
    let list = default
        .list_machines_lenient(&MachineFilter::new())
        .await
        .unwrap();
    assert_eq!(list.machines.len(), 20);
    assert!(list.is_complete());
}

/// Two large answers at once: the second waits for the first to be read and decoded before it
/// grows past the threshold, so what the client buffers stays bounded whatever the concurrency.
/// The first answer stalls half-way until the server has sent the whole second one and waited
/// a while: without the turn-taking the second would be done first.
#[tokio::test]
async fn large_answers_are_buffered_one_at_a_time() {
    let padded = |n: usize| {
        let mut body = b"[".to_vec();
        body.resize(n, b' ');
        body.push(b']');
        body
    };
    let second_sent = Arc::new(tokio::sync::Notify::new());
    let order = Arc::new(AtomicUsize::new(0));
    let sent = second_sent.clone();
    let (url, requests) = fake_maas(move |mut stream| {
        let sent = sent.clone();
        let order = order.clone();
        async move {
            if order.fetch_add(1, Ordering::SeqCst) == 0 {
                // The first answer: chunked, half of it, then the rest only after the second.
                let _ = stream
                    .write_all(head("200 OK", "transfer-encoding: chunked\r\n").as_bytes())
                    .await;
                let body = padded(8 * 1024);
                let (first, rest) = body.split_at(4 * 1024);
                for part in [first, rest] {
                    let frame = format!("{:x}\r\n", part.len());
                    let _ = stream.write_all(frame.as_bytes()).await;
                    let _ = stream.write_all(part).await;
                    let _ = stream.write_all(b"\r\n").await;
                    if part.len() == first.len() {
                        sent.notified().await;
                        tokio::time::sleep(Duration::from_millis(300)).await;
                    }
                }
                let _ = stream.write_all(b"0\r\n\r\n").await;
                let _ = stream.shutdown().await;
            } else {
                answer(stream, "200 OK", &padded(8 * 1024)).await;
                sent.notify_one();
            }
        }
    })
    .await;
    let config = Config::builder(&url, ApiKey::parse("c:t:s").unwrap())
        .large_response_bytes(1024)
        .retry_policy(RetryPolicy::none())
        .request_timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let client = MaasClient::new(config).unwrap();
    let finished = Arc::new(std::sync::Mutex::new(Vec::new()));
    let call = |name: &'static str| {
        let (client, finished) = (client.clone(), finished.clone());
        tokio::spawn(async move {
            let machines = client.list_machines(&MachineFilter::new()).await.unwrap();
            assert!(machines.is_empty());
            finished.lock().unwrap().push(name);
        })
    };
    let first = call("first");
    while requests.load(Ordering::SeqCst) < 1 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Let the first answer's head and first half reach the client.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let second = call("second");
    first.await.unwrap();
    second.await.unwrap();
    assert_eq!(*finished.lock().unwrap(), ["first", "second"]);
}
