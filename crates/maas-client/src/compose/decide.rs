//! The next step of each VM of a VM host, decided without I/O.
//!
//! Order of the writes for a `spec.vms` entry: the record `{hostname}` in
//! `status.composedVMs` first (the intent, before MAAS is asked), then a look for the hostname
//! in MAAS and the compose only when MAAS has none, then the VM's MaasHost, then the record's
//! system id. Each step is decided again from what is observed, so a lost answer or a restart
//! between two steps repeats a look, never a compose: MAAS refuses a second VM of the same
//! hostname, and the look finds the first.
//!
//! A record whose entry left `spec.vms`: a VM MAAS no longer has, or has and nobody allocated,
//! is deleted (in MAAS, then its MaasHost if no consumer holds it) and the record dropped; an
//! allocated VM, or a MaasHost still claimed, is waited for (its release deletes the VM).

use std::time::Duration;

use capmaas_api::host::MaasHostStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use maas_api_client::{MaasError, Machine, MachineStatus};

use crate::inventory::decide::ObjectVersion;

pub use capmaas_api::conditions::VMS_COMPOSED;
/// `VMsComposed` reason: every entry has its VM and MaasHost.
pub const REASON_COMPOSED: &str = "Composed";
/// `VMsComposed` reason: some entries are being composed.
pub const REASON_COMPOSING: &str = "Composing";
/// `VMsComposed` reason: MAAS refused a composition (too few resources left on the VM host,
/// or a request it does not take).
pub const REASON_COMPOSE_REFUSED: &str = "ComposeRefused";
pub use crate::host::vm_host::REASON_VM_HOSTS_UNSUPPORTED;
/// `VMsComposed` reason: the MAAS key is not an admin's (compose is admin only).
pub const REASON_COMPOSITION_FORBIDDEN: &str = "VMCompositionForbidden";
/// `VMsComposed` reason: the VM host MaasHost shows no `status.vmHost` yet.
pub const REASON_NO_VM_HOST: &str = "VMHostNotRegistered";
/// A refused composition is asked again after this long, or at once after a spec change.
pub const REFUSAL_RETRY: Duration = Duration::from_secs(60);

/// What MAAS shows of a VM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// Not asked: nothing to learn (the VM and its MaasHost are settled).
    NotLooked,
    /// MAAS has no such machine.
    Absent,
    /// MAAS has it.
    Present {
        /// Its system id.
        system_id: String,
        /// Allocated to someone (or being deployed, deployed, released).
        allocated: bool,
    },
}

impl Lookup {
    /// What `machine` (or its absence) says.
    pub fn of(machine: Option<&Machine>) -> Self {
        machine.map_or(Self::Absent, |m| Self::Present {
            system_id: m.system_id.clone(),
            allocated: allocated(m),
        })
    }
}

/// Whether MAAS shows `machine` as someone's: an owner, or a state only an allocation reaches.
pub fn allocated(machine: &Machine) -> bool {
    machine.owner.is_some()
        || matches!(
            machine.status,
            MachineStatus::Allocated
                | MachineStatus::Deploying
                | MachineStatus::Deployed
                | MachineStatus::Releasing
                | MachineStatus::DiskErasing
        )
}

/// The MaasHost of a VM as the decision sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmHostObject {
    /// Object name (the system id).
    pub name: String,
    /// `spec.consumerRef` is set.
    pub consumed: bool,
    /// The object seen: the preconditions of a delete.
    pub version: ObjectVersion,
}

/// The `status.composedVMs` record of a VM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// None.
    Absent,
    /// Recorded without a system id: the composition is (or was) in flight.
    Pending,
    /// Recorded with the VM's system id.
    Composed(String),
}

impl Record {
    /// The record of `system_id` (`None`: pending).
    pub fn of(system_id: Option<String>) -> Self {
        system_id.map_or(Self::Pending, Self::Composed)
    }

    /// The recorded system id.
    pub fn system_id(&self) -> Option<&str> {
        match self {
            Self::Composed(id) => Some(id),
            Self::Absent | Self::Pending => None,
        }
    }
}

/// Everything known of one VM (one hostname) of a VM host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmFacts {
    /// The hostname (the `spec.vms` key).
    pub hostname: String,
    /// `spec.vms` has an entry for it.
    pub wanted: bool,
    /// Its `status.composedVMs` record.
    pub record: Record,
    /// What MAAS shows.
    pub machine: Lookup,
    /// Its MaasHost, if one exists.
    pub host: Option<VmHostObject>,
}

/// Whether MAAS must be asked about a VM before deciding: always but for an entry not
/// recorded yet (the record comes first) and a settled one (recorded with its system id and
/// its MaasHost present).
pub fn needs_lookup(wanted: bool, record: &Record, host_present: bool) -> bool {
    match (wanted, record) {
        (_, Record::Absent) => false,
        (true, Record::Composed(_)) => !host_present,
        _ => true,
    }
}

/// The next step for one VM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VmStep {
    /// Write the record `{hostname}` (intent before the compose).
    Record,
    /// Compose the VM (MAAS has no machine of this hostname).
    Compose,
    /// Create (apply) the VM's MaasHost.
    CreateHost {
        /// MAAS system id of the VM.
        system_id: String,
    },
    /// Set the record's system id.
    SetSystemId {
        /// MAAS system id of the VM.
        system_id: String,
    },
    /// Delete the VM in MAAS: no longer wanted, never allocated.
    DeleteMachine {
        /// MAAS system id of the VM.
        system_id: String,
    },
    /// Delete the VM's MaasHost: the VM is gone and nobody holds the host.
    DeleteHost {
        /// Object name.
        name: String,
        /// Preconditions of the delete.
        version: ObjectVersion,
    },
    /// Drop the record: the VM and its MaasHost are gone.
    Drop,
    /// Nothing to do now; look again later (an allocated VM, a claimed MaasHost).
    Wait,
    /// Settled.
    Done,
}

