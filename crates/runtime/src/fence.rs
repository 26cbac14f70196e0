//! The leadership fence: until when this replica may still act as leader, on the local monotonic
//! clock, so that it stops before another replica can start.
//!
//! ```text
//!  Lease PATCH setting renewTime ──sent at t──► 2xx, holder = us ──► deadline = t + (duration - margin)
//!  deadline passes without such an answer ──► Fence::check fails, the election steps down
//! ```
//!
//! Another replica takes the Lease only once `renewTime + lease_duration` has passed on its clock;
//! `renewTime` is stamped just before the request is sent, so a deadline counted from the moment
//! the renewal was *sent* (not answered) ends `margin` before that, whatever the renewal's latency.
//! A renewal that blocks cannot extend it. The margin covers clock skew between nodes and the
//! transit of a request that passed the check just before the deadline.
//!
//! [`observed_client`] wraps the election's Kubernetes client: it gives every request a timeout
//! and feeds successful renewals of our Lease into the fence.
//!
//! It also judges another holder's Lease by this replica's own clock, as client-go does: the
//! election library would count its expiry from the holder's `renewTime`, so a holder whose
//! clock runs behind (more than the fence margin) would look expired while it still leads, and
//! two replicas would act at once. Every answer that shows the Lease held by someone else has
//! its `renewTime` replaced by when this replica first saw that version of the Lease (on the
//! monotonic clock, expressed as a wall time): the Lease expires only once nothing changed on it
//! for a whole lease duration as seen from here ([`ObservedRenewals`]).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response};
use http_body_util::BodyExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::client::Body;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::error::BoxError;

/// Refused: this replica may no longer hold leadership (its fence deadline passed or it stepped
/// down), so another replica may be acting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not leading: the leadership fence has lapsed")]
pub struct Fenced;

/// Whether this replica may still act as leader; cheap to clone and to [`check`](Fence::check).
///
/// Without leader election ([`Fence::unfenced`]) it is always valid.
#[derive(Debug, Clone)]
pub struct Fence {
    inner: Option<Arc<Inner>>,
}

#[derive(Debug)]
struct Inner {
    /// `lease_duration - margin`: how long a renewal sent at `t` keeps the fence valid.
    validity: Duration,
    /// `None` while not leading.
    deadline: watch::Sender<Option<Instant>>,
}

impl Fence {
    /// A fence that never lapses (single replica, no election).
    pub fn unfenced() -> Self {
        Self { inner: None }
    }

    /// A fence that is closed until the first successful renewal; each renewal sent at `t` keeps
    /// it valid until `t + validity`.
    pub fn new(validity: Duration) -> Self {
        Self {
            inner: Some(Arc::new(Inner {
                validity,
                deadline: watch::Sender::new(None),
            })),
        }
    }

    /// `Ok` while this replica may act as leader.
    ///
    /// # Errors
    /// [`Fenced`] once the deadline passed without a successful renewal, or after stepping down.
    pub fn check(&self) -> Result<(), Fenced> {
        if self.is_valid() { Ok(()) } else { Err(Fenced) }
    }

    /// `true` while this replica may act as leader.
    pub fn is_valid(&self) -> bool {
        self.inner.as_ref().is_none_or(|inner| {
            inner
                .deadline
                .borrow()
                .is_some_and(|deadline| Instant::now() < deadline)
        })
    }

    /// The current deadline: `None` when unfenced or not leading.
    pub fn deadline(&self) -> Option<Instant> {
        self.inner.as_ref().and_then(|i| *i.deadline.borrow())
    }

