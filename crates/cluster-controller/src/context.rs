//! What every reconcile of a MaasCluster shares.

use capmaas_runtime::controller::Base;

use crate::prober::Prober;

/// Shared by every reconcile of one leadership term.
#[derive(Debug)]
pub struct Ctx {
    /// Client, field manager, Events on MaasClusters, `--sync-period`.
    pub base: Base,
    /// The shared workload API-server prober.
    pub prober: Prober,
}
