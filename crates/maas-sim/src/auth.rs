//! OAuth 1.0 authentication as MAAS (piston3) does it: PLAINTEXT and HMAC-SHA1, 0-legged,
//! with an empty consumer secret. Validation order follows `maasserver/api/auth.py`.

use std::collections::{BTreeMap, HashMap, VecDeque};

use base64::Engine as _;
use hmac::{Hmac, Mac};
use http::StatusCode;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use sha1::Sha1;

use crate::config::ApiKey;
use crate::error::ApiError;
use crate::params::Params;

/// The parameters every OAuth request must carry.
pub const REQUIRED: [&str; 6] = [
    "oauth_consumer_key",
    "oauth_token",
    "oauth_signature_method",
    "oauth_signature",
    "oauth_timestamp",
    "oauth_nonce",
];

/// RFC 5849 section 3.6: everything but ALPHA, DIGIT, `-`, `.`, `_`, `~` is escaped.
const OAUTH_ESCAPE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// RFC 5849 percent-encoding.
pub fn oauth_escape(value: &str) -> String {
    utf8_percent_encode(value, OAUTH_ESCAPE).to_string()
}

/// Parses an `Authorization: OAuth k="v", ...` header like the classic oauth `_split_header`:
/// order, quoting and `&`/`%26` do not matter; `realm` is skipped. `None` when not OAuth.
pub fn parse_oauth_header(value: &str) -> Option<BTreeMap<String, String>> {
    let trimmed = value.trim_start();
    let rest = trimmed
        .get(..6)
        .filter(|p| p.eq_ignore_ascii_case("oauth "))?;
    let rest = &trimmed[rest.len()..];
    let mut out = BTreeMap::new();
    for part in rest.split(',') {
        if part.contains("realm") {
            continue;
        }
        let Some((key, val)) = part.split_once('=') else {
            continue;
        };
        let key = key.trim();
        let val = val.trim().trim_matches('"');
        let decoded = percent_decode_str(val).decode_utf8_lossy().into_owned();
        out.insert(key.to_owned(), decoded);
    }
    Some(out)
}

/// Where the request's OAuth parameters may come from.
#[derive(Debug)]
pub struct AuthRequest<'a> {
    /// The `Authorization` header, if any.
    pub header: Option<&'a str>,
    /// Upper-case HTTP method.
    pub method: &'a str,
    /// `scheme://host[:port]/path` without the query (the signature base URL).
    pub base_url: &'a str,
    /// Query parameters (oauth_* included).
    pub query: &'a Params,
    /// Form parameters of a POST (oauth_* included); empty for other methods.
    pub form: &'a Params,
}

/// Remembers nonces for replay detection (strict mode).
///
/// Expiry walks a queue in arrival order, so each request costs O(1) amortised however many
/// nonces the window holds (a benchmark sends hundreds of requests a second).
#[derive(Debug, Default)]
pub struct NonceStore {
    seen: HashMap<(String, String), u64>,
    arrivals: VecDeque<(u64, (String, String))>,
}

impl NonceStore {
    /// Records `nonce` for `consumer`; false when it was already used within `window` seconds.
    pub fn check_and_record(&mut self, consumer: &str, nonce: &str, now: u64, window: u64) -> bool {
        while let Some((at, _)) = self.arrivals.front() {
            if now.saturating_sub(*at) <= window {
                break;
            }
            if let Some((at, key)) = self.arrivals.pop_front()
                && self.seen.get(&key) == Some(&at)
            {
                self.seen.remove(&key);
            }
        }
        let key = (consumer.to_owned(), nonce.to_owned());
        if self.seen.contains_key(&key) {
            return false;
        }
        self.seen.insert(key.clone(), now);
        self.arrivals.push_back((now, key));
        true
    }

    /// Nonces remembered now.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// Whether none is remembered.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }
}

/// Strict-mode settings.
#[derive(Debug, Clone, Copy)]
pub struct Strictness {
    /// Current Unix time in seconds.
    pub now: u64,
    /// Allowed clock difference in seconds.
    pub window: u64,
}

