//! The HTTPS admission endpoint: one path per kind and mode, JSON AdmissionReviews in and out.
//!
//! Whoever reaches the port can send anything, so a review is read and decoded within limits
//! ([`AdmissionLimits`]) that keep the server inside its memory limit (256 Mi in `deploy/`):
//! a body cap, a budget for bodies being received, and a budget for the estimated memory of
//! reviews being decoded ([`crate::cost`]). The connection limits (count, timeouts) are the
//! accept loop's: [`capmaas_runtime::http::Limits`].

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use capmaas_runtime::http::{BodyError, Limits, MemoryBudget, close_after, read_body, serve_with};
use http::{Method, Request, Response, StatusCode, Version, header};
use http_body_util::Full;
use hyper::body::Incoming;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::admit::{self, Outcome};
use crate::cost;
use crate::kinds::{Kind, Mode};
use crate::metrics::{AdmissionMetrics, ModeLabels, RequestLabels};
use crate::validate::Lookups;

/// Largest review body accepted: 3 MiB + 512 KiB. A review carries the object of a write and,
/// for an update, the stored object. The API server refuses request bodies over 3 MiB, and
/// etcd (its default `--max-request-bytes`) stores no object over 1.5 MiB, so every write
/// that can succeed fits in 3 MiB of objects: one of up to 3 MiB (a create), or two of up to
/// 1.5 MiB (an update). 512 KiB more covers the review around them (user info, options) and
/// the API server re-encoding an object a little larger than it came.
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024 + 512 * 1024;

/// Default of `--max-buffered-bytes`: four bodies of the largest size at once; ordinary reviews
/// (a few KiB) by the thousand.
pub const DEFAULT_BUFFERED_BYTES: usize = 16 * 1024 * 1024;

/// Default of `--max-decoding-bytes`: room for the largest realistic review
/// ([`MAX_BODY_BYTES`] of short strings, about 62 MiB by [`cost::decode_cost`]); an ordinary
/// one costs well under 1 MiB. With the buffered bytes and the connections' own buffers
/// (64 × at most about 0.6 MiB), the worst case by this arithmetic is near 150 MiB, under the
/// Deployment's 256 Mi limit.
pub const DEFAULT_DECODING_BYTES: usize = 64 * 1024 * 1024;

/// What reading and decoding reviews may hold.
#[derive(Debug, Clone)]
pub struct AdmissionLimits {
    /// Largest body.
    pub max_body_bytes: usize,
    /// Bodies being received or answered, summed over requests.
    pub buffered: MemoryBudget,
    /// Estimated memory of reviews being decoded and answered ([`cost::decode_cost`]), summed
    /// over requests.
    pub decoding: MemoryBudget,
}

impl Default for AdmissionLimits {
    fn default() -> Self {
        Self::new(DEFAULT_BUFFERED_BYTES, DEFAULT_DECODING_BYTES)
    }
}

impl AdmissionLimits {
    /// Budgets of these sizes; the body cap is [`MAX_BODY_BYTES`], or the buffered budget if
    /// that is smaller (a body larger than the whole budget could never be read).
    pub fn new(buffered_bytes: usize, decoding_bytes: usize) -> Self {
        Self {
            max_body_bytes: MAX_BODY_BYTES.min(buffered_bytes),
            buffered: MemoryBudget::new(buffered_bytes),
            decoding: MemoryBudget::new(decoding_bytes),
        }
    }
}

/// Serves `admission` over TLS on `listener` until `shutdown`, with the connection `limits`:
/// the webhook server once its certificate and caches are set up.
pub async fn serve(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    admission: Arc<Admission>,
    limits: &Limits,
    shutdown: CancellationToken,
) {
    let handler = move |req| {
        let admission = admission.clone();
        async move { admission.handle(req).await }
    };
    serve_with(
        listener,
        Some(acceptor),
        handler,
        shutdown,
        "webhook",
        limits,
    )
    .await;
}

/// What every request needs.
#[derive(Clone)]
pub struct Admission {
    lookups: Arc<dyn Lookups>,
    metrics: AdmissionMetrics,
    limits: AdmissionLimits,
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admission").finish_non_exhaustive()
    }
}

