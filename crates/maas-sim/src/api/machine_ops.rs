//! The lifecycle operations of one machine (deploy, release, abort) and the lookups and checks
//! every `/machines/{system_id}/` handler shares.

use http::StatusCode;

use super::{Call, Reply, visible};
use crate::error::ApiError;
use crate::model::{
    Outcome, Pending, PendingKind, PendingPower, PowerState, ReleaseRecord, ReleaseResult,
};
use crate::params::{Params, decode_base64_lenient};
use crate::render;
use crate::status::NodeStatus;
use crate::world::{World, finalize_release, settle_release};

/// Kind of disk erasure requested with a release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EraseMode {
    None,
    Full,
    Quick,
}

/// The flags of a release request, as MAAS reads them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct ReleaseFlags {
    pub(crate) erase: bool,
    pub(crate) quick_erase: bool,
    pub(crate) secure_erase: bool,
    pub(crate) force: bool,
}

impl ReleaseFlags {
    /// The erasure they ask for: `erase` or `secure_erase` erase the whole disk, `quick_erase`
    /// alone (or with `erase`) only its start and end.
    pub(crate) fn mode(self) -> EraseMode {
        let erase = self.erase || self.secure_erase;
        match (
            erase || self.quick_erase,
            self.quick_erase && !self.secure_erase,
        ) {
            (false, _) => EraseMode::None,
            (true, true) => EraseMode::Quick,
            (true, false) => EraseMode::Full,
        }
    }
}

/// MAAS's limit on `agent_name` (`Node.agent_name`, `CharField(max_length=255)`).
const AGENT_NAME_MAX_CHARS: usize = 255;

/// The `agent_name` of an allocation (allocate, or the implicit allocation of deploy): the
/// last value sent, `""` when none. MAAS takes it as is and checks it only when the allocation
/// saves the machine (`CleanSave` runs `full_clean`): longer than 255 characters is a 400 on
/// `agent_name` and the allocation rolls back, so call this before [`acquire`] changes anything.
pub(crate) fn allocation_agent_name(params: &Params) -> Result<String, ApiError> {
    let agent_name = params.get("agent_name").unwrap_or_default();
    ApiError::check_max_length("agent_name", AGENT_NAME_MAX_CHARS, agent_name)?;
    Ok(agent_name.to_owned())
}

/// Takes a Ready machine for `user` (allocate, or the implicit allocation of deploy).
pub(crate) fn acquire(
    world: &mut World,
    index: usize,
    user: &str,
    agent_name: &str,
    comment: &str,
) {
    let now = world.now_ms();
    let m = &mut world.machines[index];
    m.status = NodeStatus::Allocated;
    // Noted here: a deploy of a Ready machine allocates and starts deploying in one call, and
    // the allocation would otherwise never show in the history.
    m.history.note(NodeStatus::Allocated, now);
    m.status_message = Some("Allocated".to_owned());
    "acquire".clone_into(&mut m.status_action);
    m.owner = Some(user.to_owned());
    agent_name.clone_into(&mut m.agent_name);
    comment.clone_into(&mut m.last_comment);
    world.dirty = true;
}

/// Starts a release; finishes it at once when MAAS would (power already off, or zero time).
///
/// As in MAAS, an erasing release erases first and releases afterwards: the agent name, the
/// OS fields and the workload annotations stay through Disk erasing and Failed disk erasing,
/// and go only when the erase is done. A release without erase drops them at once. Every
/// accepted request is recorded with its flags ([`ReleaseRecord`]).
pub(crate) fn start_release(world: &mut World, index: usize, flags: ReleaseFlags, comment: &str) {
    let now = world.now_ms();
    let timings = world.timings;
    let erase = flags.mode();
    let outcome = world.release_outcome(erase != EraseMode::None);
    let m = &mut world.machines[index];
    m.releases.push(ReleaseRecord {
        erase: flags.erase,
        quick_erase: flags.quick_erase,
        secure_erase: flags.secure_erase,
        force: flags.force,
        comment: comment.to_owned(),
        result: ReleaseResult::InProgress,
    });
    comment.clone_into(&mut m.last_comment);
    "release".clone_into(&mut m.status_action);
    m.pending_power = None;
    match erase {
        EraseMode::None => {
            m.agent_name.clear();
            m.osystem.clear();
            m.distro_series.clear();
            m.hwe_kernel = None;
            m.enable_hw_sync = false;
            if outcome == Outcome::Success
                && (m.power_state == PowerState::Off || timings.release.is_zero())
            {
                finalize_release(m);
                settle_release(m, ReleaseResult::Released);
            } else {
                m.status = NodeStatus::Releasing;
                m.status_message = Some("Releasing".to_owned());
                m.pending = Some(Pending::starting(
                    PendingKind::Release,
                    now,
                    timings.release,
                    outcome,
                ));
            }
        }
        EraseMode::Full | EraseMode::Quick => {
            let span = if erase == EraseMode::Quick {
                timings.erase / 10
            } else {
                timings.erase
            };
            m.status = NodeStatus::DiskErasing;
            m.status_message = Some("Erasing disks".to_owned());
            m.power_state = PowerState::On;
            m.pending = Some(Pending::starting(PendingKind::Erase, now, span, outcome));
        }
    }
    world.dirty = true;
}

