//! Leader election on a `coordination.k8s.io/v1` Lease (kube-lease-manager), and a helper that runs
//! a controller only while this replica leads.
//!
//! ```text
//!  LeaseManager.changed() ─┐
//!  Fence (renewal sent at t ├─► leader = held && fence valid ──► watch::Sender<bool>
//!   valid until t+d-margin) ┘        ──► run_while_leader: start term / cancel term
//!          ▲   errors: step down, back off, rebuild (same identity re-acquires at once)
//!  shutdown token ──► revoke the fence, release the Lease, publish false
//! ```
//!
//! Fencing ([`Fence`]): this replica leads only while its fence is valid, i.e. until the last
//! renewal's *send* time plus `lease_duration - fence_margin`; the term is cancelled when that
//! passes, even while a renewal is still blocked. Every Lease request has a timeout. Writes that
//! must not overlap with another leader check [`Fence::check`] right before they are sent (the
//! MAAS gateway does, for every mutating MAAS call). Kubernetes writes should still be idempotent
//! (server-side apply, resourceVersion preconditions): an in-flight write is not recalled.

use std::future::Future;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use kube::Client;
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::error::{BoxError, Error, Result};
use crate::fence::{Fence, RenewalFilter, observed_client};

/// Lease validity: a standby takes over at most this long after the leader stops renewing.
pub const LEASE_DURATION: Duration = Duration::from_secs(30);
/// The leader renews this long before expiry; also the tolerated clock skew between nodes.
pub const LEASE_GRACE: Duration = Duration::from_secs(10);
/// How long before the Lease expires for others this replica stops acting as leader: covers clock
/// skew between nodes and the transit of a request checked just before the fence deadline.
pub const FENCE_MARGIN: Duration = Duration::from_secs(5);
/// Timeout of each Lease request (a stalled renewal fails and is retried before the fence lapses).
pub const LEASE_REQUEST_TIMEOUT: Duration = Duration::from_secs(3);
/// How long releasing the Lease may take on shutdown.
pub const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);

/// Where and as whom to elect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElectionConfig {
    /// Lease name, one per binary.
    pub lease_name: String,
    /// Lease namespace.
    pub namespace: String,
    /// This replica's identity (holder of the Lease).
    pub identity: String,
    /// See [`LEASE_DURATION`].
    pub lease_duration: Duration,
    /// See [`LEASE_GRACE`]; must be shorter than `lease_duration`.
    pub grace: Duration,
    /// See [`FENCE_MARGIN`]; must be shorter than `grace` (else the fence lapses before each
    /// renewal is due).
    pub fence_margin: Duration,
    /// See [`LEASE_REQUEST_TIMEOUT`]; must not be zero.
    pub request_timeout: Duration,
}

impl LeaderElectionConfig {
    /// A config with default timings.
    pub fn new(
        lease_name: impl Into<String>,
        namespace: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        Self {
            lease_name: lease_name.into(),
            namespace: namespace.into(),
            identity: identity.into(),
            lease_duration: LEASE_DURATION,
            grace: LEASE_GRACE,
            fence_margin: FENCE_MARGIN,
            request_timeout: LEASE_REQUEST_TIMEOUT,
        }
    }

    /// How long a renewal keeps the fence valid from the moment it was sent:
    /// `lease_duration - fence_margin`.
    pub fn fence_validity(&self) -> Duration {
        self.lease_duration.saturating_sub(self.fence_margin)
    }

    fn validate(&self) -> Result<(u64, u64)> {
        let duration = self.lease_duration.as_secs();
        let grace = self.grace.as_secs();
        // kube-lease-manager panics on these; make them a clean error instead.
        if grace == 0 || duration <= grace {
            return Err(Error::InvalidArgument {
                flag: "leader election timings",
                reason: format!("need 0 < grace ({grace}s) < lease duration ({duration}s)"),
            });
        }
        if self.fence_margin >= self.grace || self.request_timeout.is_zero() {
            return Err(Error::InvalidArgument {
                flag: "leader election timings",
                reason: format!(
                    "need fence margin ({:?}) < grace ({grace}s) and a non-zero request timeout",
                    self.fence_margin
                ),
            });
        }
        if self.lease_name.is_empty() || self.identity.is_empty() {
            return Err(Error::InvalidArgument {
                flag: "--leader-election-id",
                reason: "lease name and identity must not be empty".into(),
            });
        }
        Ok((duration, grace))
    }
}

