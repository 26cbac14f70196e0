use super::*;
use crate::params::parse_urlencoded;

fn key() -> ApiKey {
    ApiKey {
        username: "admin".to_owned(),
        consumer_key: "ck".to_owned(),
        token_key: "tk".to_owned(),
        token_secret: "ts".to_owned(),
        is_admin: true,
        active: true,
    }
}

fn request<'a>(
    header: &'a str,
    method: &'a str,
    url: &'a str,
    query: &'a Params,
    form: &'a Params,
) -> AuthRequest<'a> {
    AuthRequest {
        header: Some(header),
        method,
        base_url: url,
        query,
        form,
    }
}

const URL: &str = "http://127.0.0.1:5240/MAAS/api/2.0/machines/";

fn plaintext(sig: &str, nonce: &str, ts: &str) -> String {
    format!(
        "OAuth realm=\"OAuth\", oauth_nonce=\"{nonce}\", oauth_timestamp=\"{ts}\", oauth_version=\"1.0\", \
oauth_signature_method=\"PLAINTEXT\", oauth_consumer_key=\"ck\", oauth_token=\"tk\", oauth_signature=\"{sig}\""
    )
}

#[test]
fn header_parsing_ignores_quotes_order_and_realm() {
    let parsed = parse_oauth_header(
        "OAuth oauth_token=tk,realm=\"MAAS+API\", oauth_signature=&ts ,oauth_consumer_key=\"ck\"",
    )
    .unwrap();
    assert_eq!(parsed.get("oauth_token").map(String::as_str), Some("tk"));
    assert_eq!(
        parsed.get("oauth_signature").map(String::as_str),
        Some("&ts")
    );
    assert!(!parsed.contains_key("realm"));
    assert!(parse_oauth_header("Bearer abc").is_none());
    assert!(parse_oauth_header("OAut").is_none());
}

#[test]
fn plaintext_encoded_and_raw_signatures_are_accepted() {
    let q = Params::default();
    for sig in ["%26ts", "&ts"] {
        let h = plaintext(sig, "1", "1");
        assert_eq!(
            authenticate(&request(&h, "GET", URL, &q, &q), &[key()], None),
            Ok(0)
        );
    }
}

#[test]
fn failures_have_maas_bodies() {
    let q = Params::default();
    let wrong = plaintext("%26nope", "1", "1");
    let err = authenticate(&request(&wrong, "GET", URL, &q, &q), &[key()], None).unwrap_err();
    assert_eq!(err.status, StatusCode::UNAUTHORIZED);

    let bad_consumer = plaintext("%26ts", "1", "1")
        .replace("oauth_consumer_key=\"ck\"", "oauth_consumer_key=\"xx\"");
    let err =
        authenticate(&request(&bad_consumer, "GET", URL, &q, &q), &[key()], None).unwrap_err();
    assert_eq!(
        err.body,
        crate::error::ErrorBody::Html("Authorization Error: Invalid API key.".to_owned())
    );

    let bad_token =
        plaintext("%26ts", "1", "1").replace("oauth_token=\"tk\"", "oauth_token=\"zz\"");
    let err = authenticate(&request(&bad_token, "GET", URL, &q, &q), &[key()], None).unwrap_err();
    assert_eq!(
        err.body,
        crate::error::ErrorBody::Html("Authorization Error: 'Invalid access token: zz'".to_owned())
    );

    let err = authenticate(
        &AuthRequest {
            header: None,
            method: "GET",
            base_url: URL,
            query: &q,
            form: &q,
        },
        &[key()],
        None,
    )
    .unwrap_err();
    assert_eq!(
        err.body,
        crate::error::ErrorBody::Text("Forbidden".to_owned())
    );

    let mut inactive = key();
    inactive.active = false;
    let ok = plaintext("%26ts", "1", "1");
    let err = authenticate(&request(&ok, "GET", URL, &q, &q), &[inactive], None).unwrap_err();
    assert_eq!(err.status, StatusCode::FORBIDDEN);
}

#[test]
fn credentials_may_come_from_the_query_string() {
    let q = parse_urlencoded(
        b"oauth_consumer_key=ck&oauth_token=tk&oauth_signature_method=PLAINTEXT&oauth_signature=%26ts&oauth_timestamp=1&oauth_nonce=9",
    );
    let empty = Params::default();
    let req = AuthRequest {
        header: None,
        method: "GET",
        base_url: URL,
        query: &q,
        form: &empty,
    };
    assert_eq!(authenticate(&req, &[key()], None), Ok(0));
}

