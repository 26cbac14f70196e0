//! The MaasHost status maas-client writes: MAAS observations, life-cycle state, allocation
//! record and conditions. Deterministic (sorted lists, times kept unless something changed),
//! so an unchanged host causes no write and no self-triggered reconcile.

use capmaas_api::conditions::{self as cond, reasons};
use capmaas_api::host::{HostAllocation, MaasHostStatus, ProvisioningState};
use capmaas_api::lxd::HostVmHost;
use capmaas_runtime::conditions::{ConditionStatus, NewCondition, set_condition, summarize_ready};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use maas_api_client::Machine;

use super::decide::Wait;
use crate::mapping;

/// Reason of `Provisioned=False` on a host whose request cannot be carried out as written
/// (e.g. network data MAAS refuses); the message says why.
pub const REASON_INVALID_SPEC: &str = "InvalidSpec";
/// Reason of `Provisioned=False` on a host nobody asked to deploy.
pub const REASON_NOT_REQUESTED: &str = "NotRequested";
/// Reason of `HostPresent=True` for a machine its inventory no longer lists (re-tagged, moved
/// to another pool or zone): it exists in MAAS and stays managed by system id.
pub const REASON_LEFT_INVENTORY_FILTER: &str = "LeftInventoryFilter";

/// Everything the status is computed from.
#[derive(Debug)]
pub struct StatusInput<'a> {
    /// The previous status.
    pub previous: Option<&'a MaasHostStatus>,
    /// The latest MAAS view; `None` when the machine vanished.
    pub machine: Option<&'a Machine>,
    /// The machine is held by this installation.
    pub ours: bool,
    /// A deployment is requested.
    pub wants_deploy: bool,
    /// The allocation record to keep (only while ours).
    pub allocation: Option<HostAllocation>,
    /// Why the controller stopped acting.
    pub wait: Wait,
    /// Failed deployments so far.
    pub deploy_failures: u32,
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// The host's inventory, when its latest list did not show the (existing) machine.
    pub unlisted_from: Option<&'a str>,
    /// Why the request cannot be carried out ([`Wait::InvalidSpec`]), or why the machine is
    /// not this host's ([`Wait::HeldByOther`]).
    pub refusal: Option<&'a str>,
    /// What a release leaves to undo is not undone yet: static addresses the gateway linked
    /// are still recorded as on the machine, or its original hostname is not back.
    pub release_cleanup_pending: bool,
    /// The `Provisioned` reason of a refusal ([`Wait::InvalidSpec`]) other than
    /// [`REASON_INVALID_SPEC`], e.g. [`super::vm_host::REASON_VM_HOSTS_UNSUPPORTED`].
    pub refusal_reason: Option<&'a str>,
    /// `status.vmHost`: the VM host the machine is ([`super::vm_host::status_fields`]).
    pub vm_host: Option<HostVmHost>,
    /// `status.vmHostId`: the VM host the machine was composed on.
    pub vm_host_id: Option<i64>,
}

/// `Provisioned` reason of a host whose machine is allocated to this installation but claimed
/// by no consumer here.
pub const REASON_UNCLAIMED: &str = "Unclaimed";

/// `Provisioned` reason of a VM host whose release waits for the machines composed on it.
pub const REASON_VM_HOST_IN_USE: &str = "VMHostInUse";

fn vm_host_in_use(vm_host: Option<&HostVmHost>) -> String {
    let guests = vm_host
        .and_then(|v| v.machines.as_deref())
        .unwrap_or_default()
        .join(", ");
    format!(
        "release waits: this server is an LXD VM host running composed machines ({guests}); MAAS \
         would delete them with a forced release, so it is released once they are gone"
    )
}

