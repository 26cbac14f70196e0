//! Pure builders: the MaasMachine status this controller owns and the machine addresses. The
//! host request (consumer reference, provisioning request) and the providerID format are
//! contracts with other Deployments, in `capmaas_api`.

use std::net::IpAddr;

use capmaas_api::common::{Initialization, MachineAddress, MachineAddressType};
use capmaas_api::conditions::{self as cond, reasons};
use capmaas_api::host::PowerState;
use capmaas_api::machine::MaasMachineStatus;
use capmaas_api::{MaasHost, MaasMachine};
use capmaas_runtime::conditions::{ConditionStatus, NewCondition, set_condition, summarize_ready};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use crate::choose::host_ref;
use crate::decide::{Observed, Step, decide};

/// Condition types this controller writes; others on the object belong to other controllers.
pub const OWNED_CONDITIONS: [&str; 4] = [
    cond::READY,
    cond::PAUSED,
    cond::HOST_ASSOCIATED,
    cond::MACHINE_DEPLOYED,
];

/// Most addresses the CRD accepts in `status.addresses`.
pub const MAX_ADDRESSES: usize = 64;

/// The MaasHost request vocabulary, shared with remediation-controller and maas-client.
pub use capmaas_api::host_request::{claimed_by, consumer_ref, provisioning_request};

/// Addresses for CAPI: every MAAS address as `InternalIP`, and also as `ExternalIP` when it is
/// one (a global address: not private, shared, loopback, link-local or unique local); then the
/// hostname (`Hostname`) and the MAAS FQDN (`InternalDNS`).
///
/// MAAS does not say which network is external. CAPMAAS reports every address as both, so a
/// node's private address became an "external" one for whatever reads it (its issue #174); a
/// public address on a bare-metal server is reachable from inside the cluster too, so it is both.
/// An address that does not parse is reported as `InternalIP` only.
pub fn machine_addresses(host: &MaasHost) -> Vec<MachineAddress> {
    let status = host.status.clone().unwrap_or_default();
    let mut out = Vec::new();
    let mut push = |type_, address: &str| {
        out.push(MachineAddress {
            type_,
            address: address.to_owned(),
        });
    };
    for address in status.addresses.iter().flatten().filter(|a| !a.is_empty()) {
        push(MachineAddressType::InternalIp, address);
        if address.trim().parse().is_ok_and(is_external) {
            push(MachineAddressType::ExternalIp, address);
        }
    }
    if let Some(hostname) = status.hostname.as_deref().filter(|h| !h.is_empty()) {
        push(MachineAddressType::Hostname, hostname);
    }
    if let Some(fqdn) = status.fqdn.as_deref().filter(|f| !f.is_empty()) {
        push(MachineAddressType::InternalDns, fqdn);
    }
    out.truncate(MAX_ADDRESSES);
    out
}

/// Whether `ip` is reachable from outside the site: a global address.
pub fn is_external(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            // 100.64.0.0/10: carrier-grade NAT, shared address space (RFC 6598).
            let shared = v4.octets()[0] == 100 && (v4.octets()[1] & 0xc0) == 64;
            !(v4.is_private()
                || shared
                || v4.is_loopback()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast())
        }
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_external(IpAddr::V4(v4)),
            None => {
                !(v6.is_unique_local()
                    || v6.is_unicast_link_local()
                    || v6.is_loopback()
                    || v6.is_unspecified()
                    || v6.is_multicast())
            }
        },
    }
}

