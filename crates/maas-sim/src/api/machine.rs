//! `/machines/{system_id}/`: each operation to its handler (read, update, delete, the lifecycle
//! in `machine_ops`, power and state in `machine_state`).

use http::StatusCode;
use serde_json::json;

use super::{Call, Reply, machine_ops, machine_state, machines_update};
use crate::error::ApiError;
use crate::vmhost_events::VmHostEventKind;

pub(super) fn dispatch(action: &str, call: &mut Call<'_>) -> Result<Reply, ApiError> {
    match action {
        "read" => {
            let index = machine_ops::find(call)?;
            Ok(machine_ops::machine_reply(call.world, index))
        }
        "update" => machines_update::update(call),
        "delete" => delete(call),
        "deploy" => machine_ops::deploy(call),
        "release" => machine_ops::release(call),
        "abort" => machine_ops::abort(call),
        "power_on" => machine_state::power_on(call),
        "power_off" => machine_state::power_off(call),
        "query_power_state" => {
            let index = machine_ops::find(call)?;
            Ok(Reply::ok(
                json!({"state": call.world.machines[index].power_state.as_str()}),
            ))
        }
        "mark_broken" => machine_state::mark_broken(call),
        "mark_fixed" => machine_state::mark_fixed(call),
        "set_owner_data" | "set_workload_annotations" => machine_state::set_owner_data(call),
        "commission" => machine_state::commission(call),
        "lock" | "unlock" => machine_state::lock(call, action == "lock"),
        _ => Err(ApiError::internal(format!(
            "unhandled machine action {action}"
        ))),
    }
}

/// `DELETE /machines/{system_id}/` (`MachineHandler.delete`): `get_node_or_404` with the
/// admin permission, so an unknown id is a 404 for anyone and a known one a 403 without a
/// body for a non-admin; then 204. A machine composed on a VM host is deleted with its VM
/// (its cores, memory and storage are the VM host's again, as after a release); a machine
/// that is a VM host takes its VM host with it, the machines composed on it stay (inferred).
fn delete(call: &mut Call<'_>) -> Result<Reply, ApiError> {
    let index = machine_ops::find(call)?;
    if !call.caller.is_admin {
        return Err(ApiError::forbidden_empty());
    }
    if let Some(host) = call.world.hosted_vm_host(call.arg(0)) {
        call.world.delete_vm_host(host, false);
    }
    let machine = call.world.machines.remove(index);
    if let Some(host) = machine
        .vm_host_id
        .and_then(|id| call.world.vm_hosts.iter().position(|h| h.id == id))
    {
        call.world
            .record_vm_host(VmHostEventKind::Decomposed, host, Some(machine.system_id));
    }
    call.world.dirty = true;
    Ok(Reply::Empty(StatusCode::NO_CONTENT))
}
