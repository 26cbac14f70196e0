//! The provisioning state machine of a MaasHost: given what the host asks for and what MAAS
//! shows, the next MAAS operation. Pure; the controller executes the step and asks again.
//!
//! Safety rules encoded here:
//! - nothing is done to a machine that is not ours, except allocating a Ready machine for a
//!   consumed host that asks for it;
//! - deploy only from Allocated; power on only a machine whose power state reads `off`;
//!   `error`/`unknown` power states are reported, never acted upon; a deployed machine found
//!   off is powered on again unless the request says `keepPoweredOn: false`;
//! - a reboot request, once started, is carried through exactly once: off, then on when no
//!   request remains;
//! - a failed deployment is retried (release, allocate, deploy) a bounded number of times,
//!   then left for the consumer to decide;
//! - the static addresses the gateway linked are unlinked once MAAS has released the machine
//!   and no deployment is wanted (not while a deployment is retried: the next one needs them),
//!   before the host is reported available.

use std::collections::BTreeMap;
use std::time::Duration;

use capmaas_api::MaasHost;
use capmaas_api::common::ReleasePolicy;
use capmaas_api::host::ProvisioningState;
use capmaas_runtime::trace_context::Relation;
use maas_api_client::{Machine, MachineStatus, PowerState};

use super::annotations::{
    HOST, INSTALLATION, RELEASE_ERASE, RELEASE_FORCE, RebootState, StaticAddresses, release_values,
};

/// Poll delay for a machine MAAS is changing (deploying, releasing, powering).
pub const POLL: Duration = Duration::from_secs(2);
/// A power-on is repeated only if the machine still reads `off` this long after it was sent
/// (repeating sooner could count as a second power cycle).
pub const POWER_ON_RETRY_AFTER: Duration = Duration::from_secs(60);

/// What the MaasHost asks for and what maas-client recorded on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostFacts {
    /// `spec.consumerRef` is set.
    pub consumed: bool,
    /// `spec.provisioning` is set.
    pub provisioning: bool,
    /// `status.allocation` records an allocation by this installation for the current consumer.
    pub allocation_recorded: bool,
    /// `status.allocation` names a different consumer than `spec.consumerRef`.
    pub allocated_for_other_consumer: bool,
    /// `status.allocation` records an allocation by this installation, for any consumer: this
    /// host object allocated the machine.
    pub allocation_known: bool,
    /// At least one `reboot.maas.cluster.x-k8s.io/*` annotation exists.
    pub reboot_requested: bool,
    /// Reboot progress.
    pub reboot: RebootState,
    /// Failed deployments counted so far.
    pub deploy_failures: u32,
    /// Retries allowed after a failed deployment.
    pub max_deploy_retries: u32,
    /// The hostname the host asks for.
    pub hostname: Option<String>,
    /// The MAAS hostname before the gateway renamed the machine (`maas.cluster.x-k8s.io/original-hostname`).
    pub original_hostname: Option<String>,
    /// How long the host has reported its machine `Unclaimed` (an allocation of this
    /// installation that no consumer here claims), when it does.
    pub unclaimed_for: Option<Duration>,
    /// `--release-unclaimed-after`: an unclaimed allocation is released after this long, if set.
    pub release_unclaimed_after: Option<Duration>,
    /// The workload annotations naming the host, its consumer and the release policy: sent
    /// after the deploy when [`Self::annotate`] is on, and kept current on a machine that carries
    /// them (the previous version annotated every allocation).
    pub annotations: BTreeMap<String, String>,
    /// `--maas-workload-annotations`: allocations get workload annotations, for people reading
    /// MAAS. Nothing depends on them: the allocation's identity is its `agent_name`.
    pub annotate: bool,
    /// Calls for machines wait in the MAAS queue now: workload annotations, which are for
    /// people, wait until it is empty (the host reports meanwhile and looks again).
    pub maas_busy: bool,
    /// The host carries the MaasHost finalizer: it was claimed here (machine-controller puts
    /// the finalizer on with the claim, the gateway before anything is asked of MAAS), so an allocation of ours for it that its status does
    /// not record was made by this host object (the record lost to a crash), not by a host of
    /// the same name in the cluster it was moved from (imported here without the finalizer).
    pub finalizer: bool,
    /// MAAS shows the machine allocated under an identity of this host. Looked up only where
    /// nothing else tells ([`identity_lookup_needed`]); `false` when not looked up.
    pub identified: bool,
    /// The release policy the recorded allocation's identity carries (`status.allocation`);
    /// `None` for none, or the previous version's.
    pub recorded_release: Option<ReleasePolicy>,
    /// The static addresses recorded as linked on the machine (`None`: no record).
    pub static_addresses: Option<StaticAddresses>,
    /// A deployed machine found powered off is powered on again (`spec.provisioning.keepPoweredOn`
    /// absent or `true`).
    pub keep_powered_on: bool,
    /// The machine is an LXD VM host and these machines (system ids) are composed on it: MAAS
    /// releases a VM host only with `force`, which deletes them, so a release waits until they
    /// are gone ([`Wait::VmHostInUse`]).
    pub vm_host_guests: Vec<String>,
}

