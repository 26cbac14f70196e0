//! Typed MAAS errors and the pure mapping from an HTTP answer to an error.

use std::collections::BTreeMap;
use std::time::Duration;

use http::{HeaderMap, StatusCode};

use crate::text::clip;

/// Longest error body (in bytes) kept in an error; MAAS can answer with whole HTML pages.
pub const MAX_ERROR_BODY: usize = 512;

/// Everything a MAAS call can fail with.
///
/// Error texts never contain the API key or the `Authorization` header, and response bodies
/// are truncated to [`MAX_ERROR_BODY`] bytes.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MaasError {
    /// 401: unknown key, bad signature, stale timestamp or a replayed nonce.
    #[error("MAAS refused the credentials (401): {message}")]
    Unauthorized {
        /// The (truncated) MAAS message.
        message: String,
    },
    /// 403: the key may not do this (admin-only call, not the owner, locked machine).
    #[error("MAAS denied the operation (403): {message}")]
    Forbidden {
        /// The (truncated) MAAS message; often empty.
        message: String,
    },
    /// 404: the object (or the endpoint) does not exist.
    #[error("not found in MAAS (404): {message}")]
    NotFound {
        /// The (truncated) MAAS message, e.g. `No Machine matches the given query.`
        message: String,
    },
    /// 409: the object is in a state that forbids the operation.
    #[error("MAAS reported a conflict (409): {message}")]
    Conflict {
        /// The (truncated) MAAS message.
        message: String,
    },
    /// 409 from `allocate`: no machine matched the constraints (or the asked one is taken).
    #[error("no MAAS machine matches (409): {message}")]
    NoMatchingMachine {
        /// The (truncated) MAAS message.
        message: String,
    },
    /// This MAAS has no VM hosts (4.0 and later removed them): the VM host endpoints are
    /// unknown (404 `Unknown API endpoint`) or deploy refused `register_vmhost`/`install_kvm`
    /// (400 `Support for install_kvm allocation parameter has been removed.`). Permanent:
    /// report "VM hosts not supported by this MAAS", never retry.
    #[error("VM hosts are not supported by this MAAS: {message}")]
    VmHostsUnsupported {
        /// The (truncated) MAAS message.
        message: String,
    },
    /// `compose` refused: the VM host lacks the cores, memory or storage asked for
    /// (503 `Unable to compose KVM instance in '<host>'. ...`). Not transient despite the
    /// 503: retrying the same request fails the same way until machines are released or the
    /// overcommit ratios raised.
    #[error("MAAS cannot compose the machine (503): {message}")]
    ComposeRefused {
        /// The (truncated) MAAS message.
        message: String,
    },
    /// `link_subnet` refused a static address: MAAS already holds it for an interface (404
    /// `IP address is already in use.`) or it is outside the acceptable range (403).
    #[error("MAAS refused the address ({status}): {message}")]
    AddressUnavailable {
        /// 404 (in use) or 403 (out of range).
        status: u16,
        /// The (truncated) MAAS message.
        message: String,
    },
    /// 502/503/504, or a 409 carrying `Retry-After` (MAAS ran out of internal DB retries):
    /// transient, worth retrying the same call later.
    #[error("MAAS is temporarily unavailable ({status}){}: {message}", retry_after_text(*.retry_after))]
    Unavailable {
        /// The HTTP status.
        status: u16,
        /// The delay MAAS asked for, when it sent `Retry-After`.
        retry_after: Option<Duration>,
        /// The (truncated) MAAS message.
        message: String,
    },
    /// 400: invalid parameters. `fields` holds MAAS's per-field validation errors when the
    /// body was the JSON form `{"field": ["msg", ...]}`.
    #[error(
        "MAAS rejected the request (400): {}",
        bad_request_text(fields, message)
    )]
    BadRequest {
        /// Per-field validation messages (empty when MAAS answered with plain text).
        fields: BTreeMap<String, Vec<String>>,
        /// The (truncated) plain-text message (empty when `fields` is set).
        message: String,
    },
    /// The request never got an HTTP answer (connection refused, reset, TLS failure...).
    #[error("transport error talking to MAAS: {message}")]
    Transport {
        /// Description of the failure, including its causes.
        message: String,
    },
    /// The request timed out (connect or whole-request timeout).
    #[error("request to MAAS timed out")]
    Timeout,
    /// A 2xx answer whose body could not be decoded into the expected type.
    #[error("cannot decode MAAS answer for {context}: {source}")]
    Decode {
        /// The operation whose answer failed to decode.
        context: &'static str,
        /// The JSON error (type mismatch, syntax, missing field).
        #[source]
        source: serde_json::Error,
    },
    /// A 2xx answer larger than [`crate::Config::max_response_bytes`]: refused before it is
    /// decoded (early from `Content-Length` when MAAS sends one, else while streaming). Not
    /// retried: the same request returns the same body; raise the limit if the MAAS is that
    /// large. The text names the operation and the limit, never the body.
    #[error(
        "MAAS answer to {operation} exceeds the limit of {limit} bytes{}",
        declared_text(*.content_length)
    )]
    ResponseTooLarge {
        /// The operation whose answer was refused, e.g. `machines.list`.
        operation: &'static str,
        /// The configured limit in bytes.
        limit: u64,
        /// The size MAAS declared in `Content-Length`, when it sent one.
        content_length: Option<u64>,
    },
    /// Any other non-success status (500, 405, 410, ...).
    #[error("MAAS answered {status}: {body}")]
    Server {
        /// The HTTP status.
        status: u16,
        /// The (truncated) body.
        body: String,
    },
    /// The client configuration is invalid (bad endpoint URL, bad CA bundle, ...).
    #[error("invalid MAAS client configuration: {0}")]
    Config(String),
    /// A request argument is invalid and was not sent (e.g. an annotation key MAAS would crash on).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// Not sent: the caller may no longer act (a leader whose leadership fence lapsed). Never
    /// produced by this crate; a wrapper that checks before sending returns it.
    #[error("not sent to MAAS: this replica is no longer the leader")]
    Fenced,
}