/// The default Lease name of a binary.
pub fn default_lease_name(binary: &str) -> String {
    format!("capmaas-{binary}-leader")
}

/// This replica's identity: the pod name (unique among live pods, set through the downward API),
/// else `<hostname>-<random>`, else `capmaas-<random>`.
pub fn leader_identity(
    pod_name: Option<&str>,
    hostname: Option<&str>,
    random_suffix: &str,
) -> String {
    let clean = |s: Option<&str>| {
        s.map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    if let Some(pod) = clean(pod_name) {
        return pod;
    }
    let base = clean(hostname).unwrap_or_else(|| "capmaas".to_owned());
    format!("{base}-{random_suffix}")
}

/// [`leader_identity`] from `POD_NAME`, the host name and a fresh random suffix.
pub fn identity_from_env() -> String {
    let pod = std::env::var("POD_NAME").ok();
    let host = hostname::get().ok().and_then(|h| h.into_string().ok());
    let suffix: String = std::iter::repeat_with(fastrand::lowercase)
        .take(8)
        .collect();
    leader_identity(pod.as_deref(), host.as_deref(), &suffix)
}

/// The running election: the "is leader" channel and the background task.
#[derive(Debug)]
pub struct Election {
    /// `true` while this replica holds the Lease.
    pub leader: watch::Receiver<bool>,
    /// Ends after `shutdown` fired and the Lease was released.
    pub task: JoinHandle<()>,
}

/// No election: always leader until `shutdown`, then `false`.
pub fn always_leader(
    shutdown: CancellationToken,
    on_change: impl Fn(bool) + Send + 'static,
) -> Election {
    let (tx, rx) = watch::channel(true);
    on_change(true);
    let task = tokio::spawn(async move {
        shutdown.cancelled().await;
        let _ = tx.send(false);
        on_change(false);
    });
    Election { leader: rx, task }
}

/// Starts electing. `on_change` is called on every leadership change (metrics, readiness, logs).
/// `fence` (made with [`Fence::new`]`(config.fence_validity())`) is renewed by every successful
/// renewal and revoked whenever this replica steps down; leadership is published only while it
/// is valid.
///
/// API errors never end the election: this replica steps down (a failed renewal may mean another
/// one took over), backs off, and tries again with the same identity, which re-acquires a Lease
/// it still holds at once (leading again after its next renewal).
pub fn spawn_election(
    client: Client,
    config: LeaderElectionConfig,
    fence: Fence,
    shutdown: CancellationToken,
    on_change: impl Fn(bool) + Send + Sync + 'static,
) -> Result<Election> {
    let (duration, grace) = config.validate()?;
    let client = observed_client(
        client,
        fence.clone(),
        RenewalFilter {
            namespace: config.namespace.clone(),
            lease_name: config.lease_name.clone(),
            identity: config.identity.clone(),
        },
        config.request_timeout,
    );
    let (tx, rx) = watch::channel(false);
    let revoke = fence.clone();
    let publish = move |leader: bool| {
        if !leader {
            revoke.revoke();
        }
        if tx.send_if_modified(|current| std::mem::replace(current, leader) != leader) {
            on_change(leader);
        }
    };
    let task = tokio::spawn(async move {
        let retry = ExponentialBuilder::new()
            .with_min_delay(Duration::from_secs(1))
            .with_max_delay(Duration::from_secs(30))
            .with_jitter()
            .without_max_times();
        let mut delays = retry.build();
        loop {
            let building = LeaseManagerBuilder::new(client.clone(), &config.lease_name)
                .with_namespace(&config.namespace)
                .with_identity(&config.identity)
                .with_duration(duration)
                .with_grace(grace)
                .build();
            let manager = tokio::select! {
                () = shutdown.cancelled() => break,
                result = building => result,
            };
            let failure = match manager {
                Ok(manager) => {
                    delays = retry.build();
                    match lead(&manager, &fence, &shutdown, &publish, &config).await {
                        None => break,
                        Some(e) => e,
                    }
                }
                Err(e) => e,
            };
            publish(false);
            let delay = delays.next().unwrap_or(Duration::from_secs(30));
            warn!(error = %failure, lease = %config.lease_name, retry_in = ?delay, "leader election error; standing by");
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = tokio::time::sleep(delay) => {}
            }
        }
        publish(false);
    });
    Ok(Election { leader: rx, task })
}

