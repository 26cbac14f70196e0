//! Issue #16, how it is shown: with `OTEL_EXPORTER_OTLP_ENDPOINT` and
//! `OTEL_EXPORTER_OTLP_PROTOCOL` set, our binaries export their spans to an OTLP receiver in
//! the test, and one machine's provisioning is ONE trace across machine-controller and the
//! gateway (maas-client): the trace holds spans of both services and the gateway's MAAS calls
//! `MAAS allocate` and `MAAS deploy` (kind CLIENT, `maas.system_id` the machine's server).
//!
//! One world (API servers, CAPI core, the simulator) for both transports: the binaries start
//! exporting over gRPC, a control-plane machine is provisioned, the binaries are stopped with
//! SIGTERM (which flushes their last batch) and the trace is looked for; then they start
//! again exporting over http/protobuf to a second receiver, a second cluster's machine is
//! provisioned and looked for the same way.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use capmaas_e2e::otlp::{ENDPOINT_ENV, OtlpReceiver, PROTOCOL_ENV, Protocol, Span};
use capmaas_e2e::{ClusterSpec, Harness, HarnessConfig};
use common::{ONE_AT_A_TIME, declare, infra, wait_running};

/// How long the binaries get to exit after SIGTERM (their exporter waits up to 5 s).
const GRACE: Duration = Duration::from_secs(20);
/// How long the receiver gets for the last batch after the binaries stopped.
const LAST_BATCH: Duration = Duration::from_secs(10);

