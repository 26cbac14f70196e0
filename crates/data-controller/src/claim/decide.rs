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
    /// No IPAddressClaim yet, but the host's previous data claim (named) is still there and may
    /// hand its address over (`crate::hold`).
    AwaitingHandover(String),
    /// No IPAddressClaim yet; this held IPAddressClaim keeps the address of the host's previous
    /// machine and is taken over.
    Held(String),
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
    /// Take over these held IPAddressClaims (pool, name): the host's addresses.
    AdoptAddresses(Vec<(PoolReference, String)>),
    /// Create the IPAddressClaims of these pools.
    ClaimAddresses(Vec<PoolReference>),
    /// The host's previous data claim may still hand addresses over: wait (why).
    WaitForHandover(String),
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

/// The address step, if one is due: holds taken over first, then claims, then waiting for a
/// handover, then waiting for the addresses.
fn next_for_addresses(obs: &Observed<'_>) -> Option<Step> {
    let held: Vec<(PoolReference, String)> = obs
        .addresses
        .iter()
        .filter_map(|(p, s)| match s {
            AddressState::Held(name) => Some((p.clone(), name.clone())),
            _ => None,
        })
        .collect();
    if !held.is_empty() {
        return Some(Step::AdoptAddresses(held));
    }
    let missing: Vec<PoolReference> = obs
        .addresses
        .iter()
        .filter(|(_, s)| **s == AddressState::Missing)
        .map(|(p, _)| p.clone())
        .collect();
    if !missing.is_empty() {
        return Some(Step::ClaimAddresses(missing));
    }
    let handover: Vec<String> = obs
        .addresses
        .iter()
        .filter_map(|(pool, s)| match s {
            AddressState::AwaitingHandover(previous) => Some(format!(
                "{} {}: waiting for MaasDataClaim {previous}, which had this host before, to \
                 hand its address over",
                pool.kind, pool.name
            )),
            _ => None,
        })
        .collect();
    if !handover.is_empty() {
        return Some(Step::WaitForHandover(handover.join("; ")));
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
