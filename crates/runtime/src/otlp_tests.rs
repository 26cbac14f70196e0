#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::*;

fn config(vars: &[(&str, &str)]) -> Result<Option<OtlpConfig>> {
    let vars: BTreeMap<String, String> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    OtlpConfig::from_vars(
        |name| vars.get(name).cloned(),
        |path: &PathBuf| {
            if path.ends_with("ca.pem") {
                Ok(b"-----BEGIN CERTIFICATE-----\n".to_vec())
            } else {
                Err(std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "no such file",
                ))
            }
        },
    )
}

fn message(vars: &[(&str, &str)]) -> String {
    config(vars).unwrap_err().to_string()
}

#[test]
fn nothing_set_exports_nothing() {
    assert!(config(&[]).unwrap().is_none());
    assert!(
        config(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"),
            ("OTEL_SDK_DISABLED", "true")
        ])
        .unwrap()
        .is_none()
    );
    assert!(
        config(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"),
            ("OTEL_TRACES_EXPORTER", "none")
        ])
        .unwrap()
        .is_none()
    );
}

#[test]
fn general_endpoint_is_grpc_by_default_and_gets_the_path_for_http() {
    let grpc = config(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317")])
        .unwrap()
        .unwrap();
    assert_eq!(grpc.protocol, Protocol::Grpc);
    assert_eq!(grpc.endpoint, "http://c:4317");
    let http = config(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318/"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
    ])
    .unwrap()
    .unwrap();
    assert_eq!(http.protocol, Protocol::HttpProtobuf);
    assert_eq!(http.endpoint, "http://c:4318/v1/traces");
}

#[test]
fn the_traces_endpoint_alone_exports_and_is_used_as_is() {
    let c = config(&[
        ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t:4318/custom"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://general:4318"),
        ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
    ])
    .unwrap()
    .unwrap();
    assert_eq!(c.endpoint, "http://t:4318/custom");
    assert_eq!(c.protocol, Protocol::HttpProtobuf);
}

#[test]
fn asking_for_otlp_without_an_endpoint_uses_the_default() {
    let c = config(&[("OTEL_TRACES_EXPORTER", "otlp")])
        .unwrap()
        .unwrap();
    assert_eq!(c.endpoint, "http://localhost:4317");
}

#[test]
fn bad_values_name_the_variable() {
    let cases: [(&[(&str, &str)], &str); 7] = [
        (
            &[("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317")],
            "OTEL_EXPORTER_OTLP_ENDPOINT",
        ),
        (
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ],
            "http/json is not supported",
        ),
        (
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"),
                ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "udp"),
            ],
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        ),
        (
            &[("OTEL_TRACES_EXPORTER", "jaeger")],
            "OTEL_TRACES_EXPORTER",
        ),
        (
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"),
                ("OTEL_EXPORTER_OTLP_TIMEOUT", "10s"),
            ],
            "OTEL_EXPORTER_OTLP_TIMEOUT",
        ),
        (
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"),
                ("OTEL_TRACES_SAMPLER", "sometimes"),
            ],
            "OTEL_TRACES_SAMPLER",
        ),
        (
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"),
                ("OTEL_TRACES_SAMPLER", "traceidratio"),
                ("OTEL_TRACES_SAMPLER_ARG", "2"),
            ],
            "OTEL_TRACES_SAMPLER_ARG",
        ),
    ];
    for (vars, named) in cases {
        let message = message(vars);
        assert!(message.contains(named), "{message}");
    }
}

#[test]
fn header_errors_do_not_echo_the_value() {
    let m = message(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"),
        (
            "OTEL_EXPORTER_OTLP_HEADERS",
            "authorization=Bearer s3cret,justatoken",
        ),
    ]);
    assert!(
        m.contains("OTEL_EXPORTER_OTLP_HEADERS") && m.contains("entry 2"),
        "{m}"
    );
    assert!(!m.contains("s3cret"), "{m}");
    assert!(
        config(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "authorization=Bearer%20x, x-tenant=a"
            )
        ])
        .is_ok()
    );
}

#[test]
fn tls_files_are_read_at_start() {
    let c = config(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://c:4317"),
        ("OTEL_EXPORTER_OTLP_CERTIFICATE", "/etc/otel/ca.pem"),
    ])
    .unwrap()
    .unwrap();
    assert!(c.tls.ca.is_some());
    let m = message(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://c:4317"),
        ("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", "/missing.pem"),
    ]);
    assert!(
        m.contains("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE") && m.contains("/missing.pem"),
        "{m}"
    );
    assert!(
        message(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://c:4317"),
            ("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "/etc/otel/ca.pem"),
        ])
        .contains("set both or neither")
    );
}

#[test]
fn samplers() {
    assert!(matches!(
        sampler(None, None).unwrap(),
        Sampler::ParentBased(_)
    ));
    assert!(matches!(
        sampler(Some("traceidratio"), Some("0.25")).unwrap(),
        Sampler::TraceIdRatioBased(r) if (r - 0.25).abs() < f64::EPSILON
    ));
    assert!(matches!(
        sampler(Some("always_off"), None).unwrap(),
        Sampler::AlwaysOff
    ));
}

#[tokio::test]
async fn exporters_build_for_both_protocols_and_https() {
    // As every binary does before telemetry starts (rustls without a built-in provider).
    crate::install_crypto_provider();
    for vars in [
        vec![("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")],
        vec![("OTEL_EXPORTER_OTLP_ENDPOINT", "https://127.0.0.1:1")],
        vec![
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
        ],
        vec![
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://127.0.0.1:1"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
        ],
    ] {
        let c = config(&vars).unwrap().unwrap();
        c.exporter().unwrap_or_else(|e| panic!("{vars:?}: {e}"));
    }
}