fn find_oauth_params(req: &AuthRequest<'_>) -> Option<BTreeMap<String, String>> {
    let complete = |m: &BTreeMap<String, String>| REQUIRED.iter().all(|k| m.contains_key(*k));
    if let Some(header) = req.header.and_then(parse_oauth_header)
        && complete(&header)
    {
        return Some(header);
    }
    for source in [req.query, req.form] {
        let map: BTreeMap<String, String> = source
            .pairs()
            .iter()
            .filter(|(k, _)| k.starts_with("oauth_"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if complete(&map) {
            return Some(map);
        }
    }
    None
}

/// Authenticates a request; on success returns the index of the matching key in `keys`.
pub fn authenticate(
    req: &AuthRequest<'_>,
    keys: &[ApiKey],
    strict: Option<(Strictness, &mut NonceStore)>,
) -> Result<usize, ApiError> {
    let Some(oauth) = find_oauth_params(req) else {
        return Err(ApiError::text(StatusCode::UNAUTHORIZED, "Forbidden"));
    };
    let value = |k: &str| oauth.get(k).map_or("", String::as_str);
    let consumer = value("oauth_consumer_key");
    if !keys.iter().any(|k| k.consumer_key == consumer) {
        return Err(ApiError::unauthorized(
            "Authorization Error: Invalid API key.",
        ));
    }
    let token = value("oauth_token");
    let Some(index) = keys
        .iter()
        .position(|k| k.consumer_key == consumer && k.token_key == token)
    else {
        return Err(ApiError::unauthorized(format!(
            "Authorization Error: 'Invalid access token: {token}'"
        )));
    };
    if let Some((strictness, nonces)) = strict {
        let Ok(timestamp) = value("oauth_timestamp").parse::<u64>() else {
            return Err(ApiError::bad_request(
                "Bad Request: oauth_timestamp has an unexpected type",
            ));
        };
        if timestamp.abs_diff(strictness.now) > strictness.window {
            return Err(ApiError::unauthorized(format!(
                "Authorization Error: 'Expired timestamp: given {timestamp} and now {} has a greater difference than threshold {}'",
                strictness.now, strictness.window
            )));
        }
        if !nonces.check_and_record(
            consumer,
            value("oauth_nonce"),
            strictness.now,
            strictness.window,
        ) {
            return Err(ApiError::unauthorized(format!(
                "Authorization Error: 'Nonce already used: {}'",
                value("oauth_nonce")
            )));
        }
    }
    let key = &keys[index];
    let valid = match value("oauth_signature_method")
        .to_ascii_uppercase()
        .as_str()
    {
        "PLAINTEXT" => plaintext_matches(value("oauth_signature"), &key.token_secret),
        "HMAC-SHA1" => hmac_matches(req, &oauth, &key.token_secret),
        other => {
            return Err(ApiError::unauthorized(format!(
                "Authorization Error: 'Signature method {other} not supported try one of the following: HMAC-SHA1, PLAINTEXT'"
            )));
        }
    };
    if !valid {
        return Err(ApiError::unauthorized(
            "Authorization Error: 'Invalid signature.'",
        ));
    }
    if !key.active {
        return Err(ApiError::text(
            StatusCode::FORBIDDEN,
            "User is not allowed access to this API.",
        ));
    }
    Ok(index)
}

fn plaintext_matches(signature: &str, secret: &str) -> bool {
    let expected = format!("&{}", oauth_escape(secret));
    constant_time_eq(signature.as_bytes(), expected.as_bytes())
        || constant_time_eq(signature.as_bytes(), format!("&{secret}").as_bytes())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The RFC 5849 signature base string.
pub fn signature_base_string(method: &str, base_url: &str, params: &[(String, String)]) -> String {
    let mut encoded: Vec<(String, String)> = params
        .iter()
        .map(|(k, v)| (oauth_escape(k), oauth_escape(v)))
        .collect();
    encoded.sort();
    let normalized = encoded
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&");
    format!(
        "{}&{}&{}",
        method.to_ascii_uppercase(),
        oauth_escape(base_url),
        oauth_escape(&normalized)
    )
}

/// base64(HMAC-SHA1(key = `&escape(token_secret)`, base string)).
pub fn hmac_sha1_signature(base: &str, token_secret: &str) -> String {
    let key = format!("&{}", oauth_escape(token_secret));
    let Ok(mut mac) = Hmac::<Sha1>::new_from_slice(key.as_bytes()) else {
        return String::new();
    };
    mac.update(base.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

fn hmac_matches(req: &AuthRequest<'_>, oauth: &BTreeMap<String, String>, secret: &str) -> bool {
    let Ok(provided) = base64::engine::general_purpose::STANDARD
        .decode(oauth.get("oauth_signature").map_or("", String::as_str))
    else {
        return false;
    };
    let header_params: Vec<(String, String)> = oauth
        .iter()
        .filter(|(k, _)| k.as_str() != "oauth_signature" && k.as_str() != "realm")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let request_params = |with_form: bool| -> Vec<(String, String)> {
        let mut all: Vec<(String, String)> = req
            .query
            .pairs()
            .iter()
            .filter(|(k, _)| !k.starts_with("oauth_"))
            .cloned()
            .collect();
        if with_form {
            all.extend(
                req.form
                    .pairs()
                    .iter()
                    .filter(|(k, _)| !k.starts_with("oauth_"))
                    .cloned(),
            );
        }
        all
    };
    // Signers disagree on multi-valued keys and on multipart bodies: RFC 5849 signs every value
    // of the query and urlencoded form; maas-client-go signs the last value only; oauthlib never
    // signs multipart parts. Any of these signatures is accepted.
    for with_form in [true, false] {
        let all = request_params(with_form);
        let last_only = last_value_per_key(&all);
        for variant in [all, last_only] {
            let mut params = header_params.clone();
            params.extend(variant);
            let base = signature_base_string(req.method, req.base_url, &params);
            let key = format!("&{}", oauth_escape(secret));
            if let Ok(mut mac) = Hmac::<Sha1>::new_from_slice(key.as_bytes()) {
                mac.update(base.as_bytes());
                if mac.verify_slice(&provided).is_ok() {
                    return true;
                }
            }
        }
    }
    false
}

fn last_value_per_key(pairs: &[(String, String)]) -> Vec<(String, String)> {
    let mut map: BTreeMap<&str, &str> = BTreeMap::new();
    for (k, v) in pairs {
        map.insert(k, v);
    }
    map.into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

#[cfg(test)]
#[path = "auth_tests.rs"]
mod tests;
