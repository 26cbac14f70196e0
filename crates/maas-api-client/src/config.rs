//! Client configuration: endpoint, key, timeouts, concurrency, retries and TLS.

use std::sync::Arc;
use std::time::Duration;

use url::Url;

use crate::auth::ApiKey;
use crate::error::MaasError;
use crate::observer::{NoopObserver, RequestObserver};

/// How often and how patiently idempotent calls are retried.
///
/// Only idempotent operations are retried (reads, `query_power_state`, and writes that are
/// idempotent by construction such as setting annotations, PUT updates, release and tag
/// membership); never `allocate`, `deploy`, `power_on`, `link_subnet` or creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Total attempts including the first (1 disables retries).
    pub max_attempts: u32,
    /// First backoff delay; doubles per attempt, with jitter.
    pub base_delay: Duration,
    /// Upper bound of the exponential backoff.
    pub max_delay: Duration,
    /// Upper bound for a server-sent `Retry-After` (MAAS sends 5 s or 10 s); the client waits
    /// `max(backoff, min(retry_after, max_retry_after))`.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 4,
            base_delay: Duration::from_millis(250),
            max_delay: Duration::from_secs(10),
            max_retry_after: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// A policy that never retries.
    pub fn none() -> Self {
        Self {
            max_attempts: 1,
            ..Self::default()
        }
    }

    /// The delay before the next attempt: the backoff, stretched to honour `Retry-After`
    /// (capped by `max_retry_after`).
    pub fn delay(&self, backoff: Duration, retry_after: Option<Duration>) -> Duration {
        match retry_after {
            Some(asked) => backoff.max(asked.min(self.max_retry_after)),
            None => backoff,
        }
    }
}

/// Default for [`Config::max_response_bytes`]: 64 MiB.
///
/// The largest answer is `GET /machines/` without a narrow filter (the orphan sweep lists every
/// allocation of an installation; an inventory may be a whole pool). A machine object of a
/// MAAS 3.x server with its interface and storage trees is about 5–30 KB, so 64 MiB holds a
/// listing of several thousand machines — more than one MAAS region serves — while bounding
/// what a broken or hostile endpoint can make the gateway buffer (the body, then its decoded
/// form). Every other answer is far smaller. Raise it with
/// [`ConfigBuilder::max_response_bytes`] for a larger MAAS.
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 64 * 1024 * 1024;

/// Default for [`Config::large_response_bytes`]: 4 MiB.
///
/// Answers up to this size are buffered side by side, one per request in flight; a larger one
/// waits for its turn, so at most one is buffered at a time. What the client holds is then
/// bounded by `max_concurrent_requests` × this + [`Config::max_response_bytes`] (8 × 4 MiB +
/// 64 MiB for the gateway's defaults), not by `max_concurrent_requests` × 64 MiB, which would
/// exceed the gateway's memory limit. Only machine listings of a few hundred machines come near
/// it; every other answer is far smaller.
pub const DEFAULT_LARGE_RESPONSE_BYTES: u64 = 4 * 1024 * 1024;

/// How a configured CA bundle is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CaMode {
    /// The bundle is the only set of trust anchors (typical for a MAAS with its own CA).
    #[default]
    Only,
    /// The bundle is trusted in addition to the platform's roots.
    Additional,
}

/// TLS settings. Certificates are verified unless `insecure_skip_tls_verify` is set.
#[derive(Debug, Clone, Default)]
pub struct TlsOptions {
    /// PEM bundle of CA certificates.
    pub ca_bundle_pem: Option<Vec<u8>>,
    /// How `ca_bundle_pem` is combined with the platform roots.
    pub ca_mode: CaMode,
    /// Accept any certificate. For labs only: PLAINTEXT OAuth sends the key secret in clear
    /// text to whoever answers.
    pub insecure_skip_tls_verify: bool,
}

/// Everything [`crate::MaasClient::new`] needs.
#[derive(Debug, Clone)]
pub struct Config {
    /// The API root, always ending in `/api/2.0/`.
    pub api_root: Url,
    /// The API key.
    pub api_key: ApiKey,
    /// TCP + TLS connect timeout.
    pub connect_timeout: Duration,
    /// Whole-request timeout per attempt (MAAS's `query_power_state` may take up to 60 s).
    pub request_timeout: Duration,
    /// Maximum requests in flight for this client (all clones share the limit).
    pub max_concurrent_requests: usize,
    /// Retry policy for idempotent calls.
    pub retry: RetryPolicy,
    /// Largest answer body accepted, in bytes (default [`DEFAULT_MAX_RESPONSE_BYTES`]); a
    /// larger 2xx answer is [`MaasError::ResponseTooLarge`].
    pub max_response_bytes: u64,
    /// Answers larger than this are buffered one at a time (default
    /// [`DEFAULT_LARGE_RESPONSE_BYTES`]).
    pub large_response_bytes: u64,
    /// TLS settings.
    pub tls: TlsOptions,
    /// `User-Agent` header.
    pub user_agent: String,
    /// Metrics hook.
    pub observer: Arc<dyn RequestObserver>,
}

