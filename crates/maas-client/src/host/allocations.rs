//! Which of the machines allocated to our MAAS user are allocations of this installation, and
//! what their identities tell ([`crate::host::identity`]): the orphan sweeper's first step.
//!
//! MAAS never shows an allocation's `agent_name`; it only filters on it by exact match. So the
//! machine of a host the gateway watches is looked up with all of that host's identities (one
//! call: MAAS matches any of the values), and only one found there is asked for each release
//! policy in turn, to learn the one it carries. A machine annotated by this installation (the
//! previous version annotated every allocation) needs no call, nor does the machine of a
//! consumed host (its host controller adopts it or finds it someone else's).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use capmaas_api::MaasHost;
use capmaas_api::common::ReleasePolicy;
use k8s_openapi::api::coordination::v1::Lease;
use kube::{Resource, ResourceExt};
use maas_api_client::{MaasError, Machine, MachineFilter, MachineStatus};

use super::annotations as ann;
use super::identity;
use crate::binding;
use crate::context::Gateway;

/// What an allocation's identity told about it, when the machine carries no annotations of
/// ours ([`recognise`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Identified {
    /// The host it was made for (`<namespace>/<name>`); `None` for the previous version's bare
    /// installation id.
    pub host: Option<String>,
    /// The release policy it carries.
    pub release: Option<ReleasePolicy>,
}

/// How one machine allocated to our MAAS user is recognised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recognition {
    /// Annotated as an allocation of this installation (the previous version, or
    /// `--maas-workload-annotations`): ours, with the host and policy the annotations record.
    Annotated,
    /// The machine of a consumed host asking for provisioning: the host controller adopts it
    /// or finds it someone else's; no lookup needed.
    Claimed,
    /// The machine of a host the gateway watches (`<namespace>`, `<name>`): ours only if MAAS
    /// finds it under one of that host's identities.
    LookUp(String, String),
    /// Someone else's, or nothing this gateway can recognise.
    Unknown,
}

/// How `machine` is recognised, from its annotations and the hosts the gateway watches by
/// system id (`hosts`: system id → `(namespace, name)`).
pub fn recognition(
    machine: &Machine,
    installation: &str,
    hosts: &BTreeMap<String, (String, String)>,
    claimed: &BTreeSet<String>,
) -> Recognition {
    match machine.annotations().get(ann::INSTALLATION) {
        Some(annotated) if annotated == installation => return Recognition::Annotated,
        Some(_) => return Recognition::Unknown,
        None => {}
    }
    let id = &machine.system_id;
    if claimed.contains(id) {
        return Recognition::Claimed;
    }
    // On its way back: the sweep leaves it alone whoever it is, so no call to find out.
    if matches!(
        machine.status,
        MachineStatus::Releasing | MachineStatus::DiskErasing
    ) {
        return Recognition::Unknown;
    }
    hosts
        .get(id)
        .map_or(Recognition::Unknown, |(namespace, name)| {
            Recognition::LookUp(namespace.clone(), name.clone())
        })
}

/// Picks our allocations out of the machines allocated to our MAAS user ([`recognition`]),
/// with what the identities of those without annotations tell. A machine of a watched host is
/// looked up with all of that host's identities in one call; only one found there (an orphan,
/// or an allocation waiting to be claimed again) is asked for each release policy in turn.
pub async fn recognise(
    gw: &Gateway,
    allocated: Vec<Machine>,
    hosts: &[Arc<MaasHost>],
    claimed: &BTreeSet<String>,
) -> Result<(Vec<Machine>, BTreeMap<String, Identified>), MaasError> {
    let installation = &gw.settings.installation_id;
    let by_system_id = hosts_by_system_id(hosts, &gw.bindings.state());
    let mut ours = Vec::new();
    let mut identified = BTreeMap::new();
    for machine in allocated {
        match recognition(&machine, installation, &by_system_id, claimed) {
            Recognition::Annotated | Recognition::Claimed => ours.push(machine),
            Recognition::Unknown => {}
            Recognition::LookUp(namespace, name) => {
                if let Some(found) =
                    identify(gw, &machine.system_id, &namespace, &name, None).await?
                {
                    identified.insert(machine.system_id.clone(), found);
                    ours.push(machine);
                }
            }
        }
    }
    Ok((ours, identified))
}

/// The host (`namespace`, `name`) of each system id: the hosts the gateway watches, and for a
/// machine whose host is gone, the holder its binding still names ([`crate::binding`]). The
/// sweeper keeps the binding of an allocation of ours until it is released, so an orphan whose
/// host was deleted is still recognised after a restart.
pub fn hosts_by_system_id(
    hosts: &[Arc<MaasHost>],
    bindings: &[Arc<Lease>],
) -> BTreeMap<String, (String, String)> {
    let bound = bindings.iter().filter_map(|lease| {
        let system_id = lease.annotations().get(binding::ANNOTATION_SYSTEM_ID)?;
        let holder = lease.spec.as_ref()?.holder_identity.as_deref()?;
        let (namespace, name) = holder.split_once('/')?;
        Some((system_id.clone(), (namespace.to_owned(), name.to_owned())))
    });
    let watched = hosts.iter().map(|h| {
        let meta = h.meta();
        let namespace = meta.namespace.clone().unwrap_or_default();
        let name = meta.name.clone().unwrap_or_default();
        (h.spec.system_id.clone(), (namespace, name))
    });
    // A live host wins over a binding naming another holder.
    bound.chain(watched).collect()
}

/// Whether MAAS has `system_id` allocated under an identity of the host `namespace/name` (or the
/// previous version's bare installation id), and which. With a `likely` policy (the one the
/// host recorded or asks for) that identity is asked for first: one call when it is the one.
/// Else one call with all of them, and only when that finds it, one per policy in turn.
pub async fn identify(
    gw: &Gateway,
    system_id: &str,
    namespace: &str,
    name: &str,
    likely: Option<&ReleasePolicy>,
) -> Result<Option<Identified>, MaasError> {
    let installation = &gw.settings.installation_id;
    let found = |policy: ReleasePolicy| Identified {
        host: Some(format!("{namespace}/{name}")),
        release: Some(policy),
    };
    let exactly = |policy: &ReleasePolicy| {
        MachineFilter::new()
            .system_id(system_id.to_owned())
            .agent_name(identity::agent_name(installation, namespace, name, policy))
    };
    if let Some(policy) = likely
        && !gw
            .maas
            .list_machines(&exactly(policy))
            .await?
            .value
            .is_empty()
    {
        return Ok(Some(found(policy.clone())));
    }
    let any = identity::lookup(installation, system_id, namespace, name);
    if gw.maas.list_machines(&any).await?.value.is_empty() {
        return Ok(None);
    }
    for policy in identity::POLICIES.into_iter().filter(|p| Some(p) != likely) {
        if !gw
            .maas
            .list_machines(&exactly(&policy))
            .await?
            .value
            .is_empty()
        {
            return Ok(Some(found(policy)));
        }
    }
    // Found under none of this version's identities: the previous version's bare id.
    Ok(Some(Identified::default()))
}

#[cfg(test)]
#[path = "allocations_tests.rs"]
mod tests;
