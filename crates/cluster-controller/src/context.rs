//! What every reconcile of a MaasCluster shares.

use capmaas_runtime::controller::Base;

use crate::hosted::HostedKinds;
use crate::prober::Prober;

/// Shared by every reconcile of one leadership term.
#[derive(Debug)]
pub struct Ctx {
    /// Client, field manager, Events on MaasClusters, `--sync-period`.
    pub base: Base,
    /// The shared workload API-server prober.
    pub prober: Prober,
    /// Control-plane kinds that are hosted (built in and `--hosted-control-plane-kinds`).
    pub hosted: HostedKinds,
}
