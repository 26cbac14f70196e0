//! `/machines/`: list with filters, allocate, list_allocated, bulk release.

use serde_json::{Value, json};

use super::{Call, Reply, machine_ops, visible};
use crate::criteria::{self, Mode};
use crate::error::ApiError;
use crate::render;
use crate::selection;
use crate::status::NodeStatus;

pub(super) fn collection(action: &str, call: &mut Call<'_>) -> Result<Reply, ApiError> {
    match action {
        "read" => list(call),
        "allocate" => allocate(call),
        "list_allocated" => {
            let world = &*call.world;
            let items: Vec<Value> = world
                .machines
                .iter()
                .filter(|m| m.owner.as_deref() == Some(call.caller.username.as_str()))
                .map(|m| render::machine(world, m))
                .collect();
            Ok(Reply::ok(Value::Array(items)))
        }
        "release" => bulk_release(call),
        _ => Err(ApiError::internal(format!(
            "unhandled machines action {action}"
        ))),
    }
}

fn list(call: &mut Call<'_>) -> Result<Reply, ApiError> {
    let world = &*call.world;
    let criteria = criteria::parse(call.params, world, Mode::List)?;
    let items: Vec<Value> = world
        .machines
        .iter()
        .filter(|m| visible(m, call.caller) && selection::matches(&criteria, m, world))
        .map(|m| render::machine(world, m))
        .collect();
    Ok(Reply::ok(Value::Array(items)))
}

fn allocate(call: &mut Call<'_>) -> Result<Reply, ApiError> {
    let criteria = criteria::parse(call.params, call.world, Mode::Allocate)?;
    let dry_run = call.params.bool("dry_run")?;
    let caller = call.caller;
    // The whole choose-and-take runs under the world lock (MAAS's `node_acquire` lock).
    let Some(index) = selection::choose(call.world, &criteria, |m| visible(m, caller) && !m.locked)
    else {
        return Err(ApiError::conflict(selection::no_match_message(
            call.params,
            &criteria,
        )));
    };
    if !dry_run {
        // Checked as MAAS does, when the allocation saves the chosen machine: after the 409s,
        // never for a dry run, and before anything changes.
        let agent_name = machine_ops::allocation_agent_name(call.params)?;
        let comment = call.params.get("comment").unwrap_or_default().to_owned();
        machine_ops::acquire(call.world, index, &caller.username, &agent_name, &comment);
    }
    let world = &*call.world;
    let mut value = render::machine(world, &world.machines[index]);
    value["constraints_by_type"] = json!({});
    Ok(Reply::ok(value))
}

fn bulk_release(call: &mut Call<'_>) -> Result<Reply, ApiError> {
    let ids: Vec<String> = call
        .params
        .all("machines")
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    let mut indexes = Vec::new();
    let mut forbidden = Vec::new();
    let mut bad_state = Vec::new();
    for id in &ids {
        let index = call
            .world
            .machine_index(id)
            .ok_or_else(|| ApiError::no_match("Machine"))?;
        let m = &call.world.machines[index];
        if !call.caller.is_admin && m.owner.as_deref() != Some(call.caller.username.as_str()) {
            forbidden.push(id.clone());
        } else if !(m.status.is_releasable()
            || matches!(m.status, NodeStatus::Ready | NodeStatus::Releasing))
        {
            bad_state.push(format!("{} ('{}')", id, m.status.name()));
        } else {
            indexes.push(index);
        }
    }
    if !forbidden.is_empty() {
        return Err(ApiError::text(
            http::StatusCode::FORBIDDEN,
            format!(
                "You don't have the required permission to release the following machine(s): {}.",
                forbidden.join(", ")
            ),
        ));
    }
    if !bad_state.is_empty() {
        return Err(ApiError::conflict(format!(
            "Machine(s) cannot be released in their current state: {}.",
            bad_state.join(", ")
        )));
    }
    // A VM host with machines composed on it needs `force`, which bulk release has not.
    for index in &indexes {
        let m = &call.world.machines[*index];
        if let Some(host) = call.world.hosted_vm_host(&m.system_id) {
            let id = call.world.vm_hosts[host].id;
            let vms = call.world.vm_host_machines(id).count();
            if vms > 0 {
                return Err(ApiError::bad_request(format!(
                    "Machine {} is a VM host with {vms} machine(s) composed on it; release it with force=true to delete them.",
                    m.hostname
                )));
            }
        }
    }
    let comment = call.params.get("comment").unwrap_or_default().to_owned();
    for index in indexes {
        // No machines are composed on it (checked above): only the VM host goes.
        machine_ops::release_vm_host(call.world, index, false)?;
        machine_ops::start_release(
            call.world,
            index,
            machine_ops::ReleaseFlags::default(),
            &comment,
        );
    }
    Ok(Reply::ok(json!(ids)))
}
