//! Property tests: no input to the request parsers, or to the server, causes a panic.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use bytes::Bytes;
use http::Method;
use maas_sim::auth::{AuthRequest, authenticate, parse_oauth_header};
use maas_sim::params::{Params, decode_base64_lenient, parse_body, parse_urlencoded};
use maas_sim::routes::{match_path, resolve_action};
use maas_sim::{ApiKey, SimConfig};
use proptest::prelude::*;

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

fn keys() -> Vec<ApiKey> {
    vec![ApiKey::parse("admin", true, "ck:tk:ts").unwrap()]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn auth_header_parsing_never_panics(header in ".{0,200}", method in "[A-Z]{0,7}", query in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = parse_oauth_header(&header);
        let q = parse_urlencoded(&query);
        let empty = Params::default();
        let req = AuthRequest { header: Some(&header), method: &method, base_url: "http://h/MAAS/api/2.0/machines/", query: &q, form: &empty };
        let _ = authenticate(&req, &keys(), None);
        let oauth = format!("OAuth oauth_consumer_key=\"ck\", oauth_token=\"tk\", oauth_signature_method=\"HMAC-SHA1\", oauth_signature=\"{header}\", oauth_nonce=\"1\", oauth_timestamp=\"{method}\"");
        let req = AuthRequest { header: Some(&oauth), method: &method, base_url: "http://h/", query: &q, form: &q };
        prop_assert!(authenticate(&req, &keys(), None).is_err());
    }

    #[test]
    fn form_and_multipart_parsing_never_panics(
        content_type in prop_oneof![
            Just("multipart/form-data; boundary=XyZ".to_owned()),
            Just("multipart/form-data; boundary=\"==X==\"".to_owned()),
            Just("application/x-www-form-urlencoded".to_owned()),
            ".{0,60}",
        ],
        body in proptest::collection::vec(any::<u8>(), 0..400),
        framed in ".{0,100}",
    ) {
        let _ = block_on(parse_body(Some(&content_type), Bytes::from(body.clone())));
        // Something closer to a real multipart body, with a possibly broken base64 part.
        let multipart = format!("--XyZ\r\nContent-Transfer-Encoding: base64\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n{framed}\r\n--XyZ--\r\n");
        let _ = block_on(parse_body(Some("multipart/form-data; boundary=XyZ"), Bytes::from(multipart)));
        let _ = decode_base64_lenient(&body);
        let p = parse_urlencoded(&body);
        let _ = p.bool("x");
    }

    #[test]
    fn routing_and_dispatch_never_panic(path in "[a-z0-9/_{}%.-]{0,60}", op in proptest::option::of("[a-z_]{0,12}"), m in 0usize..5) {
        let method = [Method::GET, Method::POST, Method::PUT, Method::DELETE, Method::PATCH][m].clone();
        if let Some(route) = match_path(&path) {
            let _ = resolve_action(route.resource, &method, op.as_deref().or(route.path_op.as_deref()));
        }
    }
}

#[test]
fn the_server_answers_arbitrary_requests() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    {
        let t = rt.block_on(common::start(SimConfig {
            machines: 3,
            ..SimConfig::instant()
        }));
        let id = t.sim.state().machines()[0].system_id.clone();
        let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
            cases: 96,
            ..ProptestConfig::default()
        });
        let paths = prop_oneof![
            Just("machines/".to_owned()),
            Just(format!("machines/{id}/")),
            Just("tags/".to_owned()),
            Just("dnsresources/".to_owned()),
            Just(format!("nodes/{id}/interfaces/")),
            "[a-z/_-]{0,30}",
        ];
        let ops = prop_oneof![
            Just(String::new()),
            Just("allocate".to_owned()),
            Just("deploy".to_owned()),
            Just("release".to_owned()),
            Just("set_owner_data".to_owned()),
            Just("link_subnet".to_owned()),
            "[a-z_]{0,10}",
        ];
        let strategy = (
            paths,
            ops,
            0usize..4,
            proptest::collection::vec(("[a-z_]{1,10}", ".{0,20}"), 0..4),
        );
        let result = runner.run(&strategy, |(path, op, m, form)| {
            let method = [Method::GET, Method::POST, Method::PUT, Method::DELETE][m].clone();
            let resp = rt.block_on(async {
                let form: Vec<(&str, &str)> =
                    form.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                let url = format!("{}?op={op}", t.api(&path));
                let req = t
                    .client
                    .request(method.clone(), url)
                    .header("Authorization", common::plaintext_header(&t.key));
                let req = if method == Method::GET {
                    req.query(&form)
                } else {
                    req.form(&form)
                };
                req.send().await
            });
            let resp = resp.map_err(|e| TestCaseError::fail(format!("no answer: {e}")))?;
            // 500 is only ever the deliberate MAAS "Invalid character in key name".
            prop_assert!(
                resp.status().as_u16() != 500 || op == "set_owner_data",
                "{} {path} op={op}",
                resp.status()
            );
            Ok(())
        });
        result.unwrap();
        rt.block_on(t.sim.shutdown());
    }
}
