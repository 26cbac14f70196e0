//! What every reconcile of a MaasRemediation shares.

use std::time::Duration;

use capmaas_api::MaasHost;
use capmaas_runtime::controller::Events;
use capmaas_runtime::controller::workload::WorkloadClients;
use kube::Client;
use kube::runtime::reflector::Store;

use crate::BINARY;
use crate::args::{ControllerArgs, FenceMode};

/// Shared by every reconcile of one leadership term.
#[derive(Clone)]
pub struct Ctx {
    /// Client for calls (with read timeouts).
    pub client: Client,
    /// Field manager of every write (`capmaas-remediation-controller`).
    pub field_manager: String,
    /// Events on MaasRemediations.
    pub events: Events,
    /// Workload cluster clients (guarded kubeconfigs, cached per cluster).
    pub workload: WorkloadClients,
    /// Cache of every watched MaasHost: where a remediation looks for hosts it still holds off
    /// when its MaasMachine no longer leads there.
    pub hosts: Store<MaasHost>,
    /// `--fence`.
    pub fence: FenceMode,
    /// `--poll-interval`.
    pub poll_interval: Duration,
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("field_manager", &self.field_manager)
            .field("fence", &self.fence)
            .field("poll_interval", &self.poll_interval)
            .finish_non_exhaustive()
    }
}

impl Ctx {
    /// The context of one leadership term.
    pub fn new(
        term: &capmaas_runtime::Context,
        hosts: Store<MaasHost>,
        args: &ControllerArgs,
    ) -> Self {
        let client = term.clients.api.clone();
        Self {
            events: Events::new(client.clone(), BINARY),
            workload: WorkloadClients::new(client.clone()),
            client,
            field_manager: term.settings.field_manager.clone(),
            hosts,
            fence: args.fence,
            poll_interval: args.poll_interval,
        }
    }
}
