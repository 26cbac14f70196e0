//! The pooled HTTP client: URL building, signing, concurrency limit, retries, decoding.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use backon::{ExponentialBuilder, Retryable};
use bytes::{Bytes, BytesMut};
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use http::{HeaderValue, Method, StatusCode};
use serde::de::DeserializeOwned;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use url::Url;

use crate::auth::{ApiKey, new_nonce, unix_timestamp};
use crate::config::{CaMode, Config, RetryPolicy};
use crate::error::{ErrorContext, MaasError, error_from_response};
use crate::form::Params;
use crate::observer::{RequestEvent, RequestObserver};

/// A MAAS API client. Cheap to clone: clones share one connection pool, one concurrency
/// limit and one observer. Operations live in the `machines`, `network`, `dns` and
/// `inventory` modules.
#[derive(Clone, Debug)]
pub struct MaasClient {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    http: reqwest::Client,
    api_root: Url,
    api_key: ApiKey,
    retry: RetryPolicy,
    max_response_bytes: u64,
    /// Answers above this size are read under [`Inner::large_answers`].
    large_response_bytes: u64,
    /// One permit: the large answer being buffered (then decoded) now.
    large_answers: Arc<Semaphore>,
    limiter: Semaphore,
    observer: Arc<dyn RequestObserver>,
}

/// Whether a call may be repeated after an ambiguous failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Idempotency {
    /// Safe to retry on transient errors.
    Idempotent,
    /// Never retried (allocate, deploy, power_on, creates, link_subnet...).
    Once,
}

/// One API call, before signing.
#[derive(Debug)]
pub(crate) struct Call {
    /// Operation name for metrics and error context, e.g. `machines.get`.
    pub(crate) name: &'static str,
    pub(crate) method: Method,
    /// Path segments below the API root; a trailing slash is always added.
    pub(crate) segments: Vec<String>,
    /// MAAS `op`, sent in the query string.
    pub(crate) op: Option<&'static str>,
    /// Query parameters for GET/DELETE, form body for POST/PUT.
    pub(crate) params: Params,
    pub(crate) idempotency: Idempotency,
    pub(crate) context: ErrorContext,
}

impl Call {
    /// A call with no parameters.
    pub(crate) fn new(name: &'static str, method: Method, segments: Vec<String>) -> Self {
        let idempotency = if method == Method::GET {
            Idempotency::Idempotent
        } else {
            Idempotency::Once
        };
        Self {
            name,
            method,
            segments,
            op: None,
            params: Params::new(),
            idempotency,
            context: ErrorContext::Other,
        }
    }

    pub(crate) fn op(mut self, op: &'static str) -> Self {
        self.op = Some(op);
        self
    }

    pub(crate) fn params(mut self, params: Params) -> Self {
        self.params = params;
        self
    }

    /// Marks a write as safe to retry (the same request twice leaves the same state).
    pub(crate) fn idempotent(mut self) -> Self {
        self.idempotency = Idempotency::Idempotent;
        self
    }

    pub(crate) fn context(mut self, context: ErrorContext) -> Self {
        self.context = context;
        self
    }

    fn sends_body(&self) -> bool {
        self.method == Method::POST || self.method == Method::PUT
    }
}

/// Checks a caller-supplied path segment (system id, tag name...) before it goes in a URL.
pub(crate) fn segment(kind: &str, value: &str) -> Result<String, MaasError> {
    if value.is_empty() || value == "." || value == ".." || value.contains('/') {
        return Err(MaasError::InvalidArgument(format!(
            "{kind} {value:?} is not a valid path segment"
        )));
    }
    Ok(value.to_owned())
}

/// Builds the request URL: API root + segments + trailing slash, `op` first in the query.
pub(crate) fn build_url(api_root: &Url, call: &Call) -> Result<Url, MaasError> {
    let mut url = api_root.clone();
    {
        let mut path = url
            .path_segments_mut()
            .map_err(|()| MaasError::Config("MAAS endpoint cannot be a base URL".to_owned()))?;
        path.pop_if_empty();
        path.extend(call.segments.iter().map(String::as_str));
        path.push("");
    }
    let mut query = Params::new();
    if let Some(op) = call.op {
        query.push("op", op);
    }
    if !call.sends_body() {
        for (key, value) in call.params.pairs() {
            query.push(key, value.clone());
        }
    }
    if !query.is_empty() {
        url.set_query(Some(&query.encode()));
    }
    Ok(url)
}

