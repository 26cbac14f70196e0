//! The MAAS API key and the OAuth 1.0 PLAINTEXT `Authorization` header.
//!
//! MAAS keys are `consumer_key:token_key:token_secret` and the consumer secret is always empty,
//! so the PLAINTEXT signature is `&<token_secret>` (maas-api.md 1.1-1.2). PLAINTEXT is pure
//! formatting, no cryptography: it is only as safe as the (verified) TLS it travels over.

use std::fmt;
use std::str::FromStr;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// RFC 5849 3.6: everything except ALPHA, DIGIT, `-`, `.`, `_`, `~` is percent-encoded.
const OAUTH_ENCODE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Why an API key string was rejected. The messages never echo the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiKeyError {
    /// The key did not have exactly three `:`-separated parts.
    #[error(
        "MAAS API key must have the form consumer_key:token_key:token_secret (found {0} part(s))"
    )]
    WrongShape(usize),
    /// One of the three parts was empty.
    #[error("MAAS API key part '{0}' is empty")]
    EmptyPart(&'static str),
}

impl ApiKeyError {
    /// Low-cardinality label for metrics.
    pub fn category(&self) -> &'static str {
        "invalid_api_key"
    }
}

/// A MAAS API key. `Debug` and `Display` never show the token secret.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey {
    consumer_key: String,
    token_key: String,
    token_secret: String,
}

impl ApiKey {
    /// Parses `consumer_key:token_key:token_secret`; surrounding whitespace (a trailing
    /// newline in a key file) is ignored.
    pub fn parse(raw: &str) -> Result<Self, ApiKeyError> {
        let parts: Vec<&str> = raw.trim().split(':').collect();
        let [consumer_key, token_key, token_secret] = parts.as_slice() else {
            return Err(ApiKeyError::WrongShape(parts.len()));
        };
        for (name, value) in [
            ("consumer_key", consumer_key),
            ("token_key", token_key),
            ("token_secret", token_secret),
        ] {
            if value.is_empty() {
                return Err(ApiKeyError::EmptyPart(name));
            }
        }
        Ok(Self {
            consumer_key: (*consumer_key).to_owned(),
            token_key: (*token_key).to_owned(),
            token_secret: (*token_secret).to_owned(),
        })
    }

    /// The consumer key (first part; not secret).
    pub fn consumer_key(&self) -> &str {
        &self.consumer_key
    }

    /// The token key (second part; not secret, it names the token).
    pub fn token_key(&self) -> &str {
        &self.token_key
    }

    /// An HMAC-SHA256 of `message` under the token secret (base64url): a proof, checkable with
    /// [`ApiKey::verify`] by any holder of this key, that a holder of it wrote `message`. The
    /// secret never leaves this type.
    pub fn sign(&self, message: &[u8]) -> String {
        use base64::Engine as _;
        let tag = ring::hmac::sign(&self.proof_key(), message);
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(tag.as_ref())
    }

    /// Whether `signature` is [`ApiKey::sign`] of `message` under this key (constant time).
    pub fn verify(&self, message: &[u8], signature: &str) -> bool {
        use base64::Engine as _;
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(signature)
            .is_ok_and(|tag| ring::hmac::verify(&self.proof_key(), message, &tag).is_ok())
    }

    fn proof_key(&self) -> ring::hmac::Key {
        ring::hmac::Key::new(ring::hmac::HMAC_SHA256, self.token_secret.as_bytes())
    }

    /// Builds the PLAINTEXT `Authorization` header value for one attempt. Callers must pass
    /// a fresh `nonce` and the current `timestamp` on every attempt, retries included: MAAS
    /// refuses a replayed nonce and stale timestamps (maas-api.md 1.4).
    pub fn authorization_header(&self, nonce: &str, timestamp: u64) -> String {
        // Signature = escape(consumer_secret) & escape(token_secret); the consumer secret is "".
        let signature = format!("&{}", encode(&self.token_secret));
        format!(
            "OAuth realm=\"\", oauth_consumer_key=\"{}\", oauth_token=\"{}\", \
             oauth_signature_method=\"PLAINTEXT\", oauth_signature=\"{}\", \
             oauth_timestamp=\"{}\", oauth_nonce=\"{}\", oauth_version=\"1.0\"",
            encode(&self.consumer_key),
            encode(&self.token_key),
            encode(&signature),
            timestamp,
            encode(nonce),
        )
    }
}

fn encode(value: &str) -> String {
    utf8_percent_encode(value, OAUTH_ENCODE).to_string()
}

