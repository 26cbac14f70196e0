//! Serving HTTP connections, plain or over TLS, with a graceful drain: the one accept loop the
//! admin server and the webhook server share.
//!
//! hyper 1 + hyper-util's auto builder (HTTP/1.1 and HTTP/2). A TLS handshake runs in the
//! connection's own task, so a slow or hostile client never stalls the accept loop.
//!
//! Every connection is bounded ([`Limits`]), so that a client — the server cannot tell the API
//! server from anyone else who reaches the port — holds a slot and memory only for a bounded
//! time:
//! - at most [`Limits::max_connections`] are served at once; over the cap the loop stops
//!   accepting, and new connections wait in the kernel's listen backlog until a slot frees;
//! - the TLS handshake, the first request and every HTTP/1 request head must arrive within
//!   their timeouts (hyper's `header_read_timeout` on HTTP/1; a per-connection watchdog for the
//!   protocol sniffing and the HTTP/2 preface, where hyper has no timer);
//! - each request (reading its body, answering, handing the answer to hyper) has
//!   [`Limits::request_timeout`]; a request still unanswered then gets `408`, and a connection
//!   whose answer is still not written a little later is dropped;
//! - a connection with no request in flight is closed after [`Limits::idle_timeout`] (HTTP/2:
//!   GOAWAY; HTTP/1's keep-alive wait is a head read, so its header timeout closes it sooner);
//! - HTTP/2 pings idle peers and caps concurrent streams and flow-control windows, which bound
//!   what one connection buffers.
//!
//! Request bodies are read by the handler, within a size cap and a shared memory budget:
//! [`read_body`] and [`MemoryBudget`].

mod body;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode, Version, header};
use http_body_util::Full;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::sync::{Notify, Semaphore};
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, info, warn};

pub use body::{BodyError, MemoryBudget, OverBudget, ReadBody, Reservation, read_body};

/// How long open connections may take to finish after shutdown starts.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// After a connection was asked to close (idle, or its answer is overdue), how long it may take
/// before it is dropped: an HTTP/2 peer finishes its streams after GOAWAY, a response already
/// handed to hyper is flushed.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// What one server accepts. [`Limits::default`] suits both servers of a binary: the admin
/// server (probes and scrapes) and the webhook server (the API server's admission calls,
/// `timeoutSeconds: 5`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Connections served at once. Over the cap the accept loop waits for a slot: the kernel
    /// keeps new connections in the listen backlog, and they are served in turn. Waiting rather
    /// than refusing, because slots free within seconds (every timeout below ends a connection)
    /// and a refused admission call is a failed write, while a queued one is usually answered.
    pub max_connections: usize,
    /// TLS handshake.
    pub handshake_timeout: Duration,
    /// HTTP/1: every request head, counted from when the server starts waiting for it — which
    /// includes a keep-alive connection's idle wait, so an idle HTTP/1 connection lives this
    /// long. Any protocol: the first request must start within this after the handshake.
    pub header_read_timeout: Duration,
    /// One request, from its head to the answer: reading the body, deciding, answering. At
    /// least the callers' own timeout (the webhooks declare 5 s), so that no call the API server
    /// still waits for is cut.
    pub request_timeout: Duration,
    /// A connection with no request in flight for this long is closed (after its first
    /// request; before it, [`Self::header_read_timeout`] applies).
    pub idle_timeout: Duration,
    /// HTTP/1 read buffer: the largest request head, and the body bytes read ahead.
    pub http1_max_buf_size: usize,
    /// HTTP/2 streams one connection may have open.
    pub http2_max_concurrent_streams: u32,
    /// HTTP/2 flow-control window per stream: body bytes the peer may send before the handler
    /// reads them.
    pub http2_stream_window: u32,
    /// HTTP/2 flow-control window per connection: the same, summed over its streams.
    pub http2_connection_window: u32,
    /// HTTP/2 keep-alive ping interval; a peer that does not answer within
    /// [`Self::http2_keep_alive_timeout`] is disconnected.
    pub http2_keep_alive_interval: Duration,
    /// See [`Self::http2_keep_alive_interval`].
    pub http2_keep_alive_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            // A handful of API server replicas multiplex admission calls over HTTP/2; probes
            // and scrapes open a connection each every few seconds. 64 leaves room for both and
            // bounds per-connection buffers (below) to a few tens of MiB.
            max_connections: 64,
            handshake_timeout: Duration::from_secs(10),
            // Real clients send a head in one write; 5 s is generous and keeps a slot held by a
            // slow-loris client short.
            header_read_timeout: Duration::from_secs(5),
            // Twice the webhooks' timeoutSeconds: the API server has given up by then.
            request_timeout: Duration::from_secs(10),
            // Below the API server's own idle timeout for webhook connections (Go's 90 s), and
            // long enough to reuse a connection between bursts of writes.
            idle_timeout: Duration::from_secs(30),
            // Heads are a few hundred bytes; hyper's default (about 400 KiB) only lets an idle
            // client park more memory per connection.
            http1_max_buf_size: 64 * 1024,
            http2_max_concurrent_streams: 32,
            http2_stream_window: 256 * 1024,
            http2_connection_window: 512 * 1024,
            http2_keep_alive_interval: Duration::from_secs(20),
            http2_keep_alive_timeout: Duration::from_secs(10),
        }
    }
}