    /// Resolves once the fence is not valid (at once if it is not); never for an unfenced one.
    /// A renewal that arrives in time moves the deadline on.
    pub fn lapsed(&self) -> impl Future<Output = ()> + Send + 'static {
        let rx = self.inner.as_ref().map(|i| i.deadline.subscribe());
        async move {
            let Some(mut rx) = rx else {
                return std::future::pending().await;
            };
            loop {
                let Some(deadline) = *rx.borrow_and_update() else {
                    return;
                };
                if Instant::now() >= deadline {
                    return;
                }
                tokio::select! {
                    () = tokio::time::sleep_until(deadline) => {}
                    changed = rx.changed() => if changed.is_err() { return },
                }
            }
        }
    }

    /// Resolves once the fence is valid (at once if it is).
    pub(crate) async fn valid(&self) {
        let Some(inner) = &self.inner else { return };
        let mut rx = inner.deadline.subscribe();
        loop {
            if self.is_valid() {
                return;
            }
            if rx.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
    }

    /// A renewal sent at `sent_at` succeeded: valid until `sent_at + validity` (never shortened
    /// by an older renewal answering late).
    pub(crate) fn renewed(&self, sent_at: Instant) {
        if let Some(inner) = &self.inner {
            let until = sent_at + inner.validity;
            inner.deadline.send_if_modified(|deadline| match deadline {
                Some(current) if *current >= until => false,
                _ => {
                    *deadline = Some(until);
                    true
                }
            });
        }
    }

    /// Stepped down: closed until the next successful renewal.
    pub(crate) fn revoke(&self) {
        if let Some(inner) = &self.inner {
            inner.deadline.send_replace(None);
        }
    }
}

/// What the election client looks for.
#[derive(Debug, Clone)]
pub(crate) struct RenewalFilter {
    pub namespace: String,
    pub lease_name: String,
    pub identity: String,
}

impl RenewalFilter {
    fn is_our_lease<B>(&self, request: &Request<B>) -> bool {
        let path = format!(
            "/apis/coordination.k8s.io/v1/namespaces/{}/leases/{}",
            self.namespace, self.lease_name
        );
        request.uri().path() == path
    }
}

/// What a PATCH of our Lease does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LeasePatch {
    /// Stamps a new `renewTime` (renewal or acquisition).
    Renew,
    /// Clears `renewTime` (release).
    Release,
    /// Anything else (the transitions counter).
    Other,
}

/// Classifies a Lease patch body and adds `resourceVersion` (the last one seen) as a
/// precondition: a patch computed from a stale read, or one that reaches the API server late,
/// fails with 409 instead of overwriting another holder's Lease.
fn prepare_patch(body: &[u8], resource_version: Option<&str>) -> (LeasePatch, Option<Vec<u8>>) {
    let Ok(mut value) = serde_json::from_slice::<serde_json::Value>(body) else {
        return (LeasePatch::Other, None);
    };
    let kind = match value.pointer("/spec/renewTime") {
        Some(serde_json::Value::String(_)) => LeasePatch::Renew,
        Some(serde_json::Value::Null) => LeasePatch::Release,
        _ => LeasePatch::Other,
    };
    let Some(rv) = resource_version else {
        return (kind, None);
    };
    let Some(object) = value.as_object_mut() else {
        return (kind, None);
    };
    let metadata = object
        .entry("metadata")
        .or_insert_with(|| serde_json::json!({}));
    if let Some(metadata) = metadata.as_object_mut() {
        metadata.insert("resourceVersion".into(), rv.into());
    }
    (kind, serde_json::to_vec(&value).ok())
}

/// Whether a Lease patch body stamps a new `renewTime` (not the release's `null`, not the
/// transitions counter).
#[cfg(test)]
fn sets_renew_time(body: &[u8]) -> bool {
    prepare_patch(body, None).0 == LeasePatch::Renew
}

/// Whether the Lease is held by `identity` with a `renewTime`.
fn held_by(lease: &Lease, identity: &str) -> bool {
    lease.spec.as_ref().is_some_and(|spec| {
        spec.renew_time.is_some() && spec.holder_identity.as_deref() == Some(identity)
    })
}

/// When this replica first saw each version of the Lease held by another identity.
#[derive(Debug, Default)]
struct ObservedRenewals {
    /// `(resourceVersion, first seen)` of the latest foreign version seen.
    latest: Option<(String, Instant)>,
}

