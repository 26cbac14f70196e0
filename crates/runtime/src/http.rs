//! Serving HTTP connections, plain or over TLS, with a graceful drain: the one accept loop the
//! admin server and the webhook server share.
//!
//! hyper 1 + hyper-util's auto builder (HTTP/1.1 and HTTP/2). A TLS handshake runs in the
//! connection's own task, so a slow or hostile client never stalls the accept loop.

use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

/// How long open connections may take to finish after shutdown starts.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a client may take to complete the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Accepts connections on `listener` until `shutdown` fires, answers every request with
/// `handler`, then drains open connections for at most [`DRAIN_TIMEOUT`]. With `tls`, each
/// connection is a TLS connection (the acceptor's config decides certificates and ALPN).
/// `server` names the server in log lines.
pub async fn serve<H, F>(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    handler: H,
    shutdown: CancellationToken,
    server: &'static str,
) where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let builder = auto::Builder::new(TokioExecutor::new());
    let graceful = GracefulShutdown::new();
    loop {
        let accepted = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Usually EMFILE or a connection reset before accept: keep serving.
                warn!(server, error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // Many small requests (admission reviews) on one connection: no Nagle delay.
        let _ = stream.set_nodelay(true);
        let handler = handler.clone();
        let service = hyper::service::service_fn(move |req: Request<Incoming>| {
            let response = handler(req);
            async move { Ok::<_, Infallible>(response.await) }
        });
        let builder = builder.clone();
        let watcher = graceful.watcher();
        let tls = tls.clone();
        tokio::spawn(async move {
            let result =
                match tls {
                    None => {
                        let conn = builder.serve_connection(TokioIo::new(stream), service);
                        watcher.watch(conn.into_owned()).await
                    }
                    Some(acceptor) => {
                        let stream =
                            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream))
                                .await
                            {
                                Ok(Ok(stream)) => stream,
                                Ok(Err(e)) => {
                                    debug!(server, %peer, error = %e, "TLS handshake failed");
                                    return;
                                }
                                Err(_) => {
                                    debug!(server, %peer, "TLS handshake timed out");
                                    return;
                                }
                            };
                        let conn = builder.serve_connection(TokioIo::new(stream), service);
                        watcher.watch(conn.into_owned()).await
                    }
                };
            if let Err(e) = result {
                debug!(server, %peer, error = %e, "connection ended with error");
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown())
        .await
        .is_err()
    {
        debug!(server, "connections did not drain in time");
    }
}
