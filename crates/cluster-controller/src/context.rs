//! What every reconcile of a MaasCluster shares.

use std::time::Duration;

use capmaas_runtime::controller::Events;
use kube::Client;

use crate::prober::Prober;

/// Shared by every reconcile of one leadership term.
pub struct Ctx {
    /// Client for calls (with read timeouts).
    pub client: Client,
    /// Server-side apply field manager (`capmaas-cluster-controller`).
    pub field_manager: String,
    /// Events on MaasClusters.
    pub events: Events,
    /// The shared workload API-server prober.
    pub prober: Prober,
    /// Requeue of a settled MaasCluster (`--sync-period`).
    pub sync_period: Duration,
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("field_manager", &self.field_manager)
            .field("prober", &self.prober)
            .finish_non_exhaustive()
    }
}
