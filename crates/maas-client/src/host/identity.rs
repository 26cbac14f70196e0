//! The identity an allocation carries in MAAS's `agent_name`, and how it is found again.
//!
//! MAAS stores `agent_name` with the allocation in the same transaction (under its allocation
//! lock), clears it on release, and filters lists on it by exact match (`agent_name` may be
//! repeated: any of the values). It never shows it: the machine object has no `agent_name`
//! field. So the value can only be recognised by rebuilding it, and it holds only what the
//! gateway can rebuild later:
//!
//! `<installation>;<namespace>/<name>;<erase><force>`, e.g. `capmaas-prod;dc1/srv-12;Q0`
//!
//! - the installation (`--installation-id`), which also keeps other installations' hands off;
//! - the MaasHost the allocation was made for, which the gateway finds again from the machine's
//!   system id (the host bound to it); when the value would pass MAAS's 255 characters
//!   (`Node.agent_name` is a `CharField(max_length=255)`) the host is `#` and 32 hex digits of
//!   the SHA-256 of `<namespace>/<name>`;
//! - the release policy at allocation (erase `N`one, `Q`uick, `S`ecure, `F`ull; force `0`/`1`),
//!   which the orphan sweeper falls back on when no host asks for anything any more.
//!
//! The consumer's UID is not in it: a `clusterctl move` gives the consumer a new UID and an
//! orphan's consumer is gone, so the value could not be rebuilt in the two cases the identity is
//! there for. Which consumer an allocation serves is recorded in the host's
//! `status.allocation.consumerUID`, as before.
//!
//! An allocation of the previous version carries the bare installation id as `agent_name` (and
//! its workload annotations); [`candidates`] lists that form too, so it is still recognised.

use capmaas_api::common::{EraseMode, ReleasePolicy};
use maas_api_client::MachineFilter;

/// MAAS's limit on `agent_name` (`Node.agent_name`, `CharField(max_length=255)`).
pub const MAX_AGENT_NAME: usize = 255;

/// The separator between the parts; neither an installation id nor a Kubernetes name has it.
const SEPARATOR: char = ';';

/// Every release policy an identity can carry, the strongest erase first.
pub const POLICIES: [ReleasePolicy; 8] = {
    const fn policy(erase: EraseMode, force: bool) -> ReleasePolicy {
        ReleasePolicy { erase, force }
    }
    [
        policy(EraseMode::Secure, false),
        policy(EraseMode::Secure, true),
        policy(EraseMode::Full, false),
        policy(EraseMode::Full, true),
        policy(EraseMode::Quick, false),
        policy(EraseMode::Quick, true),
        policy(EraseMode::None, false),
        policy(EraseMode::None, true),
    ]
};

/// The `agent_name` of an allocation by `installation` for the MaasHost `namespace/name`
/// with `release` as its policy.
pub fn agent_name(
    installation: &str,
    namespace: &str,
    name: &str,
    release: &ReleasePolicy,
) -> String {
    let host = format!("{namespace}/{name}");
    let code = policy_code(release);
    let readable = format!("{installation}{SEPARATOR}{host}{SEPARATOR}{code}");
    if readable.chars().count() <= MAX_AGENT_NAME {
        return readable;
    }
    format!(
        "{installation}{SEPARATOR}{}{SEPARATOR}{code}",
        host_digest(&host)
    )
}

/// Every `agent_name` an allocation by `installation` for the host `namespace/name` may carry:
/// one per release policy, in [`POLICIES`] order, and last the previous version's (the bare
/// installation id).
pub fn candidates(installation: &str, namespace: &str, name: &str) -> Vec<String> {
    POLICIES
        .iter()
        .map(|policy| agent_name(installation, namespace, name, policy))
        .chain(std::iter::once(installation.to_owned()))
        .collect()
}

/// The lookup of `system_id` under every identity of the host `namespace/name`
/// ([`candidates`]): one list call, MAAS matching any of the values.
pub fn lookup(installation: &str, system_id: &str, namespace: &str, name: &str) -> MachineFilter {
    candidates(installation, namespace, name).into_iter().fold(
        MachineFilter::new().system_id(system_id.to_owned()),
        MachineFilter::agent_name,
    )
}

/// Whether `record` (a host's `status.allocation.agentName`) names an allocation by
/// `installation`, in the current form or the previous one.
pub fn made_by(record: &str, installation: &str) -> bool {
    record == installation
        || record
            .strip_prefix(installation)
            .is_some_and(|rest| rest.starts_with(SEPARATOR))
}

/// The release policy an identity carries; `None` for the previous version's form (the bare
/// installation id) or a value this version did not write.
pub fn recorded_policy(record: &str) -> Option<ReleasePolicy> {
    let (_, code) = record.rsplit_once(SEPARATOR)?;
    POLICIES.into_iter().find(|p| policy_code(p) == code)
}

fn policy_code(policy: &ReleasePolicy) -> String {
    let erase = match policy.erase {
        EraseMode::None => 'N',
        EraseMode::Quick => 'Q',
        EraseMode::Secure => 'S',
        EraseMode::Full => 'F',
    };
    let force = if policy.force { '1' } else { '0' };
    format!("{erase}{force}")
}

fn host_digest(host: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, host.as_bytes());
    format!("#{}", crate::binding::hex(digest.as_ref(), 32))
}

#[cfg(test)]
#[path = "identity_tests.rs"]
mod tests;
