//! The decision logic: what to do next for one MaasMachine, as a pure function of what was
//! observed. The reconcile (`act.rs`) observes, asks [`decide`], performs the one step,
//! updates its observation from the API's answer and asks again, until a step waits.

use capmaas_api::capi::{Cluster, Machine};
use capmaas_api::conditions::reasons;
use capmaas_api::host::ProvisioningState;
use capmaas_api::{MaasData, MaasDataClaim, MaasHost, MaasMachine, keys};
use kube::ResourceExt;

use crate::choose::HostRequest;

/// Everything a decision depends on.
#[derive(Debug, Clone, Copy)]
pub struct Observed<'a> {
    /// The object being reconciled.
    pub maas_machine: &'a MaasMachine,
    /// The owner CAPI Machine, when it exists.
    pub machine: Option<&'a Machine>,
    /// The Machine's Cluster, when it exists.
    pub cluster: Option<&'a Cluster>,
    /// The MaasHost whose `consumerRef` is this MaasMachine (matched by UID), if any.
    pub host: Option<&'a MaasHost>,
    /// The MaasDataClaim made for this MaasMachine (matched by owner UID), if any.
    pub data_claim: Option<&'a MaasDataClaim>,
    /// The MaasData the claim records as rendered, if any.
    pub data: Option<&'a MaasData>,
    /// No host claimed but `spec.systemID` set: the namespace's host of that MAAS machine.
    pub system_host: Option<&'a MaasHost>,
    /// An LXD machine ([`crate::vm`]): the VM host whose `spec.vms` holds its VM's entry.
    pub vm_host: Option<&'a MaasHost>,
    /// The MaasHost of the VM composed for that entry (labelled with the VM host and the
    /// hostname), once maas-client imported it.
    pub vm: Option<&'a MaasHost>,
}

/// The next step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// CAPI has not set the owner Machine yet; its watch brings us back.
    WaitForOwner,
    /// The Machine names a Cluster that does not exist (yet).
    WaitForCluster,
    /// The Cluster or the object is paused.
    Paused,
    /// Put the finalizer on before anything else exists outside the object.
    AddFinalizer,
    /// `Cluster.status.initialization.infrastructureProvisioned` is not true yet.
    WaitForClusterInfrastructure,
    /// `Machine.spec.bootstrap.dataSecretName` is not set yet.
    WaitForBootstrapData,
    /// Choose and claim a host.
    ChooseHost,
    /// An LXD machine without a VM asked for: choose a VM host and add the VM's entry to its
    /// `spec.vms`.
    RequestVm,
    /// An LXD machine's VM is asked for and not composed (or not claimable) yet.
    WaitForVm {
        /// Condition message (names the VM host and any refusal of maas-client's).
        message: String,
    },
    /// An LXD machine's VM is composed and `Available`: claim its MaasHost.
    ClaimVm,
    /// Deleting, no host held: remove the VM's entry from the VM host's `spec.vms`.
    RemoveVmRequest,
    /// A providerID or systemID exists but no host is claimed for it any more: never choose a
    /// second host for a machine whose identity is fixed.
    HostLost,
    /// `spec.systemID` is set, no host is claimed, and the host of that MAAS machine is free:
    /// claim it again (the machine was moved here by `clusterctl move`, or its host was imported
    /// again). Its deployment goes on as it is: the gateway finds the machine deployed.
    ReclaimHost,
    /// Record the claimed host in status.
    RecordHost,
    /// `spec.dataTemplate` is set: create the MaasDataClaim for the claimed host.
    CreateDataClaim,
    /// The MaasDataClaim is not rendered yet.
    WaitForData {
        /// Condition message (the claim's own explanation).
        message: String,
    },
    /// Write `spec.provisioning` on the host.
    RequestDeployment,
    /// `spec.releasePolicy` or `spec.keepPoweredOn` was edited after the deployment was
    /// requested: carry it to the host's request, so the gateway uses it (the release policy is
    /// recorded on the MAAS machine; the power rule applies at once).
    UpdateLiveSettings,
    /// The host is on its way; report progress.
    WaitForDeployment {
        /// Condition reason.
        reason: &'static str,
        /// Condition message.
        message: String,
        /// The state is a failure a person should look at.
        failed: bool,
    },
    /// Write `spec.providerID` and `spec.systemID`.
    SetProviderId,
    /// Deployed: report it and link the workload Node.
    Provisioned,
    /// Deleting: ask for the release by clearing `spec.provisioning`.
    ClearProvisioning,
    /// Deleting: wait until the host reports it is released.
    WaitForRelease {
        /// Condition message.
        message: String,
    },
    /// Deleting: the host is released; clear the claim (or leave a reservation).
    ReleaseHost,
    /// Deleting, the host released: let the MaasDataClaim (and its addresses) go.
    ReleaseData,
    /// Deleting: nothing outside is left; drop the finalizer.
    RemoveFinalizer,
    /// Deleting without our finalizer: nothing to do.
    Done,
}