fn retry_after_text(retry_after: Option<Duration>) -> String {
    retry_after.map_or_else(String::new, |d| format!(", retry after {}s", d.as_secs()))
}

fn declared_text(content_length: Option<u64>) -> String {
    content_length.map_or_else(String::new, |n| format!(" (Content-Length {n})"))
}

fn bad_request_text(fields: &BTreeMap<String, Vec<String>>, message: &str) -> String {
    if fields.is_empty() {
        return message.to_owned();
    }
    fields
        .iter()
        .map(|(field, messages)| format!("{field}: {}", messages.join(" ")))
        .collect::<Vec<_>>()
        .join("; ")
}

impl MaasError {
    /// What MAAS said: the (truncated) message, or `field: messages; ...` of a 400 validation
    /// answer; empty for errors without a MAAS answer body.
    pub fn maas_message(&self) -> String {
        match self {
            Self::Unauthorized { message }
            | Self::Forbidden { message }
            | Self::NotFound { message }
            | Self::Conflict { message }
            | Self::NoMatchingMachine { message }
            | Self::VmHostsUnsupported { message }
            | Self::ComposeRefused { message }
            | Self::AddressUnavailable { message, .. }
            | Self::Unavailable { message, .. } => message.clone(),
            Self::BadRequest { fields, message } => bad_request_text(fields, message),
            Self::Server { body, .. } => body.clone(),
            _ => String::new(),
        }
    }

    /// A low-cardinality label for metrics and logs.
    pub fn category(&self) -> &'static str {
        match self {
            Self::Unauthorized { .. } => "unauthorized",
            Self::Forbidden { .. } => "forbidden",
            Self::NotFound { .. } => "not_found",
            Self::Conflict { .. } => "conflict",
            Self::NoMatchingMachine { .. } => "no_matching_machine",
            Self::VmHostsUnsupported { .. } => "vm_hosts_unsupported",
            Self::ComposeRefused { .. } => "compose_refused",
            Self::AddressUnavailable { .. } => "address_unavailable",
            Self::Unavailable { .. } => "unavailable",
            Self::BadRequest { .. } => "bad_request",
            Self::Transport { .. } => "transport",
            Self::Timeout => "timeout",
            Self::Decode { .. } => "decode",
            Self::ResponseTooLarge { .. } => "response_too_large",
            Self::Server { .. } => "server",
            Self::Config(_) => "config",
            Self::InvalidArgument(_) => "invalid_argument",
            Self::Fenced => "fenced",
        }
    }

    /// Whether repeating the same call later may succeed. The client only acts on this for
    /// idempotent operations; see [`crate::RetryPolicy`].
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Unavailable { .. } | Self::Transport { .. } | Self::Timeout => true,
            Self::Server { status, .. } => *status >= 500,
            _ => false,
        }
    }

    /// The delay MAAS asked for with `Retry-After`, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Unavailable { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// Builds a transport or timeout error from a reqwest error, keeping its cause chain but
    /// never the request headers (reqwest errors carry only the URL, which holds no secret).
    pub(crate) fn from_reqwest(err: &reqwest::Error) -> Self {
        if err.is_timeout() {
            return Self::Timeout;
        }
        let mut message = err.to_string();
        let mut source = std::error::Error::source(err);
        while let Some(cause) = source {
            message.push_str(": ");
            message.push_str(&cause.to_string());
            source = cause.source();
        }
        Self::Transport {
            message: truncate(&message),
        }
    }
}

