//! What every reconcile of one leadership term shares.

use capmaas_api::capi_ipam::{IPAddress, IPAddressClaim};
use capmaas_api::{MaasData, MaasDataClaim, MaasDataTemplate, MaasIPPool};
use capmaas_runtime::controller::Base;
use kube::runtime::reflector::Store;

/// Shared by every reconcile of one leadership term.
#[derive(Clone)]
pub struct Ctx {
    /// Client, field manager, Events on MaasDataClaims and MaasDataTemplates, `--sync-period`.
    pub base: Base,
    /// MaasDataClaims, from the claim controller's reflector.
    pub claims: Store<MaasDataClaim>,
    /// MaasDataTemplates.
    pub templates: Store<MaasDataTemplate>,
    /// MaasData (one per allocated index).
    pub data: Store<MaasData>,
    /// IPAddressClaims made for data claims (labelled with the data claim).
    pub ip_claims: Store<IPAddressClaim>,
    /// IPAddresses.
    pub ip_addresses: Store<IPAddress>,
    /// MaasIPPools (DNS servers of an address, which CAPI IPAddress does not carry).
    pub pools: Store<MaasIPPool>,
    /// Indexes this process is taking ([`crate::claim::reservations::Reservations`]).
    pub reservations: std::sync::Arc<crate::claim::reservations::Reservations>,
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}
