//! Request parameters as Django sees them: query string, urlencoded or multipart form.
//!
//! python-libmaas and the MAAS CLI send multipart bodies built by Python's `email` package:
//! a quoted boundary and base64 `Content-Transfer-Encoding` on every part. Both are handled.

use base64::Engine as _;
use bytes::Bytes;

use crate::error::ApiError;

/// An ordered multi-map of request parameters (Django `QueryDict`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Params {
    pairs: Vec<(String, String)>,
}

impl Params {
    /// Parameters from a list of pairs.
    pub fn from_pairs(pairs: Vec<(String, String)>) -> Self {
        Self { pairs }
    }

    /// The last value of `key` (Django `QueryDict.get`).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The last value of `key` when present and non-empty.
    pub fn get_nonempty(&self, key: &str) -> Option<&str> {
        self.get(key).filter(|v| !v.is_empty())
    }

    /// The last value of `key`, refused as Django refuses a required field left empty.
    pub(crate) fn required(&self, key: &str) -> Result<&str, ApiError> {
        self.get_nonempty(key)
            .ok_or_else(|| ApiError::required(key))
    }

    /// A required choice field, read with `parse` (`None` for a value outside the choices).
    pub(crate) fn required_choice<T>(
        &self,
        key: &str,
        parse: impl FnOnce(&str) -> Option<T>,
    ) -> Result<T, ApiError> {
        let text = self.required(key)?;
        parse(text).ok_or_else(|| ApiError::invalid_choice(key, text))
    }

    /// Every value of `key`, in order (`QueryDict.getlist`).
    pub fn all(&self, key: &str) -> Vec<&str> {
        self.pairs
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// Whether `key` was sent at all.
    pub fn contains(&self, key: &str) -> bool {
        self.pairs.iter().any(|(k, _)| k == key)
    }

    /// Distinct keys in first-seen order.
    pub fn keys(&self) -> Vec<&str> {
        let mut keys: Vec<&str> = Vec::new();
        for (k, _) in &self.pairs {
            if !keys.contains(&k.as_str()) {
                keys.push(k);
            }
        }
        keys
    }

    /// All pairs in order.
    pub fn pairs(&self) -> &[(String, String)] {
        &self.pairs
    }

    /// Appends the pairs of `other`.
    pub fn extend(&mut self, other: Params) {
        self.pairs.extend(other.pairs);
    }

    /// Removes every `oauth_*` key (MAAS strips them before handlers run).
    #[must_use]
    pub fn without_oauth(mut self) -> Self {
        self.pairs.retain(|(k, _)| !k.starts_with("oauth_"));
        self
    }

    /// Parses a boolean the way Django/MAAS forms do.
    pub fn bool(&self, key: &str) -> Result<bool, ApiError> {
        match self.get(key) {
            None | Some("") => Ok(false),
            Some(v) => parse_bool(v).ok_or_else(|| {
                ApiError::field(key, format!("'{v}' is not a valid boolean value."))
            }),
        }
    }
}

/// `true/false`, `1/0`, `yes/no`, `on/off` in any case.
pub fn parse_bool(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" | "t" | "y" => Some(true),
        "false" | "0" | "no" | "off" | "f" | "n" | "" => Some(false),
        _ => None,
    }
}

/// Parses a query string or an urlencoded body (`+` is a space, invalid UTF-8 is replaced).
pub fn parse_urlencoded(input: &[u8]) -> Params {
    Params {
        pairs: url::form_urlencoded::parse(input)
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect(),
    }
}

/// What kind of form a `Content-Type` announces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FormKind {
    /// `application/x-www-form-urlencoded`.
    UrlEncoded,
    /// `multipart/form-data` with this boundary.
    Multipart(String),
    /// Anything else (JSON included): piston leaves the form empty.
    Other,
}

/// Classifies a `Content-Type` header value.
pub fn form_kind(content_type: Option<&str>) -> FormKind {
    let Some(ct) = content_type else {
        return FormKind::Other;
    };
    let essence = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match essence.as_str() {
        "application/x-www-form-urlencoded" => FormKind::UrlEncoded,
        "multipart/form-data" => {
            multer::parse_boundary(ct).map_or(FormKind::Other, FormKind::Multipart)
        }
        _ => FormKind::Other,
    }
}

/// Parses a request body according to its content type.
pub async fn parse_body(content_type: Option<&str>, body: Bytes) -> Result<Params, ApiError> {
    match form_kind(content_type) {
        FormKind::UrlEncoded => Ok(parse_urlencoded(&body)),
        FormKind::Multipart(boundary) => parse_multipart(&boundary, body).await,
        FormKind::Other => Ok(Params::default()),
    }
}

/// Parses a multipart body, decoding base64 parts. Every part becomes a parameter.
pub async fn parse_multipart(boundary: &str, body: Bytes) -> Result<Params, ApiError> {
    if is_empty_multipart(boundary, &body) {
        return Ok(Params::default());
    }
    let stream = futures::stream::once(async move { Ok::<Bytes, std::io::Error>(body) });
    let mut multipart = multer::Multipart::new(stream, boundary);
    let mut pairs = Vec::new();
    loop {
        let field = match multipart.next_field().await {
            Ok(Some(field)) => field,
            Ok(None) => break,
            Err(e) => {
                return Err(ApiError::bad_request(format!(
                    "Malformed multipart body: {e}"
                )));
            }
        };
        let name = field.name().unwrap_or_default().to_owned();
        let base64_encoded = field
            .headers()
            .get("content-transfer-encoding")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("base64"));
        let data = field
            .bytes()
            .await
            .map_err(|e| ApiError::bad_request(format!("Malformed multipart body: {e}")))?;
        let data = if base64_encoded {
            decode_base64_lenient(&data)?
        } else {
            data.to_vec()
        };
        pairs.push((name, String::from_utf8_lossy(&data).into_owned()));
    }
    Ok(Params { pairs })
}

