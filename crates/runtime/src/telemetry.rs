//! Logging (tracing-subscriber) and optional OpenTelemetry trace export.
//!
//! - Filter: `--log-level` / `RUST_LOG` in EnvFilter syntax.
//! - Format: JSON lines in clusters, human text on a terminal (`--log-format`).
//! - OTLP export configured by the standard `OTEL_*` variables ([`crate::otlp`]). The
//!   exporter's own transport (h2, hyper, tonic, tower, reqwest) is excluded from the OTel
//!   layer, or exporting spans would create spans to export; so is kube-runtime's per-reconcile
//!   span, which would otherwise start a trace of its own for every reconcile (the kit's
//!   `reconcile` span carries the object and the trace it belongs to, see
//!   [`crate::trace_context`]).
//! - Spans are flushed when the process stops ([`TelemetryGuard::shutdown`], after SIGTERM).

use std::io::IsTerminal;
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Subscriber;
use tracing::level_filters::LevelFilter;
use tracing_subscriber::filter::{EnvFilter, FilterExt, Targets};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, Registry};

use crate::error::{Error, Result};
use crate::flags::LogFormat;
use crate::otlp::OtlpConfig;

/// How long the guard waits for the last span batch on shutdown.
pub const OTEL_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// Targets whose spans never go to the OTel layer (the exporter's own transport).
pub const OTEL_EXCLUDED_TARGETS: [&str; 8] = [
    "h2",
    "hyper",
    "tonic",
    "tower",
    "opentelemetry",
    "reqwest",
    "kube_runtime",
    "kube_client",
];

/// Telemetry settings.
#[derive(Debug, Clone)]
pub struct TelemetryConfig {
    /// `service.name` of exported spans (unless `OTEL_SERVICE_NAME` is set).
    pub service_name: String,
    /// EnvFilter directives.
    pub filter: String,
    /// Output format.
    pub format: LogFormat,
    /// OTLP export; `None` disables it.
    pub otlp: Option<OtlpConfig>,
}

impl TelemetryConfig {
    /// Settings from flags plus the `OTEL_*` environment variables; a bad value is an error.
    pub fn from_env(service_name: &str, filter: &str, format: LogFormat) -> Result<Self> {
        Ok(Self {
            service_name: service_name.to_owned(),
            filter: filter.to_owned(),
            format,
            otlp: OtlpConfig::from_env()?,
        })
    }
}

/// Keeps the trace exporter alive; flushes and shuts it down on [`shutdown`](Self::shutdown) or drop.
#[derive(Debug, Default)]
#[must_use = "dropping the guard shuts the trace exporter down"]
pub struct TelemetryGuard {
    provider: Option<SdkTracerProvider>,
}

impl TelemetryGuard {
    /// Whether spans are exported over OTLP.
    pub fn exporting(&self) -> bool {
        self.provider.is_some()
    }

    /// Flushes the last batch and stops the exporter without blocking an async worker thread.
    pub async fn shutdown(mut self) {
        if let Some(provider) = self.provider.take() {
            let done = tokio::task::spawn_blocking(move || {
                provider.shutdown_with_timeout(OTEL_SHUTDOWN_TIMEOUT)
            })
            .await;
            if let Ok(Err(e)) = done {
                tracing::warn!(error = %e, "trace exporter shutdown failed");
            }
        }
    }
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take() {
            // Fallback when `shutdown` was not awaited: blocks at most OTEL_SHUTDOWN_TIMEOUT.
            let _ = provider.shutdown_with_timeout(OTEL_SHUTDOWN_TIMEOUT);
        }
    }
}

/// Parses the filter directives; an invalid filter is a startup error, not a silent default.
pub fn env_filter(directives: &str) -> Result<EnvFilter> {
    EnvFilter::builder()
        .with_default_directive(LevelFilter::INFO.into())
        .parse(directives)
        .map_err(|e| Error::Telemetry(format!("invalid log filter {directives:?}: {e}")))
}