/// Follows one LeaseManager until shutdown (`None`, Lease released) or an error (`Some`).
/// Publishes `held && fence valid`: a held Lease whose renewal did not succeed in time no
/// longer counts, even while the manager is still waiting for that renewal.
async fn lead(
    manager: &LeaseManager,
    fence: &Fence,
    shutdown: &CancellationToken,
    publish: &impl Fn(bool),
    config: &LeaderElectionConfig,
) -> Option<kube_lease_manager::LeaseManagerError> {
    let mut held = false;
    let mut changed = Box::pin(manager.changed());
    loop {
        let valid = fence.is_valid();
        publish(held && valid);
        tokio::select! {
            biased;
            () = shutdown.cancelled() => {
                publish(false);
                drop(changed);
                match tokio::time::timeout(RELEASE_TIMEOUT, manager.release()).await {
                    Ok(Ok(())) => debug!(lease = %config.lease_name, "lease released"),
                    Ok(Err(e)) => warn!(error = %e, "releasing the lease failed; it expires on its own"),
                    Err(_) => warn!("releasing the lease timed out; it expires on its own"),
                }
                return None;
            }
            () = fence.lapsed(), if held && valid => {
                warn!(lease = %config.lease_name, identity = %config.identity, "lease renewal did not succeed before the fence deadline; stepping down");
                publish(false);
            }
            () = fence.valid(), if held && !valid => {
                info!(lease = %config.lease_name, identity = %config.identity, "lease renewed; leading again");
            }
            result = &mut changed => {
                changed = Box::pin(manager.changed());
                match result {
                    Ok(leader) => {
                        info!(lease = %config.lease_name, namespace = %config.namespace, identity = %config.identity, leader, "leadership changed");
                        held = leader;
                        if !leader {
                            publish(false);
                        }
                    }
                    Err(e) => return Some(e),
                }
            }
        }
    }
}

/// Runs `make(term)` while `leader` is `true`; cancels `term` when leadership is lost or `shutdown`
/// fires, waits up to `drain` for the future to finish, and starts a new term when leadership comes
/// back. `on_standby` runs whenever this replica is (again) not leading.
///
/// Returns when `shutdown` fires (`Ok`), when a term's future ends on its own (its result), or
/// when the election stops while not shutting down ([`Error::LeaderElectionStopped`]).
pub async fn run_while_leader<F, Fut, E>(
    mut leader: watch::Receiver<bool>,
    shutdown: CancellationToken,
    drain: Duration,
    mut make: F,
    mut on_standby: impl FnMut(),
) -> Result<()>
where
    F: FnMut(CancellationToken) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: Into<BoxError>,
{
    loop {
        if !*leader.borrow_and_update() {
            on_standby();
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                became = leader.wait_for(|l| *l) => {
                    if became.is_err() {
                        return stopped(&shutdown);
                    }
                }
            }
        }
        if shutdown.is_cancelled() {
            return Ok(());
        }
        let term = shutdown.child_token();
        let fut = make(term.clone());
        tokio::pin!(fut);
        let lost = tokio::select! {
            result = &mut fut => {
                return result.map_err(|e| Error::Controller(e.into()));
            }
            () = shutdown.cancelled() => false,
            lost = leader.wait_for(|l| !*l) => lost.is_ok(),
        };
        term.cancel();
        match tokio::time::timeout(drain, &mut fut).await {
            Ok(Err(e)) => return Err(Error::Controller(e.into())),
            Ok(Ok(())) => {}
            Err(_) => warn!(?drain, "controller did not stop in time; dropping it"),
        }
        if shutdown.is_cancelled() {
            return Ok(());
        }
        if !lost {
            return stopped(&shutdown);
        }
        info!("leadership lost; controller stopped, standing by");
    }
}

fn stopped(shutdown: &CancellationToken) -> Result<()> {
    if shutdown.is_cancelled() {
        Ok(())
    } else {
        Err(Error::LeaderElectionStopped)
    }
}

#[cfg(test)]
#[path = "leader_tests.rs"]
mod tests;
