//! An OTLP trace receiver inside the test: what a collector would get from our binaries when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` points at it, kept as plain [`Span`]s to assert on.
//!
//! One receiver listens on one loopback port (`127.0.0.1:0`) and speaks both OTLP transports
//! there, told apart per request as a collector does: `content-type: application/grpc…` is
//! OTLP/gRPC (the collector's `TraceService`, served through tonic's generated server), a
//! `POST /v1/traces` with `application/x-protobuf` is OTLP/HTTP. It is started for one
//! [`Protocol`] and refuses the other (HTTP 415, counted in [`OtlpReceiver::refused`]), so a
//! binary that ignores `OTEL_EXPORTER_OTLP_PROTOCOL` delivers nothing. The same
//! [`OtlpReceiver::endpoint`] (`http://127.0.0.1:<port>`) serves both: the gRPC exporter
//! calls `/opentelemetry.proto.collector.trace.v1.TraceService/Export` on it, the HTTP one
//! appends `/v1/traces` itself.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use prost::Message as _;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};

mod spans;

use spans::convert;
pub use spans::{Link, Span, describe, group_by_trace, hex};

/// `OTEL_EXPORTER_OTLP_ENDPOINT`: where the binaries export to.
pub const ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// `OTEL_EXPORTER_OTLP_PROTOCOL`: `grpc` or `http/protobuf`.
pub const PROTOCOL_ENV: &str = "OTEL_EXPORTER_OTLP_PROTOCOL";

/// An OTLP transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Protocol {
    /// OTLP/gRPC.
    Grpc,
    /// OTLP/HTTP with protobuf bodies.
    HttpProtobuf,
}

impl Protocol {
    /// The value of `OTEL_EXPORTER_OTLP_PROTOCOL` that selects it.
    pub fn env_value(self) -> &'static str {
        match self {
            Self::Grpc => "grpc",
            Self::HttpProtobuf => "http/protobuf",
        }
    }
}

#[derive(Debug, Default)]
struct Collected {
    spans: Vec<Span>,
    refused: Vec<String>,
}

#[derive(Debug, Clone)]
struct Collector {
    protocol: Protocol,
    collected: Arc<Mutex<Collected>>,
}

impl Collector {
    fn lock(&self) -> std::sync::MutexGuard<'_, Collected> {
        self.collected
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn collect(&self, request: ExportTraceServiceRequest, protocol: Protocol) {
        let spans = convert(request, protocol);
        self.lock().spans.extend(spans);
    }

    fn refuse(&self, why: String) {
        self.lock().refused.push(why);
    }
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> std::result::Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.collect(request.into_inner(), Protocol::Grpc);
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

/// The running receiver; dropping it stops it.
#[derive(Debug)]
pub struct OtlpReceiver {
    address: SocketAddr,
    collector: Collector,
    cancel: CancellationToken,
}

impl OtlpReceiver {
    /// Listens on a free loopback port for OTLP trace exports over `protocol`.
    pub async fn start(protocol: Protocol) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(Error::io("binding the OTLP receiver"))?;
        let address = listener
            .local_addr()
            .map_err(Error::io("reading the OTLP receiver's address"))?;
        let collector = Collector {
            protocol,
            collected: Arc::default(),
        };
        let cancel = CancellationToken::new();
        tokio::spawn(accept(listener, collector.clone(), cancel.clone()));
        Ok(Self {
            address,
            collector,
            cancel,
        })
    }

    /// The transport it accepts.
    pub fn protocol(&self) -> Protocol {
        self.collector.protocol
    }

