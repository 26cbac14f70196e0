//! W3C trace context carried on Kubernetes objects, so that work one Deployment hands to
//! another through an object joins the trace of the work that asked for it.
//!
//! The writer puts the `traceparent` of its current span into the annotation
//! [`TRACEPARENT_ANNOTATION`] of the object it writes anyway (the claim and deployment request
//! on a MaasHost, the finalizer patch on a new MaasMachine): tracing costs no extra API write.
//! The kit's reconcile span of the reading side then follows that context
//! ([`crate::controller::run_traced`]):
//!
//! - as its **child** while the object still has work outstanding for that request (the
//!   controller says so per object): one machine's provisioning, across processes, is one
//!   trace, which is what an operator asking "why is this machine not Running yet?" opens;
//! - as a **link** afterwards: periodic resyncs and unrelated later changes would otherwise
//!   keep growing a trace that finished days ago; a link still leads back to it.
//!
//! Without trace export nothing is written: the current span has no valid context.

use std::collections::HashMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The annotation holding the W3C `traceparent` of the request an object carries.
pub const TRACEPARENT_ANNOTATION: &str = "maas.cluster.x-k8s.io/traceparent";

const TRACEPARENT: &str = "traceparent";

/// How a reconcile span relates to the trace an object's annotation names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relation {
    /// Part of that trace: the reconcile works on the request the annotation came with.
    Child,
    /// A trace of its own that links to it: the request is done.
    Link,
}

/// The `traceparent` of the current span; `None` when spans are not exported.
pub fn current_traceparent() -> Option<String> {
    let cx = Span::current().context();
    if !cx.span().span_context().is_valid() {
        return None;
    }
    let mut carrier = HashMap::new();
    TraceContextPropagator::new().inject_context(&cx, &mut carrier);
    carrier.remove(TRACEPARENT)
}

/// The remote context a `traceparent` names; `None` when it is malformed.
pub fn parse(traceparent: &str) -> Option<opentelemetry::Context> {
    let carrier = HashMap::from([(TRACEPARENT.to_owned(), traceparent.trim().to_owned())]);
    let cx = TraceContextPropagator::new().extract(&carrier);
    cx.span().span_context().is_valid().then_some(cx)
}

/// Makes `span` (not entered yet) follow the trace `traceparent` names, as `relation` says.
/// A malformed value is ignored: the span starts a trace of its own.
pub fn follow(span: &Span, traceparent: &str, relation: Relation) {
    let Some(cx) = parse(traceparent) else {
        return;
    };
    match relation {
        Relation::Child => {
            // Fails only when the span is disabled or already started: it then stays a root.
            let _ = span.set_parent(cx);
        }
        Relation::Link => span.add_link(cx.span().span_context().clone()),
    }
}

/// Puts the current span's `traceparent` into `meta` (for a write about to be sent); returns
/// whether it changed anything. Does nothing when spans are not exported.
pub fn stamp(meta: &mut ObjectMeta) -> bool {
    let Some(traceparent) = current_traceparent() else {
        return false;
    };
    let annotations = meta.annotations.get_or_insert_with(Default::default);
    annotations.insert(TRACEPARENT_ANNOTATION.to_owned(), traceparent.clone()) != Some(traceparent)
}

/// The `traceparent` annotation of `meta`, if any.
pub fn annotation(meta: &ObjectMeta) -> Option<&str> {
    meta.annotations
        .as_ref()?
        .get(TRACEPARENT_ANNOTATION)
        .map(String::as_str)
}

#[cfg(test)]
#[path = "trace_context_tests.rs"]
mod tests;
