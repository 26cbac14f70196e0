//! The bench's watches: CAPI Machines, MaasMachines and MaasHosts of the run's namespace in
//! the management cluster, Nodes in the workload cluster. Every event is dated on arrival
//! and noted in the [`Recorder`]; the number of Running Machines is published so the bench
//! learns the end of a run from the watch instead of polling the API server (which would
//! add load to what it measures).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher::{self, Event};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::timeline::{Kind, Recorder};
use crate::error::{Error, Result};
use crate::harness::dynamic_api;

const INFRA_GROUP: &str = "infrastructure.cluster.x-k8s.io";

/// Running watches; dropping them stops them.
#[derive(Debug)]
pub(super) struct Watches {
    recorder: Arc<Mutex<Recorder>>,
    running: watch::Receiver<usize>,
    cancel: CancellationToken,
}

impl Drop for Watches {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

impl Watches {
    /// Starts the four watches and returns once each has listed what exists, so that no
    /// object created afterwards is dated late.
    pub(super) async fn start(
        management: &kube::Client,
        workload: &kube::Client,
        ns: &str,
    ) -> Result<Self> {
        let apis = [
            (
                Kind::Machine,
                dynamic_api(management, ns, "cluster.x-k8s.io", "v1beta2", "Machine").await?,
            ),
            (
                Kind::MaasMachine,
                dynamic_api(management, ns, INFRA_GROUP, "v1beta1", "MaasMachine").await?,
            ),
            (
                Kind::Host,
                dynamic_api(management, ns, INFRA_GROUP, "v1beta1", "MaasHost").await?,
            ),
            (
                Kind::Node,
                Api::all_with(workload.clone(), &ApiResource::erase::<Node>(&())),
            ),
        ];
        let recorder = Arc::new(Mutex::new(Recorder::default()));
        let (running_tx, running) = watch::channel(0);
        let running_tx = Arc::new(running_tx);
        let cancel = CancellationToken::new();
        let (ready_tx, mut ready_rx) = mpsc::channel(apis.len());
        let watches = apis.len();
        for (kind, api) in apis {
            tokio::spawn(pump(
                kind,
                api,
                recorder.clone(),
                running_tx.clone(),
                ready_tx.clone(),
                cancel.clone(),
            ));
        }
        let listed = async {
            for _ in 0..watches {
                ready_rx.recv().await;
            }
        };
        tokio::time::timeout(Duration::from_secs(60), listed)
            .await
            .map_err(|_| Error::Timeout {
                what: "the bench's watches to list".into(),
                seconds: 60,
            })?;
        Ok(Self {
            recorder,
            running,
            cancel,
        })
    }

    /// Waits until `machines` Machines are Running with a nodeRef; returns when the last one
    /// was seen Running.
    pub(super) async fn all_running(
        &mut self,
        machines: usize,
        timeout: Duration,
    ) -> Result<Instant> {
        let waited = tokio::time::timeout(timeout, self.running.wait_for(|n| *n >= machines))
            .await
            .is_ok_and(|seen| seen.is_ok());
        let running = *self.running.borrow();
        if waited {
            Ok(self.lock().last_running().unwrap_or_else(Instant::now))
        } else {
            Err(Error::Timeout {
                what: format!("{machines} machines to run ({running} did)"),
                seconds: timeout.as_secs(),
            })
        }
    }

    /// What the watches saw.
    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Recorder> {
        self.recorder.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

async fn pump(
    kind: Kind,
    api: Api<DynamicObject>,
    recorder: Arc<Mutex<Recorder>>,
    running: Arc<watch::Sender<usize>>,
    ready: mpsc::Sender<()>,
    cancel: CancellationToken,
) {
    let events = watcher::watcher(api, watcher::Config::default()).default_backoff();
    let mut events = std::pin::pin!(events);
    loop {
        let event = tokio::select! {
            () = cancel.cancelled() => return,
            event = events.next() => event,
        };
        let Some(event) = event else { return };
        let now = Instant::now();
        let event = match event {
            Ok(event) => event,
            Err(e) => {
                tracing::warn!(?kind, error = %e, "bench watch failed; retrying");
                continue;
            }
        };
        let mut recorder = recorder.lock().unwrap_or_else(PoisonError::into_inner);
        match &event {
            Event::Apply(object) | Event::InitApply(object) => {
                let name = object.metadata.name.as_deref().unwrap_or_default();
                recorder.observe(kind, name, &object.data, now);
                if object.metadata.deletion_timestamp.is_some() {
                    recorder.deleting(kind, name, now);
                }
            }
            Event::Delete(object) => {
                let name = object.metadata.name.as_deref().unwrap_or_default();
                recorder.forget(kind, name, now);
            }
            Event::InitDone => {
                // Only the first listing matters; later ones (after a watch error) find the
                // receiver gone.
                let _ = ready.try_send(());
            }
            Event::Init => {}
        }
        if kind == Kind::Machine {
            running.send_replace(recorder.running());
        }
    }
}