impl MaasClient {
    /// Builds the client and its connection pool. Installs rustls's ring crypto provider for
    /// the process if none is installed yet.
    pub fn new(config: Config) -> Result<Self, MaasError> {
        // Ignoring the error is intended: it only says a provider is already installed.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .timeout(config.request_timeout)
            .user_agent(config.user_agent.clone())
            .pool_idle_timeout(Duration::from_secs(60))
            // MAAS never redirects; refusing redirects keeps the key on the configured host.
            .redirect(reqwest::redirect::Policy::none());
        if config.tls.insecure_skip_tls_verify {
            builder = builder.tls_danger_accept_invalid_certs(true);
        } else if let Some(pem) = &config.tls.ca_bundle_pem {
            let certs = reqwest::Certificate::from_pem_bundle(pem)
                .map_err(|e| MaasError::Config(format!("invalid CA bundle: {e}")))?;
            if certs.is_empty() {
                return Err(MaasError::Config(
                    "CA bundle contains no certificate".to_owned(),
                ));
            }
            builder = match config.tls.ca_mode {
                CaMode::Only => builder.tls_certs_only(certs),
                CaMode::Additional => builder.tls_certs_merge(certs),
            };
        }
        let http = builder
            .build()
            .map_err(|e| MaasError::Config(format!("cannot build HTTP client: {e}")))?;
        Ok(Self {
            inner: Arc::new(Inner {
                http,
                api_root: config.api_root,
                api_key: config.api_key,
                retry: config.retry,
                max_response_bytes: config.max_response_bytes,
                large_response_bytes: config.large_response_bytes,
                large_answers: Arc::new(Semaphore::new(1)),
                limiter: Semaphore::new(config.max_concurrent_requests.max(1)),
                observer: config.observer,
            }),
        })
    }

    /// The API root this client talks to (`.../api/2.0/`).
    pub fn api_root(&self) -> &Url {
        &self.inner.api_root
    }

    /// Sends a call (with retries when idempotent) and decodes a JSON answer.
    pub(crate) async fn json<T: DeserializeOwned>(&self, call: Call) -> Result<T, MaasError> {
        let name = call.name;
        let (_, body) = self.send(&call).await?;
        // Decoded while the body still holds its large-answer permit, if it has one.
        decode(name, &body.bytes)
    }

    /// Sends a call whose answer body is irrelevant (DELETE → 204).
    pub(crate) async fn discard(&self, call: Call) -> Result<(), MaasError> {
        self.send(&call).await.map(|_| ())
    }

    /// Sends a call, retrying idempotent ones on transient errors with jittered exponential
    /// backoff that honours `Retry-After`.
    ///
    /// The HTTP attributes of the exchange (`http.request.method`, `url.full`, `server.*`,
    /// `http.response.status_code`, `http.request.resend_count`) are recorded into the current
    /// span, which the caller opens per call with those fields declared (the gateway's MAAS call
    /// span); under any other span they are dropped.
    pub(crate) async fn send(&self, call: &Call) -> Result<(StatusCode, Body), MaasError> {
        let url = build_url(&self.inner.api_root, call)?;
        let span = tracing::Span::current();
        span.record("http.request.method", call.method.as_str());
        span.record("url.full", url.as_str());
        if let Some(host) = url.host_str() {
            span.record("server.address", host);
        }
        if let Some(port) = url.port_or_known_default() {
            span.record("server.port", port);
        }
        let policy = self.inner.retry;
        let retries = if call.idempotency == Idempotency::Idempotent {
            policy.max_attempts.saturating_sub(1)
        } else {
            0
        };
        let backoff = ExponentialBuilder::default()
            .with_min_delay(policy.base_delay)
            .with_max_delay(policy.max_delay)
            .with_max_times(retries as usize)
            .with_jitter();
        let attempts = AtomicU32::new(0);
        let attempt = || async {
            let number = attempts.fetch_add(1, Ordering::Relaxed) + 1;
            self.attempt(call, &url, number).await
        };
        attempt
            .retry(backoff)
            .sleep(tokio::time::sleep)
            .when(|err: &MaasError| err.is_retryable())
            .adjust(|err: &MaasError, delay| delay.map(|d| policy.delay(d, err.retry_after())))
            .notify(|err: &MaasError, delay: Duration| {
                tracing::debug!(
                    operation = call.name,
                    category = err.category(),
                    delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                    "retrying MAAS call"
                );
            })
            .await
    }