fn provisioned_condition(input: &StatusInput<'_>, state: ProvisioningState) -> NewCondition {
    use ConditionStatus::{False, True, Unknown};
    let (status, reason, message): (ConditionStatus, &str, String) = match (input.wait, state) {
        (_, ProvisioningState::Deployed) if input.wants_deploy => {
            (True, reasons::MACHINE_DEPLOYED, String::new())
        }
        (Wait::Missing, _) => (
            False,
            reasons::HOST_MISSING,
            "the machine is gone from MAAS".into(),
        ),
        (Wait::DeployFailedFinal, _) => (
            False,
            reasons::MACHINE_DEPLOY_FAILED,
            format!(
                "deployment failed {} time(s); retries exhausted, waiting for the consumer",
                input.deploy_failures.saturating_add(1)
            ),
        ),
        (Wait::InvalidSpec, _) => (
            False,
            input.refusal_reason.unwrap_or(REASON_INVALID_SPEC),
            input.refusal.unwrap_or_default().to_owned(),
        ),
        (Wait::Broken, _) => (False, "MachineBroken", machine_error(input.machine)),
        (Wait::ReleaseFailed, _) => (False, "ReleaseFailed", machine_error(input.machine)),
        (Wait::HeldByOther, _) => (
            False,
            "HeldByOther",
            held_by_other(input.refusal, input.machine),
        ),
        (Wait::Unavailable, _) => (
            False,
            reasons::MACHINE_STATE_UNDEFINED,
            machine_error(input.machine),
        ),
        (Wait::Unclaimed, _) => (
            Unknown,
            REASON_UNCLAIMED,
            "allocated to this installation by another MaasHost object (a management cluster \
             this namespace was moved from, or before this host was imported again); kept as \
             it is until its MaasMachine claims it again by system id and asks for its \
             deployment"
                .into(),
        ),
        (Wait::VmHostInUse, _) => (
            False,
            REASON_VM_HOST_IN_USE,
            vm_host_in_use(input.vm_host.as_ref()),
        ),
        (Wait::PowerUnknown, _) => (
            Unknown,
            "PowerStateUnknown",
            "power state is error/unknown; not acted upon".into(),
        ),
        (Wait::RebootHeld | Wait::PowerTransition, _) => (Unknown, "Rebooting", String::new()),
        (Wait::Deploying, _) => {
            let message = input
                .machine
                .and_then(|m| m.status_message.clone())
                .unwrap_or_default();
            (Unknown, reasons::MACHINE_DEPLOYING, message)
        }
        (Wait::Releasing, _) => (Unknown, "Releasing", String::new()),
        (_, _) if !input.wants_deploy => (False, REASON_NOT_REQUESTED, String::new()),
        (_, _) => (Unknown, reasons::MACHINE_DEPLOY_STARTED, String::new()),
    };
    NewCondition::new(cond::PROVISIONED, status, reason)
        .message(message)
        .observed_generation(input.generation)
}

/// Why the machine is not this host's: the refusal of the allocation, else its MAAS owner.
fn held_by_other(refusal: Option<&str>, machine: Option<&Machine>) -> String {
    match (refusal, machine.and_then(|m| m.owner.as_deref())) {
        (Some(reason), _) => format!("the MAAS machine is not this host's: {reason}"),
        (None, Some(owner)) => {
            format!("the MAAS machine is allocated to someone else (MAAS user {owner})")
        }
        (None, None) => "the MAAS machine is allocated to someone else".to_owned(),
    }
}

fn machine_error(machine: Option<&Machine>) -> String {
    machine.map_or_else(String::new, |m| {
        if m.error_description.is_empty() {
            format!("MAAS status {}", m.status_name)
        } else {
            format!("MAAS status {}: {}", m.status_name, m.error_description)
        }
    })
}

