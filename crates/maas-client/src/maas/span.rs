//! The client span of one MAAS call: operation, system id, time spent waiting for the rate
//! limit, and what the HTTP exchange recorded into it (method, URL, status, resends; see
//! `maas_api_client`'s transport). One span per call, retries included.

use std::future::Future;

use maas_api_client::MaasError;
use tracing::{Instrument, Span, field};

/// Runs `call` (rate limit wait included) inside the span of a call of `operation`, marking
/// the span failed when it fails.
pub(super) async fn in_call_span<T>(
    operation: &'static str,
    system_id: Option<&str>,
    call: impl Future<Output = Result<T, MaasError>>,
) -> Result<T, MaasError> {
    let span = call_span(operation, system_id);
    let result = call.instrument(span.clone()).await;
    record_outcome(&span, result.as_ref().err());
    result
}

/// The span of a call of `operation` (e.g. `allocate`, shown as `MAAS allocate`).
fn call_span(operation: &'static str, system_id: Option<&str>) -> Span {
    let span = tracing::info_span!(
        "MAAS call",
        otel.name = %format_args!("MAAS {operation}"),
        otel.kind = "client",
        otel.status_code = field::Empty,
        maas.operation = operation,
        maas.system_id = field::Empty,
        capmaas.rate_limit.wait_ms = field::Empty,
        http.request.method = field::Empty,
        url.full = field::Empty,
        server.address = field::Empty,
        server.port = field::Empty,
        http.response.status_code = field::Empty,
        http.request.resend_count = field::Empty,
        error.type = field::Empty,
    );
    if let Some(system_id) = system_id {
        span.record("maas.system_id", system_id);
    }
    span
}

/// Marks the span failed with the error's category.
fn record_outcome(span: &Span, error: Option<&MaasError>) {
    if let Some(error) = error {
        span.record("otel.status_code", "ERROR");
        span.record("error.type", error.category());
    }
}