/// Python's `email` package writes a multipart without parts as `--B\r\n\r\n--B--`, which
/// strict parsers reject; Django reads it as an empty form.
fn is_empty_multipart(boundary: &str, body: &[u8]) -> bool {
    let delimiter = format!("--{boundary}");
    let Ok(text) = std::str::from_utf8(body) else {
        return false;
    };
    text.trim()
        .strip_prefix(delimiter.as_str())
        .and_then(|rest| rest.trim().strip_prefix(delimiter.as_str()))
        .is_some_and(|rest| rest.trim() == "--")
}

/// Decodes base64 that may be wrapped over several lines (as the `email` package writes it).
pub fn decode_base64_lenient(data: &[u8]) -> Result<Vec<u8>, ApiError> {
    let compact: Vec<u8> = data
        .iter()
        .copied()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(&compact)
        .map_err(|e| ApiError::bad_request(format!("Invalid base64 part: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urlencoded_keeps_order_and_repeats() {
        let p = parse_urlencoded(b"tags=a&tags=b&op=allocate&comment=hello+world%21");
        assert_eq!(p.all("tags"), vec!["a", "b"]);
        assert_eq!(p.get("tags"), Some("b"));
        assert_eq!(p.get("comment"), Some("hello world!"));
        assert_eq!(p.keys(), vec!["tags", "op", "comment"]);
    }

    #[test]
    fn booleans_like_django() {
        for v in ["true", "True", "1", "yes", "on"] {
            assert_eq!(parse_bool(v), Some(true), "{v}");
        }
        for v in ["false", "0", "no", "off", ""] {
            assert_eq!(parse_bool(v), Some(false), "{v}");
        }
        assert_eq!(parse_bool("maybe"), None);
        let p = parse_urlencoded(b"erase=maybe");
        assert!(p.bool("erase").is_err());
        assert!(!p.bool("quick_erase").unwrap());
    }

    #[test]
    fn oauth_keys_are_stripped() {
        let p = parse_urlencoded(b"oauth_nonce=1&op=x").without_oauth();
        assert_eq!(p.keys(), vec!["op"]);
    }

    #[test]
    fn content_types() {
        assert_eq!(
            form_kind(Some("application/x-www-form-urlencoded; charset=utf-8")),
            FormKind::UrlEncoded
        );
        assert_eq!(
            form_kind(Some(
                "multipart/form-data; boundary=\"===============123==\""
            )),
            FormKind::Multipart("===============123==".to_owned())
        );
        assert_eq!(form_kind(Some("application/json")), FormKind::Other);
        assert_eq!(form_kind(None), FormKind::Other);
        assert_eq!(form_kind(Some("multipart/form-data")), FormKind::Other);
    }

    #[tokio::test]
    async fn python_email_multipart_with_base64_parts() {
        // As python-libmaas builds it: quoted boundary, base64 parts, CRLF line endings.
        let body = "--===============7330845974216740156==\r\n\
Content-Type: application/octet-stream\r\nMIME-Version: 1.0\r\nContent-Transfer-Encoding: base64\r\n\
Content-Disposition: form-data; name=\"cpu_count\"\r\n\r\nNA==\r\n\
--===============7330845974216740156==\r\n\
Content-Type: text/plain; charset=\"utf-8\"\r\nMIME-Version: 1.0\r\nContent-Transfer-Encoding: base64\r\n\
Content-Disposition: form-data; name=\"tags\"\r\n\r\nZ3B1\r\n\
--===============7330845974216740156==\r\n\
Content-Disposition: form-data; name=\"plain\"\r\n\r\nraw value\r\n\
--===============7330845974216740156==--\r\n";
        let ct = "multipart/form-data; boundary=\"===============7330845974216740156==\"";
        let p = parse_body(Some(ct), Bytes::from(body)).await.unwrap();
        assert_eq!(p.get("cpu_count"), Some("4"));
        assert_eq!(p.get("tags"), Some("gpu"));
        assert_eq!(p.get("plain"), Some("raw value"));
    }

    #[tokio::test]
    async fn python_multipart_without_parts_is_empty() {
        let ct = "multipart/form-data; boundary=\"===============5743578115654712234==\"";
        let body = "--===============5743578115654712234==\r\n\r\n--===============5743578115654712234==--";
        assert_eq!(
            parse_body(Some(ct), Bytes::from(body)).await.unwrap(),
            Params::default()
        );
    }

    #[tokio::test]
    async fn malformed_multipart_is_an_error() {
        let ct = "multipart/form-data; boundary=xyz";
        assert!(
            parse_body(Some(ct), Bytes::from_static(b"--xyz\r\nbroken"))
                .await
                .is_err()
        );
        let bad64 = "--xyz\r\nContent-Transfer-Encoding: base64\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n!!!\r\n--xyz--\r\n";
        assert!(parse_body(Some(ct), Bytes::from(bad64)).await.is_err());
    }
}