impl Limits {
    fn builder(&self) -> auto::Builder<TokioExecutor> {
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(self.header_read_timeout)
            // hyper panics below 8 KiB.
            .max_buf_size(self.http1_max_buf_size.max(8 * 1024));
        builder
            .http2()
            .timer(TokioTimer::new())
            .max_concurrent_streams(self.http2_max_concurrent_streams)
            .initial_stream_window_size(self.http2_stream_window)
            .initial_connection_window_size(self.http2_connection_window)
            .keep_alive_interval(self.http2_keep_alive_interval)
            .keep_alive_timeout(self.http2_keep_alive_timeout);
        builder
    }
}

/// Accepts connections on `listener` until `shutdown` fires, answers every request with
/// `handler`, then drains open connections for at most [`DRAIN_TIMEOUT`]. With `tls`, each
/// connection is a TLS connection (the acceptor's config decides certificates and ALPN).
/// `server` names the server in log lines. [`Limits::default`] applies; [`serve_with`] takes
/// others.
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
    serve_with(listener, tls, handler, shutdown, server, &Limits::default()).await;
}

/// [`serve`] with explicit [`Limits`].
pub async fn serve_with<H, F>(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    handler: H,
    shutdown: CancellationToken,
    server: &'static str,
    limits: &Limits,
) where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let builder = limits.builder();
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let connections = TaskTracker::new();
    let mut saturated = false;
    loop {
        // Logged once per episode: under sustained load, not once per connection.
        let full = slots.available_permits() == 0;
        if full && !saturated {
            warn!(
                server,
                max = limits.max_connections,
                "connection cap reached; new connections wait until one closes"
            );
        } else if !full && saturated {
            info!(server, "below the connection cap again");
        }
        saturated = full;
        // Take a slot before accepting: over the cap, connections wait in the listen backlog
        // instead of being accepted and holding memory here.
        let slot = tokio::select! {
            () = shutdown.cancelled() => break,
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
        };
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
        let builder = builder.clone();
        let limits = limits.clone();
        let shutdown = shutdown.clone();
        let tls = tls.clone();
        connections.spawn(async move {
            // Held until the connection ends: its slot.
            let _slot = slot;
            let result = match tls {
                None => {
                    let activity = Activity::new();
                    let service = service(handler, &activity, &limits);
                    let conn = builder.serve_connection(TokioIo::new(stream), service);
                    drive(conn, &activity, &limits, &shutdown).await
                }
                Some(acceptor) => {
                    let stream = match tokio::time::timeout(
                        limits.handshake_timeout,
                        acceptor.accept(stream),
                    )
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
                    let activity = Activity::new();
                    let service = service(handler, &activity, &limits);
                    let conn = builder.serve_connection(TokioIo::new(stream), service);
                    drive(conn, &activity, &limits, &shutdown).await
                }
            };
            if let Err(e) = result {
                debug!(server, %peer, error = %e, "connection ended with error");
            }
        });
    }
    drop(listener);
    connections.close();
    if tokio::time::timeout(DRAIN_TIMEOUT + CLOSE_GRACE, connections.wait())
        .await
        .is_err()
    {
        debug!(server, "connections did not drain in time");
    }
}