/// Whether reconciliation is paused by the Cluster or the object's annotation.
pub fn is_paused(obs: &Observed<'_>) -> bool {
    obs.cluster.is_some_and(Cluster::is_paused)
        || obs
            .maas_machine
            .annotations()
            .contains_key(keys::ANNOTATION_PAUSED)
}

/// Whether the MaasMachine carries our finalizer.
pub fn has_finalizer(mm: &MaasMachine) -> bool {
    capmaas_runtime::controller::finalizer::has(mm, keys::FINALIZER_MAAS_MACHINE)
}

/// The next step for `obs`.
pub fn decide(obs: &Observed<'_>) -> Step {
    if obs.maas_machine.metadata.deletion_timestamp.is_some() {
        decide_delete(obs)
    } else {
        decide_apply(obs)
    }
}

fn decide_apply(obs: &Observed<'_>) -> Step {
    let mm = obs.maas_machine;
    let Some(machine) = obs.machine else {
        return Step::WaitForOwner;
    };
    let Some(cluster) = obs.cluster else {
        return Step::WaitForCluster;
    };
    if is_paused(obs) {
        return Step::Paused;
    }
    if !has_finalizer(mm) {
        return Step::AddFinalizer;
    }
    let Some(host) = obs.host else {
        if mm.spec.system_id.is_some()
            && obs
                .system_host
                .is_some_and(|h| h.spec.consumer_ref.is_none())
        {
            return Step::ReclaimHost;
        }
        if mm.spec.provider_id.is_some() || mm.spec.system_id.is_some() {
            return Step::HostLost;
        }
        if !cluster.infrastructure_provisioned() {
            return Step::WaitForClusterInfrastructure;
        }
        if bootstrap_secret(mm, machine).is_none() {
            return Step::WaitForBootstrapData;
        }
        if crate::vm::is_lxd(mm) {
            return decide_vm(obs);
        }
        return Step::ChooseHost;
    };
    if mm.status.as_ref().and_then(|s| s.host_ref.as_ref())
        != Some(&crate::choose::host_ref(mm, host))
    {
        return Step::RecordHost;
    }
    if host.spec.provisioning.is_none() {
        if bootstrap_secret(mm, machine).is_none() {
            return Step::WaitForBootstrapData;
        }
        if mm.spec.data_template.is_some() {
            let Some(claim) = obs.data_claim else {
                return Step::CreateDataClaim;
            };
            if rendered_data(claim, obs.data).is_none() {
                return Step::WaitForData {
                    message: data_wait_message(claim),
                };
            }
        }
        return Step::RequestDeployment;
    }
    if live_settings_edited(mm, host) {
        return Step::UpdateLiveSettings;
    }
    let status = host.status.clone().unwrap_or_default();
    let detail = status.status_message.clone().unwrap_or_default();
    let wait = |reason: &'static str, message: String, failed: bool| Step::WaitForDeployment {
        reason,
        message,
        failed,
    };
    match status.provisioning_state {
        Some(ProvisioningState::Deployed) => {
            if mm.spec.provider_id.is_none() || mm.spec.system_id.is_none() {
                Step::SetProviderId
            } else {
                Step::Provisioned
            }
        }
        Some(ProvisioningState::Deploying) => wait(
            reasons::MACHINE_DEPLOYING,
            format!("MAAS is deploying host {}", host.name_any()),
            false,
        ),
        None
        | Some(
            ProvisioningState::Available
            | ProvisioningState::Allocating
            | ProvisioningState::Allocated,
        ) => wait(
            reasons::MACHINE_DEPLOY_STARTED,
            format!("deployment of host {} requested", host.name_any()),
            false,
        ),
        Some(ProvisioningState::Failed) => wait(
            reasons::MACHINE_DEPLOY_FAILED,
            with_detail(
                format!("deployment of host {} failed", host.name_any()),
                &detail,
            ),
            true,
        ),
        Some(ProvisioningState::Broken) => wait(
            reasons::MACHINE_DEPLOY_FAILED,
            with_detail(
                format!("MAAS reports host {} broken", host.name_any()),
                &detail,
            ),
            true,
        ),
        Some(ProvisioningState::Missing) => wait(
            reasons::HOST_MISSING,
            format!("host {} disappeared from MAAS", host.name_any()),
            true,
        ),
        Some(ProvisioningState::Releasing | ProvisioningState::Unavailable) => wait(
            reasons::MACHINE_STATE_UNDEFINED,
            with_detail(
                format!(
                    "host {} is {}",
                    host.name_any(),
                    state_name(status.provisioning_state)
                ),
                &detail,
            ),
            false,
        ),
    }
}

