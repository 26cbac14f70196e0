//! `/vm-hosts/` and `/vm-hosts/{id}/` (also served as `/pods/`): list, register, read, update,
//! delete and compose (MAAS 3.x; a MAAS without VM hosts answers 404 before getting here).

use std::collections::BTreeSet;

use http::StatusCode;
use serde_json::{Value, json};

use super::{Call, Reply};
use crate::error::ApiError;
use crate::model::VmHost;
use crate::render::{self, API};
use crate::routes::Kind;
use crate::vmhost_events::VmHostEventKind;
use crate::vmhosts::{ComposeSpec, overcommitted};

/// Resources of a VM host registered through the API: the simulator cannot ask an LXD
/// server, so every such host has these (inferred; a test that needs others pre-creates
/// VM hosts with the control API or `SimHandle::add_vm_host`).
pub(crate) const REGISTERED_CORES: u32 = 16;
/// MiB.
pub(crate) const REGISTERED_MEMORY: u64 = 65_536;
/// Bytes.
pub(crate) const REGISTERED_STORAGE: u64 = 1_000_000_000_000;

/// MAAS's defaults of a compose request (`DEFAULT_COMPOSED_*`).
const DEFAULT_CORES: u32 = 1;
const DEFAULT_MEMORY: u64 = 2048;
const DEFAULT_STORAGE_GB: u64 = 8;

pub(super) fn dispatch(kind: Kind, action: &str, call: &mut Call<'_>) -> Result<Reply, ApiError> {
    match (kind, action) {
        (Kind::VmHosts, "read") => {
            let world = &*call.world;
            let items: Vec<Value> = world
                .vm_hosts
                .iter()
                .map(|h| render::vm_host(world, h))
                .collect();
            Ok(Reply::ok(Value::Array(items)))
        }
        (Kind::VmHosts, "create") => create(call),
        (Kind::VmHost, "read") => {
            let index = find(call)?;
            Ok(reply(call, index))
        }
        (Kind::VmHost, "update") => update(call),
        (Kind::VmHost, "delete") => {
            let index = find_editable(call)?;
            let decompose = call.params.bool("decompose")?;
            call.world.delete_vm_host(index, decompose);
            Ok(Reply::Empty(StatusCode::NO_CONTENT))
        }
        (Kind::VmHost, "compose") => compose(call),
        _ => Err(ApiError::internal(format!(
            "unhandled VM host action {action}"
        ))),
    }
}

fn reply(call: &Call<'_>, index: usize) -> Reply {
    Reply::ok(render::vm_host(call.world, &call.world.vm_hosts[index]))
}

/// `Pod.objects.get_pod_or_404`: 404 `No Pod matches the given query.`
fn find(call: &Call<'_>) -> Result<usize, ApiError> {
    call.world
        .vm_host_index(call.arg(0))
        .ok_or_else(|| ApiError::no_match("Pod"))
}

/// Edit and compose need `PodPermission.edit`/`compose`: admins only without RBAC; the
/// refusal is Django's `PermissionDenied`, a 403 without a body.
fn find_editable(call: &Call<'_>) -> Result<usize, ApiError> {
    let index = find(call)?;
    if call.caller.is_admin {
        Ok(index)
    } else {
        Err(ApiError::forbidden_empty())
    }
}

fn zone_param(call: &Call<'_>, current: &str) -> Result<String, ApiError> {
    match call.params.get_nonempty("zone") {
        None => Ok(current.to_owned()),
        Some(key) => call
            .world
            .zones
            .iter()
            .find(|z| z.name == key || z.id.to_string() == key)
            .map(|z| z.name.clone())
            .ok_or_else(|| ApiError::invalid_model_choice("zone")),
    }
}

fn pool_param(call: &Call<'_>, current: &str) -> Result<String, ApiError> {
    match call.params.get_nonempty("pool") {
        None => Ok(current.to_owned()),
        Some(key) => call
            .world
            .pools
            .iter()
            .find(|p| p.name == key || p.id.to_string() == key)
            .map(|p| p.name.clone())
            .ok_or_else(|| ApiError::invalid_model_choice("pool")),
    }
}

/// An overcommit ratio: a float in `0..=10` (the model's validators).
fn ratio_param(call: &Call<'_>, key: &str, current: f64) -> Result<f64, ApiError> {
    let Some(text) = call.params.get_nonempty(key) else {
        return Ok(current);
    };
    let value: f64 = text
        .trim()
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite())
        .ok_or_else(|| ApiError::field(key, "Enter a number."))?;
    if value < 0.0 {
        return Err(ApiError::field(
            key,
            "Ensure this value is greater than or equal to 0.",
        ));
    }
    if value > 10.0 {
        return Err(ApiError::field(
            key,
            "Ensure this value is less than or equal to 10.",
        ));
    }
    Ok(value)
}

/// `tags`: comma-separated (or repeated) names; naming a tag creates it.
fn tags_param(call: &mut Call<'_>) -> Option<BTreeSet<String>> {
    if !call.params.contains("tags") {
        return None;
    }
    let tags: BTreeSet<String> = call
        .params
        .all("tags")
        .iter()
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(ToOwned::to_owned)
        .collect();
    Some(tags)
}

