//! A client span for every Kubernetes write (create, update, patch, delete) the controllers
//! make, with the resource, verb, status and whether it was a conflict: where a reconcile spends
//! its time, and which writes lose optimistic-locking races, shows in its trace. Reads and
//! watches get no span (a watch would be one span as long as the process lives).

use std::task::{Context, Poll};

use futures::future::BoxFuture;
use http::{Method, Request, Response, StatusCode};
use tower::{Layer, Service};
use tracing::{Instrument, field};

/// Adds [`WriteSpans`] to a client's service stack.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteSpanLayer;

impl<S> Layer<S> for WriteSpanLayer {
    type Service = WriteSpans<S>;

    fn layer(&self, inner: S) -> Self::Service {
        WriteSpans { inner }
    }
}

/// The service wrapper of [`WriteSpanLayer`].
#[derive(Debug, Clone)]
pub struct WriteSpans<S> {
    inner: S,
}

/// What a request path names: `/api/v1/namespaces/ns/pods/name/status` and
/// `/apis/group/version/resource/name` alike.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target<'a> {
    /// The API group, empty for the core group.
    pub group: &'a str,
    /// The namespace, for namespaced objects.
    pub namespace: Option<&'a str>,
    /// The resource (plural), e.g. `maasmachines`.
    pub resource: &'a str,
    /// The object's name (absent for a create or a collection).
    pub name: Option<&'a str>,
    /// The subresource, e.g. `status`.
    pub subresource: Option<&'a str>,
}

/// Parses a Kubernetes API path; `None` for anything else (discovery, `/version`).
pub fn target(path: &str) -> Option<Target<'_>> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match segments.as_slice() {
        ["api", _version, rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => return None,
    };
    let (namespace, rest) = match rest {
        // `/api/v1/namespaces/x` is the namespace object x itself.
        ["namespaces", namespace, resource, tail @ ..] => (Some(*namespace), {
            let mut v = vec![*resource];
            v.extend_from_slice(tail);
            v
        }),
        other => (None, other.to_vec()),
    };
    match rest.as_slice() {
        [resource] => Some(Target {
            group,
            namespace,
            resource,
            name: None,
            subresource: None,
        }),
        [resource, name, sub @ ..] if sub.len() <= 1 => Some(Target {
            group,
            namespace,
            resource,
            name: Some(name),
            subresource: sub.first().copied(),
        }),
        _ => None,
    }
}

/// The Kubernetes verb of a write; `None` for reads.
pub fn write_verb(method: &Method) -> Option<&'static str> {
    match *method {
        Method::POST => Some("create"),
        Method::PUT => Some("update"),
        Method::PATCH => Some("patch"),
        Method::DELETE => Some("delete"),
        _ => None,
    }
}

fn write_span(method: &Method, path: &str) -> Option<tracing::Span> {
    let verb = write_verb(method)?;
    let target = target(path)?;
    let resource = match target.subresource {
        Some(sub) => format!("{}/{sub}", target.resource),
        None => target.resource.to_owned(),
    };
    Some(tracing::info_span!(
        "kubernetes write",
        otel.name = %format_args!("{verb} {resource}"),
        otel.kind = "client",
        otel.status_code = field::Empty,
        http.request.method = %method,
        http.response.status_code = field::Empty,
        k8s.namespace.name = target.namespace.unwrap_or_default(),
        capmaas.k8s.group = target.group,
        capmaas.k8s.resource = %resource,
        capmaas.k8s.name = target.name.unwrap_or_default(),
        capmaas.k8s.verb = verb,
        capmaas.k8s.conflict = field::Empty,
    ))
}

fn record(span: &tracing::Span, status: StatusCode) {
    span.record("http.response.status_code", status.as_u16());
    span.record("capmaas.k8s.conflict", status == StatusCode::CONFLICT);
    if !status.is_success() {
        span.record("otel.status_code", "ERROR");
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for WriteSpans<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let Some(span) = write_span(request.method(), request.uri().path()) else {
            return Box::pin(self.inner.call(request));
        };
        let call = span.in_scope(|| self.inner.call(request));
        Box::pin(
            async move {
                let result = call.await;
                let span = tracing::Span::current();
                match &result {
                    Ok(response) => record(&span, response.status()),
                    Err(_) => {
                        span.record("otel.status_code", "ERROR");
                    }
                }
                result
            }
            .instrument(span),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        assert_eq!(
            target(
                "/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/ns/maasmachines/m1/status"
            ),
            Some(Target {
                group: "infrastructure.cluster.x-k8s.io",
                namespace: Some("ns"),
                resource: "maasmachines",
                name: Some("m1"),
                subresource: Some("status"),
            })
        );
        assert_eq!(
            target("/api/v1/namespaces/ns/events"),
            Some(Target {
                group: "",
                namespace: Some("ns"),
                resource: "events",
                name: None,
                subresource: None,
            })
        );
        let namespace = target("/api/v1/namespaces/ns").map(|t| (t.resource, t.name));
        assert_eq!(namespace, Some(("namespaces", Some("ns"))));
        assert_eq!(target("/version"), None);
        assert_eq!(target("/apis/g/v1/a/b/c/d"), None);
    }

    #[test]
    fn only_writes_get_a_verb() {
        assert_eq!(write_verb(&Method::PATCH), Some("patch"));
        assert_eq!(write_verb(&Method::GET), None);
        assert!(write_span(&Method::GET, "/api/v1/namespaces/ns/pods").is_none());
    }
}