/// The filter that keeps the exporter's transport out of the OTel layer.
pub fn otel_target_filter() -> Targets {
    OTEL_EXCLUDED_TARGETS.iter().fold(
        Targets::new().with_default(LevelFilter::TRACE),
        |t, target| t.with_target(*target, LevelFilter::OFF),
    )
}

type BoxedLayer = Box<dyn Layer<Registry> + Send + Sync + 'static>;

/// The log layer, filtered by `directives`, writing to `writer`.
fn log_layer<W>(directives: &str, json: bool, writer: W) -> Result<BoxedLayer>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let filter = env_filter(directives)?;
    let layer = tracing_subscriber::fmt::layer().with_writer(writer);
    Ok(if json {
        layer
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .with_filter(filter)
            .boxed()
    } else {
        layer.with_ansi(false).with_filter(filter).boxed()
    })
}

fn otel_layer<S>(
    directives: &str,
    provider: &SdkTracerProvider,
    service: &str,
) -> Result<impl Layer<S>>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let filter = env_filter(directives)?.and(otel_target_filter());
    let tracer = provider.tracer(service.to_owned());
    Ok(tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_filter(filter))
}

/// Builds the trace provider exporting per `config`. Must run inside a Tokio runtime (tonic's
/// channel).
pub fn otlp_provider(service_name: &str, config: &OtlpConfig) -> Result<SdkTracerProvider> {
    let exporter = config.exporter()?;
    // `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` (read by the builder) win over the
    // binary's name.
    let mut resource = Resource::builder()
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")));
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name(service_name.to_owned());
    }
    Ok(SdkTracerProvider::builder()
        .with_resource(resource.build())
        .with_sampler(config.sampler.clone())
        .with_batch_exporter(exporter)
        .build())
}