/// The new status. `lastUpdated` and condition times are kept when nothing else changed.
pub fn build_status(input: &StatusInput<'_>, now: &Time) -> MaasHostStatus {
    let previous = input.previous.cloned().unwrap_or_default();
    let mut state = mapping::provisioning_state(input.machine, input.ours, input.wants_deploy);
    // A released machine that still holds the static addresses or the hostname it was given is
    // not available yet: the release ends when they are given back.
    if state == ProvisioningState::Available && input.release_cleanup_pending {
        state = ProvisioningState::Releasing;
    }
    let mut status = match input.machine {
        Some(m) => observed(m),
        // Keep the last known hardware of a vanished machine; drop live fields.
        None => MaasHostStatus {
            power_state: None,
            status_message: None,
            missing: Some(true),
            ..strip_times(previous.clone())
        },
    };
    if input.machine.is_some() {
        status.vm_host.clone_from(&input.vm_host);
        status.vm_host_id = input.vm_host_id;
    }
    // The composition's record (written by its own field manager, never sent by this one:
    // [`crate::compose::decide::without_composition`]), kept so that the status compares equal.
    status.composed_vms.clone_from(&previous.composed_vms);
    status.provisioning_state = Some(state);
    status.allocation = input.allocation.clone().filter(|_| input.ours);
    status.observed_generation = input.generation;
    let mut conditions = previous.conditions.clone().unwrap_or_default();
    let present = match (input.machine, input.unlisted_from) {
        (Some(_), Some(inventory)) => NewCondition::new(
            cond::HOST_PRESENT,
            ConditionStatus::True,
            REASON_LEFT_INVENTORY_FILTER,
        )
        .message(format!(
            "the machine exists in MAAS but no longer matches the filter of MaasInventory \
             {inventory} (pool, zones, tags); still managed by system id"
        )),
        (Some(_), None) => NewCondition::new(
            cond::HOST_PRESENT,
            ConditionStatus::True,
            reasons::RECONCILED,
        ),
        (None, _) => NewCondition::new(
            cond::HOST_PRESENT,
            ConditionStatus::False,
            reasons::HOST_MISSING,
        )
        .message("the machine is gone from MAAS"),
    }
    .observed_generation(input.generation);
    set_condition(&mut conditions, present, now);
    set_condition(&mut conditions, provisioned_condition(input, state), now);
    let types: &[&str] = if input.wants_deploy {
        &[cond::HOST_PRESENT, cond::PROVISIONED]
    } else {
        &[cond::HOST_PRESENT]
    };
    let ready = summarize_ready(&conditions, types, input.generation);
    set_condition(&mut conditions, ready, now);
    status.conditions = Some(conditions);
    status.last_updated.clone_from(&previous.last_updated);
    if strip_times(status.clone()) != strip_times(previous) || status.last_updated.is_none() {
        status.last_updated = Some(now.clone());
    }
    status
}

/// Least time between a written status change and a report that only moves the progress
/// text MAAS shows while it works on a machine (`status.statusMessage`, repeated in the
/// `Provisioned` and `Ready` messages). Real MAAS changes that text dozens of times during a
/// deployment of several minutes; no decision reads it, and every write wakes each watcher of
/// MaasHosts. State, power and condition status changes are written at once.
pub const PROGRESS_REPORT_INTERVAL: std::time::Duration = std::time::Duration::from_secs(60);

/// How long the write of `next` waits: `Some` when it differs from `previous` only in the
/// progress text and the previous change was written less than
/// [`PROGRESS_REPORT_INTERVAL`] before `now` (the reconcile looks again when it is due);
/// `None` to write now.
pub fn progress_report_wait(
    previous: &MaasHostStatus,
    next: &MaasHostStatus,
    now: &Time,
) -> Option<std::time::Duration> {
    let last = previous.last_updated.as_ref()?;
    if without_progress(previous.clone()) != without_progress(next.clone()) {
        return None;
    }
    let elapsed = now
        .0
        .as_millisecond()
        .saturating_sub(last.0.as_millisecond());
    let interval = i64::try_from(PROGRESS_REPORT_INTERVAL.as_millis()).unwrap_or(i64::MAX);
    let left = interval.saturating_sub(elapsed);
    (left > 0).then(|| std::time::Duration::from_millis(left.unsigned_abs()))
}

fn without_progress(mut status: MaasHostStatus) -> MaasHostStatus {
    status.last_updated = None;
    status.status_message = None;
    for c in status.conditions.iter_mut().flatten() {
        if c.type_ == cond::PROVISIONED || c.type_ == cond::READY {
            c.message.clear();
        }
    }
    status
}

/// Why maas-client leaves a host alone (`HostPresent=False` reason and message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unmanaged {
    /// Neither imported by an inventory nor marked hand-made.
    NotRegistered,
    /// Another MaasHost (`<namespace>/<name>`) holds the machine's binding.
    BoundElsewhere(String),
}

/// Reason of `HostPresent=False` on a host that is neither imported nor marked hand-made.
pub const REASON_NOT_REGISTERED: &str = "NotRegistered";
/// Reason of `HostPresent=False` on a host whose machine another MaasHost holds.
pub const REASON_BOUND_ELSEWHERE: &str = "BoundToAnotherHost";