impl HostFacts {
    /// A deployment is requested.
    pub fn wants_deploy(&self) -> bool {
        self.consumed && self.provisioning
    }
}

/// Why nothing is done now; also the `Provisioned` condition reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Not requested, machine free.
    Idle,
    /// MAAS is deploying.
    Deploying,
    /// MAAS is releasing or erasing.
    Releasing,
    /// Deployed and running as asked.
    Deployed,
    /// Held off by a reboot request.
    RebootHeld,
    /// Waiting for the power state to follow a power request.
    PowerTransition,
    /// Power state `error`/`unknown`: reported, never acted upon.
    PowerUnknown,
    /// Deployment failed and the retries are used up.
    DeployFailedFinal,
    /// MAAS reports the machine broken.
    Broken,
    /// Release or erase failed in MAAS.
    ReleaseFailed,
    /// The machine is held by someone else.
    HeldByOther,
    /// Allocated to this installation for this host's namespace and name, but not by this
    /// MaasHost object (the management cluster it was moved from, or a host deleted and imported
    /// again), and no deployment is asked for here yet: kept as it is for its MaasMachine to
    /// claim again by system id and ask for the deployment it has.
    Unclaimed,
    /// MAAS state that needs a human (commissioning, testing, rescue, new...).
    Unavailable,
    /// The machine vanished from MAAS.
    Missing,
    /// The request cannot be carried out as written (network data MAAS cannot apply, a missing
    /// Secret key...); the message is in the `Provisioned` condition.
    InvalidSpec,
    /// A release is due but the machine is a VM host with machines composed on it: nothing
    /// running there is deleted unannounced; the release waits until they are gone.
    VmHostInUse,
}

/// The next thing to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Nothing to do in MAAS now; report and look again (after `poll` when MAAS is moving).
    Wait {
        /// Why.
        why: Wait,
        /// Poll again after this long; `None` = wait for a change.
        poll: Option<Duration>,
    },
    /// Allocate the exact machine, or adopt it if it is already allocated with our agent_name.
    Allocate,
    /// Set the workload annotations naming the host and its consumer.
    SetAnnotations,
    /// Rename the machine.
    SetHostname(String),
    /// Record the machine's MAAS hostname before renaming it (`maas.cluster.x-k8s.io/original-hostname`).
    RecordOriginalHostname(String),
    /// Drop the record once the original hostname is back.
    ForgetOriginalHostname,
    /// Deploy the requested image.
    Deploy,
    /// Release (erase per policy).
    Release,
    /// Count a failed deployment, then release to try again.
    RetryDeployment,
    /// Record that a reboot started, then power off if on.
    BeginReboot,
    /// Power off (reboot in progress, machine still on).
    PowerOff,
    /// Record the power-on, then power on (machine reads `off`).
    PowerOn,
    /// A deployed machine reads `off` outside any reboot: power it on again, as a reboot's
    /// second half (recorded first, so it is sent once).
    RestorePower,
    /// The machine is back on: forget the reboot.
    FinishReboot,
    /// Forget the recorded failures (after success or release).
    ResetFailures,
    /// The machine is released and no deployment is wanted: unlink the recorded static
    /// addresses from its interfaces (fresh read), then forget the record.
    UnlinkStaticAddresses,
    /// The machine is gone from MAAS, its links with it: forget the record.
    ForgetStaticAddresses,
}

fn wait(why: Wait, poll: Option<Duration>) -> Step {
    Step::Wait { why, poll }
}