impl Admission {
    /// Serves reviews answered from `lookups`, counted in `metrics`, read within `limits`.
    pub fn new(
        lookups: Arc<dyn Lookups>,
        metrics: AdmissionMetrics,
        limits: AdmissionLimits,
    ) -> Self {
        Self {
            lookups,
            metrics,
            limits,
        }
    }

    /// Answers one HTTP request.
    pub async fn handle(&self, req: Request<Incoming>) -> Response<Full<Bytes>> {
        let started = Instant::now();
        let Some((mode, kind)) = Kind::from_path(req.uri().path()) else {
            return text(StatusCode::NOT_FOUND, "no webhook at this path\n");
        };
        if req.method() != Method::POST {
            return text(
                StatusCode::METHOD_NOT_ALLOWED,
                "admission reviews are POSTed\n",
            );
        }
        let version = req.version();
        let body = match read_body(
            req.into_body(),
            self.limits.max_body_bytes,
            &self.limits.buffered,
        )
        .await
        {
            Ok(body) => body,
            Err(e) => {
                self.count(kind, mode, "none", "error", started);
                if !matches!(e, BodyError::Read(_)) {
                    warn!(kind = kind.name(), mode = mode.as_str(), error = %e, "review refused");
                }
                return refuse(version, e.status(), format!("{e}\n"));
            }
        };
        // Held until the answer is built: what decoding this review may take.
        let _decoding = match cost::decode_cost(&body.bytes) {
            Ok(cost) => match self.limits.decoding.reserve(cost).await {
                Ok(reservation) => reservation,
                Err(e) => {
                    warn!(kind = kind.name(), mode = mode.as_str(), bytes = body.bytes.len(), error = %e, "review too costly to decode");
                    self.count(kind, mode, "none", "error", started);
                    return refuse(
                        version,
                        StatusCode::PAYLOAD_TOO_LARGE,
                        format!(
                            "decoding this review would take about {} MiB, more than the {} MiB budget\n",
                            e.wanted >> 20,
                            e.total >> 20
                        ),
                    );
                }
            },
            Err(e) => {
                let e = crate::error::Error::BadReview(e);
                warn!(kind = kind.name(), mode = mode.as_str(), error = %e, "unreadable admission review");
                self.count(kind, mode, "none", "error", started);
                return text(StatusCode::BAD_REQUEST, format!("{e}\n"));
            }
        };
        let body = body.bytes;

        match admit::review(&body, mode, kind, self.lookups.as_ref()) {
            Ok(answer) => {
                match answer.outcome {
                    Outcome::Denied => info!(
                        kind = kind.name(), mode = mode.as_str(), operation = answer.operation,
                        object = %answer.object,
                        message = answer.review.response.as_ref().map_or("", |r| r.result.message.as_str()),
                        "admission denied"
                    ),
                    outcome => debug!(
                        kind = kind.name(), mode = mode.as_str(), operation = answer.operation,
                        object = %answer.object, outcome = outcome.as_str(), "admission answered"
                    ),
                }
                self.count(
                    kind,
                    mode,
                    answer.operation,
                    answer.outcome.as_str(),
                    started,
                );
                match serde_json::to_vec(&answer.review) {
                    Ok(json) => {
                        let mut response = Response::new(Full::new(Bytes::from(json)));
                        response.headers_mut().insert(
                            header::CONTENT_TYPE,
                            header::HeaderValue::from_static("application/json"),
                        );
                        response
                    }
                    Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")),
                }
            }
            Err(e) => {
                warn!(kind = kind.name(), mode = mode.as_str(), error = %e, "unreadable admission review");
                self.count(kind, mode, "none", "error", started);
                text(StatusCode::BAD_REQUEST, format!("{e}\n"))
            }
        }
    }

    fn count(&self, kind: Kind, mode: Mode, operation: &str, outcome: &str, started: Instant) {
        self.metrics
            .requests
            .get_or_create(&RequestLabels {
                kind: kind.name().to_owned(),
                mode: mode.as_str().to_owned(),
                operation: operation.to_owned(),
                outcome: outcome.to_owned(),
            })
            .inc();
        self.metrics
            .duration
            .get_or_create(&ModeLabels {
                mode: mode.as_str().to_owned(),
            })
            .observe(started.elapsed().as_secs_f64());
    }
}

/// An answer given without (all of) the body read: HTTP/1 closes the connection after it.
fn refuse(version: Version, status: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut response = text(status, body);
    close_after(version, &mut response);
    response
}

fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