pub(super) fn find(call: &Call<'_>) -> Result<usize, ApiError> {
    let index = call
        .world
        .machine_index(call.arg(0))
        .ok_or_else(|| ApiError::no_match("Machine"))?;
    if !visible(&call.world.machines[index], call.caller) {
        return Err(ApiError::forbidden_empty());
    }
    Ok(index)
}

/// Editing needs the machine unowned, owned by the caller, or an admin; locked refuses.
pub(super) fn find_editable(call: &Call<'_>) -> Result<usize, ApiError> {
    let index = find(call)?;
    if call.world.machines[index].locked {
        return Err(ApiError::text(
            StatusCode::FORBIDDEN,
            "Cannot modify a locked machine.",
        ));
    }
    Ok(index)
}

pub(super) fn machine_reply(world: &World, index: usize) -> Reply {
    Reply::ok(render::machine(world, &world.machines[index]))
}

/// Resolves `distro_series` against the boot resources: `jammy`, `ubuntu/jammy`, `22.04`,
/// `ubuntu/22.04`, a custom image name or `custom/NAME`. Returns `(osystem, series)`.
pub(crate) fn resolve_image(world: &World, requested: &str) -> Result<(String, String), ApiError> {
    let requested = if requested.is_empty() {
        "jammy"
    } else {
        requested
    };
    let bare = requested.strip_prefix("custom/").unwrap_or(requested);
    let candidates = world.boot_resources.iter().map(|b| (b, b.os_and_series()));
    for (resource, (os, series)) in candidates {
        let version = resource.title.split_whitespace().nth(1).unwrap_or("");
        let ubuntu_match = os == "ubuntu"
            && (requested == series
                || requested == format!("ubuntu/{series}")
                || requested == version
                || requested == format!("ubuntu/{version}"));
        if ubuntu_match || resource.name == bare || resource.name == requested {
            return Ok((os, series));
        }
    }
    let valid: Vec<String> = world
        .boot_resources
        .iter()
        .map(|b| {
            let (os, series) = b.os_and_series();
            format!("'{os}/{series}'")
        })
        .collect();
    Err(ApiError::field(
        "distro_series",
        format!(
            "'{requested}' is not a valid distro_series.  It should be one of: '', {}.",
            valid.join(", ")
        ),
    ))
}

pub(super) fn deploy(call: &mut Call<'_>) -> Result<Reply, ApiError> {
    let index = find_editable(call)?;
    let status = call.world.machines[index].status;
    if !matches!(status, NodeStatus::Ready | NodeStatus::Allocated) {
        return Err(ApiError::conflict(format!(
            "Can't deploy a machine that is in the '{}' state",
            status.name()
        )));
    }
    if call.params.bool("install_rackd")? {
        return Err(ApiError::bad_request(
            "Deploying a machine as a rackd has been disabled. Please install rackd manually.",
        ));
    }
    let vm_host_kind = vm_host_registration(call)?;
    // Validate everything first: a failed deploy rolls back its implicit allocation too.
    // In MAAS's order: the allocation options (`get_allocation_options`), then the implicit
    // allocation of a Ready machine (owner check, `agent_name` checked as it saves), then the
    // image and kernel.
    let ephemeral = call.params.bool("ephemeral_deploy")?;
    let hw_sync = call.params.bool("enable_hw_sync")?;
    let allocation = if status == NodeStatus::Ready {
        if call.world.machines[index]
            .owner
            .as_deref()
            .is_some_and(|o| o != call.caller.username)
        {
            return Err(ApiError::forbidden_empty());
        }
        let agent_name = allocation_agent_name(call.params)?;
        let comment = call.params.get("comment").unwrap_or_default().to_owned();
        Some((agent_name, comment))
    } else {
        None
    };
    let (osystem, series) = resolve_image(
        call.world,
        call.params.get("distro_series").unwrap_or_default(),
    )?;
    let hwe_kernel = call
        .params
        .get_nonempty("hwe_kernel")
        .map(ToOwned::to_owned);
    if let Some(kernel) = &hwe_kernel {
        let known = ["ga-", "hwe-", "generic", "lowlatency"]
            .iter()
            .any(|p| kernel.starts_with(p) || kernel.contains(p));
        if !known {
            return Err(ApiError::field(
                "hwe_kernel",
                format!(
                    "{kernel} is not available for {osystem}/{series} on {}.",
                    call.world.machines[index].architecture
                ),
            ));
        }
    }
    let user_data = call.params.get_nonempty("user_data").map(|text| {
        decode_base64_lenient(text.as_bytes()).unwrap_or_else(|_| text.as_bytes().to_vec())
    });
    if let Some((agent_name, comment)) = allocation {
        acquire(
            call.world,
            index,
            &call.caller.username,
            &agent_name,
            &comment,
        );
    }
    start_deploy(
        call.world, index, osystem, series, hwe_kernel, user_data, ephemeral, hw_sync,
    );
    call.world.machines[index].register_vmhost = vm_host_kind;
    Ok(machine_reply(call.world, index))
}