/// The per-connection service: `handler` within the request timeout, its answer tracked until
/// hyper has taken all of it.
fn service<H, F>(
    handler: H,
    activity: &Arc<Activity>,
    limits: &Limits,
) -> impl hyper::service::Service<
    Request<Incoming>,
    Response = Response<Tracked>,
    Error = Infallible,
    Future = impl Future<Output = Result<Response<Tracked>, Infallible>> + Send + 'static,
> + Clone
+ Send
+ 'static
where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let activity = activity.clone();
    let timeout = limits.request_timeout;
    hyper::service::service_fn(move |req: Request<Incoming>| {
        let in_flight = activity.start();
        let version = req.version();
        let response = handler(req);
        async move {
            let response = match tokio::time::timeout(timeout, response).await {
                Ok(response) => response,
                Err(_) => timed_out(version, timeout),
            };
            Ok::<_, Infallible>(response.map(|body| Tracked {
                body,
                _in_flight: in_flight,
            }))
        }
    })
}

/// `408` for a request not answered in time (a body that never finished arriving, usually). The
/// handler's future is dropped with everything it held.
fn timed_out(version: Version, timeout: Duration) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(format!(
        "request not completed within {}s\n",
        timeout.as_secs()
    ))));
    *response.status_mut() = StatusCode::REQUEST_TIMEOUT;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    close_after(version, &mut response);
    response
}

/// Marks an HTTP/1 response as the connection's last (`Connection: close`), for answers
/// given before the request body was read: the client stops sending it, and hyper closes
/// instead of reading the rest. HTTP/2 ends the stream alone (the header is illegal there).
pub fn close_after<B>(version: Version, response: &mut Response<B>) {
    if version < Version::HTTP_2 {
        response.headers_mut().insert(
            header::CONNECTION,
            header::HeaderValue::from_static("close"),
        );
    }
}

/// Drives one connection to its end: closes it gracefully when it has been idle too long or the
/// server shuts down, and drops it when a close or an answer is overdue.
async fn drive<C, E>(
    conn: C,
    activity: &Activity,
    limits: &Limits,
    shutdown: &CancellationToken,
) -> Result<(), Closed>
where
    C: Future<Output = Result<(), E>> + GracefulConnection,
    E: Into<crate::error::BoxError>,
{
    let mut conn = std::pin::pin!(conn);
    // Set once the connection was asked to close: when it is dropped if still open.
    let mut closing: Option<Instant> = None;
    loop {
        let due = activity.due(limits);
        let deadline = closing.unwrap_or(match due {
            Due::Idle(at) | Due::Overdue(at) => at,
        });
        tokio::select! {
            result = conn.as_mut() => return result.map_err(|e| Closed::Error(e.into())),
            () = shutdown.cancelled(), if closing.is_none() => {
                conn.as_mut().close_gracefully();
                closing = Some(Instant::now() + DRAIN_TIMEOUT);
            }
            // A request started or ended: the deadline moved.
            () = activity.changed.notified() => {}
            () = tokio::time::sleep_until(deadline) => {
                if closing.is_some() {
                    return Err(Closed::CloseOverdue);
                }
                // Re-read: a request may have started since the deadline was taken.
                match activity.due(limits) {
                    Due::Idle(at) if at <= Instant::now() => {
                        conn.as_mut().close_gracefully();
                        closing = Some(Instant::now() + CLOSE_GRACE);
                    }
                    Due::Overdue(at) if at <= Instant::now() => {
                        return Err(Closed::AnswerOverdue);
                    }
                    Due::Idle(_) | Due::Overdue(_) => {}
                }
            }
        }
    }
}