/// The conditions a step reports (besides `Ready`, computed from them).
pub fn step_conditions(step: &Step, host: Option<&MaasHost>) -> Vec<NewCondition> {
    use ConditionStatus::{False, True};
    let not_paused = NewCondition::new(cond::PAUSED, False, reasons::NOT_PAUSED);
    let host_name = host.map(ResourceExt::name_any).unwrap_or_default();
    let associated = NewCondition::new(cond::HOST_ASSOCIATED, True, reasons::HOST_CLAIMED)
        .message(format!("host {host_name} claimed"));
    let both = |reason: &str, message: &str| {
        vec![
            not_paused.clone(),
            NewCondition::new(cond::HOST_ASSOCIATED, False, reason).message(message),
            NewCondition::new(cond::MACHINE_DEPLOYED, False, reason).message(message),
        ]
    };
    match step {
        Step::Paused => vec![
            NewCondition::new(cond::PAUSED, True, reasons::PAUSED)
                .message("the Cluster or this object is paused"),
        ],
        Step::WaitForClusterInfrastructure => both(
            reasons::WAITING_FOR_CLUSTER_INFRASTRUCTURE,
            "waiting for the Cluster's infrastructure to be provisioned",
        ),
        Step::WaitForBootstrapData => both(
            reasons::WAITING_FOR_BOOTSTRAP_DATA,
            "waiting for the Machine's bootstrap data secret",
        ),
        Step::WaitForVm { message } => both(reasons::WAITING_FOR_VM, message),
        Step::HostLost => both(
            reasons::MACHINE_NOT_FOUND,
            "the machine has a providerID but no MaasHost is claimed for it any more",
        ),
        Step::CreateDataClaim | Step::WaitForData { .. } => vec![
            not_paused,
            associated,
            NewCondition::new(cond::MACHINE_DEPLOYED, False, reasons::WAITING_FOR_DATA).message(
                match step {
                    Step::WaitForData { message } => message.clone(),
                    _ => "creating the MaasDataClaim".to_owned(),
                },
            ),
        ],
        Step::RecordHost | Step::RequestDeployment => vec![
            not_paused,
            associated,
            NewCondition::new(
                cond::MACHINE_DEPLOYED,
                False,
                reasons::MACHINE_DEPLOY_STARTED,
            )
            .message(format!("deployment of host {host_name} requested")),
        ],
        Step::WaitForDeployment {
            reason, message, ..
        } => vec![
            not_paused,
            associated,
            NewCondition::new(cond::MACHINE_DEPLOYED, False, reason).message(message.clone()),
        ],
        Step::SetProviderId | Step::Provisioned => vec![
            not_paused,
            associated,
            NewCondition::new(cond::MACHINE_DEPLOYED, True, reasons::MACHINE_DEPLOYED)
                .message(format!("host {host_name} is deployed")),
        ],
        Step::ClearProvisioning => vec![
            NewCondition::new(cond::MACHINE_DEPLOYED, False, reasons::MACHINE_TERMINATED).message(
                host.map_or_else(
                    || format!("releasing host {host_name}"),
                    crate::decide::release_wait_message,
                ),
            ),
        ],
        Step::ReleaseHost => vec![
            NewCondition::new(cond::MACHINE_DEPLOYED, False, reasons::MACHINE_TERMINATED)
                .message(format!("releasing host {host_name}")),
        ],
        Step::WaitForRelease { message } => vec![
            NewCondition::new(cond::MACHINE_DEPLOYED, False, reasons::MACHINE_TERMINATED)
                .message(message.clone()),
        ],
        Step::WaitForOwner
        | Step::WaitForCluster
        | Step::AddFinalizer
        | Step::ChooseHost
        | Step::RequestVm
        | Step::ClaimVm
        | Step::RemoveVmRequest
        | Step::ReclaimHost
        | Step::RemoveFinalizer
        | Step::ReleaseData
        | Step::UpdateLiveSettings
        | Step::Done => Vec::new(),
    }
}