/// Declares cluster `name` (one control-plane machine, no workers) in `ns`, waits until
/// `running` Machines of the namespace run, and returns the machine's MAAS system id.
async fn provision_one_machine(h: &mut Harness, ns: &str, name: &str, running: usize) -> String {
    let mut spec = ClusterSpec::story(ns);
    spec.name = name.into();
    spec.control_plane = 1;
    spec.workers = 0;
    declare(h, &spec).await;
    wait_running(h, ns, running).await;
    let machine_name = spec.control_plane_maas_machine(0)["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_owned();
    let machine = infra(h, ns, "MaasMachine")
        .await
        .get(&machine_name)
        .await
        .unwrap();
    let system_id = machine.data["spec"]["systemID"]
        .as_str()
        .unwrap_or_else(|| panic!("MaasMachine {machine_name} has no systemID: {machine:?}"))
        .to_owned();
    // The MaasHost it claimed names the same server.
    let host_name = machine.data["status"]["hostRef"]["name"].as_str().unwrap();
    let host = infra(h, ns, "MaasHost").await.get(host_name).await.unwrap();
    assert_eq!(host.data["spec"]["systemID"], system_id.as_str());
    system_id
}

/// A MAAS call of the gateway on the server `system_id`.
fn maas_call(span: &Span, name: &str, system_id: &str) -> bool {
    span.name == name
        && span.kind == "SPAN_KIND_CLIENT"
        && span.attributes.get("maas.system_id").map(String::as_str) == Some(system_id)
}

/// The trace id of a trace that holds spans of machine-controller and of maas-client and the
/// MAAS allocate and deploy calls on `system_id`.
fn provisioning_trace(spans: &[Span], system_id: &str) -> Option<String> {
    capmaas_e2e::otlp::group_by_trace(spans)
        .into_iter()
        .find(|(_, trace)| {
            let service = |name: &str| trace.iter().any(|s| s.service_name == name);
            service("machine-controller")
                && service("maas-client")
                && trace
                    .iter()
                    .any(|s| maas_call(s, "MAAS allocate", system_id))
                && trace.iter().any(|s| maas_call(s, "MAAS deploy", system_id))
        })
        .map(|(id, _)| id)
}

/// The tail of the logs of the stopped binaries that make the trace, for a failure message.
fn stopped_logs(h: &Harness) -> String {
    ["machine-controller", "maas-client"]
        .iter()
        .map(|name| {
            let path = h.dir().join(format!("{name}.previous.log"));
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            format!(
                "===== {name} (stopped) =====\n{}",
                lines[lines.len().saturating_sub(30)..].join("\n")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Stops the binaries (SIGTERM), then waits for the provisioning trace of `system_id`;
/// `Err` with what the receiver got when it does not come.
async fn stop_and_find_trace(
    h: &mut Harness,
    receiver: &OtlpReceiver,
    system_id: &str,
) -> Result<String, String> {
    let stopped = h.stop_controllers(GRACE).await.unwrap();
    let killed: Vec<_> = stopped.iter().filter(|s| s.killed).collect();
    assert!(
        killed.is_empty(),
        "binaries did not exit within {GRACE:?} of SIGTERM: {killed:?}"
    );
    let protocol = receiver.protocol().env_value();
    receiver
        .wait_for(
            &format!(
                "over {protocol}, one trace with spans of machine-controller and maas-client and \
                 CLIENT spans \"MAAS allocate\" and \"MAAS deploy\" with maas.system_id={system_id}"
            ),
            LAST_BATCH,
            |spans| provisioning_trace(spans, system_id),
        )
        .await
        .map(|trace_id| {
            // Shown with `--nocapture`.
            eprintln!(
                "over {protocol}, provisioning trace {trace_id}:\n{}",
                receiver.describe_trace(&trace_id)
            );
            trace_id
        })
        .map_err(|e| {
            format!(
                "{e}\n{}\n{}",
                traces_about(receiver, system_id),
                stopped_logs(h)
            )
        })
}

/// The traces with a MAAS call or an attribute naming `system_id` (its MaasHost's name is the
/// system id too), in full: what to look at first when the trace is not one.
fn traces_about(receiver: &OtlpReceiver, system_id: &str) -> String {
    let about: Vec<String> = receiver
        .traces()
        .into_iter()
        .filter(|(_, spans)| {
            spans.iter().any(|s| {
                s.name.starts_with("MAAS ") || s.attributes.values().any(|v| v == system_id)
            })
        })
        .map(|(id, _)| format!("trace {id}:\n{}", receiver.describe_trace(&id)))
        .collect();
    format!(
        "{} traces with a MAAS call or an attribute {system_id}:\n{}",
        about.len(),
        about.join("\n")
    )
}

#[tokio::test]
async fn one_machine_is_one_trace_across_machine_controller_and_maas_client() {
    let _one = ONE_AT_A_TIME.lock().await;
    let grpc = OtlpReceiver::start(Protocol::Grpc).await.unwrap();
    let http = OtlpReceiver::start(Protocol::HttpProtobuf).await.unwrap();
    // Both control-plane machines go to zone z1: the default 20 servers leave room.
    let config = HarnessConfig::default()
        .binary_env(ENDPOINT_ENV, grpc.endpoint())
        .binary_env(PROTOCOL_ENV, Protocol::Grpc.env_value());
    let mut h = Harness::start(config).await.unwrap();
    // One namespace for both clusters: a MAAS machine backs one MaasHost cluster-wide.
    let ns = h.management.create_namespace("tracing").await.unwrap();

    let system_id = provision_one_machine(&mut h, &ns, "grpc", 1).await;
    let over_grpc = stop_and_find_trace(&mut h, &grpc, &system_id).await;

    for (key, value) in http.env() {
        h.set_binary_env(key, value);
    }
    h.start_controllers().await.unwrap();
    let system_id = provision_one_machine(&mut h, &ns, "http", 2).await;
    let over_http = stop_and_find_trace(&mut h, &http, &system_id).await;

    let failures: Vec<String> = [("grpc", over_grpc), ("http/protobuf", over_http)]
        .into_iter()
        .filter_map(|(protocol, found)| found.err().map(|e| format!("[{protocol}] {e}")))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    for receiver in [&grpc, &http] {
        let spans = receiver.spans();
        let debug_formatted = debug_formatted(&spans);
        assert!(
            debug_formatted.is_empty(),
            "attribute values in Rust debug formatting: {debug_formatted:#?}"
        );
        assert!(
            spans.iter().any(|s| s.service_name == "machine-controller"
                && s.kind == "SPAN_KIND_CLIENT"
                && s.name == "update maashosts"),
            "no CLIENT span for machine-controller's MaasHost writes"
        );
    }
    common::assert_rbac_sufficient(&h);
}

/// Attribute values of our services that look like Rust debug output (`Some(..)`, quoted):
/// attributes carry plain values, as the semantic conventions expect.
fn debug_formatted(spans: &[Span]) -> Vec<String> {
    spans
        .iter()
        .flat_map(|s| {
            s.attributes
                .iter()
                .filter(|(_, v)| {
                    v.starts_with("Some(") || v.starts_with("None") || v.starts_with('"')
                })
                .map(move |(k, v)| format!("{} {}: {k}={v}", s.service_name, s.name))
        })
        .collect()
}