/// Whether MAAS shows this machine as one this host holds: recorded in the host status for its
/// consumer, found under one of this host's identities, or carrying our installation annotation
/// and this host's name (an allocation annotated for another host of the same installation is
/// that host's).
pub(super) fn held_by_us(host: &HostFacts, machine: &Machine) -> bool {
    owned(machine) && (host.allocation_recorded || host.identified || annotated(host, machine))
}

fn owned(machine: &Machine) -> bool {
    !matches!(
        machine.status,
        MachineStatus::Ready | MachineStatus::New | MachineStatus::Commissioning
    )
}

fn annotated(host: &HostFacts, machine: &Machine) -> bool {
    let current = machine.annotations();
    [INSTALLATION, HOST].iter().all(|key| {
        host.annotations
            .get(*key)
            .is_some_and(|ours| current.get(*key) == Some(ours))
    })
}

/// Whether the observation must ask MAAS if the machine is allocated under this host's identity
/// ([`HostFacts::identified`]): the host is letting go of a machine it holds that neither its
/// status (for its current consumer) nor annotations show as ours. The deployment path needs no
/// such call: its Allocate step looks the allocation up itself.
pub fn identity_lookup_needed(host: &HostFacts, machine: &Machine) -> bool {
    let letting_go = !host.wants_deploy() || host.allocated_for_other_consumer;
    letting_go
        && machine.owner.is_some()
        && owned(machine)
        && !matches!(
            machine.status,
            MachineStatus::Releasing | MachineStatus::DiskErasing
        )
        && !host.allocation_recorded
        && !annotated(host, machine)
}

/// The next step for a host.
pub fn next_step(host: &HostFacts, machine: Option<&Machine>) -> Step {
    let Some(machine) = machine else {
        if host.static_addresses.is_some() {
            return Step::ForgetStaticAddresses;
        }
        return wait(Wait::Missing, None);
    };
    let ours = held_by_us(host, machine);
    // A reboot in progress is finished before anything else happens to the machine.
    if ours && host.reboot != RebootState::Idle && machine.status == MachineStatus::Deployed {
        return reboot_step(host, machine);
    }
    let step = if host.wants_deploy() && !host.allocated_for_other_consumer {
        deploy_path(host, machine, ours)
    } else {
        release_path(host, machine, ours)
    };
    hold_release_of_used_vm_host(host, step)
}

/// A release of a VM host that runs composed machines waits (looking again every
/// [`VM_HOST_IN_USE_POLL`]): releasing it would need `force`, and MAAS would delete them.
fn hold_release_of_used_vm_host(host: &HostFacts, step: Step) -> Step {
    if step == Step::Release && !host.vm_host_guests.is_empty() {
        wait(Wait::VmHostInUse, Some(VM_HOST_IN_USE_POLL))
    } else {
        step
    }
}

/// How often a release held by composed machines looks again (the inventory sync refreshes
/// the VM host's machines anyway).
pub const VM_HOST_IN_USE_POLL: Duration = Duration::from_secs(30);

fn deploy_path(host: &HostFacts, machine: &Machine, ours: bool) -> Step {
    match machine.status {
        MachineStatus::Ready => Step::Allocate,
        // Allocated with our agent_name but not recorded (crash after allocate, or allocated by
        // the MaasHost of the management cluster this one was moved from): adopt, which records
        // it, so that letting it go later releases it.
        MachineStatus::Allocated | MachineStatus::Deploying | MachineStatus::Deployed
            if !ours || !host.allocation_recorded =>
        {
            Step::Allocate
        }
        MachineStatus::Allocated => {
            if let Some(name) = host.hostname.as_ref().filter(|h| **h != machine.hostname) {
                if host.original_hostname.is_none() {
                    Step::RecordOriginalHostname(machine.hostname.clone())
                } else {
                    Step::SetHostname(name.clone())
                }
            } else {
                Step::Deploy
            }
        }
        // The annotations are for people: they follow the deploy, never delay it.
        MachineStatus::Deploying if annotations_due(host, machine) && !host.maas_busy => {
            Step::SetAnnotations
        }
        MachineStatus::Deploying => wait(Wait::Deploying, Some(POLL)),
        MachineStatus::Deployed => deployed(host, machine),
        MachineStatus::FailedDeployment if ours => {
            if host.deploy_failures < host.max_deploy_retries {
                Step::RetryDeployment
            } else {
                wait(Wait::DeployFailedFinal, None)
            }
        }
        MachineStatus::Releasing | MachineStatus::DiskErasing => wait(Wait::Releasing, Some(POLL)),
        MachineStatus::FailedReleasing | MachineStatus::FailedDiskErasing => {
            wait(Wait::ReleaseFailed, None)
        }
        MachineStatus::Broken => wait(Wait::Broken, None),
        _ if !ours && machine.owner.is_some() => wait(Wait::HeldByOther, None),
        _ => wait(Wait::Unavailable, None),
    }
}

