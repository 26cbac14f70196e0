//! Who may read `/metrics` when it is served securely: the scrape's bearer token is
//! authenticated by the API server (TokenReview), and the user it names must be allowed `get`
//! on the non-resource URL `/metrics` (SubjectAccessReview). This is controller-runtime's
//! `filters.WithAuthenticationAndAuthorization`, which Cluster API's managers serve metrics
//! behind, so the ClusterRole a Prometheus already holds for them (`nonResourceURLs:
//! ["/metrics"]`, verb `get`) works here too.
//!
//! Verdicts are cached for a short time, keyed by a SHA-256 digest of the token (the token
//! itself is never kept): a Prometheus scrapes every 30 s with the same token, and two reviews
//! per scrape per replica would be API-server load for nothing. A token revoked or a binding
//! removed takes effect within [`ALLOWED_TTL`]; a refusal is cached for [`REFUSED_TTL`] only,
//! so a binding just created is honoured soon.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use http::{HeaderMap, header};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::time::Instant;
use tracing::debug;

/// How long an allowed token is trusted without asking the API server again.
pub const ALLOWED_TTL: Duration = Duration::from_secs(60);
/// How long a refused token is refused without asking again.
pub const REFUSED_TTL: Duration = Duration::from_secs(10);
/// Tokens remembered at most; beyond, expired verdicts are dropped, then all of them.
const MAX_CACHED: usize = 1024;
/// The path and verb a scrape is authorized for.
const METRICS_PATH: &str = "/metrics";

/// What a scrape may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The token is valid and its user may read `/metrics`.
    Allowed,
    /// No bearer token, or one the API server does not accept: `401`.
    Unauthenticated,
    /// A valid token whose user may not read `/metrics`: `403`.
    Forbidden {
        /// The user the token belongs to (named in the answer, as the API server does).
        user: String,
    },
}

/// Reviews scrapes with the API server and remembers the verdicts.
pub struct MetricsAuth {
    client: Client,
    cache: Mutex<HashMap<[u8; 32], (Verdict, Instant)>>,
}

impl std::fmt::Debug for MetricsAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsAuth").finish_non_exhaustive()
    }
}

/// The token of an `Authorization: Bearer <token>` header (the scheme case-insensitive, as
/// RFC 6750 has it), if there is one.
pub fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

impl MetricsAuth {
    /// Reviews with `client` (the process's own identity, which needs `create` on
    /// `tokenreviews` and `subjectaccessreviews`).
    pub fn new(client: Client) -> Self {
        Self {
            client,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The verdict on a request with these headers. An API server that cannot be asked is an
    /// error: the caller answers it with a server error rather than a refusal.
    pub async fn review(&self, headers: &HeaderMap) -> Result<Verdict, kube::Error> {
        let Some(token) = bearer_token(headers) else {
            return Ok(Verdict::Unauthenticated);
        };
        let key = digest(token);
        let now = Instant::now();
        if let Some(verdict) = self.cached(&key, now) {
            return Ok(verdict);
        }
        let verdict = self.ask(token).await?;
        self.remember(key, verdict.clone(), now);
        Ok(verdict)
    }

    async fn ask(&self, token: &str) -> Result<Verdict, kube::Error> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_owned(),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let reviewed = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await?;
        let status = reviewed.status.unwrap_or_default();
        let (Some(true), Some(user)) = (status.authenticated, status.user) else {
            debug!(error = ?status.error, "metrics scrape with a token the API server refused");
            return Ok(Verdict::Unauthenticated);
        };
        let access = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username.clone(),
                groups: user.groups.clone(),
                uid: user.uid.clone(),
                extra: user.extra.clone(),
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(METRICS_PATH.to_owned()),
                    verb: Some("get".to_owned()),
                }),
                resource_attributes: None,
            },
            ..SubjectAccessReview::default()
        };
        let decided = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &access)
            .await?;
        let allowed = decided.status.is_some_and(|s| s.allowed);
        Ok(if allowed {
            Verdict::Allowed
        } else {
            Verdict::Forbidden {
                user: user.username.unwrap_or_default(),
            }
        })
    }

    fn cached(&self, key: &[u8; 32], now: Instant) -> Option<Verdict> {
        let cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        let (verdict, at) = cache.get(key)?;
        (now.duration_since(*at) < ttl(verdict)).then(|| verdict.clone())
    }

    fn remember(&self, key: [u8; 32], verdict: Verdict, now: Instant) {
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if cache.len() >= MAX_CACHED {
            cache.retain(|_, (verdict, at)| now.duration_since(*at) < ttl(verdict));
            if cache.len() >= MAX_CACHED {
                cache.clear();
            }
        }
        cache.insert(key, (verdict, now));
    }
}

fn ttl(verdict: &Verdict) -> Duration {
    match verdict {
        Verdict::Allowed => ALLOWED_TTL,
        Verdict::Unauthenticated | Verdict::Forbidden { .. } => REFUSED_TTL,
    }
}

fn digest(token: &str) -> [u8; 32] {
    let mut key = [0; 32];
    key.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, token.as_bytes()).as_ref());
    key
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_str(value).unwrap());
        h
    }

    #[test]
    fn only_a_bearer_token_is_a_token() {
        assert_eq!(bearer_token(&headers("Bearer abc")), Some("abc"));
        assert_eq!(bearer_token(&headers("bearer  abc ")), Some("abc"));
        assert_eq!(bearer_token(&headers("Basic dXNlcjpwdw==")), None);
        assert_eq!(bearer_token(&headers("Bearer ")), None);
        assert_eq!(bearer_token(&headers("Bearer")), None);
        assert_eq!(bearer_token(&HeaderMap::new()), None);
    }

    #[test]
    fn refusals_are_remembered_for_less_time_than_permissions() {
        assert!(ttl(&Verdict::Unauthenticated) < ttl(&Verdict::Allowed));
        assert_eq!(ttl(&Verdict::Forbidden { user: "u".into() }), REFUSED_TTL);
        assert_ne!(digest("a"), digest("b"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_cached_verdict_expires() {
        crate::install_crypto_provider();
        // Never reached: every verdict below comes from the cache.
        let config = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
        let auth = MetricsAuth::new(Client::try_from(config).unwrap());
        let allowed = headers("Bearer allowed");
        auth.remember(digest("allowed"), Verdict::Allowed, Instant::now());
        auth.remember(
            digest("refused"),
            Verdict::Forbidden { user: "u".into() },
            Instant::now(),
        );
        assert_eq!(auth.review(&allowed).await.unwrap(), Verdict::Allowed);
        tokio::time::advance(REFUSED_TTL).await;
        assert_eq!(auth.cached(&digest("refused"), Instant::now()), None);
        assert_eq!(auth.review(&allowed).await.unwrap(), Verdict::Allowed);
        tokio::time::advance(ALLOWED_TTL).await;
        assert_eq!(auth.cached(&digest("allowed"), Instant::now()), None);
        assert_eq!(
            auth.review(&HeaderMap::new()).await.unwrap(),
            Verdict::Unauthenticated
        );
    }
}
