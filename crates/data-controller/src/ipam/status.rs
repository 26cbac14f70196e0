//! Pure status of claims and pools: what to write, and whether it differs from what is there.
//!
//! Deterministic, so that a status write (which wakes the object again) settles: a condition
//! keeps its `lastTransitionTime` unless its status flips, and `lastUpdated` only moves when
//! something else changed.

use capmaas_api::capi_ipam::{IPAddressClaim, IPAddressClaimStatus, IPAddressReference};
use capmaas_api::conditions::{self as cond, reasons};
use capmaas_api::{MaasIPPool, MaasIPPoolStatus};
use capmaas_runtime::conditions::{ConditionStatus, NewCondition, get_condition, set_condition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use super::index::{LayoutResult, PoolCounts};

/// The status this provider owns on a claim: `addressRef` and the `Ready` condition (other
/// conditions belong to other writers and are not sent).
pub fn claim_status(
    claim: &IPAddressClaim,
    address_ref: Option<&str>,
    ready: NewCondition,
    now: &Time,
) -> IPAddressClaimStatus {
    let mut conditions: Vec<Condition> = existing_ready(claim).into_iter().cloned().collect();
    set_condition(
        &mut conditions,
        ready.observed_generation(claim.metadata.generation),
        now,
    );
    IPAddressClaimStatus {
        address_ref: address_ref.map(|name| IPAddressReference {
            name: name.to_owned(),
        }),
        conditions: Some(conditions),
    }
}

fn existing_ready(claim: &IPAddressClaim) -> Option<&Condition> {
    claim
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .and_then(|c| get_condition(c, cond::READY))
}

/// Whether writing `status` would change the claim.
pub fn claim_status_differs(claim: &IPAddressClaim, status: &IPAddressClaimStatus) -> bool {
    let current_ref = claim.status.as_ref().and_then(|s| s.address_ref.as_ref());
    let new_ready = status
        .conditions
        .as_deref()
        .and_then(|c| get_condition(c, cond::READY));
    current_ref != status.address_ref.as_ref() || existing_ready(claim) != new_ready
}

/// `Ready=True`: the claim has `IPAddress` `name` holding `address/prefix` of `pool`.
pub fn ready_condition(name: &str, address: &str, prefix: i32, pool: &str) -> NewCondition {
    NewCondition::new(
        cond::READY,
        ConditionStatus::True,
        super::decide::REASON_ALLOCATED,
    )
    .message(format!(
        "IPAddress {name} holds {address}/{prefix} from MaasIPPool {pool}"
    ))
}

/// `Ready=False` with `reason` and `message`.
pub fn not_ready_condition(reason: &str, message: impl Into<String>) -> NewCondition {
    NewCondition::new(cond::READY, ConditionStatus::False, reason).message(message)
}

/// The message of an exhausted pool, naming the pool and the claim.
pub fn exhausted_message(namespace: &str, pool: &str, claim: &str) -> String {
    format!(
        "MaasIPPool {namespace}/{pool} has no free address for IPAddressClaim {namespace}/{claim}; \
         it is served as soon as an address of the pool is released"
    )
}

/// What the pool status is computed from.
#[derive(Clone, Copy, Debug)]
pub struct PoolFacts<'a> {
    /// The pool's layout, or why it is invalid.
    pub layout: &'a LayoutResult,
    /// In-use and free counts (when the layout is valid).
    pub counts: Option<PoolCounts>,
    /// Deleting and waiting for this many `IPAddress` objects to go.
    pub waiting_for: Option<usize>,
    /// Addresses in use that the layout no longer hands out ([`super::UsageIndex::stranded`]).
    pub stranded: &'a [std::net::IpAddr],
}

/// Stranded addresses named in the condition message; the count says how many more.
const STRANDED_SHOWN: usize = 10;

