//! Choosing a MaasHost for a MaasMachine: a pure, deterministic ranking.
//!
//! Filters (all hard): not being deleted, not a composed VM (`crate::vm`), not consumed, not missing, not marked unhealthy, no
//! reboot request left on it,
//! `Available` in MAAS, not reserved (unexpired) for another owner, `resourcePool`,
//! failure domain (MAAS zone), `minCPU`, `minMemory` (MiB), `minDiskSize` (GiB), every tag,
//! `hostSelector`.
//!
//! Rank: reserved for this machine's owner (node reuse) first, then hosts in the requested
//! failure domain, then the smallest host that fits (CPU, then memory: big servers stay free
//! for big requests), then the name, so two controllers looking at the same hosts agree.
//! The claim itself is an optimistic lock; the ranked list lets the caller fall through to the
//! next host when another machine won the first.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use capmaas_api::common::HostReference;
use capmaas_api::common::{HostSelector, SelectorOperator};
use capmaas_api::conditions::reasons;
use capmaas_api::host::ProvisioningState;
use capmaas_api::keys;
use capmaas_api::{MaasHost, MaasHostStatus, MaasInventory, MaasMachine};
use kube::ResourceExt;

/// What the machine asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostRequest {
    /// Minimum CPU cores.
    pub min_cpu: i64,
    /// Minimum memory in MiB.
    pub min_memory_mib: i64,
    /// Minimum storage in GiB.
    pub min_disk_gib: Option<i64>,
    /// MAAS tags the host must all carry.
    pub tags: Vec<String>,
    /// MAAS resource pool.
    pub resource_pool: Option<String>,
    /// MAAS zone (hard constraint).
    pub failure_domain: Option<String>,
    /// Label selector on the host's labels.
    pub host_selector: Option<HostSelector>,
    /// UID of the owner (MachineDeployment or control plane) whose reservations this
    /// machine may take; `None` when the machine has no such owner.
    pub reuse_owner_uid: Option<String>,
    /// Hosts other machines are claiming right now (in this process), as [`host_key`]s;
    /// counted as claimed.
    pub busy_hosts: BTreeSet<String>,
    /// The machine's namespace: its own hosts rank before equal hosts of other namespaces.
    pub namespace: Option<String>,
}

/// `status.hostRef` of `mm` for `host` (the namespace written only when it is not the
/// machine's).
pub fn host_ref(mm: &MaasMachine, host: &MaasHost) -> HostReference {
    let host_ns = host.namespace().unwrap_or_default();
    let own = mm.metadata.namespace.as_deref().unwrap_or(host_ns.as_str());
    HostReference::new(host.name_any(), &host_ns, own)
}

/// `namespace/name` of a host: the key of [`HostRequest::busy_hosts`].
pub fn host_key(host: &MaasHost) -> String {
    format!(
        "{}/{}",
        host.namespace().unwrap_or_default(),
        host.name_any()
    )
}

/// Which hosts the machines of one namespace may claim: those of their own namespace, and
/// those imported by an inventory whose `spec.claimNamespaces` admits the namespace (the
/// host's inventory is its `maas.cluster.x-k8s.io/inventory` label). A hand-made host of
/// another namespace is never claimable from here.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Claimable {
    namespace: String,
    /// `(namespace, name)` of the admitting inventories of other namespaces.
    inventories: BTreeSet<(String, String)>,
}

impl Claimable {
    /// What `namespace` may claim, given every inventory.
    pub fn new<'i>(
        namespace: &str,
        inventories: impl IntoIterator<Item = &'i MaasInventory>,
    ) -> Self {
        let inventories = inventories
            .into_iter()
            .filter(|inv| inv.namespace().as_deref() != Some(namespace) && inv.admits(namespace))
            .filter_map(|inv| Some((inv.namespace()?, inv.name_any())))
            .collect();
        Self {
            namespace: namespace.to_owned(),
            inventories,
        }
    }

    /// Whether `host` may be claimed from the namespace.
    pub fn admits_host(&self, host: &MaasHost) -> bool {
        let Some(host_ns) = host.metadata.namespace.as_deref() else {
            return false;
        };
        host_ns == self.namespace
            || host
                .labels()
                .get(keys::LABEL_HOST_INVENTORY)
                .is_some_and(|inv| {
                    self.inventories
                        .contains(&(host_ns.to_owned(), inv.clone()))
                })
    }

    /// Whether hosts of other namespaces may be claimed too.
    pub fn reaches_other_namespaces(&self) -> bool {
        !self.inventories.is_empty()
    }
}