/// The next step of the VM `facts` describes.
pub fn next_step(facts: &VmFacts) -> VmStep {
    if facts.record == Record::Absent {
        return if facts.wanted {
            VmStep::Record
        } else {
            VmStep::Done
        };
    }
    if facts.wanted {
        return match (&facts.machine, &facts.host) {
            // Never composed yet: compose.
            (Lookup::Absent, _) if facts.record == Record::Pending => VmStep::Compose,
            (Lookup::Present { system_id, .. }, None) => VmStep::CreateHost {
                system_id: system_id.clone(),
            },
            (Lookup::Present { system_id, .. }, Some(_))
                if facts.record.system_id() != Some(system_id.as_str()) =>
            {
                VmStep::SetSystemId {
                    system_id: system_id.clone(),
                }
            }
            // Settled (not even looked up); or recorded with its id and gone from MAAS:
            // released and deleted by MAAS, never composed again (machine-controller sees its
            // host missing and withdraws the entry).
            _ => VmStep::Done,
        };
    }
    if facts.host.as_ref().is_some_and(|h| h.consumed) {
        return VmStep::Wait;
    }
    match (&facts.machine, &facts.host) {
        (
            Lookup::NotLooked
            | Lookup::Present {
                allocated: true, ..
            },
            _,
        ) => VmStep::Wait,
        (Lookup::Present { system_id, .. }, _) => VmStep::DeleteMachine {
            system_id: system_id.clone(),
        },
        (Lookup::Absent, Some(host)) => VmStep::DeleteHost {
            name: host.name.clone(),
            version: host.version.clone(),
        },
        (Lookup::Absent, None) => VmStep::Drop,
    }
}

/// A composition MAAS refused, reported as `VMsComposed=False`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The condition reason.
    pub reason: &'static str,
    /// What to tell people: the hostname and MAAS's answer.
    pub message: String,
}

/// What a failed compose of `hostname` means: `Ok(None)` when MAAS already has a machine of
/// that hostname (composed meanwhile: look again), `Ok(Some(refusal))` for a refusal that
/// stands until the VM host or the request changes, `Err` for anything else (retried with the
/// usual backoff; a lost answer is found by the next look).
pub fn compose_failure(hostname: &str, error: MaasError) -> Result<Option<Refusal>, MaasError> {
    let refusal = |reason: &'static str, text: &str| {
        Ok(Some(Refusal {
            reason,
            message: format!("MAAS refused to compose VM {hostname}: {text}"),
        }))
    };
    match &error {
        MaasError::BadRequest { fields, message } => {
            let all: Vec<&str> = fields
                .values()
                .flatten()
                .map(String::as_str)
                .chain((!message.is_empty()).then_some(message.as_str()))
                .collect();
            if all.iter().any(|m| m.contains("already exists")) {
                Ok(None)
            } else {
                refusal(REASON_COMPOSE_REFUSED, &all.join("; "))
            }
        }
        MaasError::ComposeRefused { message } => refusal(REASON_COMPOSE_REFUSED, message),
        MaasError::VmHostsUnsupported { message } => refusal(REASON_VM_HOSTS_UNSUPPORTED, message),
        MaasError::Forbidden { message } => refusal(
            REASON_COMPOSITION_FORBIDDEN,
            &format!("the MAAS key has no admin rights (compose is admin only) {message}"),
        ),
        _ => Err(error),
    }
}

/// How long a compose still waits after a refusal recorded at `generation` `elapsed` ago:
/// `None` to compose now (no refusal, a spec change since, or [`REFUSAL_RETRY`] passed).
pub fn refusal_wait(
    refused: Option<(Option<i64>, Duration)>,
    generation: Option<i64>,
) -> Option<Duration> {
    let (at_generation, elapsed) = refused?;
    (at_generation == generation)
        .then(|| REFUSAL_RETRY.checked_sub(elapsed))
        .flatten()
        .filter(|left| !left.is_zero())
}

/// The `VMsComposed` condition: False with the refusal, else False while some wanted VM is
/// not settled, else True. `None` when the host never had VMs to report.
pub fn composed_condition(
    refusal: Option<&Refusal>,
    pending: &[String],
    wanted: usize,
    previous: Option<&Condition>,
) -> Option<(bool, &'static str, String)> {
    if let Some(r) = refusal {
        return Some((false, r.reason, r.message.clone()));
    }
    if !pending.is_empty() {
        return Some((
            false,
            REASON_COMPOSING,
            format!("composing {}", pending.join(", ")),
        ));
    }
    if wanted == 0 && previous.is_none() {
        return None;
    }
    Some((true, REASON_COMPOSED, format!("{wanted} VM(s) composed")))
}

/// `status` without what the composition writes (`composedVMs`, `VMsComposed`): what the host
/// controller applies, so that its field manager never owns them and a stale apply of its own
/// never brings back a record the composition dropped.
pub fn without_composition(mut status: MaasHostStatus) -> MaasHostStatus {
    status.composed_vms = None;
    if let Some(conditions) = status.conditions.as_mut() {
        conditions.retain(|c| c.type_ != VMS_COMPOSED);
    }
    status
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