/// Why a connection was ended.
#[derive(Debug, thiserror::Error)]
enum Closed {
    #[error(transparent)]
    Error(crate::error::BoxError),
    #[error("closed; it did not finish within its grace period")]
    CloseOverdue,
    #[error("an answer was not written within the request timeout")]
    AnswerOverdue,
}

/// hyper-util's connection types, by their graceful shutdown.
trait GracefulConnection {
    fn close_gracefully(self: Pin<&mut Self>);
}

impl<I, S, E, B> GracefulConnection for auto::Connection<'_, I, S, E>
where
    S: hyper::service::HttpService<Incoming, ResBody = B>,
    S::Error: Into<crate::error::BoxError>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin,
    B: Body + 'static,
    B::Error: Into<crate::error::BoxError>,
    E: auto::HttpServerConnExec<S::Future, B>,
{
    fn close_gracefully(self: Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

/// What a connection is doing: requests in flight (by start time) and since when it has been
/// idle. Shared by its service (which starts and ends requests) and [`drive`] (which reads the
/// deadlines).
#[derive(Debug)]
struct Activity {
    state: Mutex<ActivityState>,
    changed: Notify,
}

#[derive(Debug)]
struct ActivityState {
    next_id: u64,
    /// Requests whose answer hyper has not yet taken, by id; ids grow, so the first is the
    /// oldest.
    in_flight: BTreeMap<u64, Instant>,
    /// When the last request ended, or the connection was set up.
    idle_since: Instant,
    /// Whether any request has started.
    served: bool,
}

/// The next thing that can happen to a connection.
#[derive(Debug, Clone, Copy)]
enum Due {
    /// Idle: closed gracefully at this instant.
    Idle(Instant),
    /// Busy: dropped at this instant if its oldest request has still not been answered.
    Overdue(Instant),
}

impl Activity {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(ActivityState {
                next_id: 0,
                in_flight: BTreeMap::new(),
                idle_since: Instant::now(),
                served: false,
            }),
            changed: Notify::new(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ActivityState> {
        // The state stays consistent whatever panicked while holding it (plain inserts).
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn start(self: &Arc<Self>) -> InFlight {
        let id = {
            let mut state = self.lock();
            let id = state.next_id;
            state.next_id += 1;
            state.in_flight.insert(id, Instant::now());
            state.served = true;
            id
        };
        // One waiter (drive); a stored permit wakes it even if it is not waiting yet.
        self.changed.notify_one();
        InFlight {
            activity: self.clone(),
            id,
        }
    }

    fn due(&self, limits: &Limits) -> Due {
        let state = self.lock();
        match state.in_flight.values().next() {
            // The request timeout answers it; the grace covers handing the answer to hyper.
            Some(oldest) => Due::Overdue(*oldest + limits.request_timeout + CLOSE_GRACE),
            None if state.served => Due::Idle(state.idle_since + limits.idle_timeout),
            None => Due::Idle(state.idle_since + limits.header_read_timeout),
        }
    }
}

/// A request in flight; ends when dropped.
#[derive(Debug)]
struct InFlight {
    activity: Arc<Activity>,
    id: u64,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        {
            let mut state = self.activity.lock();
            state.in_flight.remove(&self.id);
            if state.in_flight.is_empty() {
                state.idle_since = Instant::now();
            }
        }
        self.activity.changed.notify_one();
    }
}

/// A response body that keeps its request in flight until hyper has taken (or dropped) it.
#[derive(Debug)]
struct Tracked {
    body: Full<Bytes>,
    _in_flight: InFlight,
}

impl Body for Tracked {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