/// The status of a host maas-client does not manage: nothing read from MAAS is shown (the
/// machine may be another tenant's), no provisioning state (so nobody claims it), the
/// allocation record kept; `HostPresent=False` says why.
pub fn unmanaged_status(
    previous: Option<&MaasHostStatus>,
    why: &Unmanaged,
    generation: Option<i64>,
    now: &Time,
) -> MaasHostStatus {
    let previous = previous.cloned().unwrap_or_default();
    let (reason, message) = match why {
        Unmanaged::NotRegistered => (
            REASON_NOT_REGISTERED,
            format!(
                "not imported by a MaasInventory (label {}) nor marked hand-made (annotation \
                 {}=\"true\"); maas-client does not touch its MAAS machine",
                capmaas_api::keys::LABEL_HOST_INVENTORY,
                capmaas_api::keys::ANNOTATION_HOST_HAND_MADE
            ),
        ),
        Unmanaged::BoundElsewhere(holder) => (
            REASON_BOUND_ELSEWHERE,
            format!(
                "the MAAS machine belongs to MaasHost {holder}; one machine backs one host in \
                 the whole cluster"
            ),
        ),
    };
    let mut conditions = previous.conditions.clone().unwrap_or_default();
    let present = NewCondition::new(cond::HOST_PRESENT, ConditionStatus::False, reason)
        .message(message)
        .observed_generation(generation);
    set_condition(&mut conditions, present, now);
    let ready = summarize_ready(&conditions, &[cond::HOST_PRESENT], generation);
    set_condition(&mut conditions, ready, now);
    let mut status = MaasHostStatus {
        allocation: previous.allocation.clone(),
        observed_generation: generation,
        conditions: Some(conditions),
        last_updated: previous.last_updated.clone(),
        ..MaasHostStatus::default()
    };
    if strip_times(status.clone()) != strip_times(previous) || status.last_updated.is_none() {
        status.last_updated = Some(now.clone());
    }
    status
}

fn strip_times(mut status: MaasHostStatus) -> MaasHostStatus {
    status.last_updated = None;
    status
}

