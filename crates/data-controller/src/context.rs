//! What every reconcile of one leadership term shares.

use std::time::Duration;

use capmaas_api::capi_ipam::{IPAddress, IPAddressClaim};
use capmaas_api::{MaasData, MaasDataClaim, MaasDataTemplate, MaasIPPool};
use capmaas_runtime::controller::Events;
use kube::Client;
use kube::runtime::reflector::Store;

/// Shared by every reconcile of one leadership term.
#[derive(Clone)]
pub struct Ctx {
    /// Client for calls (with read timeouts).
    pub client: Client,
    /// Server-side apply field manager (`capmaas-data-controller`).
    pub field_manager: String,
    /// Events on MaasDataClaims and MaasDataTemplates.
    pub events: Events,
    /// Requeue of a settled claim (`--sync-period`).
    pub sync_period: Duration,
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
    /// Indexes this process is taking ([`crate::reservations::Reservations`]).
    pub reservations: std::sync::Arc<crate::reservations::Reservations>,
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("field_manager", &self.field_manager)
            .finish_non_exhaustive()
    }
}