#[test]
fn strict_mode_refuses_replays_and_stale_timestamps() {
    let q = Params::default();
    let mut nonces = NonceStore::default();
    let strict = Strictness {
        now: 1_700_000_000,
        window: 300,
    };
    // A signed GET checked strictly, against the nonces seen so far.
    let mut check = |header: &str| {
        authenticate(
            &request(header, "GET", URL, &q, &q),
            &[key()],
            Some((strict, &mut nonces)),
        )
    };
    let h = plaintext("%26ts", "abc", "1700000000");
    assert_eq!(check(&h), Ok(0));
    let err = check(&h).unwrap_err();
    assert_eq!(
        err.body,
        crate::error::ErrorBody::Html("Authorization Error: 'Nonce already used: abc'".to_owned())
    );
    let stale = plaintext("%26ts", "def", "1699999000");
    let err = check(&stale).unwrap_err();
    assert_eq!(err.status, StatusCode::UNAUTHORIZED);
    let garbage = plaintext("%26ts", "ghi", "soon");
    let err = check(&garbage).unwrap_err();
    assert_eq!(err.status, StatusCode::BAD_REQUEST);
}

// Vectors computed independently with python oauthlib 4.0.1 (`oauth1.Client(..., SIGNATURE_HMAC)`).
#[test]
fn hmac_sha1_matches_oauthlib_for_get_with_repeated_query_keys() {
    let q = parse_urlencoded(b"tags=a&tags=b&op=");
    let empty = Params::default();
    let h = "OAuth oauth_nonce=\"n1\", oauth_timestamp=\"1700000000\", oauth_version=\"1.0\", \
oauth_signature_method=\"HMAC-SHA1\", oauth_consumer_key=\"ck\", oauth_token=\"tk\", oauth_signature=\"gXOGZRAU5gPhGcIT2dwsuFxpQLA%3D\"";
    assert_eq!(
        authenticate(&request(h, "GET", URL, &q, &empty), &[key()], None),
        Ok(0)
    );
    // The same signature must not authorise another query.
    let other = parse_urlencoded(b"tags=a&op=");
    assert!(authenticate(&request(h, "GET", URL, &other, &empty), &[key()], None).is_err());
}

#[test]
fn hmac_sha1_matches_oauthlib_for_urlencoded_post() {
    let q = parse_urlencoded(b"op=allocate");
    let form = parse_urlencoded(b"cpu_count=4&tags=gpu");
    let h = "OAuth oauth_nonce=\"n2\", oauth_timestamp=\"1700000001\", oauth_version=\"1.0\", \
oauth_signature_method=\"HMAC-SHA1\", oauth_consumer_key=\"ck\", oauth_token=\"tk\", oauth_signature=\"FsNBZTXrwL6s9jvWJ8l6d6ocbbw%3D\"";
    assert_eq!(
        authenticate(&request(h, "POST", URL, &q, &form), &[key()], None),
        Ok(0)
    );
    assert!(authenticate(&request(h, "PUT", URL, &q, &form), &[key()], None).is_err());
}

#[test]
fn base_string_follows_rfc5849() {
    let params = vec![
        ("b".to_owned(), "x y".to_owned()),
        ("a".to_owned(), "1".to_owned()),
    ];
    assert_eq!(
        signature_base_string("get", "http://h/p/", &params),
        "GET&http%3A%2F%2Fh%2Fp%2F&a%3D1%26b%3Dx%2520y"
    );
}

#[test]
fn nonces_expire_after_the_window_in_arrival_order() {
    let mut store = NonceStore::default();
    assert!(store.check_and_record("c", "n1", 100, 300));
    assert!(store.check_and_record("c", "n2", 200, 300));
    assert!(
        !store.check_and_record("c", "n1", 400, 300),
        "n1 is 300 s old"
    );
    assert!(
        store.check_and_record("other", "n1", 400, 300),
        "per consumer"
    );
    assert!(store.check_and_record("c", "n1", 401, 300), "n1 expired");
    assert_eq!(store.len(), 3, "n2 is still in the window");
    assert!(store.check_and_record("c", "n3", 10_000, 300));
    assert_eq!(store.len(), 1, "everything older went");
}