fn check_unique_name(call: &Call<'_>, name: &str, except: Option<u64>) -> Result<(), ApiError> {
    if call
        .world
        .vm_hosts
        .iter()
        .any(|h| h.name == name && Some(h.id) != except)
    {
        return Err(ApiError::field(
            "name",
            "Pod with this Name already exists.",
        ));
    }
    Ok(())
}

/// `POST /vm-hosts/` (admin): registers an LXD or virsh host.
fn create(call: &mut Call<'_>) -> Result<Reply, ApiError> {
    call.require_admin()?;
    let kind = call.params.required_choice("type", |t| {
        ["lxd", "virsh"].contains(&t).then(|| t.to_owned())
    })?;
    let power_address = call.params.required("power_address")?.to_owned();
    let zone = zone_param(call, "default")?;
    let pool = pool_param(call, "default")?;
    let cpu_ratio = ratio_param(call, "cpu_over_commit_ratio", 1.0)?;
    let memory_ratio = ratio_param(call, "memory_over_commit_ratio", 1.0)?;
    let id = call.world.next_id + 1;
    let name = call
        .params
        .get_nonempty("name")
        .map_or_else(|| format!("vmhost-{id}"), ToOwned::to_owned);
    check_unique_name(call, &name, None)?;
    let tags = tags_param(call).unwrap_or_default();
    for tag in &tags {
        call.world.ensure_tag(tag);
    }
    let id = call.world.new_id();
    let index = call.world.add_vm_host(VmHost {
        id,
        name,
        kind,
        power_address,
        zone,
        pool,
        host_system_id: None,
        cores: REGISTERED_CORES,
        memory: REGISTERED_MEMORY,
        local_storage: REGISTERED_STORAGE,
        cpu_over_commit_ratio: cpu_ratio,
        memory_over_commit_ratio: memory_ratio,
        tags,
        architecture: "amd64/generic".to_owned(),
        storage_pool: "default".to_owned(),
    });
    Ok(reply(call, index))
}

/// `PUT /vm-hosts/{id}/`: name, zone, pool, overcommit ratios, tags, power address.
fn update(call: &mut Call<'_>) -> Result<Reply, ApiError> {
    let index = find_editable(call)?;
    let current = call.world.vm_hosts[index].clone();
    let name = call
        .params
        .get_nonempty("name")
        .map_or_else(|| current.name.clone(), ToOwned::to_owned);
    check_unique_name(call, &name, Some(current.id))?;
    let zone = zone_param(call, &current.zone)?;
    let pool = pool_param(call, &current.pool)?;
    let cpu_ratio = ratio_param(call, "cpu_over_commit_ratio", current.cpu_over_commit_ratio)?;
    let memory_ratio = ratio_param(
        call,
        "memory_over_commit_ratio",
        current.memory_over_commit_ratio,
    )?;
    let power_address = call
        .params
        .get_nonempty("power_address")
        .map_or_else(|| current.power_address.clone(), ToOwned::to_owned);
    let tags = tags_param(call);
    for tag in tags.iter().flatten() {
        call.world.ensure_tag(tag);
    }
    let host = &mut call.world.vm_hosts[index];
    host.name = name;
    host.zone = zone;
    host.pool = pool;
    host.cpu_over_commit_ratio = cpu_ratio;
    host.memory_over_commit_ratio = memory_ratio;
    host.power_address = power_address;
    if let Some(tags) = tags {
        host.tags = tags;
    }
    if *host != current {
        call.world
            .record_vm_host(VmHostEventKind::Updated, index, None);
        call.world.dirty = true;
    }
    Ok(reply(call, index))
}

fn whole_number(call: &Call<'_>, key: &str) -> Result<Option<u64>, ApiError> {
    call.params
        .get_nonempty(key)
        .map(|v| {
            v.trim()
                .parse::<u64>()
                .map_err(|_| ApiError::field(key, "Enter a whole number."))
        })
        .transpose()
}

/// Python's `str(float)`: `1.0`, `2.5`.
fn python_float(value: f64) -> String {
    if value.fract() == 0.0 {
        format!("{value:.1}")
    } else {
        value.to_string()
    }
}