impl Config {
    /// Starts a builder for `endpoint` (the MAAS root such as `https://maas:5443/MAAS/`, with
    /// or without `api/2.0/`).
    pub fn builder(endpoint: &str, api_key: ApiKey) -> ConfigBuilder {
        ConfigBuilder {
            endpoint: endpoint.to_owned(),
            api_key,
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(90),
            max_concurrent_requests: 16,
            retry: RetryPolicy::default(),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            large_response_bytes: DEFAULT_LARGE_RESPONSE_BYTES,
            tls: TlsOptions::default(),
            user_agent: concat!("capmaas-maas-client/", env!("CARGO_PKG_VERSION")).to_owned(),
            observer: Arc::new(NoopObserver),
        }
    }
}

/// Builder for [`Config`]; `build` validates the endpoint.
#[derive(Debug, Clone)]
pub struct ConfigBuilder {
    endpoint: String,
    api_key: ApiKey,
    connect_timeout: Duration,
    request_timeout: Duration,
    max_concurrent_requests: usize,
    retry: RetryPolicy,
    max_response_bytes: u64,
    large_response_bytes: u64,
    tls: TlsOptions,
    user_agent: String,
    observer: Arc<dyn RequestObserver>,
}

impl ConfigBuilder {
    /// Sets the connect timeout.
    #[must_use]
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets the per-attempt request timeout.
    #[must_use]
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Sets the global in-flight request limit (at least 1).
    #[must_use]
    pub fn max_concurrent_requests(mut self, limit: usize) -> Self {
        self.max_concurrent_requests = limit.max(1);
        self
    }

    /// Sets the retry policy.
    #[must_use]
    pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// Sets the largest answer body accepted, in bytes (at least 1; see
    /// [`DEFAULT_MAX_RESPONSE_BYTES`]).
    #[must_use]
    pub fn max_response_bytes(mut self, limit: u64) -> Self {
        self.max_response_bytes = limit;
        self
    }

    /// Sets the size above which answers are buffered one at a time (see
    /// [`DEFAULT_LARGE_RESPONSE_BYTES`]).
    #[must_use]
    pub fn large_response_bytes(mut self, bytes: u64) -> Self {
        self.large_response_bytes = bytes;
        self
    }

    /// Trusts the CAs of a PEM bundle, as the only anchors or in addition to the platform's.
    #[must_use]
    pub fn ca_bundle_pem(mut self, pem: impl Into<Vec<u8>>, mode: CaMode) -> Self {
        self.tls.ca_bundle_pem = Some(pem.into());
        self.tls.ca_mode = mode;
        self
    }

    /// Disables certificate verification. Explicit opt-out for labs only.
    #[must_use]
    pub fn insecure_skip_tls_verify(mut self, insecure: bool) -> Self {
        self.tls.insecure_skip_tls_verify = insecure;
        self
    }

    /// Sets the `User-Agent`.
    #[must_use]
    pub fn user_agent(mut self, user_agent: impl Into<String>) -> Self {
        self.user_agent = user_agent.into();
        self
    }

    /// Installs a metrics hook.
    #[must_use]
    pub fn observer(mut self, observer: Arc<dyn RequestObserver>) -> Self {
        self.observer = observer;
        self
    }

    /// Validates the endpoint and returns the configuration.
    pub fn build(self) -> Result<Config, MaasError> {
        if self.retry.max_attempts == 0 {
            return Err(MaasError::Config(
                "retry max_attempts must be at least 1".to_owned(),
            ));
        }
        if self.max_response_bytes == 0 {
            return Err(MaasError::Config(
                "max_response_bytes must be at least 1".to_owned(),
            ));
        }
        Ok(Config {
            api_root: api_root(&self.endpoint)?,
            api_key: self.api_key,
            connect_timeout: self.connect_timeout,
            request_timeout: self.request_timeout,
            max_concurrent_requests: self.max_concurrent_requests,
            retry: self.retry,
            max_response_bytes: self.max_response_bytes,
            large_response_bytes: self.large_response_bytes,
            tls: self.tls,
            user_agent: self.user_agent,
            observer: self.observer,
        })
    }
}

