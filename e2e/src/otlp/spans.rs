//! The received spans as plain structs, and how they are shown in failure messages.

use std::collections::BTreeMap;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;

use super::Protocol;

/// A span link: the linked span's context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// Hex trace id.
    pub trace_id: String,
    /// Hex span id.
    pub span_id: String,
}

/// One received span.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    /// Hex trace id (32 digits).
    pub trace_id: String,
    /// Hex span id (16 digits).
    pub span_id: String,
    /// Hex span id of the parent; empty for a root span.
    pub parent_span_id: String,
    /// Span name.
    pub name: String,
    /// The proto enum name, e.g. `SPAN_KIND_CLIENT`.
    pub kind: String,
    /// The resource's `service.name` (empty when it has none).
    pub service_name: String,
    /// Attributes, values rendered as strings (arrays as `[a, b]`, bytes as hex).
    pub attributes: BTreeMap<String, String>,
    /// Links to other spans.
    pub links: Vec<Link>,
    /// Start, Unix nanoseconds.
    pub start_unix_nanos: u64,
    /// End, Unix nanoseconds.
    pub end_unix_nanos: u64,
    /// The transport it arrived by.
    pub protocol: Protocol,
}

/// Spans by trace id, each trace's spans by start time.
pub fn group_by_trace(spans: &[Span]) -> BTreeMap<String, Vec<Span>> {
    let mut traces: BTreeMap<String, Vec<Span>> = BTreeMap::new();
    for span in spans {
        traces
            .entry(span.trace_id.clone())
            .or_default()
            .push(span.clone());
    }
    for spans in traces.values_mut() {
        spans.sort_by_key(|s| s.start_unix_nanos);
    }
    traces
}

/// One line for a span: service, kind, name, span and parent ids, attributes (`maas.*` first;
/// the tracing bridge's `code.*`, `thread.*`, `busy_ns`, `idle_ns` left out; cut at 200
/// characters).
pub fn describe(span: &Span) -> String {
    let noise = |k: &str| {
        k.starts_with("code.") || k.starts_with("thread.") || k == "busy_ns" || k == "idle_ns"
    };
    let mut attributes: Vec<(&String, &String)> =
        span.attributes.iter().filter(|(k, _)| !noise(k)).collect();
    attributes.sort_by_key(|(k, _)| !k.starts_with("maas."));
    let attributes: Vec<String> = attributes
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let mut attributes = attributes.join(" ");
    if attributes.chars().count() > 200 {
        attributes = attributes.chars().take(200).chain(['…']).collect();
    }
    format!(
        "{:<22} {:<8} {:<32} span {} parent {:<16} {attributes}",
        span.service_name,
        span.kind.trim_start_matches("SPAN_KIND_"),
        span.name,
        span.span_id,
        if span.parent_span_id.is_empty() {
            "-"
        } else {
            &span.parent_span_id
        },
    )
}

/// The spans of one export as plain structs.
pub(super) fn convert(request: ExportTraceServiceRequest, protocol: Protocol) -> Vec<Span> {
    let mut out = Vec::new();
    for resource_spans in request.resource_spans {
        let service_name = resource_spans
            .resource
            .iter()
            .flat_map(|r| &r.attributes)
            .find(|kv| kv.key == "service.name")
            .map(|kv| render(kv.value.as_ref()))
            .unwrap_or_default();
        for span in resource_spans.scope_spans.into_iter().flat_map(|s| s.spans) {
            out.push(Span {
                trace_id: hex(&span.trace_id),
                span_id: hex(&span.span_id),
                parent_span_id: hex(&span.parent_span_id),
                kind: SpanKind::try_from(span.kind).map_or_else(
                    |_| format!("SPAN_KIND_{}", span.kind),
                    |k| k.as_str_name().to_owned(),
                ),
                name: span.name,
                service_name: service_name.clone(),
                attributes: span
                    .attributes
                    .iter()
                    .map(|kv| (kv.key.clone(), render(kv.value.as_ref())))
                    .collect(),
                links: span
                    .links
                    .iter()
                    .map(|l| Link {
                        trace_id: hex(&l.trace_id),
                        span_id: hex(&l.span_id),
                    })
                    .collect(),
                start_unix_nanos: span.start_time_unix_nano,
                end_unix_nanos: span.end_time_unix_nano,
                protocol,
            });
        }
    }
    out
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// An attribute value as a string.
pub(super) fn render(value: Option<&AnyValue>) -> String {
    use any_value::Value as V;
    let join = |items: Vec<String>| items.join(", ");
    match value.and_then(|v| v.value.as_ref()) {
        None => String::new(),
        Some(V::StringValue(s)) => s.clone(),
        Some(V::BoolValue(b)) => b.to_string(),
        Some(V::IntValue(i)) => i.to_string(),
        Some(V::DoubleValue(d)) => d.to_string(),
        Some(V::BytesValue(b)) => hex(b),
        Some(V::ArrayValue(a)) => format!(
            "[{}]",
            join(a.values.iter().map(|v| render(Some(v))).collect())
        ),
        Some(V::KvlistValue(l)) => format!(
            "{{{}}}",
            join(
                l.values
                    .iter()
                    .map(|kv| format!("{}={}", kv.key, render(kv.value.as_ref())))
                    .collect()
            )
        ),
        Some(V::StringValueStrindex(i)) => format!("<string table index {i}>"),
    }
}