impl ObservedRenewals {
    /// `lease` with a foreign holder's `renewTime` replaced by when this replica first saw its
    /// current version (`now_wall` at `now`); `None` when there is nothing to replace (held by
    /// `identity`, released, or without a resourceVersion).
    fn rewrite(
        &mut self,
        mut lease: Lease,
        identity: &str,
        now: Instant,
        now_wall: jiff::Timestamp,
    ) -> Option<Lease> {
        let rv = lease.metadata.resource_version.clone()?;
        let spec = lease.spec.as_mut()?;
        let foreign = spec
            .holder_identity
            .as_deref()
            .is_some_and(|h| !h.is_empty() && h != identity);
        if !foreign || spec.renew_time.is_none() {
            return None;
        }
        let first_seen = match &self.latest {
            Some((seen_rv, at)) if *seen_rv == rv => *at,
            _ => {
                self.latest = Some((rv, now));
                now
            }
        };
        let age = jiff::SignedDuration::try_from(now.duration_since(first_seen)).ok()?;
        let seen_at = now_wall.checked_sub(age).ok()?;
        spec.renew_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
            seen_at,
        ));
        Some(lease)
    }
}

async fn collect(body: Body) -> Result<Bytes, BoxError> {
    Ok(body.collect().await?.to_bytes())
}

/// The election's client: every request through `inner` gets `timeout`; every PATCH of our Lease
/// carries the last seen `resourceVersion` as a precondition; one that stamps `renewTime` and is
/// answered 2xx with us as holder renews `fence` from its send time.
pub(crate) fn observed_client(
    inner: Client,
    fence: Fence,
    filter: RenewalFilter,
    timeout: Duration,
) -> Client {
    let namespace = inner.default_namespace().to_owned();
    let last_rv = Arc::new(std::sync::Mutex::new(None::<String>));
    let observed = Arc::new(std::sync::Mutex::new(ObservedRenewals::default()));
    let service = tower::service_fn(move |request: Request<Body>| {
        let (inner, fence, filter, last_rv, observed) = (
            inner.clone(),
            fence.clone(),
            filter.clone(),
            last_rv.clone(),
            observed.clone(),
        );
        async move {
            let ours = filter.is_our_lease(&request);
            let (request, patch) = if ours && request.method() == Method::PATCH {
                let (parts, body) = request.into_parts();
                let body = collect(body).await?;
                let rv = last_rv.lock().map_or(None, |rv| rv.clone());
                let (kind, prepared) = prepare_patch(&body, rv.as_deref());
                let body = prepared.map_or(body, Bytes::from);
                (Request::from_parts(parts, Body::from(body)), Some(kind))
            } else {
                (request, None)
            };
            let sent_at = Instant::now();
            let response = tokio::time::timeout(timeout, async {
                let response = inner.send(request).await?;
                if !ours {
                    return Ok::<_, BoxError>(response);
                }
                if patch == Some(LeasePatch::Release)
                    && response.status() == http::StatusCode::CONFLICT
                {
                    // kube-lease-manager cannot handle a conflict on release.
                    return Err("the Lease changed since it was read; not released".into());
                }
                if !response.status().is_success() {
                    return Ok(response);
                }
                let (mut parts, body) = response.into_parts();
                let mut body = collect(body).await?;
                if let Ok(lease) = serde_json::from_slice::<Lease>(&body) {
                    if let Ok(mut rv) = last_rv.lock() {
                        rv.clone_from(&lease.metadata.resource_version);
                    }
                    if patch == Some(LeasePatch::Renew) && held_by(&lease, &filter.identity) {
                        fence.renewed(sent_at);
                    }
                    let rewritten = observed.lock().ok().and_then(|mut o| {
                        o.rewrite(
                            lease,
                            &filter.identity,
                            Instant::now(),
                            jiff::Timestamp::now(),
                        )
                    });
                    if let Some(json) = rewritten.and_then(|l| serde_json::to_vec(&l).ok()) {
                        parts.headers.remove(http::header::CONTENT_LENGTH);
                        body = Bytes::from(json);
                    }
                }
                Ok(Response::from_parts(parts, Body::from(body)))
            })
            .await
            .map_err(|_| BoxError::from(format!("Lease request timed out after {timeout:?}")))??;
            Ok::<_, BoxError>(response)
        }
    });
    Client::new(service, namespace)
}

