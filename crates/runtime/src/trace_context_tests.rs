#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use tracing_subscriber::layer::SubscriberExt;

use super::*;

/// A subscriber exporting to memory, and the exporter to read the spans back.
fn recording() -> (
    impl tracing::Subscriber + Send + Sync,
    InMemorySpanExporter,
    SdkTracerProvider,
) {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("test"));
    (
        tracing_subscriber::registry().with(layer),
        exporter,
        provider,
    )
}

const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// The trace of `span` once it follows the stamped `value` as `relation` and has been entered.
fn followed(
    span: &tracing::Span,
    value: &str,
    relation: Relation,
) -> opentelemetry::trace::TraceId {
    follow(span, value, relation);
    span.in_scope(|| {});
    span.context().span().span_context().trace_id()
}

#[test]
fn no_export_no_traceparent_and_no_stamp() {
    assert_eq!(current_traceparent(), None);
    let mut meta = ObjectMeta::default();
    assert!(!stamp(&mut meta));
    assert_eq!(meta.annotations, None);
}

#[test]
fn malformed_values_are_ignored() {
    assert!(parse("").is_none());
    assert!(parse("00-zz-00f067aa0ba902b7-01").is_none());
    assert!(parse(PARENT).is_some());
}

#[test]
fn stamp_then_follow_as_child_joins_the_trace() {
    let (subscriber, exporter, provider) = recording();
    tracing::subscriber::with_default(subscriber, || {
        let writer = tracing::info_span!("writer");
        let mut meta = ObjectMeta::default();
        writer.in_scope(|| assert!(stamp(&mut meta)));
        let value = annotation(&meta).unwrap().to_owned();
        let writer_trace = writer.context().span().span_context().trace_id();
        drop(writer);

        let child = tracing::info_span!("reader");
        assert_eq!(followed(&child, &value, Relation::Child), writer_trace);
        drop(child);

        let linked = tracing::info_span!("later");
        assert_ne!(followed(&linked, &value, Relation::Link), writer_trace);
    });
    provider.force_flush().unwrap();
    let spans = exporter.get_finished_spans().unwrap();
    let later = spans.iter().find(|s| s.name == "later").unwrap();
    assert_eq!(later.links.links.len(), 1);
    let reader = spans.iter().find(|s| s.name == "reader").unwrap();
    let writer = spans.iter().find(|s| s.name == "writer").unwrap();
    assert_eq!(reader.parent_span_id, writer.span_context.span_id());
}
