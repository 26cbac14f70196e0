//! OTLP trace export configured by the OpenTelemetry environment variables, as the
//! specification defines them (<https://opentelemetry.io/docs/specs/otel/protocol/exporter/>):
//!
//! - `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as is) or `OTEL_EXPORTER_OTLP_ENDPOINT` (for
//!   HTTP, `/v1/traces` is appended). Neither set: no export, unless `OTEL_TRACES_EXPORTER=otlp`
//!   asks for it, then the specification's default (`localhost:4317` gRPC, `:4318` HTTP).
//! - `OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL`: `grpc` (the default, as before this variable was
//!   read) or `http/protobuf`.
//! - `OTEL_EXPORTER_OTLP_[TRACES_]CERTIFICATE` (CA bundle, PEM) and
//!   `…_CLIENT_CERTIFICATE` / `…_CLIENT_KEY` (mutual TLS) for an `https` endpoint, whose server
//!   is otherwise verified against the system's roots.
//! - `OTEL_EXPORTER_OTLP_[TRACES_]HEADERS`, `…_TIMEOUT`, `…_COMPRESSION`: read by the exporter
//!   itself; headers and timeout are checked here first, so a typo stops the start instead of
//!   exporting nothing. Header values are never logged (they usually carry a token).
//! - `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG`; `OTEL_TRACES_EXPORTER=none` and
//!   `OTEL_SDK_DISABLED=true` switch export off; `OTEL_SERVICE_NAME` and
//!   `OTEL_RESOURCE_ATTRIBUTES` name the process.
//!
//! Every value is checked at start-up: a bad one is an error naming the variable (the SDK on its
//! own would fall back to a default and say nothing).

use std::path::PathBuf;

use opentelemetry_otlp::{WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_sdk::trace::Sampler;

use crate::error::{Error, Result};

/// The transport of the exporter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// OTLP/gRPC.
    Grpc,
    /// OTLP/HTTP with protobuf bodies.
    HttpProtobuf,
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Grpc => "grpc",
            Self::HttpProtobuf => "http/protobuf",
        })
    }
}

impl Protocol {
    fn parse(variable: &str, value: &str) -> Result<Self> {
        match value.trim() {
            "grpc" => Ok(Self::Grpc),
            "http/protobuf" => Ok(Self::HttpProtobuf),
            "http/json" => Err(invalid(
                variable,
                value,
                "http/json is not supported; use grpc or http/protobuf",
            )),
            _ => Err(invalid(variable, value, "expected grpc or http/protobuf")),
        }
    }

    fn default_endpoint(self) -> &'static str {
        match self {
            Self::Grpc => "http://localhost:4317",
            Self::HttpProtobuf => "http://localhost:4318/v1/traces",
        }
    }
}

/// TLS material read from the files the variables name.
#[derive(Clone, Default)]
pub struct TlsFiles {
    /// CA bundle (PEM) the collector's certificate must chain to, added to the system roots.
    pub ca: Option<Vec<u8>>,
    /// Client certificate and key (PEM) for mutual TLS.
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
}

impl std::fmt::Debug for TlsFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsFiles")
            .field("ca", &self.ca.is_some())
            .field("identity", &self.identity.is_some())
            .finish()
    }
}

/// Where and how spans are exported.
#[derive(Debug, Clone)]
pub struct OtlpConfig {
    /// Full URL of the collector (for HTTP including `/v1/traces`).
    pub endpoint: String,
    /// Transport.
    pub protocol: Protocol,
    /// TLS files for an `https` endpoint.
    pub tls: TlsFiles,
    /// Which traces are recorded.
    pub sampler: Sampler,
}

impl OtlpConfig {
    /// The configuration the process environment asks for; `None` when export is off.
    pub fn from_env() -> Result<Option<Self>> {
        Self::from_vars(|name| std::env::var(name).ok(), |path| std::fs::read(path))
    }