fn deployed(host: &HostFacts, machine: &Machine) -> Step {
    if host.reboot_requested {
        return Step::BeginReboot;
    }
    if host.deploy_failures > 0 {
        return Step::ResetFailures;
    }
    // Only a fresh `off` counts: `error`/`unknown` readings are reported, never acted upon.
    if host.keep_powered_on && machine.power_state == PowerState::Off {
        return Step::RestorePower;
    }
    // The release policy was edited after the deployment on a machine whose annotations record
    // one: record the edited one, so the orphan sweep, which reads the machine, uses it too.
    if annotations_due(host, machine) || release_policy_stale(host, machine) {
        // Reported now, sent once the MAAS queue is empty.
        if host.maas_busy {
            return wait(Wait::Deployed, Some(POLL));
        }
        return Step::SetAnnotations;
    }
    wait(Wait::Deployed, None)
}

/// The machine is to be annotated and carries none of our annotations yet. Other drift (an
/// annotation edited in MAAS) costs no call per resync.
fn annotations_due(host: &HostFacts, machine: &Machine) -> bool {
    host.annotate && !machine.annotations().contains_key(INSTALLATION)
}

/// The release policy recorded for the machine (its annotations, else its identity) is not
/// the one asked for now: the policy was edited after the allocation. MAAS cannot change an
/// allocation's `agent_name`, so the edited policy goes into the annotations (one call per
/// edit), which the release and the orphan sweep read before the identity.
fn release_policy_stale(host: &HostFacts, machine: &Machine) -> bool {
    let current = machine.annotations();
    let asked = |key: &str| host.annotations.get(key).map(String::as_str);
    let recorded = if current.contains_key(RELEASE_ERASE) {
        (
            current.get(RELEASE_ERASE).cloned(),
            current.get(RELEASE_FORCE).cloned(),
        )
    } else if let Some(policy) = &host.recorded_release {
        let (erase, force) = release_values(policy);
        (Some(erase), Some(force))
    } else {
        return false;
    };
    recorded.0.as_deref() != asked(RELEASE_ERASE) || recorded.1.as_deref() != asked(RELEASE_FORCE)
}

fn reboot_step(host: &HostFacts, machine: &Machine) -> Step {
    match (host.reboot, &machine.power_state) {
        (_, PowerState::Error | PowerState::Unknown | PowerState::Other(_)) => {
            wait(Wait::PowerUnknown, Some(POLL))
        }
        (RebootState::PoweringOff, PowerState::On) => Step::PowerOff,
        (RebootState::PoweringOff, PowerState::Off) if host.reboot_requested => {
            wait(Wait::RebootHeld, None)
        }
        (RebootState::PoweringOff, PowerState::Off) => Step::PowerOn,
        (RebootState::PoweringOn { .. }, PowerState::On) => Step::FinishReboot,
        (RebootState::PoweringOn { since }, PowerState::Off) if since >= POWER_ON_RETRY_AFTER => {
            Step::PowerOn
        }
        (RebootState::PoweringOn { .. } | RebootState::Idle, PowerState::Off) => {
            wait(Wait::PowerTransition, Some(POLL))
        }
        (RebootState::Idle, PowerState::On) => wait(Wait::Deployed, None),
    }
}

