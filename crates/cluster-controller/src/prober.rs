//! One shared prober of workload API servers.
//!
//! CAPMAAS starts a goroutine per cluster that polls every second forever. Here one [`Prober`]
//! owns a task per MaasCluster: it reads the `<cluster>-kubeconfig` Secret, calls `/version` with a
//! short timeout, backs off exponentially while the server is down, refreshes slowly while it is
//! up, wakes the reconciler only when the state changes, and stops when the MaasCluster goes.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use capmaas_api::MaasCluster;
use capmaas_api::conditions::reasons;
use capmaas_runtime::controller::workload::{WorkloadClients, WorkloadError};
use futures::channel::mpsc;
use kube::Client;
use kube::runtime::reflector::{ObjectRef, Store};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

/// Key of a MaasCluster in the prober.
pub type ClusterRef = ObjectRef<MaasCluster>;

/// Reasons of `APIServerAvailable=False`.
pub mod probe_reason {
    pub use capmaas_runtime::controller::workload::reason::{
        KUBECONFIG_INVALID, KUBECONFIG_MISSING, KUBECONFIG_REFUSED,
    };
    /// The API server did not answer (CAPMAAS name).
    pub const API_SERVER_NOT_READY: &str = super::reasons::API_SERVER_NOT_READY;
}

/// What the last probe of a cluster found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeState {
    /// No probe has finished yet.
    Pending,
    /// `/version` answered.
    Available {
        /// The server's `gitVersion`.
        version: String,
    },
    /// It did not.
    Unavailable {
        /// CamelCase reason (see [`probe_reason`]).
        reason: &'static str,
        /// Detail for humans; never contains credentials.
        message: String,
    },
}

impl ProbeState {
    fn unavailable(reason: &'static str, message: impl Into<String>) -> Self {
        Self::Unavailable {
            reason,
            message: message.into(),
        }
    }
}

/// Probe timing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProberConfig {
    /// Limit of one probe (Secret read and `/version` call each).
    pub timeout: Duration,
    /// Interval between probes while the server answers.
    pub refresh: Duration,
    /// First retry delay while it does not.
    pub min_backoff: Duration,
    /// Largest retry delay while it does not.
    pub max_backoff: Duration,
    /// Random jitter on retry delays, so clusters that failed together retry apart.
    pub jitter: bool,
}

impl Default for ProberConfig {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(5),
            refresh: Duration::from_secs(60),
            min_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(120),
            jitter: true,
        }
    }
}

impl ProberConfig {
    fn backoff(&self) -> impl Iterator<Item = Duration> + use<> {
        let builder = ExponentialBuilder::new()
            .with_min_delay(self.min_backoff)
            .with_max_delay(self.max_backoff)
            .with_factor(2.0)
            .without_max_times();
        let max = self.max_backoff;
        let delays = if self.jitter {
            builder.with_jitter()
        } else {
            builder
        }
        .build();
        // `without_max_times` never ends; the chain only satisfies the type.
        delays.chain(std::iter::repeat(max))
    }
}

#[derive(Debug)]
struct Target {
    cluster: String,
    state: ProbeState,
    stop: CancellationToken,
}

struct Inner {
    workload: WorkloadClients,
    config: ProberConfig,
    targets: Mutex<HashMap<ClusterRef, Target>>,
    wake: mpsc::UnboundedSender<ClusterRef>,
    cancel: CancellationToken,
    store: Option<Store<MaasCluster>>,
}

/// The shared prober; cheap to clone.
#[derive(Clone)]
pub struct Prober {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Prober {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prober")
            .field("config", &self.inner.config)
            .field("targets", &self.lock().len())
            .finish_non_exhaustive()
    }
}

impl Prober {
    /// A prober reading Secrets with `client`. Its tasks stop when `cancel` fires or when the
    /// MaasCluster is no longer in `store`. The receiver yields a MaasCluster each time its
    /// probe state changes: feed it to `Controller::reconcile_on`.
    pub fn new(
        client: Client,
        config: ProberConfig,
        store: Option<Store<MaasCluster>>,
        cancel: CancellationToken,
    ) -> (Self, mpsc::UnboundedReceiver<ClusterRef>) {
        let (wake, woken) = mpsc::unbounded();
        let inner = Inner {
            workload: WorkloadClients::new(client).with_timeout(config.timeout),
            config,
            targets: Mutex::default(),
            wake,
            cancel,
            store,
        };
        (
            Self {
                inner: Arc::new(inner),
            },
            woken,
        )
    }