    /// The configuration `var` asks for (`var` reads one variable, `read` one file).
    pub fn from_vars(
        var: impl Fn(&str) -> Option<String>,
        read: impl Fn(&PathBuf) -> std::io::Result<Vec<u8>>,
    ) -> Result<Option<Self>> {
        let get = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        // The signal-specific variable wins over the general one.
        let pick = |suffix: &str| {
            let specific = format!("OTEL_EXPORTER_OTLP_TRACES_{suffix}");
            let general = format!("OTEL_EXPORTER_OTLP_{suffix}");
            get(&specific)
                .map(|v| (specific, v))
                .or_else(|| get(&general).map(|v| (general, v)))
        };
        if get("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        let requested = match get("OTEL_TRACES_EXPORTER") {
            None => false,
            Some(v) if v.trim() == "otlp" => true,
            Some(v) if v.trim() == "none" => return Ok(None),
            Some(v) => {
                return Err(invalid(
                    "OTEL_TRACES_EXPORTER",
                    &v,
                    "only otlp and none are supported",
                ));
            }
        };
        let protocol = match pick("PROTOCOL") {
            Some((name, value)) => Protocol::parse(&name, &value)?,
            None => Protocol::Grpc,
        };
        let endpoint = match (
            get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
            get("OTEL_EXPORTER_OTLP_ENDPOINT"),
        ) {
            (Some(url), _) => checked_url("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", &url)?,
            (None, Some(url)) => {
                let url = checked_url("OTEL_EXPORTER_OTLP_ENDPOINT", &url)?;
                match protocol {
                    Protocol::Grpc => url,
                    Protocol::HttpProtobuf => format!("{}/v1/traces", url.trim_end_matches('/')),
                }
            }
            (None, None) if requested => protocol.default_endpoint().to_owned(),
            (None, None) => return Ok(None),
        };
        if let Some((name, value)) = pick("HEADERS") {
            check_headers(&name, &value)?;
        }
        if let Some((name, value)) = pick("TIMEOUT") {
            value
                .trim()
                .parse::<u64>()
                .map_err(|_| invalid(&name, &value, "expected milliseconds"))?;
        }
        let file = |suffix: &str| -> Result<Option<Vec<u8>>> {
            pick(suffix)
                .map(|(name, path)| {
                    let path = PathBuf::from(path.trim());
                    read(&path).map_err(|e| {
                        Error::Telemetry(format!("{name}: cannot read {}: {e}", path.display()))
                    })
                })
                .transpose()
        };
        let identity = match (file("CLIENT_CERTIFICATE")?, file("CLIENT_KEY")?) {
            (Some(cert), Some(key)) => Some((cert, key)),
            (None, None) => None,
            _ => {
                return Err(Error::Telemetry(
                    "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY \
                     go together: set both or neither"
                        .to_owned(),
                ));
            }
        };
        Ok(Some(Self {
            endpoint,
            protocol,
            tls: TlsFiles {
                ca: file("CERTIFICATE")?,
                identity,
            },
            sampler: sampler(
                get("OTEL_TRACES_SAMPLER").as_deref(),
                get("OTEL_TRACES_SAMPLER_ARG").as_deref(),
            )?,
        }))
    }

    fn is_https(&self) -> bool {
        self.endpoint.starts_with("https://")
    }

    /// Builds the span exporter. Runs inside a Tokio runtime (tonic's channel).
    pub fn exporter(&self) -> Result<opentelemetry_otlp::SpanExporter> {
        let built = match self.protocol {
            Protocol::Grpc => {
                let mut builder = opentelemetry_otlp::SpanExporter::builder()
                    .with_tonic()
                    .with_endpoint(&self.endpoint);
                if self.is_https() {
                    builder = builder.with_tls_config(self.tonic_tls());
                }
                builder.build()
            }
            Protocol::HttpProtobuf => {
                let mut builder = opentelemetry_otlp::SpanExporter::builder()
                    .with_http()
                    .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                    .with_endpoint(&self.endpoint);
                if self.is_https() && (self.tls.ca.is_some() || self.tls.identity.is_some()) {
                    builder = builder.with_http_client(self.blocking_client()?);
                }
                builder.build()
            }
        };
        built.map_err(|e| Error::Telemetry(format!("OTLP exporter for {}: {e}", self.endpoint)))
    }

    fn tonic_tls(&self) -> opentelemetry_otlp::tonic_types::transport::ClientTlsConfig {
        use opentelemetry_otlp::tonic_types::transport::{Certificate, ClientTlsConfig, Identity};
        let mut tls = ClientTlsConfig::new().with_native_roots();
        if let Some(ca) = &self.tls.ca {
            tls = tls.ca_certificate(Certificate::from_pem(ca));
        }
        if let Some((cert, key)) = &self.tls.identity {
            tls = tls.identity(Identity::from_pem(cert, key));
        }
        tls
    }