/// `inner` with every write (POST, PUT, PATCH, DELETE) refused once `fence` has lapsed: the
/// client a leader's controllers use, so that a term that lost the Lease writes nothing more,
/// even while it is still draining, and a write decided on a view from the lost term cannot
/// land after another replica took over. Reads pass, so a draining reconcile can still finish
/// quietly. The election's own client stays unfenced (it must acquire while fenced).
pub fn fenced_client(inner: Client, fence: Fence) -> Client {
    let namespace = inner.default_namespace().to_owned();
    let service = tower::service_fn(move |request: Request<Body>| {
        let (inner, fence) = (inner.clone(), fence.clone());
        async move {
            let writes = matches!(
                *request.method(),
                Method::POST | Method::PUT | Method::PATCH | Method::DELETE
            );
            if writes {
                fence.check().map_err(BoxError::from)?;
            }
            inner.send(request).await.map_err(BoxError::from)
        }
    });
    Client::new(service, namespace)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_fenced_client_refuses_writes_once_the_fence_lapses_and_lets_reads_pass() {
        use k8s_openapi::api::core::v1::ConfigMap;
        use kube::api::{Api, PostParams};
        let sent = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = sent.clone();
        let server = tower::service_fn(move |_request: Request<Body>| {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async {
                let body = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}"#;
                Ok::<_, std::convert::Infallible>(Response::new(Body::from(body.to_vec())))
            }
        });
        let fence = Fence::new(25 * SECOND);
        let api: Api<ConfigMap> = Api::namespaced(
            fenced_client(Client::new(server, "ns"), fence.clone()),
            "ns",
        );
        let cm: ConfigMap = serde_json::from_str(r#"{"metadata":{"name":"c"}}"#).unwrap();
        let refused = api.create(&PostParams::default(), &cm).await.unwrap_err();
        assert!(refused.to_string().contains("not leading"), "{refused}");
        assert_eq!(
            sent.load(std::sync::atomic::Ordering::SeqCst),
            0,
            "never sent"
        );
        api.get("c").await.unwrap();
        fence.renewed(Instant::now());
        api.create(&PostParams::default(), &cm).await.unwrap();
        tokio::time::advance(25 * SECOND).await;
        assert!(
            api.delete("c", &kube::api::DeleteParams::default())
                .await
                .is_err(),
            "lapsed"
        );
        assert_eq!(sent.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    const SECOND: Duration = Duration::from_secs(1);

    fn foreign(rv: &str, renew: &str) -> Lease {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "l", "resourceVersion": rv},
            "spec": {"holderIdentity": "other", "renewTime": renew, "leaseDurationSeconds": 30}
        }))
        .unwrap()
    }

    fn renew_time(lease: &Lease) -> jiff::Timestamp {
        lease.spec.as_ref().unwrap().renew_time.as_ref().unwrap().0
    }

    #[tokio::test(start_paused = true)]
    async fn a_foreign_lease_ages_on_this_replicas_clock_not_the_holders() {
        let mut observed = ObservedRenewals::default();
        let wall: jiff::Timestamp = "2026-01-01T12:00:00Z".parse().unwrap();
        // The holder's clock is an hour behind: its renewTime says it expired long ago.
        let skewed = foreign("1", "2026-01-01T11:00:00.000000Z");
        let seen = observed
            .rewrite(skewed.clone(), "me", Instant::now(), wall)
            .unwrap();
        assert_eq!(
            renew_time(&seen),
            wall,
            "first seen now: a whole duration to go"
        );
        tokio::time::advance(20 * SECOND).await;
        let same = observed
            .rewrite(
                skewed,
                "me",
                Instant::now(),
                wall + jiff::SignedDuration::from_secs(20),
            )
            .unwrap();
        assert_eq!(
            renew_time(&same),
            wall,
            "unchanged since: it ages from then"
        );
        // Renewed (a new version): the clock starts again, whatever time it claims.
        let renewed = foreign("2", "2026-01-01T11:00:03.000000Z");
        let later = wall + jiff::SignedDuration::from_secs(20);
        let seen = observed
            .rewrite(renewed, "me", Instant::now(), later)
            .unwrap();
        assert_eq!(renew_time(&seen), later);
        // Our own Lease and a released one are left as they are.
        assert!(
            observed
                .rewrite(
                    foreign("3", "2026-01-01T11:00:00.000000Z"),
                    "other",
                    Instant::now(),
                    wall
                )
                .is_none()
        );
        let mut released = foreign("4", "2026-01-01T11:00:00.000000Z");
        released.spec.as_mut().unwrap().renew_time = None;
        assert!(
            observed
                .rewrite(released, "me", Instant::now(), wall)
                .is_none()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn deadline_counts_from_the_send_time() {
        let fence = Fence::new(25 * SECOND);
        assert_eq!(fence.check(), Err(Fenced), "closed until the first renewal");
        let sent = Instant::now();
        // The answer takes 10 s: the fence still ends 25 s after the request left.
        tokio::time::advance(10 * SECOND).await;
        fence.renewed(sent);
        assert_eq!(fence.deadline(), Some(sent + 25 * SECOND));
        assert!(fence.is_valid());
        tokio::time::advance(Duration::from_millis(14_999)).await;
        assert!(fence.check().is_ok());
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(
            fence.check(),
            Err(Fenced),
            "expired at send time + validity"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn renewal_extends_and_late_answers_never_shorten() {
        let fence = Fence::new(25 * SECOND);
        let first = Instant::now();
        fence.renewed(first);
        tokio::time::advance(20 * SECOND).await;
        let second = Instant::now();
        fence.renewed(second);
        assert_eq!(fence.deadline(), Some(second + 25 * SECOND));
        fence.renewed(first);
        assert_eq!(fence.deadline(), Some(second + 25 * SECOND));
        tokio::time::advance(10 * SECOND).await;
        assert!(
            fence.is_valid(),
            "30 s after the first renewal, 10 s after the second"
        );
        fence.revoke();
        assert_eq!(fence.check(), Err(Fenced));
        assert_eq!(fence.deadline(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn lapsed_resolves_at_the_deadline_unless_renewed() {
        let fence = Fence::new(5 * SECOND);
        let start = Instant::now();
        fence.renewed(start);
        let lapsed = tokio::spawn(fence.lapsed());
        tokio::time::advance(4 * SECOND).await;
        fence.renewed(Instant::now());
        tokio::time::sleep(4 * SECOND).await;
        assert!(!lapsed.is_finished(), "moved on by the renewal");
        lapsed.await.unwrap();
        assert_eq!(Instant::now().duration_since(start), 9 * SECOND);
        fence.lapsed().await; // at once when already lapsed
    }

    #[tokio::test(start_paused = true)]
    async fn unfenced_is_always_valid() {
        let fence = Fence::unfenced();
        assert!(fence.check().is_ok());
        fence.revoke();
        assert!(fence.is_valid());
        fence.valid().await;
        let lapsed = tokio::spawn(fence.lapsed());
        tokio::time::sleep(3600 * SECOND).await;
        assert!(!lapsed.is_finished());
    }

    #[test]
    fn renewals_are_recognised() {
        assert!(sets_renew_time(
            br#"{"spec":{"renewTime":"2024-01-01T00:00:00.000000Z","leaseDurationSeconds":30}}"#
        ));
        assert!(!sets_renew_time(br#"{"spec":{"renewTime":null}}"#));
        assert!(!sets_renew_time(br#"{"spec":{"leaseTransitions":3}}"#));
        let lease = |holder: &str| {
            format!(
                r#"{{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{{"name":"l"}},
                "spec":{{"holderIdentity":"{holder}","renewTime":"2024-01-01T00:00:00.000000Z"}}}}"#
            )
        };
        let parse = |holder: &str| serde_json::from_str::<Lease>(&lease(holder)).unwrap();
        assert!(held_by(&parse("me"), "me"));
        assert!(!held_by(&parse("other"), "me"));
    }

    #[test]
    fn lease_patches_carry_the_last_resource_version() {
        let renew = br#"{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","spec":{"renewTime":"2024-01-01T00:00:00.000000Z"}}"#;
        let (kind, body) = prepare_patch(renew, Some("42"));
        assert_eq!(kind, LeasePatch::Renew);
        let body: serde_json::Value = serde_json::from_slice(&body.unwrap()).unwrap();
        assert_eq!(
            body.pointer("/metadata/resourceVersion"),
            Some(&"42".into())
        );
        assert_eq!(
            body.pointer("/spec/renewTime"),
            Some(&"2024-01-01T00:00:00.000000Z".into())
        );
        let (kind, body) = prepare_patch(br#"{"spec":{"renewTime":null}}"#, None);
        assert_eq!((kind, body), (LeasePatch::Release, None));
    }
}
