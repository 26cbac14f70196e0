//! The MaasDataTemplate status, as a pure function of the MaasData that use the template.

use std::sync::Arc;

use capmaas_api::MaasData;
use capmaas_api::conditions as cond;
use capmaas_api::data::{IndexAllocation, MaasDataTemplateStatus};
use capmaas_runtime::conditions::{ConditionStatus, NewCondition, set_condition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// Reason of `Ready=False` on a template being deleted while MaasData still use it.
pub const REASON_IN_USE: &str = "InUse";

/// The template status for these MaasData (sorted by index; times kept when nothing changed).
pub fn template_status(
    previous: Option<&MaasDataTemplateStatus>,
    data: &[Arc<MaasData>],
    deleting: bool,
    generation: Option<i64>,
    now: &Time,
) -> MaasDataTemplateStatus {
    let mut indexes: Vec<IndexAllocation> = data
        .iter()
        .map(|d| IndexAllocation {
            name: d.spec.claim.name.clone(),
            index: d.spec.index,
        })
        .collect();
    indexes.sort_by(|a, b| (a.index, &a.name).cmp(&(b.index, &b.name)));
    // Two replicas racing for one claim may briefly have made two MaasData; the list is keyed
    // by claim, so each claim is listed once, with its lowest index.
    let mut seen = std::collections::BTreeSet::new();
    indexes.retain(|i| seen.insert(i.name.clone()));
    let previous = previous.cloned().unwrap_or_default();
    let mut conditions = previous.conditions.clone().unwrap_or_default();
    let ready = if deleting && !indexes.is_empty() {
        NewCondition::new(cond::READY, ConditionStatus::False, REASON_IN_USE).message(format!(
            "deletion waits for {} MaasData still using the template",
            indexes.len()
        ))
    } else {
        NewCondition::new(cond::READY, ConditionStatus::True, "Reconciled")
    };
    set_condition(&mut conditions, ready.observed_generation(generation), now);
    let mut status = MaasDataTemplateStatus {
        allocated_indexes: Some(i32::try_from(indexes.len()).unwrap_or(i32::MAX)),
        indexes: Some(indexes),
        conditions: Some(conditions),
        last_updated: previous.last_updated.clone(),
    };
    let unchanged = MaasDataTemplateStatus {
        last_updated: None,
        ..status.clone()
    } == MaasDataTemplateStatus {
        last_updated: None,
        ..previous
    };
    if !unchanged || status.last_updated.is_none() {
        status.last_updated = Some(now.clone());
    }
    status
}

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;
