//! Leader election on a `coordination.k8s.io/v1` Lease (kube-lease-manager), and a helper that runs
//! a controller only while this replica leads.
//!
//! ```text
//!  LeaseManager.changed() ──► watch::Sender<bool> ──► run_while_leader: start term / cancel term
//!          ▲   errors: step down, back off, rebuild (same identity re-acquires at once)
//!  shutdown token ──► release the Lease, publish false
//! ```
//!
//! There is no fencing: two replicas may both believe they lead for a moment around a takeover,
//! so every write must be idempotent (server-side apply, resourceVersion preconditions).

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

/// Lease validity: a standby takes over at most this long after the leader stops renewing.
pub const LEASE_DURATION: Duration = Duration::from_secs(30);
/// The leader renews this long before expiry; also the tolerated clock skew between nodes.
pub const LEASE_GRACE: Duration = Duration::from_secs(10);
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
        }
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
///
/// API errors never end the election: this replica steps down (a failed renewal may mean another
/// one took over), backs off, and tries again with the same identity, which re-acquires a Lease
/// it still holds at once.
pub fn spawn_election(
    client: Client,
    config: LeaderElectionConfig,
    shutdown: CancellationToken,
    on_change: impl Fn(bool) + Send + Sync + 'static,
) -> Result<Election> {
    let (duration, grace) = config.validate()?;
    let (tx, rx) = watch::channel(false);
    let publish = move |leader: bool| {
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
                    match lead(&manager, &shutdown, &publish, &config).await {
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
async fn lead(
    manager: &LeaseManager,
    shutdown: &CancellationToken,
    publish: &impl Fn(bool),
    config: &LeaderElectionConfig,
) -> Option<kube_lease_manager::LeaseManagerError> {
    loop {
        tokio::select! {
            biased;
            () = shutdown.cancelled() => {
                publish(false);
                match tokio::time::timeout(RELEASE_TIMEOUT, manager.release()).await {
                    Ok(Ok(())) => debug!(lease = %config.lease_name, "lease released"),
                    Ok(Err(e)) => warn!(error = %e, "releasing the lease failed; it expires on its own"),
                    Err(_) => warn!("releasing the lease timed out; it expires on its own"),
                }
                return None;
            }
            changed = manager.changed() => match changed {
                Ok(leader) => {
                    info!(lease = %config.lease_name, namespace = %config.namespace, identity = %config.identity, leader, "leadership changed");
                    publish(leader);
                }
                Err(e) => return Some(e),
            },
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
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn identity_prefers_pod_name() {
        assert_eq!(
            leader_identity(Some("mc-7f9-abc"), Some("node1"), "xyz"),
            "mc-7f9-abc"
        );
        assert_eq!(
            leader_identity(Some(" "), Some("node1"), "xyz"),
            "node1-xyz"
        );
        assert_eq!(leader_identity(None, None, "xyz"), "capmaas-xyz");
        let a = identity_from_env();
        assert!(!a.is_empty());
    }

    #[test]
    fn default_lease_names_differ_per_binary() {
        assert_eq!(
            default_lease_name("machine-controller"),
            "capmaas-machine-controller-leader"
        );
        assert_ne!(default_lease_name("a"), default_lease_name("b"));
    }

    #[test]
    fn timings_are_validated() {
        let mut c = LeaderElectionConfig::new("l", "ns", "me");
        assert_eq!(c.validate().unwrap(), (30, 10));
        c.grace = Duration::from_secs(30);
        assert!(c.validate().is_err());
        c.grace = Duration::ZERO;
        assert!(c.validate().is_err());
        let empty = LeaderElectionConfig::new("", "ns", "me");
        assert!(empty.validate().is_err());
    }

    /// A term future that counts starts and finishes cleanly when its token is cancelled.
    fn counting(
        starts: Arc<AtomicUsize>,
        stops: Arc<AtomicUsize>,
    ) -> impl FnMut(
        CancellationToken,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<(), BoxError>> + Send>> {
        move |term: CancellationToken| {
            starts.fetch_add(1, Ordering::SeqCst);
            let stops = stops.clone();
            Box::pin(async move {
                term.cancelled().await;
                stops.fetch_add(1, Ordering::SeqCst);
                Ok(())
            })
        }
    }

    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn runs_only_while_leader_and_restarts_on_regain() {
        let (tx, rx) = watch::channel(false);
        let shutdown = CancellationToken::new();
        let (starts, stops, standby) = (
            Arc::default(),
            Arc::default(),
            Arc::new(AtomicUsize::new(0)),
        );
        let sb = standby.clone();
        let task = tokio::spawn(run_while_leader(
            rx,
            shutdown.clone(),
            Duration::from_secs(5),
            counting(Arc::clone(&starts), Arc::clone(&stops)),
            move || {
                sb.fetch_add(1, Ordering::SeqCst);
            },
        ));
        settle().await;
        assert_eq!(starts.load(Ordering::SeqCst), 0);
        assert_eq!(standby.load(Ordering::SeqCst), 1);

        tx.send(true).unwrap();
        settle().await;
        assert_eq!(starts.load(Ordering::SeqCst), 1);

        tx.send(false).unwrap();
        settle().await;
        assert_eq!(stops.load(Ordering::SeqCst), 1);
        assert_eq!(standby.load(Ordering::SeqCst), 2);

        tx.send(true).unwrap();
        settle().await;
        assert_eq!(starts.load(Ordering::SeqCst), 2);

        shutdown.cancel();
        task.await.unwrap().unwrap();
        assert_eq!(stops.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn stuck_controller_is_dropped_after_drain() {
        let (_tx, rx) = watch::channel(true);
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(run_while_leader(
            rx,
            shutdown.clone(),
            Duration::from_secs(3),
            |_term| std::future::pending::<Result<(), BoxError>>(),
            || {},
        ));
        settle().await;
        shutdown.cancel();
        let started = tokio::time::Instant::now();
        task.await.unwrap().unwrap();
        assert!(started.elapsed() >= Duration::from_secs(3));
    }

    #[tokio::test(start_paused = true)]
    async fn controller_error_is_returned() {
        let (_tx, rx) = watch::channel(true);
        let err = run_while_leader(
            rx,
            CancellationToken::new(),
            Duration::from_secs(1),
            |_term| async { Err::<(), BoxError>("watch failed".into()) },
            || {},
        )
        .await
        .unwrap_err();
        assert!(matches!(err, Error::Controller(e) if e.to_string() == "watch failed"));
    }

    #[tokio::test(start_paused = true)]
    async fn election_ending_without_shutdown_is_an_error() {
        let (tx, rx) = watch::channel(false);
        let task = tokio::spawn(run_while_leader(
            rx,
            CancellationToken::new(),
            Duration::from_secs(1),
            |_term| async { Ok::<(), BoxError>(()) },
            || {},
        ));
        settle().await;
        drop(tx);
        assert!(matches!(
            task.await.unwrap(),
            Err(Error::LeaderElectionStopped)
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn always_leader_until_shutdown() {
        let shutdown = CancellationToken::new();
        let changes = Arc::new(std::sync::Mutex::new(Vec::new()));
        let c = changes.clone();
        let mut election = always_leader(shutdown.clone(), move |l| c.lock().unwrap().push(l));
        assert!(*election.leader.borrow());
        shutdown.cancel();
        election.leader.wait_for(|l| !*l).await.unwrap();
        election.task.await.unwrap();
        assert_eq!(*changes.lock().unwrap(), vec![true, false]);
    }
}