/// Splits `label:size(tag,tag),label:size` on the commas outside parentheses.
fn storage_entries(text: &str) -> Vec<&str> {
    let mut entries = Vec::new();
    let (mut depth, mut start) = (0u32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                entries.push(text[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    entries.push(text[start..].trim());
    entries.into_iter().filter(|e| !e.is_empty()).collect()
}

/// The disks of `storage` (sizes in GB, 10^9 bytes), each in a named storage pool or the
/// default one.
fn parse_storage(text: Option<&str>, pool: &str) -> Result<Vec<u64>, ApiError> {
    let Some(text) = text else {
        return Ok(vec![DEFAULT_STORAGE_GB * 1_000_000_000]);
    };
    let mut sizes = Vec::new();
    for entry in storage_entries(text) {
        let malformed = || {
            ApiError::field(
                "storage",
                format!("Malformed storage constraint, \"{entry}\"."),
            )
        };
        let without_label = entry.split_once(':').map_or(entry, |(_, rest)| rest);
        let (size_text, tags) = match without_label.split_once('(') {
            Some((size, rest)) => (size, rest.strip_suffix(')').ok_or_else(malformed)?),
            None => (without_label, ""),
        };
        let gb: f64 = size_text.trim().parse().map_err(|_| malformed())?;
        if !gb.is_finite() || gb <= 0.0 {
            return Err(malformed());
        }
        for tag in tags.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            if tag != pool {
                return Err(ApiError::field(
                    "storage",
                    format!("Unknown storage pool '{tag}'."),
                ));
            }
        }
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        sizes.push((gb * 1e9) as u64);
    }
    if sizes.is_empty() {
        sizes.push(DEFAULT_STORAGE_GB * 1_000_000_000);
    }
    Ok(sizes)
}

/// `POST /vm-hosts/{id}/?op=compose`: a new machine on the VM host, within its overcommitted
/// resources. Answers `{"system_id", "resource_uri"}`.
fn compose(call: &mut Call<'_>) -> Result<Reply, ApiError> {
    let index = find_editable(call)?;
    let host = call.world.vm_hosts[index].clone();
    let cores = whole_number(call, "cores")?.unwrap_or(u64::from(DEFAULT_CORES));
    let memory = whole_number(call, "memory")?.unwrap_or(DEFAULT_MEMORY);
    if cores == 0 {
        return Err(ApiError::field(
            "cores",
            "Ensure this value is greater than or equal to 1.",
        ));
    }
    if memory < 1024 {
        return Err(ApiError::field(
            "memory",
            "Ensure this value is greater than or equal to 1024.",
        ));
    }
    let cpu_speed = whole_number(call, "cpu_speed")?.unwrap_or(2000);
    let disks = parse_storage(call.params.get_nonempty("storage"), &host.storage_pool)?;
    let zone = zone_param(call, &host.zone)?;
    let pool = pool_param(call, &host.pool)?;
    let architecture = match call.params.get_nonempty("architecture") {
        None => host.architecture.clone(),
        Some(arch)
            if arch == host.architecture || host.architecture.split('/').next() == Some(arch) =>
        {
            host.architecture.clone()
        }
        Some(arch) => return Err(ApiError::invalid_choice("architecture", arch)),
    };
    let hostname = match call.params.get_nonempty("hostname") {
        Some(name) => {
            if call.world.machines.iter().any(|m| m.hostname == name) {
                return Err(ApiError::field(
                    "hostname",
                    format!("Node with hostname \"{name}\" already exists."),
                ));
            }
            Some(name.to_owned())
        }
        None => None,
    };
    let used = call.world.vm_host_used(host.id);
    let unable = |detail: String| {
        ApiError::text(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "Unable to compose KVM instance in '{}'. {detail}",
                host.name
            ),
        )
    };
    let cores_left =
        overcommitted(u64::from(host.cores), host.cpu_over_commit_ratio).saturating_sub(used.cores);
    if cores > cores_left {
        return Err(unable(format!(
            "CPU overcommit ratio is {} and there are {cores_left} available resources; {cores} requested.",
            python_float(host.cpu_over_commit_ratio)
        )));
    }
    let memory_left =
        overcommitted(host.memory, host.memory_over_commit_ratio).saturating_sub(used.memory);
    if memory > memory_left {
        return Err(unable(format!(
            "Memory overcommit ratio is {} and there are {memory_left} available resources; {memory} requested.",
            python_float(host.memory_over_commit_ratio)
        )));
    }
    let storage_left = host.local_storage.saturating_sub(used.local_storage);
    let storage: u64 = disks.iter().sum();
    if storage > storage_left {
        return Err(unable(format!(
            "Not enough storage space in storage pool '{}'; {storage_left} bytes available, {storage} requested.",
            host.storage_pool
        )));
    }
    let spec = ComposeSpec {
        hostname,
        cores: u32::try_from(cores).unwrap_or(u32::MAX),
        memory,
        disks,
        zone,
        pool,
        architecture,
        cpu_speed: u32::try_from(cpu_speed).unwrap_or(u32::MAX),
    };
    let system_id = call.world.compose_machine(index, spec);
    Ok(Reply::ok(json!({
        "system_id": system_id,
        "resource_uri": format!("{API}machines/{system_id}/"),
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_specs_as_maas_takes_them() {
        assert_eq!(
            parse_storage(Some("20"), "default").unwrap(),
            vec![20_000_000_000]
        );
        assert_eq!(
            parse_storage(Some("0:20(default),1:5"), "default").unwrap(),
            vec![20_000_000_000, 5_000_000_000]
        );
        assert_eq!(parse_storage(None, "default").unwrap(), vec![8_000_000_000]);
        assert!(parse_storage(Some("root:x"), "default").is_err());
        let err = parse_storage(Some("0:20(fast)"), "default").unwrap_err();
        assert_eq!(err.status, StatusCode::BAD_REQUEST);
    }

    #[test]
    fn ratios_print_as_python_floats() {
        assert_eq!(python_float(1.0), "1.0");
        assert_eq!(python_float(2.5), "2.5");
    }
}
