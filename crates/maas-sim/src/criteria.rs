//! Machine selection criteria: parsing and validating allocate constraints (`AcquireNodeForm`)
//! and list filters (`ReadNodesForm`). Matching and ranking live in [`crate::selection`].
//! Pure functions over the world, so ranking and error texts are unit-tested.

use crate::error::ApiError;
use crate::params::Params;
use crate::status::NodeStatus;
use crate::world::World;

/// Which form the parameters feed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Allocate,
    List,
}

impl Mode {
    /// The name of a parameter the two forms spell differently (`id` when listing,
    /// `system_id` when allocating).
    fn key(self, list: &'static str, allocate: &'static str) -> &'static str {
        match self {
            Self::List => list,
            Self::Allocate => allocate,
        }
    }
}

const IGNORED: &[&str] = &[
    "op",
    "comment",
    "agent_name",
    "bridge_all",
    "bridge_type",
    "bridge_stp",
    "bridge_fd",
    "dry_run",
    "verbose",
];
const ALLOCATE_KEYS: &[&str] = &[
    "name",
    "system_id",
    "arch",
    "not_arch",
    "cpu_count",
    "mem",
    "cpu_speed",
    "tags",
    "not_tags",
    "zone",
    "not_in_zone",
    "pool",
    "not_in_pool",
    "pod",
    "not_pod",
    "pod_type",
    "not_pod_type",
    "storage",
];
const LIST_KEYS: &[&str] = &[
    "id",
    "not_id",
    "hostname",
    "not_hostname",
    "mac_address",
    "domain",
    "not_domain",
    "agent_name",
    "not_agent_name",
    "zone",
    "not_in_zone",
    "pool",
    "not_in_pool",
    "tags",
    "not_tags",
    "arch",
    "not_arch",
    "owner",
    "not_owner",
    "power_state",
    "not_power_state",
    "status",
    "not_status",
    "simple_status",
    "not_simple_status",
    "cpu_count",
    "mem",
    "cpu_speed",
    "pod",
    "not_pod",
    "pod_type",
    "not_pod_type",
    "storage",
];
/// Real MAAS constraints the simulator does not model; refused loudly instead of ignored.
const UNSUPPORTED: &[&str] = &[
    "subnets",
    "not_subnets",
    "fabrics",
    "not_fabrics",
    "fabric_classes",
    "not_fabric_classes",
    "vlans",
    "not_vlans",
    "link_speed",
    "interfaces",
    "devices",
    "deployment_target",
    "not_deployment_target",
];
const ARCHES: &[&str] = &[
    "amd64", "arm64", "i386", "armhf", "ppc64el", "s390x", "riscv64",
];

/// Parsed selection criteria; empty vectors mean "no constraint".
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Criteria {
    pub(crate) system_ids: Vec<String>,
    pub(crate) not_system_ids: Vec<String>,
    pub(crate) names: Vec<String>,
    pub(crate) not_names: Vec<String>,
    pub(crate) macs: Vec<String>,
    pub(crate) domains: Vec<String>,
    pub(crate) not_domains: Vec<String>,
    pub(crate) agent_names: Vec<String>,
    pub(crate) not_agent_names: Vec<String>,
    pub(crate) arch: Vec<String>,
    pub(crate) not_arch: Vec<String>,
    pub(crate) cpu_count: Option<f64>,
    pub(crate) mem: Option<f64>,
    pub(crate) cpu_speed: Option<f64>,
    pub(crate) tags: Vec<String>,
    pub(crate) not_tags: Vec<String>,
    pub(crate) zones: Vec<String>,
    pub(crate) not_zones: Vec<String>,
    pub(crate) pools: Vec<String>,
    pub(crate) not_pools: Vec<String>,
    pub(crate) owners: Vec<String>,
    pub(crate) not_owners: Vec<String>,
    pub(crate) power: Vec<String>,
    pub(crate) not_power: Vec<String>,
    pub(crate) statuses: Vec<NodeStatus>,
    pub(crate) not_statuses: Vec<NodeStatus>,
    pub(crate) simple: Vec<String>,
    pub(crate) not_simple: Vec<String>,
    /// VM host names (`pod`, `not_pod`) and types (`pod_type`, `not_pod_type`) of machines
    /// composed on a VM host.
    pub(crate) pods: Vec<String>,
    pub(crate) not_pods: Vec<String>,
    pub(crate) pod_types: Vec<String>,
    pub(crate) not_pod_types: Vec<String>,
    /// Minimum disk sizes in bytes, one distinct disk each.
    pub(crate) storage: Vec<u64>,
}