    /// The value for `OTEL_EXPORTER_OTLP_ENDPOINT`: `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.address)
    }

    /// `OTEL_EXPORTER_OTLP_ENDPOINT` and `OTEL_EXPORTER_OTLP_PROTOCOL` for an exporter to
    /// send here.
    pub fn env(&self) -> [(&'static str, String); 2] {
        [
            (ENDPOINT_ENV, self.endpoint()),
            (PROTOCOL_ENV, self.protocol().env_value().to_owned()),
        ]
    }

    /// Every span received so far, in arrival order.
    pub fn spans(&self) -> Vec<Span> {
        self.collector.lock().spans.clone()
    }

    /// The spans received so far by trace id, each trace's spans by start time.
    pub fn traces(&self) -> BTreeMap<String, Vec<Span>> {
        group_by_trace(&self.spans())
    }

    /// Requests refused (the other transport, an undecodable body, a wrong path), described.
    pub fn refused(&self) -> Vec<String> {
        self.collector.lock().refused.clone()
    }

    /// Waits until `check` returns `Some` for the spans received so far, polling every 50 ms;
    /// after `timeout` a [`Error::Timeout`] that lists what did arrive ([`Self::summary`]).
    pub async fn wait_for<T>(
        &self,
        what: &str,
        timeout: Duration,
        mut check: impl FnMut(&[Span]) -> Option<T>,
    ) -> Result<T> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(found) = check(&self.collector.lock().spans) {
                return Ok(found);
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(Error::Timeout {
                    what: format!("{what}; received:\n{}", self.summary(400)),
                    seconds: timeout.as_secs(),
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// What arrived, for a failure message: each trace with one line per span
    /// ([`describe`]), at most `max_lines` lines, then any refused requests.
    pub fn summary(&self, max_lines: usize) -> String {
        use std::fmt::Write as _;
        let traces = self.traces();
        let mut lines = Vec::new();
        for (trace_id, spans) in &traces {
            lines.push(format!("trace {trace_id} ({} spans)", spans.len()));
            lines.extend(spans.iter().map(|s| format!("  {}", describe(s))));
        }
        let total = lines.len();
        let mut out = format!("{} traces:\n", traces.len());
        for line in lines.iter().take(max_lines) {
            let _ = writeln!(out, "{line}");
        }
        if total > max_lines {
            let _ = writeln!(out, "… {} more lines", total - max_lines);
        }
        for refused in self.refused() {
            let _ = writeln!(out, "refused: {refused}");
        }
        out
    }

    /// The spans of one trace, one line each ([`describe`]), by start time.
    pub fn describe_trace(&self, trace_id: &str) -> String {
        self.traces()
            .get(trace_id)
            .map(|spans| spans.iter().map(describe).collect::<Vec<_>>().join("\n"))
            .unwrap_or_default()
    }
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

async fn accept(listener: TcpListener, collector: Collector, cancel: CancellationToken) {
    loop {
        let accepted = tokio::select! {
            () = cancel.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let Ok((stream, _)) = accepted else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        tokio::spawn(serve(stream, collector.clone(), cancel.clone()));
    }
}

type Body = tonic::body::Body;

async fn serve(stream: tokio::net::TcpStream, collector: Collector, cancel: CancellationToken) {
    let grpc = TraceServiceServer::new(collector.clone());
    let service = service_fn(move |request: Request<Incoming>| {
        let collector = collector.clone();
        let mut grpc = grpc.clone();
        async move {
            let response = if is_grpc(&request) {
                if collector.protocol == Protocol::Grpc {
                    tonic::codegen::Service::call(&mut grpc, request).await?
                } else {
                    refuse(&collector, "an OTLP/gRPC export", &request)
                }
            } else {
                handle_http(&collector, request).await
            };
            Ok::<_, std::convert::Infallible>(response)
        }
    });
    // HTTP/1.1 for the HTTP exporter, HTTP/2 (prior knowledge) for gRPC.
    let builder = auto::Builder::new(TokioExecutor::new());
    let connection = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(connection);
    let result = tokio::select! {
        result = connection.as_mut() => result,
        () = cancel.cancelled() => {
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    if let Err(e) = result {
        tracing::debug!(error = %e, "OTLP receiver connection ended with an error");
    }
}

fn content_type(request: &Request<Incoming>) -> &str {
    request
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

fn is_grpc(request: &Request<Incoming>) -> bool {
    content_type(request).starts_with("application/grpc")
}

/// OTLP/HTTP: `POST /v1/traces`, an uncompressed protobuf `ExportTraceServiceRequest`.
async fn handle_http(collector: &Collector, request: Request<Incoming>) -> Response<Body> {
    let protobuf = content_type(&request) == "application/x-protobuf";
    let compressed = request
        .headers()
        .get(http::header::CONTENT_ENCODING)
        .is_some_and(|v| v.as_bytes() != b"identity");
    if request.method() != http::Method::POST
        || request.uri().path() != "/v1/traces"
        || !protobuf
        || compressed
    {
        return refuse(collector, "an unsupported HTTP request", &request);
    }
    if collector.protocol != Protocol::HttpProtobuf {
        return refuse(collector, "an OTLP/HTTP export", &request);
    }
    let body = match request.into_body().collect().await {
        Ok(body) => body.to_bytes(),
        Err(e) => {
            collector.refuse(format!("an OTLP/HTTP body that could not be read: {e}"));
            return respond(StatusCode::BAD_REQUEST, Bytes::new());
        }
    };
    match ExportTraceServiceRequest::decode(body) {
        Ok(export) => {
            collector.collect(export, Protocol::HttpProtobuf);
            let answer = ExportTraceServiceResponse::default().encode_to_vec();
            respond(StatusCode::OK, Bytes::from(answer))
        }
        Err(e) => {
            collector.refuse(format!(
                "an OTLP/HTTP body that is no ExportTraceServiceRequest: {e}"
            ));
            respond(StatusCode::BAD_REQUEST, Bytes::new())
        }
    }
}

fn refuse(collector: &Collector, what: &str, request: &Request<Incoming>) -> Response<Body> {
    collector.refuse(format!(
        "{what} ({} {}, content-type {:?}) to a receiver of {}",
        request.method(),
        request.uri().path(),
        content_type(request),
        collector.protocol.env_value(),
    ));
    respond(StatusCode::UNSUPPORTED_MEDIA_TYPE, Bytes::new())
}

fn respond(status: StatusCode, body: Bytes) -> Response<Body> {
    let mut response = Response::new(Body::new(Full::new(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/x-protobuf"),
    );
    response
}

#[cfg(test)]
#[path = "otlp_tests.rs"]
mod tests;