    /// One signed HTTP exchange, under the global concurrency limit.
    async fn attempt(
        &self,
        call: &Call,
        url: &Url,
        number: u32,
    ) -> Result<(StatusCode, Body), MaasError> {
        let _permit = self
            .inner
            .limiter
            .acquire()
            .await
            .map_err(|_| MaasError::Config("client concurrency limiter closed".to_owned()))?;
        let started = Instant::now();
        let result = self.exchange(call, url).await;
        let latency = started.elapsed();
        let (outcome, status) = match &result {
            Ok((status, _)) => ("ok", Some(status.as_u16())),
            Err(err) => (err.category(), error_status(err)),
        };
        let span = tracing::Span::current();
        if let Some(status) = status {
            span.record("http.response.status_code", status);
        }
        if number > 1 {
            span.record("http.request.resend_count", number - 1);
        }
        self.inner.observer.observe(&RequestEvent {
            operation: call.name,
            outcome,
            status,
            latency,
            attempt: number,
        });
        result
    }

    async fn exchange(&self, call: &Call, url: &Url) -> Result<(StatusCode, Body), MaasError> {
        // A fresh nonce and timestamp per attempt: MAAS refuses replays (retries included).
        let mut authorization = HeaderValue::from_str(
            &self
                .inner
                .api_key
                .authorization_header(&new_nonce(), unix_timestamp()),
        )
        .map_err(|_| MaasError::Config("API key contains invalid header characters".to_owned()))?;
        authorization.set_sensitive(true);
        let mut request = self
            .inner
            .http
            .request(call.method.clone(), url.clone())
            .header(AUTHORIZATION, authorization)
            .header(ACCEPT, "application/json");
        if call.sends_body() {
            request = request
                .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
                .body(call.params.encode());
        }
        let mut response = request
            .send()
            .await
            .map_err(|e| MaasError::from_reqwest(&e))?;
        let status = response.status();
        if !status.is_success() {
            // Only a prefix of an error answer is kept; a huge error page is cut, not refused,
            // so the status still decides the error (and whether it is retried).
            let headers = response.headers().clone();
            let limit = self.inner.max_response_bytes.min(MAX_ERROR_READ);
            let body = read_capped(&mut response, limit, None).await?;
            return Err(error_from_response(
                call.context,
                status,
                &headers,
                &body.bytes,
            ));
        }
        let limit = self.inner.max_response_bytes;
        let content_length = response.content_length();
        let too_large = || MaasError::ResponseTooLarge {
            operation: call.name,
            limit,
            content_length,
        };
        // Refused before a byte of the body is read when MAAS declares the size.
        if content_length.is_some_and(|n| n > limit) {
            return Err(too_large());
        }
        let mut gate = LargeAnswerGate {
            threshold: self.inner.large_response_bytes,
            turns: &self.inner.large_answers,
            permit: None,
        };
        // A declared large answer waits for its turn before any of it is read.
        if content_length.is_some_and(|n| n > gate.threshold) {
            gate.take_turn().await?;
        }
        let body = read_capped(&mut response, limit, Some(&mut gate)).await?;
        if body.complete {
            Ok((
                status,
                Body {
                    bytes: body.bytes,
                    _large: gate.permit,
                },
            ))
        } else {
            Err(too_large())
        }
    }
}

/// Longest prefix of an error answer that is read: the error keeps [`crate::MAX_ERROR_BODY`]
/// bytes of it, and a 400's JSON field errors are far smaller.
const MAX_ERROR_READ: u64 = 64 * 1024;

/// A 2xx answer's body, with the large-answer turn it was read under ([`LargeAnswerGate`]),
/// held until the body is dropped (after it is decoded).
#[derive(Debug)]
pub(crate) struct Body {
    pub(crate) bytes: Bytes,
    _large: Option<OwnedSemaphorePermit>,
}

/// Large answers are buffered one at a time: one that is (or turns out, while streaming, to be)
/// larger than `threshold` waits for the single permit of `turns` before it grows further. The
/// holder only reads and decodes, never waits for another turn, so no two answers wait for each
/// other.
struct LargeAnswerGate<'a> {
    threshold: u64,
    turns: &'a Arc<Semaphore>,
    permit: Option<OwnedSemaphorePermit>,
}

impl LargeAnswerGate<'_> {
    async fn take_turn(&mut self) -> Result<(), MaasError> {
        if self.permit.is_none() {
            let permit = Arc::clone(self.turns)
                .acquire_owned()
                .await
                .map_err(|_| MaasError::Config("large-answer gate closed".to_owned()))?;
            self.permit = Some(permit);
        }
        Ok(())
    }
}

/// A body read up to a limit.
#[derive(Debug)]
struct CappedBody {
    /// The body, or its first `limit` bytes when it is longer.
    bytes: Bytes,
    /// Whether the whole body fit within the limit.
    complete: bool,
}

