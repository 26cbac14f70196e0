//! What every reconcile of a MaasRemediation shares.

use std::time::Duration;

use capmaas_api::MaasHost;
use capmaas_runtime::controller::Base;
use capmaas_runtime::controller::workload::WorkloadClients;
use kube::runtime::reflector::Store;

use crate::args::{ControllerArgs, FenceMode};

/// Shared by every reconcile of one leadership term.
#[derive(Clone)]
pub struct Ctx {
    /// Client, field manager, Events on MaasRemediations.
    pub base: Base,
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
            .field("base", &self.base)
            .field("fence", &self.fence)
            .field("poll_interval", &self.poll_interval)
            .finish_non_exhaustive()
    }
}

impl Ctx {
    /// The context of one leadership term.
    pub fn new(
        term: &capmaas_runtime::Term,
        hosts: Store<MaasHost>,
        args: &ControllerArgs,
    ) -> Self {
        let base = Base::for_term(term);
        Self {
            workload: WorkloadClients::new(base.client.clone()),
            base,
            hosts,
            fence: args.fence,
            poll_interval: args.poll_interval,
        }
    }
}
