//! Adoption and the orphan sweeper.
//!
//! At the start of every leadership term, and then periodically, one call lists the MAAS
//! machines allocated to our MAAS user (`op=list_allocated`), and the gateway picks out its own
//! ([`crate::host::allocations`]). MAAS never shows an allocation's `agent_name`, it only filters on it by
//! exact match, so an allocation is recognised by rebuilding its identity
//! ([`crate::host::identity`]): the machine of a host the gateway watches is looked up with
//! that host's identities (one call, any of the values), and for an orphan the release policy
//! it carries is found by asking for each in turn. Allocations of the previous version carry the
//! bare installation id and workload annotations naming the host; those are recognised by
//! their annotations, or by the bare id for the machine of a watched host.
//!
//! Each allocation of ours is matched to a MaasHost by system id; a machine claimed by a
//! consumed host that asks for provisioning is adopted (the host controller records it). Any
//! other is an orphan: after the grace period (it may be a host being created or an allocation
//! about to be recorded) it is released, with the erase its identity (or its annotations)
//! records, so it is found although no host asks for it any more; without a record the erase
//! is the safest ([`ann::SAFEST_ERASE`]). A release that failed (5xx, Releasing failed, Failed
//! disk erasing: MAAS keeps the agent_name until an erase succeeds) is sent again on a later
//! pass with the same flags.
//!
//! Scope: a gateway watching one namespace sees only that namespace's hosts, while other
//! gateways (or itself before a re-scope) may hold allocations of the same installation for
//! hosts of other namespaces. It adopts or releases only the machines it can prove are its
//! own: those whose identity or annotations record a host (`<namespace>/<name>`) in the
//! namespace it watches, or, with no host recorded (a previous-version allocation whose gateway
//! died before annotating it), whose system id is one of the hosts it watches. An annotated one
//! recorded for another namespace is left alone and reported once ([`SweepScope`]); an identity
//! for a host the gateway does not watch cannot be rebuilt, so such an allocation is never
//! touched. A cluster-wide gateway sees every namespace of its cluster, but not the other
//! management clusters that may share the MAAS and the installation id (the source or target of
//! a `clusterctl move`, with the provider installed there before the move): it adopts or
//! releases the allocations recorded for a host of a namespace it serves (one with MaasHosts),
//! or unrecorded ones of its hosts' machines, and leaves the others alone as well.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use capmaas_api::MaasHost;
use kube::Resource;
use maas_api_client::{Machine, MachineStatus, ReleaseRequest};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::binding::Bindings;
use crate::context::Gateway;
use crate::host::allocations::{Identified, recognise};
use crate::host::annotations as ann;
use crate::host::state::recorded_allocation;

/// An orphan to release now, with the request built from the policy recorded on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrphanRelease {
    /// MAAS system id.
    pub system_id: String,
    /// The release, erase flags included.
    pub request: ReleaseRequest,
}

/// The sweep's decision for this pass.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SweepPlan {
    /// System ids claimed by a host (adopted).
    pub adopted: Vec<String>,
    /// Orphans to release now.
    pub release: Vec<OrphanRelease>,
    /// First-seen times of orphans still within the grace period (carried to the next pass).
    pub pending: BTreeMap<String, Instant>,
    /// Allocations of ours this gateway cannot prove are its own (recorded for a host it does
    /// not watch, or no host recorded while scoped): left alone.
    pub not_ours: Vec<NotOurs>,
}

/// An allocation with our agent_name that is outside what this gateway watches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotOurs {
    /// MAAS system id.
    pub system_id: String,
    /// The host recorded on the machine (`<namespace>/<name>`), if any.
    pub recorded_host: Option<String>,
}

/// Which allocations of ours a gateway may adopt or release: the hosts it can see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SweepScope {
    /// Cluster-wide: the allocations recorded for a host of a namespace this cluster serves
    /// (one with MaasHosts).
    ClusterWide {
        /// The namespaces that have MaasHosts.
        namespaces: BTreeSet<String>,
        /// System ids of the hosts the gateway sees.
        system_ids: BTreeSet<String>,
    },
    /// Scoped to one namespace.
    Namespace {
        /// The namespace watched.
        namespace: String,
        /// System ids of the hosts the gateway sees in it.
        system_ids: BTreeSet<String>,
    },
}

impl SweepScope {
    /// From `--namespace` (`None` or empty = all namespaces) and the hosts the gateway sees
    /// (namespace, system id).
    pub fn new<'a>(
        namespace: Option<&str>,
        hosts: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Self {
        let (namespaces, system_ids): (BTreeSet<String>, BTreeSet<String>) = hosts
            .into_iter()
            .map(|(ns, id)| (ns.to_owned(), id.to_owned()))
            .unzip();
        match namespace {
            Some(ns) if !ns.is_empty() => Self::Namespace {
                namespace: ns.to_owned(),
                system_ids,
            },
            _ => Self::ClusterWide {
                namespaces,
                system_ids,
            },
        }
    }

