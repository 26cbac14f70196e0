//! What to do next for one MaasDataTemplate, as a pure function of what was observed; and
//! which of its MaasData no claim will ever release ([`orphaned`]).

use std::sync::Arc;

use capmaas_api::{MaasData, MaasDataTemplate, keys};
use capmaas_runtime::controller::finalizer;
use kube::ResourceExt;

/// Everything a decision depends on.
#[derive(Debug, Clone, Copy)]
pub struct Observed<'a> {
    /// The template.
    pub template: &'a MaasDataTemplate,
    /// The MaasData of the template (each holds one index).
    pub data: &'a [Arc<MaasData>],
}

/// The next step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Deleting and no MaasData uses the template: our finalizer off.
    RemoveFinalizer,
    /// Deleting, unused, without our finalizer: nothing to do.
    Done,
    /// Put the finalizer on before anything else.
    AddFinalizer,
    /// Write the status (deleting or not).
    WriteStatus,
}

/// The next step for `obs`.
pub fn decide(obs: &Observed<'_>) -> Step {
    let deleting = obs.template.metadata.deletion_timestamp.is_some();
    let ours = finalizer::has(obs.template, keys::FINALIZER_MAAS_DATA_TEMPLATE);
    if deleting && obs.data.is_empty() {
        return if ours {
            Step::RemoveFinalizer
        } else {
            Step::Done
        };
    }
    if !deleting && !ours {
        return Step::AddFinalizer;
    }
    Step::WriteStatus
}

/// The MaasData being deleted whose claim no longer holds them: still carrying our finalizer
/// (which only the claim's release removes), with an owner claim that `live_claim_uid` (the
/// UID of the claim of that name now, if any) shows gone or re-created.
pub fn orphaned(
    data: &[Arc<MaasData>],
    live_claim_uid: impl Fn(&str) -> Option<String>,
) -> Vec<&MaasData> {
    data.iter()
        .map(AsRef::as_ref)
        .filter(|d| {
            d.metadata.deletion_timestamp.is_some()
                && finalizer::has(*d, keys::FINALIZER_MAAS_DATA)
                && claim_uid_of(d) != live_claim_uid(&d.spec.claim.name)
        })
        .collect()
}

/// The UID of the claim `data` was made for (its owner reference).
pub fn claim_uid_of(data: &MaasData) -> Option<String> {
    data.owner_references()
        .iter()
        .find(|o| o.kind == "MaasDataClaim")
        .map(|o| o.uid.clone())
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