/// Installs the global subscriber. Call once, early in `main`, inside the Tokio runtime.
pub fn init(config: &TelemetryConfig) -> Result<TelemetryGuard> {
    let json = config.format.use_json(std::io::stderr().is_terminal());
    let mut layers = vec![log_layer(&config.filter, json, std::io::stderr)?];
    let mut guard = TelemetryGuard::default();
    if let Some(otlp) = &config.otlp {
        let provider = otlp_provider(&config.service_name, otlp)?;
        layers.push(otel_layer(&config.filter, &provider, &config.service_name)?.boxed());
        opentelemetry::global::set_text_map_propagator(
            opentelemetry_sdk::propagation::TraceContextPropagator::new(),
        );
        opentelemetry::global::set_tracer_provider(provider.clone());
        guard.provider = Some(provider);
    }
    tracing_subscriber::registry()
        .with(layers)
        .try_init()
        .map_err(|e| Error::Telemetry(format!("a global subscriber is already set: {e}")))?;
    if let (true, Some(otlp)) = (guard.exporting(), &config.otlp) {
        tracing::info!(endpoint = %otlp.endpoint, protocol = %otlp.protocol, "exporting traces over OTLP");
    }
    Ok(guard)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);
    impl Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    impl<'a> MakeWriter<'a> for Buffer {
        type Writer = Buffer;
        fn make_writer(&'a self) -> Self::Writer {
            self.clone()
        }
    }
    impl Buffer {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    fn capture(directives: &str, json: bool, f: impl FnOnce()) -> String {
        let buf = Buffer::default();
        let layer = log_layer(directives, json, buf.clone()).unwrap();
        let subscriber = tracing_subscriber::registry().with(vec![layer]);
        tracing::subscriber::with_default(subscriber, f);
        buf.text()
    }

    #[test]
    fn json_lines_are_json_with_flattened_fields() {
        let out = capture("info", true, || {
            tracing::info!(machine = "m-1", "claimed host");
        });
        let line: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
        assert_eq!(line["message"], "claimed host");
        assert_eq!(line["machine"], "m-1");
        assert_eq!(line["level"], "INFO");
    }

    #[test]
    fn text_output_is_not_json() {
        let out = capture("info", false, || tracing::info!("hello"));
        assert!(out.contains("hello"));
        assert!(serde_json::from_str::<serde_json::Value>(out.trim()).is_err());
    }

    #[test]
    fn filter_applies() {
        let out = capture("warn", false, || {
            tracing::info!("hidden");
            tracing::warn!("shown");
        });
        assert!(!out.contains("hidden") && out.contains("shown"), "{out}");
        let out = capture("warn,capmaas_runtime=debug", false, || {
            tracing::debug!("module debug");
        });
        assert!(out.contains("module debug"), "{out}");
    }

    #[test]
    fn invalid_filter_is_an_error() {
        let err = env_filter("info,=[").unwrap_err();
        assert!(matches!(err, Error::Telemetry(_)), "{err:?}");
    }

    #[test]
    fn transport_targets_are_excluded_from_otel() {
        let f = otel_target_filter();
        for t in [
            "h2",
            "h2::codec",
            "hyper",
            "hyper_util::client",
            "tonic::transport",
            "tower::buffer",
        ] {
            assert!(!f.would_enable(t, &tracing::Level::ERROR), "{t}");
        }
        assert!(f.would_enable("capmaas_runtime", &tracing::Level::TRACE));
        assert!(f.would_enable("maas_client::host", &tracing::Level::INFO));
        assert!(!f.would_enable("kube_runtime::controller", &tracing::Level::INFO));
    }

    #[tokio::test]
    async fn otlp_provider_builds_and_shuts_down_without_a_collector() {
        // Nothing listens on port 1: the channel connects lazily, so building succeeds and
        // shutdown returns within its timeout.
        let config = OtlpConfig {
            endpoint: "http://127.0.0.1:1".to_owned(),
            protocol: crate::otlp::Protocol::Grpc,
            tls: crate::otlp::TlsFiles::default(),
            sampler: opentelemetry_sdk::trace::Sampler::AlwaysOn,
        };
        let provider = otlp_provider("test", &config).unwrap();
        let layer = otel_layer::<Registry>("info", &provider, "test").unwrap();
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, || {
            let _span = tracing::info_span!("reconcile").entered();
        });
        let guard = TelemetryGuard {
            provider: Some(provider),
        };
        assert!(guard.exporting());
        tokio::time::timeout(Duration::from_secs(10), guard.shutdown())
            .await
            .unwrap();
    }

    /// Keeps what it is given (the SDK's in-memory exporter forgets on shutdown).
    #[derive(Debug, Clone, Default)]
    struct Kept(Arc<Mutex<Vec<String>>>);

    impl opentelemetry_sdk::trace::SpanExporter for Kept {
        async fn export(
            &self,
            batch: Vec<opentelemetry_sdk::trace::SpanData>,
        ) -> opentelemetry_sdk::error::OTelSdkResult {
            self.0
                .lock()
                .unwrap()
                .extend(batch.into_iter().map(|s| s.name.into_owned()));
            Ok(())
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn shutdown_flushes_the_last_batch() {
        // A batch that would be sent only in an hour: what SIGTERM finds pending.
        let kept = Kept::default();
        let processor = opentelemetry_sdk::trace::BatchSpanProcessor::builder(kept.clone())
            .with_batch_config(
                opentelemetry_sdk::trace::BatchConfigBuilder::default()
                    .with_scheduled_delay(Duration::from_secs(3600))
                    .build(),
            )
            .build();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(processor)
            .build();
        let layer = otel_layer::<Registry>("info", &provider, "test").unwrap();
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
            let _span = tracing::info_span!("last words").entered();
        });
        assert!(
            kept.0.lock().unwrap().is_empty(),
            "exported before shutdown"
        );
        TelemetryGuard {
            provider: Some(provider),
        }
        .shutdown()
        .await;
        assert_eq!(*kept.0.lock().unwrap(), vec!["last words".to_owned()]);
    }
}