    /// Whether allocation `system_id` recording `host` (`<namespace>/<name>`, `None` when
    /// nothing is recorded) is within this scope: recorded for a host of the namespace (scoped)
    /// or of a namespace with MaasHosts (cluster-wide; a namespace this cluster does not serve
    /// is another management cluster's, such as the source or target of a `clusterctl move`);
    /// or, with nothing recorded (the allocating gateway died before annotating it), the
    /// machine of a host the gateway sees.
    pub fn sees(&self, host: Option<&str>, system_id: &str) -> bool {
        match self {
            Self::ClusterWide {
                namespaces,
                system_ids,
            } => match host {
                Some(host) => host
                    .split_once('/')
                    .is_some_and(|(ns, _)| namespaces.contains(ns)),
                None => system_ids.contains(system_id),
            },
            Self::Namespace {
                namespace,
                system_ids,
            } => match host {
                Some(host) => host
                    .split_once('/')
                    .is_some_and(|(recorded, _)| recorded == namespace),
                None => system_ids.contains(system_id),
            },
        }
    }
}

/// Decides which of our allocations are claimed, and which orphans to release.
///
/// `ours` are the machines recognised as allocations of `installation` ([`crate::host::allocations`]), and
/// `identified` what their identities told about those that carry no annotations; `claimed` the
/// system ids of consumed hosts with `provisioning` set; `unclaimed` the hosts
/// (`<namespace>/<name>`) that ask for no deployment and recorded no allocation: an allocation
/// recorded for one of them was made for that host by another MaasHost object (the management
/// cluster it was moved from) and waits for its MaasMachine to claim it again, which the
/// host's status reports (`Unclaimed`); it is no orphan. `first_seen` the orphans seen in
/// earlier passes; `scope` what the gateway watches. Machines on their way back (Releasing,
/// Disk erasing) are left alone; a failed release (Releasing failed, Failed disk erasing) is an
/// orphan like any other and is released again, with the same erase flags. A machine outside
/// `scope` ([`SweepScope::sees`]) is never adopted nor released, whatever its state; one with
/// no host recorded yet may still be adopted by a claiming host of ours.
#[allow(clippy::too_many_arguments)] // The pure decision takes every input explicitly.
pub fn plan_sweep(
    ours: &[Machine],
    identified: &BTreeMap<String, Identified>,
    claimed: &BTreeSet<String>,
    unclaimed: &BTreeSet<String>,
    first_seen: &BTreeMap<String, Instant>,
    now: Instant,
    grace: Duration,
    installation: &str,
    scope: &SweepScope,
) -> SweepPlan {
    let mut plan = SweepPlan::default();
    for machine in ours {
        let id = &machine.system_id;
        let identity = identified.get(id);
        let recorded = machine
            .annotations()
            .get(ann::HOST)
            .map(String::as_str)
            .or_else(|| identity.and_then(|i| i.host.as_deref()));
        let visible = scope.sees(recorded, id);
        // Recorded for a host this gateway does not watch: never its own, claimed or not.
        let foreign = recorded.is_some() && !visible;
        if (claimed.contains(id) && !foreign) || recorded.is_some_and(|h| unclaimed.contains(h)) {
            plan.adopted.push(id.clone());
            continue;
        }
        // Already on its way back, nothing to do.
        if matches!(
            machine.status,
            MachineStatus::Ready | MachineStatus::Releasing | MachineStatus::DiskErasing
        ) {
            continue;
        }
        if !visible {
            plan.not_ours.push(NotOurs {
                system_id: id.clone(),
                recorded_host: recorded.map(ToOwned::to_owned),
            });
            continue;
        }
        let seen = first_seen.get(id).copied().unwrap_or(now);
        if now.saturating_duration_since(seen) >= grace {
            let comment = format!(
                "capmaas orphan sweep: no MaasHost claims this allocation of {installation}"
            );
            plan.release.push(OrphanRelease {
                system_id: id.clone(),
                request: ann::release_request(
                    machine.annotations(),
                    identity.and_then(|i| i.release.as_ref()),
                    comment,
                ),
            });
        } else {
            plan.pending.insert(id.clone(), seen);
        }
    }
    plan
}

/// The hosts (`<namespace>/<name>`) asking for no deployment and recording no allocation of
/// `installation`, that are claimed or were never claimed here: a host with the finalizer and
/// no claim was claimed here and let its allocation go (its record lost to a crash); it is not
/// waiting for it.
fn unclaimed_hosts(hosts: &[Arc<MaasHost>], installation: &str) -> BTreeSet<String> {
    hosts
        .iter()
        .filter(|h| h.spec.provisioning.is_none())
        .filter(|h| recorded_allocation(h, installation).is_none())
        .filter(|h| h.spec.consumer_ref.is_some() || !crate::host::finalizer::present(h))
        .map(|h| host_key(h))
        .collect()
}

fn host_key(host: &MaasHost) -> String {
    format!(
        "{}/{}",
        host.meta().namespace.as_deref().unwrap_or_default(),
        host.meta().name.as_deref().unwrap_or_default()
    )
}