    /// Makes sure `key`'s workload API server (CAPI Cluster `cluster`) is being probed and
    /// returns the latest state.
    pub fn ensure(&self, key: &ClusterRef, cluster: &str) -> ProbeState {
        let mut targets = self.lock();
        if let Some(t) = targets
            .get(key)
            .filter(|t| t.cluster == cluster && !t.stop.is_cancelled())
        {
            return t.state.clone();
        }
        if let Some(old) = targets.remove(key) {
            old.stop.cancel();
        }
        let stop = self.inner.cancel.child_token();
        targets.insert(
            key.clone(),
            Target {
                cluster: cluster.to_owned(),
                state: ProbeState::Pending,
                stop: stop.clone(),
            },
        );
        drop(targets);
        let namespace = key.namespace.clone().unwrap_or_default();
        debug!(cluster, namespace, "starting API server probe");
        let inner = self.inner.clone();
        let (workload, timeout, cluster) = (
            inner.workload.clone(),
            inner.config.timeout,
            cluster.to_owned(),
        );
        let probe = move || {
            let (workload, namespace, cluster) =
                (workload.clone(), namespace.clone(), cluster.clone());
            async move { probe_api_server(&workload, &namespace, &cluster, timeout).await }
        };
        let (key, prober, loop_stop) = (key.clone(), self.clone(), stop.clone());
        let report = move |state: ProbeState| prober.report(&key, &stop, state);
        tokio::spawn(probe_loop(probe, inner.config, loop_stop, report));
        ProbeState::Pending
    }

    /// Stops probing `key` (paused or deleted cluster).
    pub fn stop(&self, key: &ClusterRef) {
        if let Some(t) = self.lock().remove(key) {
            t.stop.cancel();
            let namespace = key.namespace.as_deref().unwrap_or_default();
            self.inner.workload.forget(namespace, &t.cluster);
        }
    }

    /// The latest state of `key`, `Pending` when it is not probed.
    pub fn state(&self, key: &ClusterRef) -> ProbeState {
        self.lock()
            .get(key)
            .map_or(ProbeState::Pending, |t| t.state.clone())
    }

    /// Number of clusters being probed.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no cluster is probed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Records a probe result; returns whether the loop should go on.
    fn report(&self, key: &ClusterRef, stop: &CancellationToken, state: ProbeState) -> bool {
        let mut targets = self.lock();
        let gone = self
            .inner
            .store
            .as_ref()
            .is_some_and(|s| s.get(key).is_none());
        let Some(target) = targets
            .get_mut(key)
            .filter(|t| t.stop == *stop && !stop.is_cancelled())
        else {
            return false;
        };
        if gone {
            stop.cancel();
            targets.remove(key);
            return false;
        }
        if target.state != state {
            info!(cluster = %target.cluster, namespace = key.namespace.as_deref().unwrap_or(""), state = ?state, "API server probe state changed");
            target.state = state;
            // A closed receiver means the controller stopped; the cancel token ends us soon.
            let _ = self.inner.wake.unbounded_send(key.clone());
        }
        true
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ClusterRef, Target>> {
        // Every update replaces whole entries; a panic cannot leave one half-written.
        self.inner
            .targets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// Probes until `stop` fires or `report` says the target is gone: back off exponentially while
/// down, refresh slowly while up.
pub(crate) async fn probe_loop<P, Fut, R>(
    probe: P,
    config: ProberConfig,
    stop: CancellationToken,
    mut report: R,
) where
    P: Fn() -> Fut,
    Fut: Future<Output = ProbeState>,
    R: FnMut(ProbeState) -> bool,
{
    let mut backoff: Option<Box<dyn Iterator<Item = Duration> + Send>> = None;
    loop {
        let state = tokio::select! {
            () = stop.cancelled() => return,
            s = probe() => s,
        };
        let up = matches!(state, ProbeState::Available { .. });
        if !report(state) {
            return;
        }
        let delay = if up {
            backoff = None;
            config.refresh
        } else {
            backoff
                .get_or_insert_with(|| Box::new(config.backoff()))
                .next()
                .unwrap_or(config.max_backoff)
        };
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(delay) => {}
        }
    }
}

/// One probe: a guarded client from the kubeconfig Secret, then `GET /version`.
async fn probe_api_server(
    clients: &WorkloadClients,
    namespace: &str,
    cluster: &str,
    timeout: Duration,
) -> ProbeState {
    let workload = match tokio::time::timeout(timeout, clients.client(namespace, cluster)).await {
        Ok(Ok(client)) => client,
        Ok(Err(e)) => return ProbeState::unavailable(unusable_reason(&e), e.to_string()),
        Err(_) => {
            return ProbeState::unavailable(
                probe_reason::API_SERVER_NOT_READY,
                format!("reading the kubeconfig Secret took longer than {timeout:?}"),
            );
        }
    };
    match tokio::time::timeout(timeout, workload.apiserver_version()).await {
        Ok(Ok(info)) => ProbeState::Available {
            version: info.git_version,
        },
        Ok(Err(e)) => ProbeState::unavailable(
            probe_reason::API_SERVER_NOT_READY,
            format!("GET /version: {}", capmaas_runtime::error_chain(&e)),
        ),
        Err(_) => ProbeState::unavailable(
            probe_reason::API_SERVER_NOT_READY,
            format!("GET /version did not answer within {timeout:?}"),
        ),
    }
}

/// The condition reason for a kubeconfig that yields no client; a Secret that cannot be read
/// right now says nothing about the workload cluster, so it counts as not ready.
fn unusable_reason(error: &WorkloadError) -> &'static str {
    if error.is_spec_problem() {
        error.reason()
    } else {
        probe_reason::API_SERVER_NOT_READY
    }
}

#[cfg(test)]
#[path = "prober_tests.rs"]
mod tests;