    /// A blocking client with the CA bundle and client identity. Built on a thread of its own:
    /// the blocking client starts (and on drop stops) a runtime, which Tokio forbids on its
    /// worker threads.
    fn blocking_client(&self) -> Result<reqwest::blocking::Client> {
        let tls = self.tls.clone();
        let build = move || -> std::result::Result<reqwest::blocking::Client, String> {
            let mut builder = reqwest::blocking::Client::builder();
            if let Some(ca) = &tls.ca {
                let certs = reqwest::Certificate::from_pem_bundle(ca)
                    .map_err(|e| format!("OTEL_EXPORTER_OTLP_CERTIFICATE: {e}"))?;
                builder = builder.tls_certs_merge(certs);
            }
            if let Some((cert, key)) = &tls.identity {
                let pem = [cert.as_slice(), b"\n", key.as_slice()].concat();
                let identity = reqwest::Identity::from_pem(&pem)
                    .map_err(|e| format!("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE/KEY: {e}"))?;
                builder = builder.identity(identity);
            }
            builder
                .build()
                .map_err(|e| format!("OTLP HTTP client: {e}"))
        };
        std::thread::spawn(build)
            .join()
            .map_err(|_| Error::Telemetry("OTLP HTTP client: builder thread panicked".to_owned()))?
            .map_err(Error::Telemetry)
    }
}

fn invalid(variable: &str, value: &str, why: &str) -> Error {
    Error::Telemetry(format!("{variable}={value:?}: {why}"))
}

fn checked_url(variable: &str, url: &str) -> Result<String> {
    let trimmed = url.trim().to_owned();
    let uri: http::Uri = trimmed
        .parse()
        .map_err(|e| invalid(variable, &trimmed, &format!("not a URL: {e}")))?;
    match (uri.scheme_str(), uri.authority()) {
        (Some("http" | "https"), Some(_)) => Ok(trimmed),
        _ => Err(invalid(
            variable,
            &trimmed,
            "expected an http:// or https:// URL with a host",
        )),
    }
}

/// `key=value` pairs separated by commas; the value is not echoed in the error.
fn check_headers(variable: &str, value: &str) -> Result<()> {
    for (index, pair) in value.split(',').enumerate() {
        if pair.trim().is_empty() {
            continue;
        }
        let key = pair.split_once('=').map(|(k, _)| k.trim());
        match key {
            Some(key) if http::HeaderName::from_bytes(key.as_bytes()).is_ok() => {}
            _ => {
                return Err(Error::Telemetry(format!(
                    "{variable}: entry {} is not key=value with a valid header name",
                    index + 1
                )));
            }
        }
    }
    Ok(())
}

/// The sampler `OTEL_TRACES_SAMPLER` names (default: `parentbased_always_on`).
pub fn sampler(name: Option<&str>, arg: Option<&str>) -> Result<Sampler> {
    let ratio = || -> Result<f64> {
        match arg {
            None => Ok(1.0),
            Some(v) => v
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|r| (0.0..=1.0).contains(r))
                .ok_or_else(|| {
                    invalid("OTEL_TRACES_SAMPLER_ARG", v, "expected a ratio from 0 to 1")
                }),
        }
    };
    let parent_based = |root: Sampler| Sampler::ParentBased(Box::new(root));
    Ok(match name.map(str::trim) {
        None | Some("parentbased_always_on") => parent_based(Sampler::AlwaysOn),
        Some("always_on") => Sampler::AlwaysOn,
        Some("always_off") => Sampler::AlwaysOff,
        Some("parentbased_always_off") => parent_based(Sampler::AlwaysOff),
        Some("traceidratio") => Sampler::TraceIdRatioBased(ratio()?),
        Some("parentbased_traceidratio") => parent_based(Sampler::TraceIdRatioBased(ratio()?)),
        Some(other) => {
            return Err(invalid(
                "OTEL_TRACES_SAMPLER",
                other,
                "expected always_on, always_off, traceidratio, parentbased_always_on, \
                 parentbased_always_off or parentbased_traceidratio",
            ));
        }
    })
}

#[cfg(test)]
#[path = "otlp_tests.rs"]
mod tests;