impl Criteria {
    /// True when nothing constrains the choice.
    pub(crate) fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

fn strings(params: &Params, key: &str) -> Vec<String> {
    params
        .all(key)
        .iter()
        .map(|v| v.trim())
        .filter(|v| !v.is_empty())
        .map(ToOwned::to_owned)
        .collect()
}

/// Every value of `key`, exactly as sent (Django's `UnconstrainedMultipleChoiceField`).
fn exact_strings(params: &Params, key: &str) -> Vec<String> {
    params.all(key).into_iter().map(ToOwned::to_owned).collect()
}

/// Tag lists may also be comma or space separated.
fn tag_list(params: &Params, key: &str) -> Vec<String> {
    params
        .all(key)
        .iter()
        .flat_map(|v| v.split([',', ' ']))
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(ToOwned::to_owned)
        .collect()
}

fn minimum(params: &Params, key: &str, message: &str) -> Result<Option<f64>, ApiError> {
    let mut min: Option<f64> = None;
    for v in params.all(key).iter().filter(|v| !v.trim().is_empty()) {
        let value: f64 = v
            .trim()
            .parse()
            .map_err(|_| ApiError::field(key, message))?;
        if !value.is_finite() {
            return Err(ApiError::field(key, message));
        }
        min = Some(min.map_or(value, |m: f64| m.min(value)));
    }
    Ok(min)
}

fn check_known(
    field: &str,
    values: &[String],
    known: impl Fn(&str) -> bool,
    what: &str,
    quote: bool,
) -> Result<(), ApiError> {
    let unknown: Vec<String> = values
        .iter()
        .filter(|v| !known(v))
        .map(|v| if quote { format!("'{v}'") } else { v.clone() })
        .collect();
    if unknown.is_empty() {
        Ok(())
    } else {
        Err(ApiError::field(
            field,
            format!("No such {what}(s): {}.", unknown.join(", ")),
        ))
    }
}

fn parse_storage(params: &Params) -> Result<Vec<u64>, ApiError> {
    let mut sizes = Vec::new();
    for entry in params
        .all("storage")
        .iter()
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|e| !e.is_empty())
    {
        let without_label = entry.split_once(':').map_or(entry, |(_, rest)| rest);
        let size_text = without_label.split('(').next().unwrap_or("").trim();
        let gb: f64 = size_text.parse().map_err(|_| {
            ApiError::field(
                "storage",
                format!("Malformed storage constraint, \"{entry}\"."),
            )
        })?;
        if !gb.is_finite() || gb < 0.0 {
            return Err(ApiError::field(
                "storage",
                format!("Malformed storage constraint, \"{entry}\"."),
            ));
        }
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        sizes.push((gb * 1e9) as u64);
    }
    Ok(sizes)
}