fn release_path(host: &HostFacts, machine: &Machine, ours: bool) -> Step {
    match machine.status {
        MachineStatus::Releasing | MachineStatus::DiskErasing => wait(Wait::Releasing, Some(POLL)),
        MachineStatus::Ready if host.deploy_failures > 0 && !host.wants_deploy() => {
            Step::ResetFailures
        }
        // Released: MAAS keeps static links, and the address is free again only once this
        // machine cannot answer on it. A host that wants a deployment (a retry, a consumer
        // change) keeps them: applying its network data settles the record.
        MachineStatus::Ready if host.static_addresses.is_some() && !host.wants_deploy() => {
            Step::UnlinkStaticAddresses
        }
        // MAAS keeps a released machine's hostname: give the requested one back.
        MachineStatus::Ready if !host.wants_deploy() && host.original_hostname.is_some() => {
            match host.original_hostname.as_ref() {
                Some(original) if *original != machine.hostname => {
                    Step::SetHostname(original.clone())
                }
                _ => Step::ForgetOriginalHostname,
            }
        }
        MachineStatus::Ready => wait(Wait::Idle, None),
        MachineStatus::Allocated
        | MachineStatus::Deploying
        | MachineStatus::Deployed
        | MachineStatus::FailedDeployment
        | MachineStatus::Broken
        | MachineStatus::FailedReleasing
        | MachineStatus::FailedDiskErasing
            if ours =>
        {
            // Never release what this host object did not allocate: a consumer that claimed
            // it again has not asked for its deployment yet, or none has claimed it yet.
            // A host claimed here that nobody claims any more and whose record was lost let
            // its allocation go.
            if host.allocation_known || (host.finalizer && !host.consumed) {
                Step::Release
            } else {
                unclaimed(host)
            }
        }
        MachineStatus::Broken => wait(Wait::Broken, None),
        _ if machine.owner.is_some() => wait(Wait::HeldByOther, None),
        _ => wait(Wait::Unavailable, None),
    }
}

/// An allocation of ours that no consumer here claims: kept, unless the operator opted in to
/// releasing those left unclaimed longer than `release_unclaimed_after`. A host that is claimed
/// (its consumer has not asked for the deployment yet) is never released by that rule.
fn unclaimed(host: &HostFacts) -> Step {
    let Some(after) = host.release_unclaimed_after.filter(|_| !host.consumed) else {
        return wait(Wait::Unclaimed, None);
    };
    // The first report starts the clock; until it is written the host waits a full period.
    let waited = host.unclaimed_for.unwrap_or_default();
    match after.checked_sub(waited) {
        Some(left) if !left.is_zero() => wait(Wait::Unclaimed, Some(left)),
        _ => Step::Release,
    }
}

/// Whether a reconcile of `host` is part of the trace its annotation names (recorded by
/// machine-controller with its last request: the claim, the deployment, the release): while
/// that request is being carried out. A settled host's reconciles (resyncs, MAAS-side changes)
/// start traces of their own, linked to it.
pub fn trace_relation(host: &MaasHost) -> Relation {
    let state = host.status.as_ref().and_then(|s| s.provisioning_state);
    let claimed = host.spec.consumer_ref.is_some();
    let in_flight = matches!(
        state,
        Some(
            ProvisioningState::Allocating
                | ProvisioningState::Allocated
                | ProvisioningState::Deploying
                | ProvisioningState::Releasing
        )
    );
    let waiting = match state {
        // Claimed but not allocated yet, or released but not yet handed back.
        None | Some(ProvisioningState::Available) => claimed,
        Some(ProvisioningState::Deployed) => !claimed,
        _ => false,
    };
    if in_flight || waiting {
        Relation::Child
    } else {
        Relation::Link
    }
}

/// A provisioning or a release starts only while the MAAS queue (calls for one machine waiting
/// for the rate limit) holds less than this much work: [`starts_later`].
pub const NEW_WORK_BACKLOG: Duration = Duration::from_secs(1);

/// When `next` would start a provisioning or a release while the MAAS queue holds more than
/// [`NEW_WORK_BACKLOG`] of work: look again when about half of it has gone, without a step or a
/// status write.
///
/// A provisioning's calls (allocate, deploy) each wait their turn in that queue, and its
/// reconcile holds one of the controller's slots meanwhile; so does a release. Started in a
/// burst (a MachineDeployment scaled up or deleted by hundreds), they would take every slot,
/// and a host whose deployment has just finished would wait behind them to report it (seconds,
/// where its reconcile needs no MAAS call), while the calls cannot go faster than the rate limit
/// anyway. The queue stays deep enough to use the whole budget, and allocations and releases
/// share it in the order they come.
///
/// Workload annotations, which are for people, are not even decided while any call waits
/// ([`HostFacts::maas_busy`]): the host reports and looks again, and its slot is free.
pub fn starts_later(next: &Step, backlog: Duration) -> Option<Duration> {
    match next {
        Step::Allocate | Step::Release | Step::RetryDeployment => {
            (backlog > NEW_WORK_BACKLOG).then(|| backlog / 2)
        }
        _ => None,
    }
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