fn claimed_system_ids(hosts: &[Arc<MaasHost>]) -> BTreeSet<String> {
    hosts
        .iter()
        .filter(|h| h.spec.consumer_ref.is_some() && h.spec.provisioning.is_some())
        .filter(|h| h.meta().deletion_timestamp.is_none())
        .map(|h| h.spec.system_id.clone())
        .collect()
}

/// What the sweeper carries from one pass to the next.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SweepMemory {
    /// First-seen times of orphans within the grace period.
    pub first_seen: BTreeMap<String, Instant>,
    /// Allocations left alone as not ours that were already reported.
    pub reported: BTreeSet<String>,
    /// System ids of the allocations of ours the last pass found: their bindings are kept
    /// until they are released, so an orphan whose host is gone stays recognisable.
    pub allocated: BTreeSet<String>,
}

/// The allocations of `plan` left alone as not ours that were not reported by an earlier pass
/// (`reported`), and the set to remember: a machine is reported once while it stays out of
/// scope, and again if it comes back after leaving.
pub fn to_report<'a>(
    plan: &'a SweepPlan,
    reported: &BTreeSet<String>,
) -> (Vec<&'a NotOurs>, BTreeSet<String>) {
    let new = plan
        .not_ours
        .iter()
        .filter(|n| !reported.contains(&n.system_id))
        .collect();
    let now = plan.not_ours.iter().map(|n| n.system_id.clone()).collect();
    (new, now)
}

/// One pass; returns what to remember for the next one.
pub async fn sweep_once(
    gw: &Gateway,
    memory: &SweepMemory,
) -> Result<SweepMemory, maas_api_client::MaasError> {
    let installation = &gw.settings.installation_id;
    // Lenient: an allocation that does not decode is skipped (its state is unknown, so it is
    // never released) and reported; the others are swept.
    let listing = gw.maas.list_allocated_lenient().await?.value;
    for skipped in &listing.skipped {
        warn!(%skipped, "orphan sweep skipped an allocation that does not decode");
    }
    let hosts = gw.hosts.state();
    let claimed = claimed_system_ids(&hosts);
    let (ours, identified) = recognise(gw, listing.machines, &hosts, &claimed).await?;
    let seen = hosts.iter().map(|h| {
        (
            h.meta().namespace.as_deref().unwrap_or_default(),
            h.spec.system_id.as_str(),
        )
    });
    let scope = SweepScope::new(gw.settings.namespace.as_deref(), seen);
    let plan = plan_sweep(
        &ours,
        &identified,
        &claimed,
        &unclaimed_hosts(&hosts, installation),
        &memory.first_seen,
        Instant::now(),
        gw.settings.orphan_grace_period,
        installation,
        &scope,
    );
    let (new, reported) = to_report(&plan, &memory.reported);
    for NotOurs {
        system_id,
        recorded_host,
    } in new
    {
        warn!(
            system_id,
            recorded_host = recorded_host.as_deref().unwrap_or("<none>"),
            scope = ?scope,
            "allocation of ours for a host this gateway does not have (another namespace, or another management cluster): left alone (neither adopted nor released)"
        );
    }
    if !plan.adopted.is_empty() {
        // Every pass finds them: not news.
        debug!(
            count = plan.adopted.len(),
            "allocations of ours matched to hosts"
        );
    }
    for OrphanRelease { system_id, request } in &plan.release {
        // A failure is retried on a later pass, from the same record: same erase flags.
        match gw.maas.release(system_id, request).await {
            Ok(m) => warn!(
                system_id,
                erase = request.erase,
                secure_erase = request.secure_erase,
                quick_erase = request.quick_erase,
                status = %m.value.status,
                "release of an orphaned allocation requested"
            ),
            Err(e) => warn!(system_id, error = %e, "cannot release orphaned allocation"),
        }
    }
    Ok(SweepMemory {
        first_seen: plan.pending,
        reported,
        allocated: ours.iter().map(|m| m.system_id.clone()).collect(),
    })
}

/// Runs the sweeper until `cancel`; the first pass waits for the host cache.
pub async fn run(gw: Arc<Gateway>, cancel: CancellationToken) {
    tokio::select! {
        () = cancel.cancelled() => return,
        _ = gw.hosts.wait_until_ready() => {}
    }
    let mut memory = SweepMemory::default();
    loop {
        match sweep_once(&gw, &memory).await {
            Ok(next) => memory = next,
            Err(e) => warn!(error = %e, "orphan sweep failed"),
        }
        match Bindings::of(&gw)
            .collect_stale(&gw.bindings.state(), &memory.allocated)
            .await
        {
            Ok(0) => {}
            Ok(deleted) => info!(deleted, "deleted host bindings whose host is gone"),
            Err(e) => warn!(error = %e, "host binding collection failed"),
        }
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(gw.settings.orphan_sweep_interval) => {}
        }
    }
}

#[cfg(test)]
#[path = "sweeper_tests.rs"]
mod tests;