/// `AddressesInPool`: True, or False naming the stranded addresses (they stay with their
/// claims until released, and are never handed out again).
fn addresses_in_pool(stranded: &[std::net::IpAddr]) -> NewCondition {
    if stranded.is_empty() {
        return NewCondition::new(
            cond::ADDRESSES_IN_POOL,
            ConditionStatus::True,
            cond::ADDRESSES_IN_POOL,
        );
    }
    let shown: Vec<String> = stranded
        .iter()
        .take(STRANDED_SHOWN)
        .map(ToString::to_string)
        .collect();
    let more = stranded.len().saturating_sub(STRANDED_SHOWN);
    NewCondition::new(
        cond::ADDRESSES_IN_POOL,
        ConditionStatus::False,
        reasons::ADDRESSES_STRANDED,
    )
    .message(format!(
        "{} address(es) in use are outside the pool's ranges or excluded: {}{}; they stay with \
         their claims until released and are not handed out again",
        stranded.len(),
        shown.join(", "),
        if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        }
    ))
}

/// Reason of `PoolValid=True`.
pub const REASON_POOL_VALID: &str = "PoolValid";
/// Reason of `Ready=False` while a deleted pool waits for its addresses.
pub const REASON_DELETING: &str = "Deleting";

/// `i64` for the status, saturating (huge IPv6 ranges).
pub fn saturating_i64(n: u128) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The condition types this provider writes on a pool; other writers' conditions (maas-client's
/// `MAASRangesReserved`) are neither sent nor compared: server-side apply keeps them theirs.
pub const POOL_CONDITIONS: [&str; 4] = [
    cond::READY,
    cond::POOL_VALID,
    cond::ADDRESSES_IN_POOL,
    cond::PAUSED,
];

/// The part of `status` this provider owns: its fields and its conditions only.
pub fn owned_pool_status(status: Option<&MaasIPPoolStatus>) -> MaasIPPoolStatus {
    let mut owned = status.cloned().unwrap_or_default();
    owned.conditions = Some(
        owned
            .conditions
            .unwrap_or_default()
            .into_iter()
            .filter(|c| POOL_CONDITIONS.contains(&c.type_.as_str()))
            .collect(),
    );
    owned
}

/// The status of `pool` from `facts` (`Paused=False`): counts, `PoolValid`, `Ready`.
pub fn pool_status(pool: &MaasIPPool, facts: PoolFacts<'_>, now: &Time) -> MaasIPPoolStatus {
    let old = owned_pool_status(pool.status.as_ref());
    let generation = pool.metadata.generation;
    let mut conditions = old.conditions.clone().unwrap_or_default();
    let valid = match facts.layout {
        Ok(_) => NewCondition::new(cond::POOL_VALID, ConditionStatus::True, REASON_POOL_VALID),
        Err(e) => NewCondition::new(
            cond::POOL_VALID,
            ConditionStatus::False,
            reasons::INVALID_POOL,
        )
        .message(e.to_string()),
    };
    let ready = match (facts.waiting_for, facts.layout) {
        (Some(n), _) => not_ready_condition(
            REASON_DELETING,
            format!("waiting for {n} IPAddress(es) of the pool to be released"),
        ),
        (None, Err(e)) => not_ready_condition(reasons::INVALID_POOL, e.to_string()),
        (None, Ok(_)) => NewCondition::new(cond::READY, ConditionStatus::True, cond::READY),
    };
    let paused = NewCondition::new(cond::PAUSED, ConditionStatus::False, reasons::NOT_PAUSED);
    let in_pool = addresses_in_pool(facts.stranded);
    for c in [ready, valid, in_pool, paused] {
        set_condition(&mut conditions, c.observed_generation(generation), now);
    }
    let mut status = MaasIPPoolStatus {
        addresses_in_use: facts.counts.map(|c| saturating_i64(c.in_use)),
        addresses_free: facts.counts.map(|c| saturating_i64(c.free)),
        last_updated: old.last_updated.clone(),
        observed_generation: generation,
        conditions: Some(conditions),
    };
    if status != old {
        status.last_updated = Some(now.clone());
    }
    status
}

/// The status of a paused pool: what this provider owns, with `Paused=True`.
pub fn paused_pool_status(pool: &MaasIPPool, why: &str, now: &Time) -> MaasIPPoolStatus {
    let mut status = owned_pool_status(pool.status.as_ref());
    let mut conditions = status.conditions.take().unwrap_or_default();
    set_condition(
        &mut conditions,
        NewCondition::new(cond::PAUSED, ConditionStatus::True, reasons::PAUSED)
            .message(why)
            .observed_generation(pool.metadata.generation),
        now,
    );
    status.conditions = Some(conditions);
    status
}

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;