/// What kind of call produced an error answer; 409 means different things per call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorContext {
    /// `POST /machines/?op=allocate`: a plain 409 means no machine matched.
    Allocate,
    /// `POST .../interfaces/{id}/?op=link_subnet`: a 404 `... already in use.` or a 403 is
    /// MAAS refusing the static address ([`MaasError::AddressUnavailable`]).
    LinkSubnet,
    /// A `/vm-hosts/` call: a 404 `Unknown API endpoint` means this MAAS has no VM hosts
    /// ([`MaasError::VmHostsUnsupported`]).
    VmHosts,
    /// `POST /vm-hosts/{id}/?op=compose`: as [`ErrorContext::VmHosts`], and a 503
    /// `Unable to compose ...` is [`MaasError::ComposeRefused`].
    Compose,
    /// Every other call.
    Other,
}

/// MAAS 4.0's answer to `install_kvm`/`register_vmhost` on deploy.
const VM_HOSTS_REMOVED: &str = "install_kvm allocation parameter has been removed";

/// Maps a non-2xx MAAS answer to a typed error. Pure, so every branch is unit-tested.
pub fn error_from_response(
    context: ErrorContext,
    status: StatusCode,
    headers: &HeaderMap,
    body: &[u8],
) -> MaasError {
    let text = truncate(&String::from_utf8_lossy(body));
    let retry_after = parse_retry_after(headers);
    let vm_host_call = matches!(context, ErrorContext::VmHosts | ErrorContext::Compose);
    match status.as_u16() {
        404 if vm_host_call && text.starts_with("Unknown API endpoint") => {
            MaasError::VmHostsUnsupported { message: text }
        }
        400 if text.contains(VM_HOSTS_REMOVED) => MaasError::VmHostsUnsupported { message: text },
        503 if context == ErrorContext::Compose && text.starts_with("Unable to compose") => {
            MaasError::ComposeRefused { message: text }
        }
        code @ (403 | 404)
            if context == ErrorContext::LinkSubnet
                && (code == 403 || text.contains("already in use")) =>
        {
            MaasError::AddressUnavailable {
                status: code,
                message: text,
            }
        }
        400 => bad_request(body, text),
        401 => MaasError::Unauthorized { message: text },
        403 => MaasError::Forbidden { message: text },
        404 => MaasError::NotFound { message: text },
        409 if retry_after.is_some() => MaasError::Unavailable {
            status: 409,
            retry_after,
            message: summarise_html(&text),
        },
        409 if context == ErrorContext::Allocate => MaasError::NoMatchingMachine { message: text },
        409 => MaasError::Conflict { message: text },
        code @ (502..=504) => MaasError::Unavailable {
            status: code,
            retry_after,
            message: summarise_html(&text),
        },
        code => MaasError::Server {
            status: code,
            body: text,
        },
    }
}

/// Only 400 validation errors are JSON (`{"field": ["msg"]}` or `["msg"]`); anything else is text.
fn bad_request(body: &[u8], text: String) -> MaasError {
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(serde_json::Value::Object(map)) => {
            let fields = map
                .into_iter()
                .map(|(field, value)| (field, messages_of(value)))
                .collect();
            MaasError::BadRequest {
                fields,
                message: String::new(),
            }
        }
        Ok(serde_json::Value::Array(items)) => MaasError::BadRequest {
            fields: BTreeMap::new(),
            message: truncate(&messages_of(serde_json::Value::Array(items)).join("; ")),
        },
        _ => MaasError::BadRequest {
            fields: BTreeMap::new(),
            message: text,
        },
    }
}

fn messages_of(value: serde_json::Value) -> Vec<String> {
    match value {
        serde_json::Value::Array(items) => items
            .into_iter()
            .map(|item| match item {
                serde_json::Value::String(s) => truncate(&s),
                other => truncate(&other.to_string()),
            })
            .collect(),
        serde_json::Value::String(s) => vec![truncate(&s)],
        other => vec![truncate(&other.to_string())],
    }
}

/// `Retry-After` in delta-seconds (MAAS never sends the HTTP-date form).
fn parse_retry_after(headers: &HeaderMap) -> Option<Duration> {
    headers
        .get(http::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()
        .map(Duration::from_secs)
}

/// The 409 retry-exhaustion answer is a Django HTML page; keep a readable hint instead.
fn summarise_html(text: &str) -> String {
    let trimmed = text.trim_start();
    if trimmed.starts_with('<') {
        "MAAS returned an HTML error page (transient server conflict)".to_owned()
    } else {
        text.to_owned()
    }
}

/// Truncates to at most [`MAX_ERROR_BODY`] bytes on a character boundary.
pub(crate) fn truncate(text: &str) -> String {
    clip(text, MAX_ERROR_BODY)
}

#[cfg(test)]
#[path = "error_tests.rs"]
mod tests;
