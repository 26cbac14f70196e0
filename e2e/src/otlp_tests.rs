#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use opentelemetry::trace::{
    Span as _, SpanContext, SpanKind as Kind, TraceContextExt as _, TraceFlags, TraceState,
    Tracer as _, TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::{SpanExporter, WithExportConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;

use super::spans::render;
use super::*;
use opentelemetry_proto::tonic::common::v1::{AnyValue, any_value};

const LINKED_TRACE: u128 = 0x0af7_6519_16cd_43dd_8448_eb21_1c80_319c;
const LINKED_SPAN: u64 = 0x00f0_67aa_0ba9_02b7;

/// An exporter of `protocol` sending to `endpoint` the way `OTEL_EXPORTER_OTLP_ENDPOINT` would
/// (the HTTP exporter's programmatic endpoint is the full URL: the signal path is only added to
/// the environment variable's).
fn exporter(protocol: Protocol, endpoint: &str) -> SpanExporter {
    // reqwest is built without a default crypto provider (the workspace uses ring).
    let _ = rustls::crypto::ring::default_provider().install_default();
    match protocol {
        Protocol::Grpc => SpanExporter::builder()
            .with_tonic()
            .with_endpoint(endpoint)
            .build()
            .unwrap(),
        Protocol::HttpProtobuf => SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_endpoint(format!("{endpoint}/v1/traces"))
            .build()
            .unwrap(),
    }
}

/// Exports a client span with attributes and a link, and a child of it, from a service
/// named `service`, then shuts the provider down (which flushes the batch).
async fn export_two_spans(protocol: Protocol, endpoint: &str, service: &'static str) {
    let exporter = exporter(protocol, endpoint);
    let provider = SdkTracerProvider::builder()
        .with_resource(Resource::builder_empty().with_service_name(service).build())
        .with_batch_exporter(exporter)
        .build();
    let tracer = provider.tracer("otlp-receiver-test");
    let linked = SpanContext::new(
        opentelemetry::trace::TraceId::from(LINKED_TRACE),
        opentelemetry::trace::SpanId::from(LINKED_SPAN),
        TraceFlags::SAMPLED,
        true,
        TraceState::default(),
    );
    let parent = tracer
        .span_builder("MAAS allocate")
        .with_kind(Kind::Client)
        .with_attributes([
            KeyValue::new("maas.system_id", "abc123"),
            KeyValue::new("attempt", 2_i64),
            KeyValue::new("retried", true),
            KeyValue::new("ratio", 0.5),
        ])
        .with_links(vec![opentelemetry::trace::Link::with_context(linked)])
        .start(&tracer);
    let cx = Context::current_with_span(parent);
    tracer.start_with_context("decode answer", &cx).end();
    cx.span().end();
    // Shutdown blocks until the batch is exported: off the async workers.
    tokio::task::spawn_blocking(move || provider.shutdown())
        .await
        .unwrap()
        .unwrap();
}

async fn received_over(protocol: Protocol) {
    let receiver = OtlpReceiver::start(protocol).await.unwrap();
    assert!(receiver.endpoint().starts_with("http://127.0.0.1:"));
    export_two_spans(protocol, &receiver.endpoint(), "otlp-test-service").await;
    let spans = receiver
        .wait_for("two spans", Duration::from_secs(10), |spans| {
            (spans.len() >= 2).then(|| spans.to_vec())
        })
        .await
        .unwrap();
    assert_eq!(spans.len(), 2, "{}", receiver.summary(50));
    assert!(receiver.refused().is_empty(), "{:?}", receiver.refused());

    let parent = spans.iter().find(|s| s.name == "MAAS allocate").unwrap();
    let child = spans.iter().find(|s| s.name == "decode answer").unwrap();
    assert_eq!(parent.kind, "SPAN_KIND_CLIENT");
    assert_eq!(child.kind, "SPAN_KIND_INTERNAL");
    assert_eq!(parent.service_name, "otlp-test-service");
    assert_eq!(parent.protocol, protocol);
    let expected: BTreeMap<String, String> = [
        ("maas.system_id", "abc123"),
        ("attempt", "2"),
        ("retried", "true"),
        ("ratio", "0.5"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    assert_eq!(parent.attributes, expected);
    assert_eq!(
        parent.links,
        vec![Link {
            trace_id: "0af7651916cd43dd8448eb211c80319c".into(),
            span_id: "00f067aa0ba902b7".into(),
        }]
    );
    assert_eq!(parent.trace_id.len(), 32);
    assert_eq!(parent.span_id.len(), 16);
    assert_eq!(parent.parent_span_id, "");
    assert_eq!(child.trace_id, parent.trace_id);
    assert_eq!(child.parent_span_id, parent.span_id);
    assert!(parent.start_unix_nanos > 0 && parent.end_unix_nanos >= parent.start_unix_nanos);

    let traces = receiver.traces();
    assert_eq!(traces.len(), 1);
    assert_eq!(traces[&parent.trace_id].len(), 2);
    let described = receiver.describe_trace(&parent.trace_id);
    assert_eq!(described.lines().count(), 2, "{described}");
    assert!(described.contains("CLIENT") && described.contains("maas.system_id=abc123"));
    let summary = receiver.summary(50);
    assert!(
        summary.contains("otlp-test-service") && summary.contains("MAAS allocate"),
        "{summary}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_exported_over_grpc_arrive_with_name_service_and_attributes() {
    received_over(Protocol::Grpc).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_exported_over_http_protobuf_arrive_with_name_service_and_attributes() {
    received_over(Protocol::HttpProtobuf).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_refuses_the_other_protocol() {
    let receiver = OtlpReceiver::start(Protocol::Grpc).await.unwrap();
    export_two_spans(
        Protocol::HttpProtobuf,
        &receiver.endpoint(),
        "wrong-protocol",
    )
    .await;
    assert!(receiver.spans().is_empty(), "{}", receiver.summary(50));
    let refused = receiver.refused();
    assert!(
        refused
            .iter()
            .any(|r| r.contains("OTLP/HTTP") && r.contains("grpc")),
        "{refused:?}"
    );

    let receiver = OtlpReceiver::start(Protocol::HttpProtobuf).await.unwrap();
    export_two_spans(Protocol::Grpc, &receiver.endpoint(), "wrong-protocol").await;
    assert!(receiver.spans().is_empty(), "{}", receiver.summary(50));
    assert!(
        receiver.refused().iter().any(|r| r.contains("OTLP/gRPC")),
        "{:?}",
        receiver.refused()
    );
}

#[test]
fn attribute_values_and_ids_render_as_strings() {
    use opentelemetry_proto::tonic::common::v1::{ArrayValue, KeyValue as Kv, KeyValueList};
    let string = |s: &str| AnyValue {
        value: Some(any_value::Value::StringValue(s.into())),
    };
    assert_eq!(hex(&[0x00, 0xab, 0x10]), "00ab10");
    assert_eq!(render(None), "");
    assert_eq!(render(Some(&string("x"))), "x");
    let array = AnyValue {
        value: Some(any_value::Value::ArrayValue(ArrayValue {
            values: vec![string("a"), string("b")],
        })),
    };
    assert_eq!(render(Some(&array)), "[a, b]");
    let list = AnyValue {
        value: Some(any_value::Value::KvlistValue(KeyValueList {
            values: vec![Kv {
                key: "k".into(),
                value: Some(string("v")),
                ..Kv::default()
            }],
        })),
    };
    assert_eq!(render(Some(&list)), "{k=v}");
}
