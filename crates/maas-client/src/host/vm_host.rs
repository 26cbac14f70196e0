//! A MaasHost and MAAS VM hosts (LXD): the `status.vmHost` and `status.vmHostId` fields, built
//! from the cache ([`crate::vm_hosts`]) without a call per host, and the deployment refusals of
//! `spec.provisioning.registerVMHost` (a MAAS without VM hosts, a key without admin rights),
//! reported once as `Provisioned=False` with their own reason and a Warning Event, and not
//! sent to MAAS again while the refusal stands ([`remembered`]).

use std::time::Duration;

use capmaas_api::MaasHost;
use capmaas_api::conditions as cond;
use capmaas_api::host::MaasHostStatus;
use capmaas_api::lxd::HostVmHost;
use maas_api_client::{MaasError, Machine};

use crate::cache::MachineCache;
use crate::error::Error;

/// `Provisioned` reason: the deployment asks for a VM host and this MAAS has none.
pub const REASON_VM_HOSTS_UNSUPPORTED: &str = "VMHostsUnsupported";
/// `Provisioned` reason: the deployment asks for a VM host and the MAAS key is not an admin's.
pub const REASON_VM_HOST_NOT_ADMIN: &str = "VMHostRegistrationForbidden";
/// A refusal reported on the host (same generation) is not sent to MAAS again for this long.
pub const REFUSAL_RETRY: Duration = Duration::from_secs(30 * 60);

/// `status.vmHost` and `status.vmHostId` of a host whose machine MAAS shows as `machine`:
/// the VM host running on it in the latest listing (the previous value while nothing is known:
/// no listing yet, or a MAAS without VM hosts), and the VM host it was composed on.
pub fn status_fields(
    cache: &MachineCache,
    machine: Option<&Machine>,
    previous: Option<&MaasHostStatus>,
) -> (Option<HostVmHost>, Option<i64>) {
    let Some(machine) = machine else {
        return (
            previous.and_then(|p| p.vm_host.clone()),
            previous.and_then(|p| p.vm_host_id),
        );
    };
    let vm_host = match cache.vm_hosts.on_machine(&machine.system_id) {
        Some(Some(host)) => Some(crate::vm_hosts::host_status(
            &host,
            cache.composed_on(host.id),
        )),
        Some(None) => None,
        None => previous.and_then(|p| p.vm_host.clone()),
    };
    (vm_host, machine.vm_host_id())
}

/// The machines composed on the VM host that `machine` is: from the gateway's cache, or what
/// the host last reported while the cache has not listed VM hosts yet (a restart). VMs MAAS
/// counts on the VM host (its `used` resources) that no inventory lists count too, described
/// by what they use, since the release must wait for them as well.
pub fn guests(
    cache: &MachineCache,
    machine: &Machine,
    previous: Option<&MaasHostStatus>,
) -> Vec<String> {
    match cache.vm_hosts.on_machine(&machine.system_id) {
        Some(Some(host)) => {
            let mut seen = cache.composed_on(host.id);
            if seen.is_empty() && (host.used.cores > 0 || host.used.memory > 0) {
                seen.push(format!(
                    "VMs of pools no inventory imports, using {} core(s) and {} MiB",
                    host.used.cores, host.used.memory
                ));
            }
            seen
        }
        Some(None) => Vec::new(),
        None => previous
            .and_then(|p| p.vm_host.as_ref())
            .and_then(|v| v.machines.clone())
            .unwrap_or_default(),
    }
}

/// Before a deployment asking for a VM host: the refusal MAAS gave already, if it stands (this
/// MAAS has no VM hosts, or the host reports a refusal of its current generation), so that it
/// is not asked again.
pub fn not_refused(cache: &MachineCache, host: &MaasHost) -> Result<(), Error> {
    if let Some(message) = cache.vm_hosts.unsupported() {
        return Err(unsupported(&message));
    }
    match remembered(host, super::annotations::unix_now()) {
        Some(refused) => Err(refused),
        None => Ok(()),
    }
}

/// The error of a failed deploy: a VM host refusal when the deploy asked for a VM host
/// (`register_vmhost`) and MAAS refused it for good (a MAAS without VM hosts is remembered),
/// else the MAAS error.
pub fn deploy_error(cache: &MachineCache, error: MaasError, register_vmhost: bool) -> Error {
    match refusal_of(&error).filter(|_| register_vmhost) {
        Some(refused) => {
            if let MaasError::VmHostsUnsupported { message } = error {
                cache.vm_hosts.mark_unsupported(message);
            }
            refused
        }
        None => Error::maas("deploy")(error),
    }
}

/// The refusal of a deployment with `register_vmhost` that MAAS answered with `error`, if it
/// is one of the two permanent ones.
pub fn refusal_of(error: &MaasError) -> Option<Error> {
    match error {
        MaasError::VmHostsUnsupported { message } => Some(unsupported(message)),
        MaasError::Forbidden { .. } => Some(Error::VmHostRefused {
            reason: REASON_VM_HOST_NOT_ADMIN,
            message: "spec.provisioning.registerVMHost: MAAS refused to register the machine as \
                      a VM host (403): the MAAS user of maas-client's API key needs admin rights \
                      to register VM hosts"
                .to_owned(),
        }),
        _ => None,
    }
}

/// The refusal of a deployment with `register_vmhost` by a MAAS without VM hosts.
pub fn unsupported(maas_message: &str) -> Error {
    Error::VmHostRefused {
        reason: REASON_VM_HOSTS_UNSUPPORTED,
        message: format!(
            "spec.provisioning.registerVMHost: this MAAS has no VM hosts (MAAS 4.0 and later \
             removed them), so lxdConfig cannot be served; MAAS said: {maas_message}"
        ),
    }
}

/// The refusal `host` reports for its current generation, if reported less than
/// [`REFUSAL_RETRY`] ago (`now_unix`): the deployment is not sent to MAAS again.
pub fn remembered(host: &MaasHost, now_unix: i64) -> Option<Error> {
    let conditions = host.status.as_ref()?.conditions.as_deref()?;
    let condition = capmaas_runtime::get_condition(conditions, cond::PROVISIONED)?;
    let reason = [REASON_VM_HOSTS_UNSUPPORTED, REASON_VM_HOST_NOT_ADMIN]
        .into_iter()
        .find(|r| *r == condition.reason)?;
    let age = now_unix.saturating_sub(condition.last_transition_time.0.as_second());
    let retry = i64::try_from(REFUSAL_RETRY.as_secs()).unwrap_or(i64::MAX);
    (condition.observed_generation == host.metadata.generation && age < retry).then(|| {
        Error::VmHostRefused {
            reason,
            message: condition.message.clone(),
        }
    })
}

/// Whether `host` already reports the refusal `reason` with `message` (no second Event).
pub fn reported(host: &MaasHost, reason: &str, message: &str) -> bool {
    host.status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .and_then(|c| capmaas_runtime::get_condition(c, cond::PROVISIONED))
        .is_some_and(|c| c.reason == reason && c.message == message)
}

#[cfg(test)]
#[path = "vm_host_tests.rs"]
mod tests;