/// Reads a body chunk by chunk and stops as soon as it exceeds `limit` bytes (the rest is
/// never read; the connection is dropped). A body that arrives in one chunk is not copied.
async fn read_capped(
    response: &mut reqwest::Response,
    limit: u64,
    mut gate: Option<&mut LargeAnswerGate<'_>>,
) -> Result<CappedBody, MaasError> {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let mut parts: Vec<Bytes> = Vec::new();
    let mut total = 0usize;
    let mut complete = true;
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| MaasError::from_reqwest(&e))?
    {
        if let Some(gate) = gate.as_deref_mut()
            && u64::try_from(total + chunk.len()).unwrap_or(u64::MAX) > gate.threshold
        {
            gate.take_turn().await?;
        }
        let room = limit - total;
        if chunk.len() > room {
            parts.push(chunk.slice(..room));
            total = limit;
            complete = false;
            break;
        }
        total += chunk.len();
        parts.push(chunk);
    }
    let bytes = match parts.len() {
        0 => Bytes::new(),
        1 => parts.swap_remove(0),
        _ => {
            let mut joined = BytesMut::with_capacity(total);
            for part in &parts {
                joined.extend_from_slice(part);
            }
            joined.freeze()
        }
    };
    Ok(CappedBody { bytes, complete })
}

fn error_status(err: &MaasError) -> Option<u16> {
    match err {
        MaasError::Unauthorized { .. } => Some(401),
        MaasError::Forbidden { .. } => Some(403),
        MaasError::NotFound { .. } => Some(404),
        MaasError::Conflict { .. } | MaasError::NoMatchingMachine { .. } => Some(409),
        MaasError::BadRequest { .. } => Some(400),
        MaasError::AddressUnavailable { status, .. }
        | MaasError::Unavailable { status, .. }
        | MaasError::Server { status, .. } => Some(*status),
        _ => None,
    }
}

/// Decodes a JSON body; any mismatch is a [`MaasError::Decode`] naming the operation.
pub fn decode<T: DeserializeOwned>(context: &'static str, body: &[u8]) -> Result<T, MaasError> {
    serde_json::from_slice(body).map_err(|source| MaasError::Decode { context, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> Url {
        Url::parse("http://127.0.0.1:5240/MAAS/api/2.0/").unwrap()
    }

    #[test]
    fn get_params_and_op_go_in_the_query_with_trailing_slash() {
        let mut params = Params::new();
        params.push_all("tags", ["a", "b"]);
        let call = Call::new("machines.list", Method::GET, vec!["machines".into()])
            .op("list_allocated")
            .params(params);
        assert_eq!(
            build_url(&root(), &call).unwrap().as_str(),
            "http://127.0.0.1:5240/MAAS/api/2.0/machines/?op=list_allocated&tags=a&tags=b"
        );
        assert_eq!(call.idempotency, Idempotency::Idempotent);
    }

    #[test]
    fn post_params_stay_out_of_the_query() {
        let mut params = Params::new();
        params.push("system_id", "abc");
        let call = Call::new("machines.allocate", Method::POST, vec!["machines".into()])
            .op("allocate")
            .params(params);
        assert_eq!(
            build_url(&root(), &call).unwrap().as_str(),
            "http://127.0.0.1:5240/MAAS/api/2.0/machines/?op=allocate"
        );
        assert_eq!(call.idempotency, Idempotency::Once);
        assert!(call.sends_body());
    }

    #[test]
    fn nested_segments_are_encoded() {
        let call = Call::new(
            "network.link_subnet",
            Method::POST,
            vec![
                "nodes".into(),
                "ab c".into(),
                "interfaces".into(),
                "7".into(),
            ],
        );
        assert_eq!(
            build_url(&root(), &call).unwrap().as_str(),
            "http://127.0.0.1:5240/MAAS/api/2.0/nodes/ab%20c/interfaces/7/"
        );
    }

    #[test]
    fn rejects_path_tricks() {
        for bad in ["", ".", "..", "a/b"] {
            assert_eq!(
                segment("system_id", bad).unwrap_err().category(),
                "invalid_argument"
            );
        }
        assert_eq!(segment("system_id", "abc123").unwrap(), "abc123");
    }

    #[test]
    fn decode_errors_name_the_operation() {
        let err = decode::<Vec<u32>>("zones.list", b"{").unwrap_err();
        assert!(matches!(
            err,
            MaasError::Decode {
                context: "zones.list",
                ..
            }
        ));
        assert_eq!(decode::<Vec<u32>>("x", b"[1,2]").unwrap(), vec![1, 2]);
    }
}
