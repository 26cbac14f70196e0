//! The HTTPS admission endpoint: one path per kind and mode, JSON AdmissionReviews in and out.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use tracing::{debug, info, warn};

use crate::admit::{self, Outcome};
use crate::kinds::{Kind, Mode};
use crate::metrics::{AdmissionMetrics, ModeLabels, RequestLabels};
use crate::validate::Lookups;

/// Largest review accepted: an update carries two objects of up to the API server's 3 MiB.
const MAX_BODY_BYTES: usize = 7 * 1024 * 1024;

/// What every request needs.
#[derive(Clone)]
pub struct Admission {
    lookups: Arc<dyn Lookups>,
    metrics: AdmissionMetrics,
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admission").finish_non_exhaustive()
    }
}

impl Admission {
    /// Serves reviews answered from `lookups`, counted in `metrics`.
    pub fn new(lookups: Arc<dyn Lookups>, metrics: AdmissionMetrics) -> Self {
        Self { lookups, metrics }
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
        let body = match Limited::new(req.into_body(), MAX_BODY_BYTES)
            .collect()
            .await
        {
            Ok(body) => body.to_bytes(),
            Err(e) => {
                self.count(kind, mode, "none", "error", started);
                return text(StatusCode::BAD_REQUEST, format!("reading the body: {e}\n"));
            }
        };

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

fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