/// A new random nonce (uuid4, 32 hex digits).
pub(crate) fn new_nonce() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// Seconds since the Unix epoch; a clock before 1970 yields 0 (MAAS will then answer 401).
pub(crate) fn unix_timestamp() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl FromStr for ApiKey {
    type Err = ApiKeyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiKey")
            .field("consumer_key", &self.consumer_key)
            .field("token_key", &self.token_key)
            .field("token_secret", &"<redacted>")
            .finish()
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:<redacted>", self.consumer_key, self.token_key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    const KEY: &str = "cOnSuMeRkEy1234567:tOkEnKeY1234567890:sEcReTsEcReTsEcReTsEcReTsEcReT12";

    #[test]
    fn parses_three_parts_and_trims() {
        let key = ApiKey::parse(&format!("  {KEY}\n")).unwrap();
        assert_eq!(key.consumer_key(), "cOnSuMeRkEy1234567");
        assert_eq!(key.token_key(), "tOkEnKeY1234567890");
        assert_eq!(KEY.parse::<ApiKey>().unwrap(), key);
    }

    #[test]
    fn proofs_verify_under_the_same_key_only() {
        let key = ApiKey::parse(KEY).unwrap();
        let proof = key.sign(b"capmaas dnsresource 42");
        assert!(key.verify(b"capmaas dnsresource 42", &proof));
        assert!(!key.verify(b"capmaas dnsresource 43", &proof));
        assert!(!key.verify(b"capmaas dnsresource 42", "not base64!"));
        assert!(!key.verify(b"capmaas dnsresource 42", ""));
        let other = ApiKey::parse("cOnSuMeRkEy1234567:tOkEnKeY1234567890:another").unwrap();
        assert!(!other.verify(b"capmaas dnsresource 42", &proof));
        assert!(!proof.contains("sEcReT"));
    }

    #[test]
    fn rejects_malformed_keys_without_echoing_them() {
        assert_eq!(ApiKey::parse("a:b"), Err(ApiKeyError::WrongShape(2)));
        assert_eq!(ApiKey::parse("a:b:c:d"), Err(ApiKeyError::WrongShape(4)));
        assert_eq!(ApiKey::parse(""), Err(ApiKeyError::WrongShape(1)));
        assert_eq!(
            ApiKey::parse(":b:c"),
            Err(ApiKeyError::EmptyPart("consumer_key"))
        );
        assert_eq!(
            ApiKey::parse("a::c"),
            Err(ApiKeyError::EmptyPart("token_key"))
        );
        let err = ApiKey::parse("a:b:").unwrap_err();
        assert_eq!(err, ApiKeyError::EmptyPart("token_secret"));
        let err = ApiKey::parse("x:y:verysecret:z").unwrap_err();
        assert!(!err.to_string().contains("verysecret"));
        assert_eq!(err.category(), "invalid_api_key");
    }

    #[test]
    fn debug_and_display_redact_the_secret() {
        let key = ApiKey::parse(KEY).unwrap();
        let debug = format!("{key:?}");
        let display = key.to_string();
        for shown in [&debug, &display] {
            assert!(!shown.contains("sEcReT"), "{shown}");
            assert!(shown.contains("<redacted>"));
        }
        assert!(display.starts_with("cOnSuMeRkEy1234567:tOkEnKeY1234567890:"));
    }

    fn header_params(header: &str) -> BTreeMap<String, String> {
        let rest = header.strip_prefix("OAuth ").unwrap();
        rest.split(", ")
            .map(|part| {
                let (k, v) = part.split_once('=').unwrap();
                (k.to_owned(), v.trim_matches('"').to_owned())
            })
            .collect()
    }

    #[test]
    fn plaintext_header_has_every_required_parameter() {
        let key = ApiKey::parse(KEY).unwrap();
        let header = key.authorization_header("abc123", 1_700_000_000);
        let params = header_params(&header);
        assert_eq!(params["oauth_consumer_key"], "cOnSuMeRkEy1234567");
        assert_eq!(params["oauth_token"], "tOkEnKeY1234567890");
        assert_eq!(params["oauth_signature_method"], "PLAINTEXT");
        assert_eq!(
            params["oauth_signature"],
            "%26sEcReTsEcReTsEcReTsEcReTsEcReT12"
        );
        assert_eq!(params["oauth_timestamp"], "1700000000");
        assert_eq!(params["oauth_nonce"], "abc123");
        assert_eq!(params["oauth_version"], "1.0");
        assert_eq!(params.len(), 8);
    }

    #[test]
    fn header_values_are_percent_encoded() {
        let key = ApiKey::parse("a,b:t\"k:s&e=c").unwrap();
        let params = header_params(&key.authorization_header("n", 1));
        assert_eq!(params["oauth_consumer_key"], "a%2Cb");
        assert_eq!(params["oauth_token"], "t%22k");
        // "&" + escape("s&e=c") = "&s%26e%3Dc", escaped again for the header.
        assert_eq!(params["oauth_signature"], "%26s%2526e%253Dc");
    }

    #[test]
    fn nonces_are_fresh() {
        let a = new_nonce();
        let b = new_nonce();
        assert_ne!(a, b);
        assert_eq!(a.len(), 32);
        assert!(unix_timestamp() > 1_600_000_000);
    }
}
