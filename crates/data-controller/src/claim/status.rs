//! The MaasDataClaim status data-controller writes, as a pure function of the outcome.
//! Deterministic: an unchanged outcome gives an equal status (no write).

use capmaas_api::common::LocalObjectReference;
use capmaas_api::conditions::{self as cond, reasons};
use capmaas_api::data::MaasDataClaimStatus;
use capmaas_runtime::conditions::{ConditionStatus, NewCondition, set_condition, summarize_ready};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// Reason: the MaasDataTemplate does not exist.
pub const REASON_TEMPLATE_NOT_FOUND: &str = "TemplateNotFound";
/// Reason: some address is not served yet.
pub const REASON_WAITING_FOR_ADDRESSES: &str = "WaitingForAddresses";
/// Reason: every address is served.
pub const REASON_ADDRESSES_ALLOCATED: &str = "AddressesAllocated";
/// Reason: the template cannot be rendered for this machine.
pub const REASON_RENDER_FAILED: &str = "RenderFailed";
/// Reason: the data is rendered.
pub const REASON_RENDERED: &str = "Rendered";
/// Reason: the claim or its Cluster is paused.
pub const REASON_PAUSED: &str = "Paused";

/// Where a claim stands after a reconcile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The template is missing.
    TemplateMissing(String),
    /// Addresses are claimed or awaited; why.
    AddressesPending(String),
    /// Rendering failed; the message names the template field.
    RenderFailed(String),
    /// Rendered into this MaasData.
    Rendered(String),
}

/// The status after `outcome`.
pub fn claim_status(
    previous: Option<&MaasDataClaimStatus>,
    outcome: &Outcome,
    generation: Option<i64>,
    now: &Time,
) -> MaasDataClaimStatus {
    use ConditionStatus::{False, True};
    let mut status = previous.cloned().unwrap_or_default();
    let mut conditions = status.conditions.take().unwrap_or_default();
    let addresses = match outcome {
        Outcome::TemplateMissing(_) => None,
        Outcome::AddressesPending(why) => Some(
            NewCondition::new(
                cond::ADDRESSES_ALLOCATED,
                False,
                REASON_WAITING_FOR_ADDRESSES,
            )
            .message(why.clone()),
        ),
        Outcome::RenderFailed(_) | Outcome::Rendered(_) => Some(NewCondition::new(
            cond::ADDRESSES_ALLOCATED,
            True,
            REASON_ADDRESSES_ALLOCATED,
        )),
    };
    if let Some(c) = addresses {
        set_condition(&mut conditions, c.observed_generation(generation), now);
    }
    // Reconciled, so not paused: a claim that was paused says so no more (CAPI's contract).
    set_condition(
        &mut conditions,
        NewCondition::new(cond::PAUSED, False, reasons::NOT_PAUSED).observed_generation(generation),
        now,
    );
    let data_ready = match outcome {
        Outcome::TemplateMissing(name) => {
            NewCondition::new(cond::DATA_READY, False, REASON_TEMPLATE_NOT_FOUND)
                .message(format!("MaasDataTemplate {name} not found"))
        }
        Outcome::AddressesPending(why) => {
            NewCondition::new(cond::DATA_READY, False, REASON_WAITING_FOR_ADDRESSES)
                .message(why.clone())
        }
        Outcome::RenderFailed(why) => {
            NewCondition::new(cond::DATA_READY, False, REASON_RENDER_FAILED).message(why.clone())
        }
        Outcome::Rendered(_) => NewCondition::new(cond::DATA_READY, True, REASON_RENDERED),
    };
    set_condition(
        &mut conditions,
        data_ready.observed_generation(generation),
        now,
    );
    let ready = summarize_ready(
        &conditions,
        &[cond::DATA_READY, cond::ADDRESSES_ALLOCATED],
        generation,
    );
    set_condition(&mut conditions, ready, now);
    status.conditions = Some(conditions);
    status.error_message = match outcome {
        Outcome::RenderFailed(why) => Some(why.clone()),
        _ => None,
    };
    if let Outcome::Rendered(data) = outcome {
        status.rendered_data = Some(LocalObjectReference::new(data.clone()));
    }
    status
}

/// The Paused condition on top of the previous status (nothing else changes while paused).
pub fn paused_status(
    previous: Option<&MaasDataClaimStatus>,
    generation: Option<i64>,
    now: &Time,
) -> MaasDataClaimStatus {
    let mut status = previous.cloned().unwrap_or_default();
    let mut conditions = status.conditions.take().unwrap_or_default();
    set_condition(
        &mut conditions,
        NewCondition::new(cond::PAUSED, ConditionStatus::True, REASON_PAUSED)
            .observed_generation(generation),
        now,
    );
    status.conditions = Some(conditions);
    status
}

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;
