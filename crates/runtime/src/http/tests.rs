//! The accept loop's limits against a real listener and raw TCP clients, with short timeouts.
//! Each test fails without the limit it names: the client would be served, or kept waiting.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::time::Duration;

use capmaas_testenv::slow_client::trickle;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::*;

/// Serves with `limits`; the handler reads the body (cap 1 KiB) and answers its length.
async fn start(limits: Limits) -> (SocketAddr, CancellationToken) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let budget = MemoryBudget::new(64 * 1024);
    let handler = move |req: Request<Incoming>| {
        let budget = budget.clone();
        async move {
            let version = req.version();
            match read_body(req.into_body(), 1024, &budget).await {
                Ok(read) => Response::new(Full::new(Bytes::from(format!(
                    "{} bytes\n",
                    read.bytes.len()
                )))),
                Err(e) => {
                    let mut response = Response::new(Full::new(Bytes::from(e.to_string())));
                    *response.status_mut() = e.status();
                    close_after(version, &mut response);
                    response
                }
            }
        }
    };
    tokio::spawn({
        let shutdown = shutdown.clone();
        async move { serve_with(listener, None, handler, shutdown, "test", &limits).await }
    });
    (addr, shutdown)
}

fn short() -> Limits {
    Limits {
        header_read_timeout: Duration::from_secs(1),
        request_timeout: Duration::from_secs(1),
        idle_timeout: Duration::from_secs(60),
        ..Limits::default()
    }
}

const HEAD: &[u8] =
    b"POST /x HTTP/1.1\r\nHost: test\r\nContent-Length: 0\r\nX-Padding: aaaaaaaaaa\r\n\r\n";

#[tokio::test]
async fn a_head_sent_byte_by_byte_is_cut_off_by_the_header_timeout() {
    let (addr, _shutdown) = start(short()).await;
    let stream = TcpStream::connect(addr).await.unwrap();
    // 70 bytes, 100 ms apart: 7 s for the whole head.
    let (got, closed) = trickle(stream, b"", HEAD, Duration::from_millis(100))
        .await
        .unwrap();
    let closed = closed.expect("the connection outlived its head's timeout");
    assert!(got.is_empty() || got.starts_with("HTTP/1.1 408"), "{got}");
    assert!(closed < Duration::from_secs(3), "closed after {closed:?}");
}

#[tokio::test]
async fn a_slow_second_head_on_a_kept_alive_connection_is_cut_off() {
    let (addr, _shutdown) = start(short()).await;
    let stream = TcpStream::connect(addr).await.unwrap();
    // One full request first: the watchdog's idle timeout (60 s) applies from then on, so only
    // hyper's header timer can end this.
    let (got, closed) = trickle(stream, HEAD, HEAD, Duration::from_millis(100))
        .await
        .unwrap();
    let closed = closed.expect("the connection outlived its second head's timeout");
    assert!(got.starts_with("HTTP/1.1 200"), "{got}");
    assert_eq!(got.matches("HTTP/1.1").count(), 1, "{got}");
    assert!(closed < Duration::from_secs(3), "closed after {closed:?}");
}

#[tokio::test]
async fn a_connection_stuck_before_its_protocol_is_known_is_closed() {
    let (addr, _shutdown) = start(short()).await;
    let stream = TcpStream::connect(addr).await.unwrap();
    // The start of the HTTP/2 preface: hyper-util waits for 24 bytes to choose a protocol, and
    // no hyper timer runs yet; the watchdog's first-request deadline closes it.
    let (got, closed) = trickle(stream, b"PRI * HTTP/2.0\r\n", b"\r", Duration::from_secs(3))
        .await
        .unwrap();
    let closed = closed.expect("a connection that never sent a request stayed open");
    assert!(got.is_empty(), "{got}");
    assert!(closed < Duration::from_secs(3), "closed after {closed:?}");
}

#[tokio::test]
async fn a_body_trickled_past_the_request_timeout_gets_408_and_the_connection_closes() {
    let (addr, _shutdown) = start(short()).await;
    let stream = TcpStream::connect(addr).await.unwrap();
    let head = b"POST /x HTTP/1.1\r\nHost: test\r\nContent-Length: 100\r\n\r\n";
    let (got, closed) = trickle(stream, head, &[b'a'; 100], Duration::from_millis(100))
        .await
        .unwrap();
    let closed = closed.expect("a 10 s body outlived the 1 s request timeout");
    assert!(got.starts_with("HTTP/1.1 408"), "{got}");
    assert!(
        got.to_ascii_lowercase().contains("connection: close"),
        "{got}"
    );
    assert!(closed < Duration::from_secs(3), "closed after {closed:?}");
}

async fn request(stream: &mut TcpStream, body: &str) -> String {
    let head = format!(
        "POST /x HTTP/1.1\r\nHost: test\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut buf = vec![0; 4096];
    let n = stream.read(&mut buf).await.unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[tokio::test]
async fn over_the_connection_cap_a_connection_waits_until_one_closes() {
    let limits = Limits {
        max_connections: 2,
        header_read_timeout: Duration::from_secs(30),
        ..short()
    };
    let (addr, _shutdown) = start(limits).await;
    let mut first = TcpStream::connect(addr).await.unwrap();
    assert!(request(&mut first, "abc").await.ends_with("3 bytes\n"));
    let second = TcpStream::connect(addr).await.unwrap();
    // The kernel completes the third handshake (listen backlog), but the server does not
    // accept it while two are open.
    let mut third = TcpStream::connect(addr).await.unwrap();
    let waiting = tokio::spawn(async move { request(&mut third, "abcd").await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!waiting.is_finished(), "the third connection was served");
    drop(second);
    let answer = tokio::time::timeout(Duration::from_secs(2), waiting)
        .await
        .expect("the third connection was not served after one closed")
        .unwrap();
    assert!(answer.ends_with("4 bytes\n"), "{answer}");
    // The first connection is still open and served (keep-alive).
    assert!(request(&mut first, "ab").await.ends_with("2 bytes\n"));
}

#[tokio::test]
async fn an_announced_body_over_the_cap_gets_413_before_it_is_sent() {
    let (addr, _shutdown) = start(short()).await;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"POST /x HTTP/1.1\r\nHost: test\r\nContent-Length: 1048576\r\n\r\n")
        .await
        .unwrap();
    let mut got = String::new();
    tokio::time::timeout(Duration::from_secs(2), stream.read_to_string(&mut got))
        .await
        .expect("the server waited for the body")
        .unwrap();
    assert!(got.starts_with("HTTP/1.1 413"), "{got}");
}

#[tokio::test]
async fn shutdown_drains_and_stops_accepting() {
    let (addr, shutdown) = start(short()).await;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    assert!(request(&mut stream, "").await.starts_with("HTTP/1.1 200"));
    shutdown.cancel();
    // The idle keep-alive connection is closed.
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(3), stream.read_to_end(&mut rest))
        .await
        .expect("an idle connection outlived shutdown")
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(TcpStream::connect(addr).await.is_err());
}