/// Normalises a MAAS endpoint to the API root `.../api/2.0/`.
///
/// Accepts the MAAS root (`http://host:5240/MAAS`, with or without a trailing slash) or the API
/// root (`.../MAAS/api/2.0`, with or without a trailing slash). Query and fragment are dropped.
pub fn api_root(endpoint: &str) -> Result<Url, MaasError> {
    let mut url = Url::parse(endpoint.trim())
        .map_err(|e| MaasError::Config(format!("invalid MAAS endpoint URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(MaasError::Config(format!(
            "MAAS endpoint must be http or https, not {}",
            url.scheme()
        )));
    }
    if url.host_str().is_none() {
        return Err(MaasError::Config("MAAS endpoint has no host".to_owned()));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(MaasError::Config(
            "MAAS endpoint must not contain credentials; use the API key".to_owned(),
        ));
    }
    url.set_query(None);
    url.set_fragment(None);
    let path = url.path().trim_end_matches('/');
    let root = path.strip_suffix("/api/2.0").unwrap_or(path);
    let api_path = format!("{root}/api/2.0/");
    url.set_path(&api_path);
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_maas_root_or_api_root() {
        for endpoint in [
            "http://10.0.0.1:5240/MAAS",
            "http://10.0.0.1:5240/MAAS/",
            "http://10.0.0.1:5240/MAAS/api/2.0",
            "http://10.0.0.1:5240/MAAS/api/2.0/",
            " http://10.0.0.1:5240/MAAS/?x=1#y ",
        ] {
            assert_eq!(
                api_root(endpoint).unwrap().as_str(),
                "http://10.0.0.1:5240/MAAS/api/2.0/",
                "{endpoint}"
            );
        }
        assert_eq!(
            api_root("https://maas.example").unwrap().as_str(),
            "https://maas.example/api/2.0/"
        );
    }

    #[test]
    fn rejects_bad_endpoints() {
        for endpoint in [
            "",
            "maas:5240",
            "ftp://maas/MAAS/",
            "http://user:pw@maas/MAAS/",
        ] {
            let err = api_root(endpoint).unwrap_err();
            assert_eq!(err.category(), "config", "{endpoint}");
        }
    }

    #[test]
    fn builder_sets_fields() {
        let key = ApiKey::parse("a:b:c").unwrap();
        let config = Config::builder("http://h/MAAS/", key)
            .connect_timeout(Duration::from_secs(1))
            .request_timeout(Duration::from_secs(2))
            .max_concurrent_requests(0)
            .insecure_skip_tls_verify(true)
            .ca_bundle_pem(b"pem".to_vec(), CaMode::Additional)
            .build()
            .unwrap();
        assert_eq!(config.api_root.as_str(), "http://h/MAAS/api/2.0/");
        assert_eq!(config.max_concurrent_requests, 1);
        assert_eq!(config.request_timeout, Duration::from_secs(2));
        assert!(config.tls.insecure_skip_tls_verify);
        assert_eq!(config.tls.ca_mode, CaMode::Additional);
        assert_eq!(config.max_response_bytes, DEFAULT_MAX_RESPONSE_BYTES);
        let small = Config::builder("http://h/", ApiKey::parse("a:b:c").unwrap())
            .max_response_bytes(1024)
            .build()
            .unwrap();
        assert_eq!(small.max_response_bytes, 1024);
        let zero = Config::builder("http://h/", ApiKey::parse("a:b:c").unwrap())
            .max_response_bytes(0)
            .build();
        assert!(zero.is_err_and(|e| e.category() == "config"));
        let bad = Config::builder("http://h/", ApiKey::parse("a:b:c").unwrap())
            .retry_policy(RetryPolicy {
                max_attempts: 0,
                ..RetryPolicy::default()
            })
            .build();
        assert!(bad.is_err());
    }

    #[test]
    fn debug_output_never_shows_the_secret() {
        let key = ApiKey::parse("consumer:token:topsecretvalue").unwrap();
        let config = Config::builder("https://maas/MAAS/", key).build().unwrap();
        let shown = format!("{config:?}");
        assert!(!shown.contains("topsecretvalue"), "{shown}");
        assert!(shown.contains("<redacted>"));
        let client = crate::MaasClient::new(config).unwrap();
        let shown = format!("{client:?}");
        assert!(!shown.contains("topsecretvalue"), "{shown}");
    }

    #[test]
    fn retry_delay_honours_retry_after_within_cap() {
        let policy = RetryPolicy {
            max_retry_after: Duration::from_secs(5),
            ..RetryPolicy::default()
        };
        let backoff = Duration::from_millis(300);
        assert_eq!(policy.delay(backoff, None), backoff);
        assert_eq!(
            policy.delay(backoff, Some(Duration::from_secs(2))),
            Duration::from_secs(2)
        );
        assert_eq!(
            policy.delay(backoff, Some(Duration::from_secs(60))),
            Duration::from_secs(5)
        );
        assert_eq!(policy.delay(backoff, Some(Duration::ZERO)), backoff);
    }
}