/// The status fields observed in MAAS.
pub fn observed(m: &Machine) -> MaasHostStatus {
    let mut tags = m.tag_names.clone();
    tags.sort();
    let mut addresses: Vec<String> = m.ip_addresses.iter().map(ToString::to_string).collect();
    addresses.sort();
    MaasHostStatus {
        hostname: Some(m.hostname.clone()).filter(|h| !h.is_empty()),
        fqdn: Some(m.fqdn.clone()).filter(|f| !f.is_empty()),
        maas_status: i32::try_from(m.status.number()).ok(),
        maas_status_name: Some(m.status_name.clone()).filter(|s| !s.is_empty()),
        status_message: m.status_message.clone().filter(|s| !s.is_empty()),
        power_state: Some(mapping::power_state(&m.power_state)),
        cpu_count: i32::try_from(m.cpu_count).ok(),
        memory_mib: i64::try_from(m.memory).ok(),
        storage_gib: Some(mapping::storage_gib(m.storage)),
        architecture: Some(m.architecture.clone()).filter(|a| !a.is_empty()),
        zone: Some(m.zone_name().to_owned()).filter(|z| !z.is_empty()),
        pool: Some(m.pool_name().to_owned()).filter(|p| !p.is_empty()),
        tags: Some(tags),
        interfaces: Some(mapping::interfaces(m)),
        boot_interface: mapping::boot_interface(m),
        addresses: Some(addresses),
        deployed_image: mapping::deployed_image(m),
        ..MaasHostStatus::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use capmaas_runtime::conditions::get_condition;
    use maas_api_client::MachineStatus;

    fn t(s: i64) -> Time {
        Time(jiff::Timestamp::from_second(s).unwrap())
    }

    fn input<'a>(
        machine: Option<&'a Machine>,
        previous: Option<&'a MaasHostStatus>,
        wait: Wait,
    ) -> StatusInput<'a> {
        StatusInput {
            previous,
            machine,
            ours: true,
            wants_deploy: true,
            allocation: Some(HostAllocation {
                agent_name: Some("a".into()),
                ..Default::default()
            }),
            wait,
            deploy_failures: 0,
            generation: Some(3),
            unlisted_from: None,
            refusal: None,
            refusal_reason: None,
            vm_host: None,
            vm_host_id: None,
            release_cleanup_pending: false,
        }
    }

    #[test]
    fn unchanged_status_keeps_its_times() {
        let mut m = crate::cache::tests::machine("abc", 6);
        m.status = MachineStatus::Deployed;
        let first = build_status(&input(Some(&m), None, Wait::Deployed), &t(100));
        assert_eq!(first.provisioning_state, Some(ProvisioningState::Deployed));
        assert_eq!(first.last_updated, Some(t(100)));
        let conditions = first.conditions.clone().unwrap();
        assert_eq!(get_condition(&conditions, "Ready").unwrap().status, "True");
        let second = build_status(&input(Some(&m), Some(&first), Wait::Deployed), &t(200));
        assert_eq!(second, first, "no change, no write");
        m.power_state = maas_api_client::PowerState::On;
        let third = build_status(&input(Some(&m), Some(&second), Wait::Deployed), &t(300));
        assert_eq!(third.last_updated, Some(t(300)));
    }

    #[test]
    fn progress_text_alone_is_reported_at_most_once_a_minute_and_state_changes_at_once() {
        let mut m = crate::cache::tests::machine("abc", 6);
        m.status = MachineStatus::Deploying;
        m.status_message = Some("Performing PXE boot".into());
        let deploying = build_status(&input(Some(&m), None, Wait::Deploying), &t(100));
        m.status_message = Some("Installing OS".into());
        let progressed = build_status(&input(Some(&m), Some(&deploying), Wait::Deploying), &t(110));
        assert_ne!(progressed, deploying);
        let provisioned = |s: &MaasHostStatus| {
            get_condition(s.conditions.as_deref().unwrap(), cond::PROVISIONED)
                .unwrap()
                .message
                .clone()
        };
        assert_eq!(provisioned(&progressed), "Installing OS");
        assert_eq!(
            progress_report_wait(&deploying, &progressed, &t(110)),
            Some(std::time::Duration::from_secs(50)),
            "due a minute after the last change"
        );
        assert_eq!(progress_report_wait(&deploying, &progressed, &t(160)), None);

        m.power_state = maas_api_client::PowerState::On;
        let powered = build_status(&input(Some(&m), Some(&deploying), Wait::Deploying), &t(110));
        assert_eq!(progress_report_wait(&deploying, &powered, &t(110)), None);
        m.status = MachineStatus::Deployed;
        m.status_message = Some("Deployed".into());
        let deployed = build_status(&input(Some(&m), Some(&deploying), Wait::Deployed), &t(110));
        assert_eq!(progress_report_wait(&deploying, &deployed, &t(110)), None);
        let mut untimed = deploying.clone();
        untimed.last_updated = None;
        assert_eq!(progress_report_wait(&untimed, &progressed, &t(110)), None);
    }

    #[test]
    fn a_machine_outside_the_inventory_filter_is_present_not_missing() {
        let mut m = crate::cache::tests::machine("abc", 6);
        m.status = MachineStatus::Deployed;
        let listed = build_status(&input(Some(&m), None, Wait::Deployed), &t(1));
        let mut unlisted_input = input(Some(&m), Some(&listed), Wait::Deployed);
        unlisted_input.unlisted_from = Some("inv-a");
        let unlisted = build_status(&unlisted_input, &t(2));
        assert_eq!(unlisted.missing, None);
        assert_eq!(
            unlisted.provisioning_state,
            Some(ProvisioningState::Deployed)
        );
        let conditions = unlisted.conditions.unwrap();
        let present = get_condition(&conditions, "HostPresent").unwrap();
        assert_eq!(
            (present.status.as_str(), present.reason.as_str()),
            ("True", REASON_LEFT_INVENTORY_FILTER)
        );
        assert!(present.message.contains("inv-a"), "{}", present.message);
        assert_eq!(get_condition(&conditions, "Ready").unwrap().status, "True");
    }

    #[test]
    fn an_unmanaged_host_shows_nothing_of_the_machine_and_is_not_available() {
        let ready = crate::cache::tests::machine("abc", 4);
        let before = build_status(&input(Some(&ready), None, Wait::Idle), &t(1));
        assert!(before.cpu_count.is_some() && before.provisioning_state.is_some());
        let why = Unmanaged::BoundElsewhere("team-a/abc".into());
        let after = unmanaged_status(Some(&before), &why, Some(3), &t(2));
        assert_eq!(after.provisioning_state, None, "never claimable");
        assert_eq!((after.cpu_count, after.hostname.clone()), (None, None));
        assert_eq!(after.allocation, before.allocation);
        let conditions = after.conditions.clone().unwrap();
        let present = get_condition(&conditions, "HostPresent").unwrap();
        assert_eq!(present.reason, REASON_BOUND_ELSEWHERE);
        assert!(
            present.message.contains("team-a/abc"),
            "{}",
            present.message
        );
        assert_eq!(get_condition(&conditions, "Ready").unwrap().status, "False");
        let again = unmanaged_status(Some(&after), &why, Some(3), &t(3));
        assert_eq!(again, after, "no change, no write");
        let unregistered = unmanaged_status(None, &Unmanaged::NotRegistered, None, &t(4));
        let conditions = unregistered.conditions.unwrap();
        let present = get_condition(&conditions, "HostPresent").unwrap();
        assert_eq!(present.reason, REASON_NOT_REGISTERED);
        assert!(present.message.contains("hand-made"), "{}", present.message);
    }

    #[test]
    fn missing_and_failed_are_reported() {
        let ready = crate::cache::tests::machine("abc", 4);
        let before = build_status(&input(Some(&ready), None, Wait::Idle), &t(1));
        let gone = build_status(&input(None, Some(&before), Wait::Missing), &t(2));
        assert_eq!(gone.missing, Some(true));
        assert_eq!(gone.provisioning_state, Some(ProvisioningState::Missing));
        assert_eq!(gone.cpu_count, before.cpu_count, "hardware kept");
        assert_eq!(gone.allocation, None.or(gone.allocation.clone()));
        let gone_conditions = gone.conditions.unwrap();
        assert_eq!(
            get_condition(&gone_conditions, "HostPresent")
                .unwrap()
                .reason,
            reasons::HOST_MISSING
        );
        assert_eq!(
            get_condition(&gone_conditions, "Ready").unwrap().status,
            "False"
        );

        let mut failed = crate::cache::tests::machine("abc", 11);
        failed.status = MachineStatus::FailedDeployment;
        failed.error_description = "time-out during deployment".into();
        let mut failed_input = input(Some(&failed), None, Wait::DeployFailedFinal);
        failed_input.deploy_failures = 2;
        let failed_status = build_status(&failed_input, &t(3));
        assert_eq!(
            failed_status.provisioning_state,
            Some(ProvisioningState::Failed)
        );
        let conditions = failed_status.conditions.unwrap();
        let provisioned = get_condition(&conditions, "Provisioned").unwrap();
        assert_eq!(provisioned.reason, reasons::MACHINE_DEPLOY_FAILED);
        assert!(
            provisioned.message.contains("3 time(s)"),
            "{}",
            provisioned.message
        );

        let allocated = crate::cache::tests::machine("abc", 10);
        let mut refused = input(Some(&allocated), None, Wait::InvalidSpec);
        refused.refusal = Some("network n1: MAAS refused static address 10.0.0.5");
        let conditions = build_status(&refused, &t(4)).conditions.unwrap();
        let provisioned = get_condition(&conditions, "Provisioned").unwrap();
        assert_eq!(
            (provisioned.status.as_str(), provisioned.reason.as_str()),
            ("False", REASON_INVALID_SPEC)
        );
        assert!(provisioned.message.contains("network n1"));
    }

    #[test]
    fn released_with_static_addresses_left_is_not_available() {
        let ready = crate::cache::tests::machine("abc", 4);
        let mut released = input(Some(&ready), None, Wait::Idle);
        released.wants_deploy = false;
        released.release_cleanup_pending = true;
        let status = build_status(&released, &t(1));
        assert_eq!(
            status.provisioning_state,
            Some(ProvisioningState::Releasing)
        );
        released.release_cleanup_pending = false;
        let status = build_status(&released, &t(2));
        assert_eq!(
            status.provisioning_state,
            Some(ProvisioningState::Available)
        );
    }
}
