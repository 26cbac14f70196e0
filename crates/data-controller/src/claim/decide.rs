//! What to do next for one MaasDataClaim, as a pure function of what was observed.
//!
//! Order: finalizer, template, one IPAddressClaim per pool the template uses, wait for their
//! addresses, then take an index (a MaasData) and render once. Rendered data is never rendered again: the
//! template's metaData and networkData are immutable, and a machine must keep the addresses
//! and names it was deployed with. Deleting: the IPAddressClaims and the MaasData (with its
//! Secrets) are deleted, then the finalizer goes. machine-controller holds its own finalizer
//! on the claim until MAAS has released the server, so nothing is released early.

use std::collections::BTreeMap;

use capmaas_api::common::PoolReference;
use capmaas_api::{MaasData, MaasDataClaim, MaasDataTemplate, keys};
use kube::ResourceExt;

use crate::render::AllocatedAddress;

/// Where the address of one pool stands.
#[derive(Debug, Clone, PartialEq)]
pub enum AddressState {
    /// No IPAddressClaim yet.
    Missing,
    /// Claimed, not served yet; the claim's own explanation (e.g. the pool is exhausted).
    Pending(String),
    /// Served.
    Bound(AllocatedAddress),
}

/// Everything a decision depends on.
#[derive(Debug, Clone, Copy)]
pub struct Observed<'a> {
    /// The claim.
    pub claim: &'a MaasDataClaim,
    /// Its template, when it exists.
    pub template: Option<&'a MaasDataTemplate>,
    /// The claim or its Cluster is paused.
    pub paused: bool,
    /// The MaasData the claim records (`status.renderedData`), when it exists.
    pub data: Option<&'a MaasData>,
    /// The address of every pool the template uses.
    pub addresses: &'a BTreeMap<PoolReference, AddressState>,
}

/// The next step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Deleting: delete the IPAddressClaims and the MaasData, then drop the finalizer.
    Cleanup,
    /// Deleting, but another finalizer (the consumer's) is still on: wait for it to go.
    HeldByConsumer,
    /// Deleting without our finalizer: nothing to do.
    Done,
    /// The claim or its Cluster is paused.
    Paused,
    /// Put the finalizer on before anything else exists.
    AddFinalizer,
    /// The template does not exist (yet).
    WaitForTemplate,
    /// Create the IPAddressClaims of these pools.
    ClaimAddresses(Vec<PoolReference>),
    /// Some address is not served yet.
    WaitForAddresses(String),
    /// Take an index (a MaasData, or the one taken before), render the Secrets, record them.
    Render,
    /// Rendered and recorded: nothing to do.
    Rendered,
}

/// Whether the claim carries our finalizer.
pub fn has_finalizer(claim: &MaasDataClaim) -> bool {
    capmaas_runtime::controller::finalizer::has(claim, keys::FINALIZER_MAAS_DATA_CLAIM)
}

/// The MaasData name the claim records.
pub fn recorded_data(claim: &MaasDataClaim) -> Option<&str> {
    claim
        .status
        .as_ref()
        .and_then(|s| s.rendered_data.as_ref())
        .map(|r| r.name.as_str())
}

/// The next step for `obs`.
pub fn decide(obs: &Observed<'_>) -> Step {
    let claim = obs.claim;
    if claim.metadata.deletion_timestamp.is_some() {
        return if !has_finalizer(claim) {
            Step::Done
        } else if claim.finalizers().len() > 1 {
            // The consumer (machine-controller, until MAAS released the server) still holds
            // the claim: nothing is released before it lets go.
            Step::HeldByConsumer
        } else {
            Step::Cleanup
        };
    }
    if obs.paused {
        return Step::Paused;
    }
    if !has_finalizer(claim) {
        return Step::AddFinalizer;
    }
    if obs.template.is_none() {
        return Step::WaitForTemplate;
    }
    let rendered = obs.data.is_some_and(|d| {
        Some(d.name_any().as_str()) == recorded_data(claim)
            && d.status.as_ref().and_then(|s| s.ready) == Some(true)
    });
    if rendered {
        return Step::Rendered;
    }
    // The index is taken when everything else is there, so a claim waiting for an exhausted
    // pool holds no index.
    next_for_addresses(obs).unwrap_or(Step::Render)
}

/// The address step, if one is due: claims first, then waiting.
fn next_for_addresses(obs: &Observed<'_>) -> Option<Step> {
    let missing: Vec<PoolReference> = obs
        .addresses
        .iter()
        .filter(|(_, s)| **s == AddressState::Missing)
        .map(|(p, _)| p.clone())
        .collect();
    if !missing.is_empty() {
        return Some(Step::ClaimAddresses(missing));
    }
    let waiting: Vec<String> = obs
        .addresses
        .iter()
        .filter_map(|(pool, s)| match s {
            AddressState::Pending(why) if why.is_empty() => Some(format!(
                "{} {}: waiting for an address",
                pool.kind, pool.name
            )),
            AddressState::Pending(why) => Some(format!("{} {}: {why}", pool.kind, pool.name)),
            _ => None,
        })
        .collect();
    (!waiting.is_empty()).then(|| Step::WaitForAddresses(waiting.join("; ")))
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
