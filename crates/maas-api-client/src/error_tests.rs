use super::*;
use http::HeaderValue;

fn map(status: u16, headers: &[(&str, &str)], body: &str, ctx: ErrorContext) -> MaasError {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        map.insert(
            http::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    error_from_response(
        ctx,
        StatusCode::from_u16(status).unwrap(),
        &map,
        body.as_bytes(),
    )
}

/// The error of an answer that carries no headers worth mapping.
fn map_plain(status: u16, body: &str, ctx: ErrorContext) -> MaasError {
    map(status, &[], body, ctx)
}

#[test]
fn maps_auth_errors() {
    let e = map_plain(
        401,
        "Authorization Error: Invalid API key.",
        ErrorContext::Other,
    );
    assert!(
        matches!(&e, MaasError::Unauthorized { message } if message.contains("Invalid API key"))
    );
    assert_eq!(e.category(), "unauthorized");
    assert!(!e.is_retryable());
    let e = map_plain(403, "", ErrorContext::Other);
    assert!(matches!(&e, MaasError::Forbidden { message } if message.is_empty()));
    assert_eq!(e.category(), "forbidden");
}

#[test]
fn maps_not_found() {
    let e = map_plain(
        404,
        "No Machine matches the given query.",
        ErrorContext::Other,
    );
    assert!(matches!(e, MaasError::NotFound { .. }));
    assert!(!e.is_retryable());
}

#[test]
fn link_subnet_refusals_of_the_address_are_typed() {
    let e = map_plain(
        404,
        "IP address is already in use.",
        ErrorContext::LinkSubnet,
    );
    assert!(
        matches!(&e, MaasError::AddressUnavailable { status: 404, message } if message == "IP address is already in use.")
    );
    assert_eq!(e.category(), "address_unavailable");
    assert!(!e.is_retryable());
    let e = map_plain(403, "out of range", ErrorContext::LinkSubnet);
    assert!(matches!(
        e,
        MaasError::AddressUnavailable { status: 403, .. }
    ));
    // A missing interface is still a plain 404.
    let e = map_plain(
        404,
        "No Interface matches the given query.",
        ErrorContext::LinkSubnet,
    );
    assert!(matches!(e, MaasError::NotFound { .. }));
    let e = map_plain(404, "IP address is already in use.", ErrorContext::Other);
    assert!(matches!(e, MaasError::NotFound { .. }));
    assert_eq!(e.maas_message(), "IP address is already in use.");
    let e = map_plain(
        400,
        r#"{"start_ip": ["conflict"], "end_ip": ["conflict"]}"#,
        ErrorContext::Other,
    );
    assert_eq!(e.maas_message(), "end_ip: conflict; start_ip: conflict");
}

#[test]
fn plain_409_depends_on_the_call() {
    let body = "No machine with system ID abc123 available.";
    let e = map_plain(409, body, ErrorContext::Allocate);
    assert!(matches!(&e, MaasError::NoMatchingMachine { message } if message == body));
    assert!(!e.is_retryable());
    let e = map_plain(
        409,
        "Can't deploy a machine that is in the 'Deployed' state",
        ErrorContext::Other,
    );
    assert!(matches!(e, MaasError::Conflict { .. }));
    assert_eq!(e.category(), "conflict");
}

#[test]
fn conflict_with_retry_after_is_transient_even_for_allocate() {
    let e = map(
        409,
        &[("retry-after", "5")],
        "<html><body>conflict</body></html>",
        ErrorContext::Allocate,
    );
    match &e {
        MaasError::Unavailable {
            status,
            retry_after,
            message,
        } => {
            assert_eq!(*status, 409);
            assert_eq!(*retry_after, Some(Duration::from_secs(5)));
            assert!(!message.contains("<html>"));
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(e.is_retryable());
    assert_eq!(e.retry_after(), Some(Duration::from_secs(5)));
}

#[test]
fn maps_503_with_and_without_retry_after() {
    let e = map(
        503,
        &[("Retry-After", "10")],
        "rack unavailable",
        ErrorContext::Other,
    );
    assert!(
        matches!(e, MaasError::Unavailable { status: 503, retry_after: Some(d), .. } if d == Duration::from_secs(10))
    );
    let e = map(503, &[("Retry-After", "soon")], "x", ErrorContext::Other);
    assert!(matches!(
        e,
        MaasError::Unavailable {
            retry_after: None,
            ..
        }
    ));
    assert!(e.is_retryable());
    assert_eq!(
        map_plain(504, "", ErrorContext::Other).category(),
        "unavailable"
    );
}

#[test]
fn maps_400_json_fields() {
    let e = map_plain(
        400,
        r#"{"zone": ["No such zone(s): x."], "tags": ["a", "b"]}"#,
        ErrorContext::Allocate,
    );
    match &e {
        MaasError::BadRequest { fields, message } => {
            assert_eq!(fields["zone"], vec!["No such zone(s): x.".to_owned()]);
            assert_eq!(fields["tags"].len(), 2);
            assert!(message.is_empty());
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(e.to_string().contains("zone: No such zone(s): x."));
}

#[test]
fn maps_400_text_and_list() {
    let e = map_plain(
        400,
        "Unrecognised signature: method=POST op=foo",
        ErrorContext::Other,
    );
    assert!(
        matches!(&e, MaasError::BadRequest { fields, message } if fields.is_empty() && message.starts_with("Unrecognised"))
    );
    let e = map_plain(400, r#"["one", "two"]"#, ErrorContext::Other);
    assert!(matches!(&e, MaasError::BadRequest { message, .. } if message == "one; two"));
}

#[test]
fn maps_500_as_retryable_server_error_and_405_as_final() {
    let e = map_plain(500, "Invalid character in key name", ErrorContext::Other);
    assert!(matches!(e, MaasError::Server { status: 500, .. }));
    assert!(e.is_retryable());
    let e = map_plain(405, "", ErrorContext::Other);
    assert!(!e.is_retryable());
    assert_eq!(e.category(), "server");
}

#[test]
fn response_too_large_names_operation_and_limit_and_is_final() {
    let e = MaasError::ResponseTooLarge {
        operation: "machines.list",
        limit: 1024,
        content_length: Some(5000),
    };
    assert_eq!(
        e.to_string(),
        "MAAS answer to machines.list exceeds the limit of 1024 bytes (Content-Length 5000)"
    );
    assert_eq!(e.category(), "response_too_large");
    assert!(!e.is_retryable());
    let e = MaasError::ResponseTooLarge {
        operation: "machines.get",
        limit: 7,
        content_length: None,
    };
    assert_eq!(
        e.to_string(),
        "MAAS answer to machines.get exceeds the limit of 7 bytes"
    );
}

#[test]
fn truncates_long_bodies_on_char_boundaries() {
    let body = "é".repeat(1000);
    let e = map_plain(500, &body, ErrorContext::Other);
    let MaasError::Server { body, .. } = e else {
        panic!()
    };
    assert!(body.len() <= MAX_ERROR_BODY + 3);
    assert!(body.ends_with("..."));
}

#[test]
fn maas_without_vm_hosts_is_a_distinct_permanent_error() {
    let e = map_plain(
        404,
        "Unknown API endpoint: /MAAS/api/2.0/vm-hosts/.",
        ErrorContext::VmHosts,
    );
    assert!(matches!(e, MaasError::VmHostsUnsupported { .. }), "{e:?}");
    assert!(!e.is_retryable());
    assert_eq!(e.category(), "vm_hosts_unsupported");
    // A missing VM host on a MAAS that has them stays NotFound.
    let e = map_plain(
        404,
        "No Pod matches the given query.",
        ErrorContext::VmHosts,
    );
    assert!(matches!(e, MaasError::NotFound { .. }), "{e:?}");
    // Unknown endpoints elsewhere are plain NotFound.
    let e = map_plain(404, "Unknown API endpoint: /x/.", ErrorContext::Other);
    assert!(matches!(e, MaasError::NotFound { .. }), "{e:?}");
    let e = map_plain(
        400,
        "Support for install_kvm allocation parameter has been removed.",
        ErrorContext::Other,
    );
    assert!(matches!(e, MaasError::VmHostsUnsupported { .. }), "{e:?}");
}

#[test]
fn compose_without_resources_is_not_transient() {
    let text = "Unable to compose KVM instance in 'h'. CPU overcommit ratio is 1.0 and there are 1 available resources; 2 requested.";
    let e = map_plain(503, text, ErrorContext::Compose);
    assert!(matches!(e, MaasError::ComposeRefused { .. }), "{e:?}");
    assert!(!e.is_retryable());
    assert_eq!(e.maas_message(), text);
    // Any other 503 of compose is an outage.
    let e = map_plain(503, "busy", ErrorContext::Compose);
    assert!(matches!(e, MaasError::Unavailable { .. }), "{e:?}");
}