/// The next step of an LXD machine with no host claimed, its bootstrap data there: ask for the
/// VM, wait for it, or claim it ([`crate::vm`]).
pub fn decide_vm(obs: &Observed<'_>) -> Step {
    let Some(vm_host) = obs.vm_host else {
        return Step::RequestVm;
    };
    let hostname = crate::vm::entry_of(vm_host, obs.maas_machine)
        .map(|e| e.hostname.clone())
        .unwrap_or_default();
    match obs.vm {
        Some(vm) if crate::vm::vm_claimable(vm) => Step::ClaimVm,
        vm => Step::WaitForVm {
            message: crate::vm::waiting_message(vm_host, &hostname, vm),
        },
    }
}

fn decide_delete(obs: &Observed<'_>) -> Step {
    if !has_finalizer(obs.maas_machine) {
        return Step::Done;
    }
    // Moved to another management cluster by `clusterctl move`: the host, its MAAS machine and
    // the data stay as they are, for the copy in the target cluster.
    if moved_by_clusterctl(obs) {
        return Step::RemoveFinalizer;
    }
    if is_paused(obs) {
        return Step::Paused;
    }
    let Some(host) = obs.host else {
        // The VM is released (or was never claimed): only now may its entry go, which lets
        // maas-client delete a VM that was never allocated.
        if obs.vm_host.is_some() {
            return Step::RemoveVmRequest;
        }
        // The host is released (or was never claimed): only now may the addresses go.
        if obs.data_claim.is_some_and(holds_data_claim) {
            return Step::ReleaseData;
        }
        return Step::RemoveFinalizer;
    };
    if host.spec.provisioning.is_some() {
        return Step::ClearProvisioning;
    }
    if is_released(host) {
        Step::ReleaseHost
    } else {
        Step::WaitForRelease {
            message: release_wait_message(host),
        }
    }
}

/// The condition message of a machine waiting for its host's release, naming the host's state.
/// The withdrawal of the deployment request says the same, so that the wait after it, the host
/// unchanged, writes nothing (a mass deletion is one status write less per machine, and with it
/// one Machine status patch of CAPI core's less).
pub fn release_wait_message(host: &MaasHost) -> String {
    let state = host.status.as_ref().and_then(|s| s.provisioning_state);
    format!(
        "waiting for host {} to be released (now {})",
        host.name_any(),
        state_name(state)
    )
}

/// Whether a deletion is `clusterctl move`'s: the annotation alone is not enough, since anyone
/// who may annotate and delete a MaasMachine could set it and leave the server deployed with no
/// owner. clusterctl pauses the Cluster before it deletes anything from the source and deletes
/// the Cluster last, so a move's deletion always finds its Cluster paused. An annotated machine
/// whose Cluster is not found is taken as moved too: releasing the servers of a cluster that
/// now runs from another management cluster would be the worse mistake.
pub fn moved_by_clusterctl(obs: &Observed<'_>) -> bool {
    keys::deleted_for_move(&obs.maas_machine.metadata) && obs.cluster.is_none_or(Cluster::is_paused)
}

/// A deletion annotated for `clusterctl move` while its Cluster runs unpaused: not a move.
pub fn move_annotation_ignored(obs: &Observed<'_>) -> bool {
    keys::deleted_for_move(&obs.maas_machine.metadata) && !moved_by_clusterctl(obs)
}

/// Whether the host's deployment request carries another release policy or power rule than
/// the machine's: the settings that may change while the host is deployed.
pub fn live_settings_edited(mm: &MaasMachine, host: &MaasHost) -> bool {
    host.spec.provisioning.as_ref().is_some_and(|p| {
        p.release_policy != mm.spec.release_policy || p.keep_powered_on != mm.spec.keep_powered_on
    })
}

/// Whether the MaasDataClaim still carries our finalizer (we have not let it go yet).
pub fn holds_data_claim(claim: &MaasDataClaim) -> bool {
    claim
        .finalizers()
        .iter()
        .any(|f| f == keys::FINALIZER_MAAS_MACHINE)
}