/// The status this controller owns after a step: the current owned fields, host facts,
/// `conditions` applied, `Ready` summarised, and the provisioning signals when `provisioned`
/// (which are never reset once true).
pub fn next_status(
    mm: &MaasMachine,
    host: Option<&MaasHost>,
    conditions: Vec<NewCondition>,
    provisioned: bool,
    now: &Time,
) -> MaasMachineStatus {
    let current = mm.status.clone().unwrap_or_default();
    let generation = mm.metadata.generation;
    let mut list: Vec<_> = current
        .conditions
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|c| OWNED_CONDITIONS.contains(&c.type_.as_str()))
        .collect();
    for c in conditions {
        set_condition(&mut list, c.observed_generation(generation), now);
    }
    // A control-plane machine's DNSAttached (written by the cluster-controller) counts too.
    let others = current.conditions.clone().unwrap_or_default();
    let mut summary_of: Vec<&str> = vec![cond::HOST_ASSOCIATED, cond::MACHINE_DEPLOYED];
    let mut summary_input = list.clone();
    if let Some(dns) = others.iter().find(|c| c.type_ == cond::DNS_ATTACHED) {
        summary_of.push(cond::DNS_ATTACHED);
        summary_input.push(dns.clone());
    }
    let ready = summarize_ready(&summary_input, &summary_of, generation);
    set_condition(&mut list, ready, now);

    let mut status = MaasMachineStatus {
        ready: current.ready,
        initialization: current.initialization.clone(),
        host_ref: current.host_ref.clone(),
        system_id: current.system_id.clone(),
        machine_state: current.machine_state.clone(),
        machine_powered: current.machine_powered,
        hostname: current.hostname.clone(),
        dns_attached: None,
        addresses: current.addresses.clone(),
        failure_domain: current.failure_domain.clone(),
        conditions: Some(list),
    };
    if let Some(host) = host {
        let host_status = host.status.clone().unwrap_or_default();
        status.host_ref = Some(host_ref(mm, host));
        status.system_id = Some(host.spec.system_id.clone());
        status
            .machine_state
            .clone_from(&host_status.maas_status_name);
        status.machine_powered = host_status.power_state.map(|p| p == PowerState::On);
        status.hostname.clone_from(&host_status.hostname);
        if provisioned {
            let addresses = machine_addresses(host);
            status.addresses = (!addresses.is_empty()).then_some(addresses);
            status.failure_domain.clone_from(&host_status.zone);
        }
    }
    if provisioned {
        status.ready = Some(true);
        status.initialization = Some(Initialization {
            provisioned: Some(true),
        });
    }
    status
}

/// The status the MaasMachine of `obs` will have once it holds `obs.host` (a host as cached,
/// marked as the claim will mark it): the claim's intent carries it, so a won claim needs no
/// second status write. Whatever differs afterwards (the host changed meanwhile) is written by
/// the next step as usual.
pub fn intended_status(obs: &Observed<'_>, now: &Time) -> MaasMachineStatus {
    let mut mm = obs.maas_machine.clone();
    let intended = obs.host.map(|h| host_ref(&mm, h));
    mm.status.get_or_insert_with(Default::default).host_ref = intended;
    let step = decide(&Observed {
        maas_machine: &mm,
        ..*obs
    });
    next_status(&mm, obs.host, step_conditions(&step, obs.host), false, now)
}

/// Whether `next` differs from `current` only in what the status repeats of the host's MAAS
/// view (`machineState`, `machinePowered`, `hostname`) on a machine not provisioned yet: such
/// a change is written with the next change of the conditions instead of on its own. On its
/// way to Deployed a machine passes through MAAS states that last a fraction of a second
/// (Allocated), and every MaasMachine write also makes CAPI core reconcile (and usually patch)
/// the Machine. Once provisioned, every change of the host's state or power is written at once.
pub fn host_facts_only(current: &MaasMachineStatus, next: &MaasMachineStatus) -> bool {
    if next.ready == Some(true) || current.ready == Some(true) {
        return false;
    }
    let without_facts = |s: &MaasMachineStatus| MaasMachineStatus {
        machine_state: None,
        machine_powered: None,
        hostname: None,
        ..s.clone()
    };
    without_facts(current) == without_facts(next)
}

/// The owned part of the current status, to compare with [`next_status`] and skip writes that
/// change nothing.
pub fn owned_status(mm: &MaasMachine) -> MaasMachineStatus {
    let mut status = mm.status.clone().unwrap_or_default();
    status.dns_attached = None;
    status.conditions = Some(
        status
            .conditions
            .unwrap_or_default()
            .into_iter()
            .filter(|c| OWNED_CONDITIONS.contains(&c.type_.as_str()))
            .collect(),
    );
    status
}

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;
