//! What one reconcile of an `IPAddressClaim` knows: its MaasIPPool and the pool's layout,
//! whether it is paused, and its addresses (from the usage index, plus the one its status
//! names when the index has not seen that one yet: never a second address for a lagging
//! cache).

use capmaas_runtime::error::failed;
use std::sync::Arc;

use capmaas_api::MaasIPPool;
use capmaas_api::capi_ipam::{IPAddress, IPAddressClaim};
use kube::{Api, ResourceExt};

use super::context::Ctx;
use super::decide::{Observed, belongs_to};
use super::error::Result;
use super::index::{AddressEntry, LayoutResult};

/// What the decision about one claim depends on, beside the claim itself.
#[derive(Debug)]
pub struct ClaimState {
    /// Its MaasIPPool, when it exists.
    pub pool: Option<Arc<MaasIPPool>>,
    /// The pool's layout (when the pool exists).
    pub layout: Option<LayoutResult>,
    /// Why reconciliation is paused, if it is.
    pub paused: Option<String>,
    /// `IPAddress` objects naming this claim.
    pub addresses: Vec<AddressEntry>,
}

impl ClaimState {
    /// Reads what the decision about `claim` (of namespace `ns`) depends on.
    pub async fn observe(ctx: &Ctx, ns: &str, claim: &IPAddressClaim) -> Result<Self> {
        let pool = ctx.pool(ns, &claim.spec.pool_ref.name);
        let layout = pool.as_deref().map(|p| ctx.index().layout(p));
        let paused = ctx.claim_pause(claim, pool.as_deref());
        let mut addresses = ctx.index().claim_addresses(ns, &claim.name_any());
        if let Some(named) = claim.address_ref()
            && !addresses.iter().any(|e| e.name == named)
            && let Some(entry) = fetch_own(ctx, claim, named).await?
        {
            // The status names an address the index has not seen yet: keep it, never a second.
            addresses.push(entry);
        }
        Ok(Self {
            pool,
            layout,
            paused,
            addresses,
        })
    }

    /// The view [`super::decide::decide_claim`] takes.
    pub fn observed<'a>(&'a self, claim: &'a IPAddressClaim) -> Observed<'a> {
        Observed {
            claim,
            pool: self.pool.as_deref(),
            layout: self.layout.as_ref(),
            paused: self.paused.as_deref(),
            addresses: &self.addresses,
        }
    }
}

/// The `IPAddress` `name`, read from the API server, when it is `claim`'s.
pub(crate) async fn fetch_own(
    ctx: &Ctx,
    claim: &IPAddressClaim,
    name: &str,
) -> Result<Option<AddressEntry>> {
    let ns = claim.namespace().unwrap_or_default();
    let found = Api::<IPAddress>::namespaced(ctx.base.client.clone(), &ns)
        .get_opt(name)
        .await
        .map_err(failed("get IPAddress"))?;
    let Some(found) = found else {
        return Ok(None);
    };
    let entry = AddressEntry::of(&found).filter(|e| belongs_to(e, claim));
    if entry.is_some() {
        ctx.index().note_created(&found);
    }
    Ok(entry)
}