/// The rendered MaasData of `claim`: the one its status records, rendered and ready.
pub fn rendered_data<'a>(
    claim: &MaasDataClaim,
    data: Option<&'a MaasData>,
) -> Option<&'a MaasData> {
    let recorded = claim.status.as_ref()?.rendered_data.as_ref()?;
    data.filter(|d| {
        d.name_any() == recorded.name && d.status.as_ref().and_then(|s| s.ready) == Some(true)
    })
}

/// Why the data is not there yet, from the claim's `DataReady` (or `Ready`) condition.
pub fn data_wait_message(claim: &MaasDataClaim) -> String {
    let conditions = claim
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let explanation = [
        capmaas_api::conditions::DATA_READY,
        capmaas_api::conditions::READY,
    ]
    .iter()
    .find_map(|t| {
        conditions
            .iter()
            .find(|c| c.type_ == *t && c.status != "True" && !c.message.is_empty())
    })
    .map(|c| format!(": {}", c.message))
    .unwrap_or_default();
    format!(
        "waiting for MaasDataClaim {}{explanation}",
        claim.name_any()
    )
}

/// Whether the gateway has acted on the host's latest spec (no provisioning request) and
/// reports it free: `Available` (released), or gone from MAAS. A host the gateway never
/// reported on was never acted upon either.
pub fn is_released(host: &MaasHost) -> bool {
    let Some(status) = host.status.as_ref() else {
        return true;
    };
    let Some(state) = status.provisioning_state else {
        return true;
    };
    let observed = match (status.observed_generation, host.metadata.generation) {
        (Some(seen), Some(current)) => seen >= current,
        // Without generations there is nothing to compare: trust the state.
        (_, None) => true,
        (None, Some(_)) => false,
    };
    // `Missing` means MAAS answered 404 for the system id (the gateway reads the machine
    // directly before saying so), but only a status written after the release request counts:
    // an older one may predate it.
    let gone = status.missing == Some(true) || state == ProvisioningState::Missing;
    // MAAS deletes a composed VM when it is released: its host missing is its release.
    if gone && crate::vm::is_composed_vm(host) {
        return true;
    }
    observed && (gone || state == ProvisioningState::Available)
}

/// The Secret holding the user data: `spec.userData` if set, else the Machine's bootstrap
/// data Secret (key `value`).
pub fn bootstrap_secret(
    mm: &MaasMachine,
    machine: &Machine,
) -> Option<capmaas_api::common::SecretKeyReference> {
    if let Some(user_data) = &mm.spec.user_data {
        return Some(user_data.clone());
    }
    machine
        .spec
        .bootstrap
        .data_secret_name
        .as_deref()
        .filter(|n| !n.is_empty())
        .map(capmaas_api::common::SecretKeyReference::new)
}

/// The failure domain the machine must be placed in: CAPI's `Machine.spec.failureDomain`
/// wins over `MaasMachine.spec.failureDomain`.
pub fn failure_domain(mm: &MaasMachine, machine: Option<&Machine>) -> Option<String> {
    machine
        .and_then(|m| m.spec.failure_domain.clone())
        .or_else(|| mm.spec.failure_domain.clone())
        .filter(|fd| !fd.is_empty())
}

/// The host request of a machine: its constraints, the effective failure domain and the
/// owner whose node-reuse reservations it may take.
pub fn host_request(
    mm: &MaasMachine,
    machine: Option<&Machine>,
    reuse_owner_uid: Option<String>,
) -> HostRequest {
    HostRequest {
        failure_domain: failure_domain(mm, machine),
        reuse_owner_uid,
        namespace: mm.metadata.namespace.clone(),
        ..spec_request(&mm.spec)
    }
}

/// The constraints a MaasMachine spec puts on its host (a MaasMachineTemplate's too), with
/// the spec's own failure domain: no owner, no namespace preference, no busy host.
pub fn spec_request(spec: &capmaas_api::MaasMachineSpec) -> HostRequest {
    HostRequest {
        min_cpu: i64::from(spec.min_cpu),
        min_memory_mib: i64::from(spec.min_memory),
        min_disk_gib: spec.min_disk_size.map(i64::from),
        tags: spec.tags.clone().unwrap_or_default(),
        resource_pool: spec.resource_pool.clone().filter(|p| !p.is_empty()),
        failure_domain: spec.failure_domain.clone().filter(|fd| !fd.is_empty()),
        host_selector: spec.host_selector.clone(),
        ..HostRequest::default()
    }
}

fn with_detail(message: String, detail: &str) -> String {
    if detail.is_empty() {
        message
    } else {
        format!("{message}: {detail}")
    }
}

fn state_name(state: Option<ProvisioningState>) -> &'static str {
    state.map_or("unreported", ProvisioningState::as_str)
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