/// Parses and validates the parameters of `mode`; unknown keys are 400 "No such constraint.".
pub(crate) fn parse(params: &Params, world: &World, mode: Mode) -> Result<Criteria, ApiError> {
    let allowed = match mode {
        Mode::Allocate => ALLOCATE_KEYS,
        Mode::List => LIST_KEYS,
    };
    for key in params.keys() {
        // MAAS 4.0 / [dev] removed the VM host constraints with VM hosts.
        if !world.vm_hosts_supported && key.contains("pod") {
            return Err(ApiError::field(key, "No such constraint."));
        }
        if UNSUPPORTED.contains(&key) && params.all(key).iter().any(|v| !v.is_empty()) {
            return Err(ApiError::field(
                key,
                "Constraint not supported by the MAAS simulator.",
            ));
        }
        if !allowed.contains(&key) && !IGNORED.contains(&key) && !UNSUPPORTED.contains(&key) {
            return Err(ApiError::field(key, "No such constraint."));
        }
    }
    let mut c = Criteria {
        system_ids: strings(params, mode.key("id", "system_id")),
        not_system_ids: strings(params, "not_id"),
        names: strings(params, mode.key("hostname", "name")),
        not_names: strings(params, "not_hostname"),
        macs: strings(params, "mac_address")
            .into_iter()
            .map(|m| m.to_ascii_lowercase())
            .collect(),
        domains: strings(params, "domain"),
        not_domains: strings(params, "not_domain"),
        arch: strings(params, "arch"),
        not_arch: strings(params, "not_arch"),
        cpu_count: minimum(params, "cpu_count", "Invalid CPU count: number required.")?,
        mem: minimum(params, "mem", "Invalid memory: number of MiB required.")?,
        cpu_speed: minimum(
            params,
            "cpu_speed",
            "Invalid CPU speed: number of MHz required.",
        )?,
        tags: tag_list(params, "tags"),
        not_tags: tag_list(params, "not_tags"),
        zones: strings(params, "zone"),
        not_zones: strings(params, "not_in_zone"),
        pools: strings(params, "pool"),
        not_pools: strings(params, "not_in_pool"),
        owners: strings(params, "owner"),
        not_owners: strings(params, "not_owner"),
        power: strings(params, "power_state"),
        not_power: strings(params, "not_power_state"),
        simple: strings(params, "simple_status"),
        not_simple: strings(params, "not_simple_status"),
        pods: strings(params, "pod"),
        not_pods: strings(params, "not_pod"),
        pod_types: strings(params, "pod_type"),
        not_pod_types: strings(params, "not_pod_type"),
        storage: parse_storage(params)?,
        ..Criteria::default()
    };
    if mode == Mode::List {
        // `ReadNodesForm` takes these as sent (no trimming; an empty value matches the empty
        // agent name of unallocated machines) and matches any of them exactly (`agent_name__in`).
        c.agent_names = exact_strings(params, "agent_name");
        c.not_agent_names = exact_strings(params, "not_agent_name");
        for (key, target) in [
            ("status", &mut c.statuses),
            ("not_status", &mut c.not_statuses),
        ] {
            for v in strings(params, key) {
                let status =
                    NodeStatus::from_filter(&v).ok_or_else(|| ApiError::invalid_choice(key, v))?;
                target.push(status);
            }
        }
    }
    for (field, values) in [("arch", &c.arch), ("not_arch", &c.not_arch)] {
        if values
            .iter()
            .any(|a| !ARCHES.contains(&a.split('/').next().unwrap_or("")))
        {
            return Err(ApiError::field(field, "Architecture not recognised."));
        }
    }
    let tag_known = |t: &str| world.tags.iter().any(|x| x.name == t);
    check_known("tags", &c.tags, tag_known, "tag", true)?;
    check_known("not_tags", &c.not_tags, tag_known, "tag", true)?;
    let zone_known = |z: &str| world.zones.iter().any(|x| x.name == z);
    check_known("zone", &c.zones, zone_known, "zone", false)?;
    check_known("not_in_zone", &c.not_zones, zone_known, "zone", false)?;
    let pool_known = |p: &str| world.pools.iter().any(|x| x.name == p);
    check_known("pool", &c.pools, pool_known, "pool", false)?;
    check_known("not_in_pool", &c.not_pools, pool_known, "pool", false)?;
    Ok(c)
}

#[cfg(test)]
#[path = "criteria_tests.rs"]
mod tests;