/// The VM host a deploy asks to become: `register_vmhost=true` an LXD one, `install_kvm=true`
/// a virsh one (MAAS 3.x: admins only, not with `ephemeral_deploy`). A MAAS without VM hosts
/// refuses either parameter, whatever its value.
fn vm_host_registration(call: &Call<'_>) -> Result<Option<String>, ApiError> {
    let asked = ["register_vmhost", "install_kvm"]
        .iter()
        .any(|key| call.params.contains(key));
    if !asked {
        return Ok(None);
    }
    if !call.world.vm_hosts_supported {
        return Err(ApiError::bad_request(
            "Support for install_kvm allocation parameter has been removed.",
        ));
    }
    let kind = if call.params.bool("register_vmhost")? {
        "lxd"
    } else if call.params.bool("install_kvm")? {
        "virsh"
    } else {
        return Ok(None);
    };
    if !call.caller.is_admin {
        return Err(ApiError::forbidden_empty());
    }
    if call.params.bool("ephemeral_deploy")? {
        return Err(ApiError::bad_request(
            "A machine can not be a VM host if it is deployed to memory.",
        ));
    }
    Ok(Some(kind.to_owned()))
}

/// Releasing the machine a VM host runs on tears the VM host down: refused while machines are
/// composed on it unless `force` (then they are deleted with it). Inferred from the `force`
/// documentation; see docs/maas-sim.md.
pub(crate) fn release_vm_host(
    world: &mut World,
    index: usize,
    force: bool,
) -> Result<(), ApiError> {
    let system_id = world.machines[index].system_id.clone();
    let Some(host) = world.hosted_vm_host(&system_id) else {
        world.machines[index].register_vmhost = None;
        return Ok(());
    };
    let id = world.vm_hosts[host].id;
    let vms = world.vm_host_machines(id).count();
    if vms > 0 && !force {
        return Err(ApiError::bad_request(format!(
            "Machine {} is a VM host with {vms} machine(s) composed on it; release it with force=true to delete them.",
            world.machines[index].hostname
        )));
    }
    world.delete_vm_host(host, true);
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn start_deploy(
    world: &mut World,
    index: usize,
    osystem: String,
    series: String,
    hwe_kernel: Option<String>,
    user_data: Option<Vec<u8>>,
    ephemeral: bool,
    hw_sync: bool,
) {
    let now = world.now_ms();
    let timings = world.timings;
    let system_id = world.machines[index].system_id.clone();
    let outcome = world.deploy_outcome(&system_id);
    world.assign_auto_ips(index);
    let deploy_time = timings.deploy_for(world.seed, &system_id);
    let m = &mut world.machines[index];
    m.status = NodeStatus::Deploying;
    m.history.note(NodeStatus::Deploying, now);
    m.status_message = Some("Deploying".to_owned());
    "start".clone_into(&mut m.status_action);
    m.error_description.clear();
    m.osystem = osystem;
    m.distro_series = series;
    // MAAS picks the GA kernel of the Ubuntu release when none is asked for.
    let default_kernel = match m.distro_series.as_str() {
        "focal" => Some("ga-20.04"),
        "jammy" => Some("ga-22.04"),
        "noble" => Some("ga-24.04"),
        _ => None,
    };
    m.hwe_kernel = hwe_kernel.or_else(|| default_kernel.map(ToOwned::to_owned));
    m.user_data = user_data;
    m.ephemeral_deploy = ephemeral;
    m.enable_hw_sync = hw_sync;
    m.power_on_count += 1;
    m.pending = Some(Pending::starting(
        PendingKind::Deploy,
        now,
        deploy_time,
        outcome,
    ));
    if outcome != Outcome::PowerFail {
        m.pending_power = Some(PendingPower::starting(PowerState::On, now, timings.power));
    }
    world.dirty = true;
}

pub(super) fn require_owner_or_admin(call: &Call<'_>, index: usize) -> Result<(), ApiError> {
    let m = &call.world.machines[index];
    if call.caller.is_admin || m.owner.as_deref() == Some(call.caller.username.as_str()) {
        Ok(())
    } else {
        Err(ApiError::forbidden_empty())
    }
}

pub(super) fn release(call: &mut Call<'_>) -> Result<Reply, ApiError> {
    let index = find_editable(call)?;
    let status = call.world.machines[index].status;
    if matches!(status, NodeStatus::Ready | NodeStatus::Releasing) {
        return Ok(machine_reply(call.world, index));
    }
    require_owner_or_admin(call, index)?;
    if !status.is_releasable() {
        return Err(ApiError::conflict(format!(
            "Machine cannot be released in its current state ('{}').",
            status.name()
        )));
    }
    let (erase, secure_erase, quick_erase) = call.world.settings.release_erase(
        call.params.bool("erase")?,
        optional_bool(call, "secure_erase")?,
        optional_bool(call, "quick_erase")?,
    );
    let flags = ReleaseFlags {
        erase,
        quick_erase,
        secure_erase,
        force: call.params.bool("force")?,
    };
    let comment = call.params.get("comment").unwrap_or_default().to_owned();
    release_vm_host(call.world, index, flags.force)?;
    // Deleting the VM host's machines shifted the indexes.
    let index = find(call)?;
    start_release(call.world, index, flags, &comment);
    Ok(machine_reply(call.world, index))
}

/// A boolean parameter that may be absent (MAAS then uses its configured default).
fn optional_bool(call: &Call<'_>, key: &str) -> Result<Option<bool>, ApiError> {
    if call.params.contains(key) {
        call.params.bool(key).map(Some)
    } else {
        Ok(None)
    }
}

pub(super) fn abort(call: &mut Call<'_>) -> Result<Reply, ApiError> {
    let index = find_editable(call)?;
    require_owner_or_admin(call, index)?;
    let m = &mut call.world.machines[index];
    if !m.status.is_abortable() {
        return Err(ApiError::conflict(format!(
            "Cannot abort in current state: node {} is in state {}.",
            m.system_id,
            m.status.name()
        )));
    }
    m.pending = None;
    m.pending_power = None;
    m.register_vmhost = None;
    m.status = match m.status {
        NodeStatus::Deploying => {
            m.power_state = PowerState::Off;
            NodeStatus::Allocated
        }
        NodeStatus::DiskErasing => {
            settle_release(m, ReleaseResult::Failed);
            NodeStatus::FailedDiskErasing
        }
        NodeStatus::Commissioning => NodeStatus::New,
        _ => NodeStatus::FailedTesting,
    };
    m.status_message = Some(format!("Aborted {}", m.status_action));
    call.params
        .get("comment")
        .unwrap_or_default()
        .clone_into(&mut m.last_comment);
    call.world.dirty = true;
    Ok(machine_reply(call.world, index))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(erase: bool, quick_erase: bool, secure_erase: bool) -> ReleaseFlags {
        ReleaseFlags {
            erase,
            quick_erase,
            secure_erase,
            force: false,
        }
    }

    #[test]
    fn release_flags_select_the_erase_mode() {
        assert_eq!(flags(false, false, false).mode(), EraseMode::None);
        assert_eq!(flags(true, false, false).mode(), EraseMode::Full);
        assert_eq!(flags(true, false, true).mode(), EraseMode::Full);
        assert_eq!(flags(false, false, true).mode(), EraseMode::Full);
        assert_eq!(flags(true, true, false).mode(), EraseMode::Quick);
        assert_eq!(flags(false, true, false).mode(), EraseMode::Quick);
        assert_eq!(flags(true, true, true).mode(), EraseMode::Full);
    }
}