/// Why a host was not a candidate, in the order the filters run (the first failing filter
/// is counted). The order also makes the "no host" message list hard facts first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Exclusion {
    /// The host object is being deleted.
    Deleting,
    /// The MaasHost of a VM composed on a VM host (label `composed-on` or `status.vmHostId`):
    /// only the LXD machine it was composed for claims it ([`crate::vm`]).
    ComposedVm,
    /// Another machine claimed it.
    Consumed,
    /// The MAAS machine is gone.
    Missing,
    /// Remediation gave up on it.
    Unhealthy,
    /// A reboot request is left on it (a remediation of its previous machine): the server
    /// may be powered off under its next one.
    RebootRequested,
    /// MAAS does not report it ready for allocation.
    NotAvailable,
    /// Reserved for another owner's next machine (node reuse).
    ReservedForOther,
    /// Other resource pool.
    ResourcePool,
    /// Other zone.
    FailureDomain,
    /// Too few CPU cores.
    Cpu,
    /// Too little memory.
    Memory,
    /// Too little storage.
    Disk,
    /// A requested tag is missing.
    Tags,
    /// The labels do not match `hostSelector`.
    Selector,
}

impl Exclusion {
    /// Whether the exclusion is about the request (a constraint) rather than the host's state.
    pub fn is_constraint(self) -> bool {
        self >= Self::ResourcePool
    }
}

/// The outcome of [`rank_hosts`].
#[derive(Debug, Clone, PartialEq)]
pub struct Ranking<'h> {
    /// Candidates, best first.
    pub candidates: Vec<&'h MaasHost>,
    /// How many hosts each filter removed.
    pub excluded: BTreeMap<Exclusion, usize>,
}

impl Ranking<'_> {
    /// The best host, if any.
    pub fn best(&self) -> Option<&MaasHost> {
        self.candidates.first().copied()
    }

    /// Number of hosts looked at.
    pub fn considered(&self) -> usize {
        self.candidates.len() + self.excluded.values().sum::<usize>()
    }
}

/// Filters and ranks `hosts` for `request` at time `now`.
pub fn rank_hosts<'h>(
    request: &HostRequest,
    hosts: impl IntoIterator<Item = &'h MaasHost>,
    now: jiff::Timestamp,
) -> Ranking<'h> {
    let mut excluded = BTreeMap::new();
    let mut candidates = Vec::new();
    for host in hosts {
        match exclusion(request, host, now) {
            Some(reason) => *excluded.entry(reason).or_insert(0) += 1,
            None => candidates.push(host),
        }
    }
    candidates.sort_by_cached_key(|h| {
        let status = h.status.as_ref();
        (
            Reverse(reserved_for(h, request.reuse_owner_uid.as_deref(), now)),
            Reverse(
                request
                    .failure_domain
                    .as_deref()
                    .is_some_and(|fd| status.and_then(|s| s.zone.as_deref()) == Some(fd)),
            ),
            // Existing users' hosts first: an installation-wide inventory only fills in.
            Reverse(request.namespace.is_some() && h.metadata.namespace == request.namespace),
            status.and_then(|s| s.cpu_count).unwrap_or(0),
            status.and_then(|s| s.memory_mib).unwrap_or(0),
            h.name_any(),
        )
    });
    Ranking {
        candidates,
        excluded,
    }
}

/// The first filter `host` fails, or `None` if it is a candidate.
pub fn exclusion(
    request: &HostRequest,
    host: &MaasHost,
    now: jiff::Timestamp,
) -> Option<Exclusion> {
    state_exclusion(request, host, now).or_else(|| constraint_exclusion(request, host))
}

/// The first filter on the host's current state (claimed, missing, not `Available`, reserved,
/// ...) that `host` fails: the exclusions before [`Exclusion::ResourcePool`].
pub fn state_exclusion(
    request: &HostRequest,
    host: &MaasHost,
    now: jiff::Timestamp,
) -> Option<Exclusion> {
    let status = host.status.clone().unwrap_or_default();
    if host.metadata.deletion_timestamp.is_some() {
        return Some(Exclusion::Deleting);
    }
    if crate::vm::is_composed_vm(host) {
        return Some(Exclusion::ComposedVm);
    }
    if host.spec.consumer_ref.is_some() || request.busy_hosts.contains(&host_key(host)) {
        return Some(Exclusion::Consumed);
    }
    if status.missing == Some(true) || status.provisioning_state == Some(ProvisioningState::Missing)
    {
        return Some(Exclusion::Missing);
    }
    if host
        .annotations()
        .contains_key(keys::ANNOTATION_HOST_UNHEALTHY)
    {
        return Some(Exclusion::Unhealthy);
    }
    if host
        .annotations()
        .keys()
        .any(|k| keys::is_reboot_annotation(k))
    {
        return Some(Exclusion::RebootRequested);
    }
    if status.provisioning_state != Some(ProvisioningState::Available) {
        return Some(Exclusion::NotAvailable);
    }
    if reservation_active(host, now) && !reserved_for(host, request.reuse_owner_uid.as_deref(), now)
    {
        return Some(Exclusion::ReservedForOther);
    }
    None
}

