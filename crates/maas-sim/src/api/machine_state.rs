//! Machine power and state operations: power_on/off, mark_broken/fixed, workload
//! annotations, commission, lock/unlock.

use serde_json::Value;

use super::machine_ops::{deploy, find, find_editable, machine_reply, require_owner_or_admin};
use super::{Call, Reply};
use crate::error::ApiError;
use crate::model::{Outcome, Pending, PendingKind, PendingPower, PowerState};
use crate::status::NodeStatus;
use crate::world::finalize_release;

pub(super) fn power_on(call: &mut Call<'_>) -> Result<Reply, ApiError> {
    let index = find_editable(call)?;
    let m = &call.world.machines[index];
    if m.owner.is_none() {
        return Err(ApiError::conflict(
            "Can't start node: it hasn't been allocated.",
        ));
    }
    require_owner_or_admin(call, index)?;
    if m.status == NodeStatus::Allocated {
        // On an Allocated machine power_on *is* a deploy, with the default image.
        return deploy(call);
    }
    let pending = PendingPower::starting(
        PowerState::On,
        call.world.now_ms(),
        call.world.timings.power,
    );
    let m = &mut call.world.machines[index];
    m.power_on_count += 1;
    m.pending_power = Some(pending);
    call.world.dirty = true;
    call.world.advance();
    Ok(machine_reply(call.world, index))
}

pub(super) fn power_off(call: &mut Call<'_>) -> Result<Reply, ApiError> {
    let index = find_editable(call)?;
    require_owner_or_admin(call, index)?;
    if call.world.machines[index].power_type == "manual" {
        return Ok(Reply::ok(Value::Null));
    }
    let pending = PendingPower::starting(
        PowerState::Off,
        call.world.now_ms(),
        call.world.timings.power,
    );
    call.world.machines[index].pending_power = Some(pending);
    call.world.dirty = true;
    call.world.advance();
    Ok(machine_reply(call.world, index))
}

pub(super) fn mark_broken(call: &mut Call<'_>) -> Result<Reply, ApiError> {
    let index = find(call)?;
    let m = &call.world.machines[index];
    let is_owner = m.owner.as_deref() == Some(call.caller.username.as_str());
    if !(is_owner || (m.owner.is_none() && call.caller.is_admin)) {
        return Err(ApiError::forbidden_empty());
    }
    let comment = call
        .params
        .get("comment")
        .or_else(|| call.params.get("error_description"))
        .unwrap_or_default();
    let m = &mut call.world.machines[index];
    if m.status != NodeStatus::Broken {
        m.status_before_broken = Some(m.status);
    }
    m.pending = None;
    m.status = NodeStatus::Broken;
    m.status_message = Some("Marked broken".to_owned());
    comment.clone_into(&mut m.error_description);
    call.world.dirty = true;
    Ok(machine_reply(call.world, index))
}

pub(super) fn mark_fixed(call: &mut Call<'_>) -> Result<Reply, ApiError> {
    call.require_admin()?;
    let index = find(call)?;
    let m = &mut call.world.machines[index];
    if m.status != NodeStatus::Broken {
        return Err(ApiError::conflict(
            "Can't mark a non-broken node as 'Ready'.",
        ));
    }
    if m.status_before_broken.take() == Some(NodeStatus::Deployed) {
        m.status = NodeStatus::Deployed;
        m.status_message = Some("Deployed".to_owned());
    } else {
        finalize_release(m);
    }
    m.error_description.clear();
    call.world.dirty = true;
    Ok(machine_reply(call.world, index))
}

fn valid_owner_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '.' || c == '-')
}

pub(super) fn set_owner_data(call: &mut Call<'_>) -> Result<Reply, ApiError> {
    let index = find(call)?;
    let m = &call.world.machines[index];
    match m.owner.as_deref() {
        None => {
            return Err(ApiError::conflict(
                "Cannot set workload annotation: it hasn't been acquired.",
            ));
        }
        Some(owner) if owner != call.caller.username && !call.caller.is_admin => {
            return Err(ApiError::forbidden_empty());
        }
        Some(_) => {}
    }
    let updates: Vec<(String, String)> = call
        .params
        .pairs()
        .iter()
        .filter(|(k, _)| k != "op")
        .cloned()
        .collect();
    if updates.iter().any(|(k, _)| !valid_owner_key(k)) {
        return Err(ApiError::internal("Invalid character in key name"));
    }
    let m = &mut call.world.machines[index];
    for (key, value) in updates {
        if value.is_empty() {
            m.owner_data.remove(&key);
        } else {
            m.owner_data.insert(key, value);
        }
    }
    call.world.dirty = true;
    Ok(machine_reply(call.world, index))
}

pub(super) fn commission(call: &mut Call<'_>) -> Result<Reply, ApiError> {
    call.require_admin()?;
    let index = find_editable(call)?;
    let pending = Pending::starting(
        PendingKind::Commission,
        call.world.now_ms(),
        call.world.timings.commission,
        Outcome::Success,
    );
    let m = &mut call.world.machines[index];
    if !m.status.can_move_to(NodeStatus::Commissioning) || m.status == NodeStatus::Commissioning {
        return Err(ApiError::conflict(format!(
            "Can't commission a machine that is in the '{}' state",
            m.status.name()
        )));
    }
    m.status = NodeStatus::Commissioning;
    m.status_message = Some("Commissioning".to_owned());
    "commission".clone_into(&mut m.status_action);
    m.power_state = PowerState::On;
    m.pending = Some(pending);
    call.world.dirty = true;
    Ok(machine_reply(call.world, index))
}

pub(super) fn lock(call: &mut Call<'_>, lock: bool) -> Result<Reply, ApiError> {
    let index = find(call)?;
    require_owner_or_admin(call, index)?;
    let m = &mut call.world.machines[index];
    if lock && !matches!(m.status, NodeStatus::Deployed | NodeStatus::Deploying) {
        return Err(ApiError::conflict("Can only lock deployed machines."));
    }
    m.locked = lock;
    call.world.dirty = true;
    Ok(machine_reply(call.world, index))
}