/// The first constraint of the request (pool, zone, CPU, memory, disk, tags, selector) that
/// `host` does not meet, whatever its state ([`Exclusion::is_constraint`]).
pub fn constraint_exclusion(request: &HostRequest, host: &MaasHost) -> Option<Exclusion> {
    let unreported = MaasHostStatus::default();
    let status = host.status.as_ref().unwrap_or(&unreported);
    if let Some(pool) = &request.resource_pool
        && status.pool.as_ref() != Some(pool)
    {
        return Some(Exclusion::ResourcePool);
    }
    if let Some(zone) = &request.failure_domain
        && status.zone.as_ref() != Some(zone)
    {
        return Some(Exclusion::FailureDomain);
    }
    if i64::from(status.cpu_count.unwrap_or(0)) < request.min_cpu {
        return Some(Exclusion::Cpu);
    }
    if status.memory_mib.unwrap_or(0) < request.min_memory_mib {
        return Some(Exclusion::Memory);
    }
    if let Some(min_disk) = request.min_disk_gib
        && status.storage_gib.unwrap_or(0) < min_disk
    {
        return Some(Exclusion::Disk);
    }
    let host_tags = status.tags.as_deref().unwrap_or_default();
    if !request.tags.iter().all(|t| host_tags.contains(t)) {
        return Some(Exclusion::Tags);
    }
    if let Some(selector) = &request.host_selector
        && !selector_matches(selector, host.labels())
    {
        return Some(Exclusion::Selector);
    }
    None
}

/// Whether the host carries a reservation that has not expired at `now`.
pub fn reservation_active(host: &MaasHost, now: jiff::Timestamp) -> bool {
    host.spec
        .reservation
        .as_ref()
        .is_some_and(|r| r.expires_at.0 > now)
}

/// Whether the host carries an unexpired reservation for the owner with UID `owner_uid`.
pub fn reserved_for(host: &MaasHost, owner_uid: Option<&str>, now: jiff::Timestamp) -> bool {
    let Some(owner_uid) = owner_uid else {
        return false;
    };
    reservation_active(host, now)
        && host
            .spec
            .reservation
            .as_ref()
            .is_some_and(|r| r.owner.uid == owner_uid)
}

/// Kubernetes label-selector semantics (`NotIn` and `DoesNotExist` match absent labels).
pub fn selector_matches(selector: &HostSelector, labels: &BTreeMap<String, String>) -> bool {
    let labels_match = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let expressions_match = selector.match_expressions.iter().flatten().all(|req| {
        let value = labels.get(&req.key);
        let values = req.values.as_deref().unwrap_or_default();
        match req.operator {
            SelectorOperator::In => value.is_some_and(|v| values.contains(v)),
            SelectorOperator::NotIn => value.is_none_or(|v| !values.contains(v)),
            SelectorOperator::Exists => value.is_some(),
            SelectorOperator::DoesNotExist => value.is_none(),
        }
    });
    labels_match && expressions_match
}

/// Condition reason and message when no host is available: names the constraints that
/// removed hosts, so a person sees what to change.
pub fn no_host_explanation(request: &HostRequest, ranking: &Ranking<'_>) -> (&'static str, String) {
    let considered = ranking.considered();
    // Hosts that would fit if only the zone were different: the zone is out of capacity.
    let fd_only = ranking
        .excluded
        .get(&Exclusion::FailureDomain)
        .copied()
        .unwrap_or(0);
    let reason = if fd_only > 0 {
        reasons::NO_CAPACITY_IN_FAILURE_DOMAIN
    } else {
        reasons::NO_HOST_AVAILABLE
    };
    let mut message = if considered == 0 {
        "no MaasHost this namespace may claim (none in the namespace, and no MaasInventory's \
         spec.claimNamespaces admits it)"
            .to_owned()
    } else {
        format!("no free MaasHost fits among {considered}:")
    };
    for (exclusion, count) in &ranking.excluded {
        let _ = write!(message, " {count} {};", describe(*exclusion, request));
    }
    if message.ends_with(';') {
        message.pop();
    }
    (reason, message)
}

/// How a "no host" message names the hosts `exclusion` kept out, e.g. `below minCPU 32`.
pub fn describe(exclusion: Exclusion, request: &HostRequest) -> String {
    match exclusion {
        Exclusion::Deleting => "being deleted".into(),
        Exclusion::ComposedVm => "composed VMs of LXD machines".into(),
        Exclusion::Consumed => "claimed by other machines".into(),
        Exclusion::Missing => "missing from MAAS".into(),
        Exclusion::Unhealthy => "marked unhealthy".into(),
        Exclusion::RebootRequested => "with a reboot request left on them".into(),
        Exclusion::NotAvailable => "not Available in MAAS".into(),
        Exclusion::ReservedForOther => "reserved for another owner (node reuse)".into(),
        Exclusion::ResourcePool => format!(
            "outside resourcePool {}",
            request.resource_pool.as_deref().unwrap_or_default()
        ),
        Exclusion::FailureDomain => format!(
            "outside failureDomain {}",
            request.failure_domain.as_deref().unwrap_or_default()
        ),
        Exclusion::Cpu => format!("below minCPU {}", request.min_cpu),
        Exclusion::Memory => format!("below minMemory {} MiB", request.min_memory_mib),
        Exclusion::Disk => format!(
            "below minDiskSize {} GiB",
            request.min_disk_gib.unwrap_or_default()
        ),
        Exclusion::Tags => format!("without tags [{}]", request.tags.join(", ")),
        Exclusion::Selector => "not matching hostSelector".into(),
    }
}

#[cfg(test)]
#[path = "choose_tests.rs"]
mod tests;
