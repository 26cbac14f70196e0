//! Machine selection over parsed [`Criteria`]: which machines match, which one allocation
//! takes, and the MAAS text of an allocation that finds none.

use crate::criteria::Criteria;
use crate::model::Machine;
use crate::params::Params;
use crate::status::NodeStatus;
use crate::world::World;

fn arch_matches(wanted: &str, actual: &str) -> bool {
    if wanted.contains('/') {
        wanted == actual
    } else {
        actual.split('/').next() == Some(wanted)
    }
}

fn any_or_all<T>(values: &[T], test: impl Fn(&T) -> bool) -> bool {
    values.is_empty() || values.iter().any(test)
}

fn storage_fits(wanted: &[u64], m: &Machine) -> bool {
    let mut sizes: Vec<u64> = m.disks.iter().map(|d| d.size).collect();
    sizes.sort_unstable();
    let mut wanted = wanted.to_vec();
    wanted.sort_unstable();
    // Smallest request first takes the smallest disk that fits: optimal for single sizes.
    for want in wanted {
        match sizes.iter().position(|s| *s >= want) {
            Some(i) => {
                sizes.remove(i);
            }
            None => return false,
        }
    }
    true
}

/// Whether machine `m` satisfies `c`.
pub(crate) fn matches(c: &Criteria, m: &Machine, world: &World) -> bool {
    let domain = world.domain_name(m.domain_id);
    let fqdn = format!("{}.{domain}", m.hostname);
    let owner = m.owner.as_deref().unwrap_or("");
    #[allow(clippy::cast_precision_loss)]
    let memory = m.memory as f64;
    any_or_all(&c.system_ids, |s| *s == m.system_id)
        && !c.not_system_ids.contains(&m.system_id)
        && any_or_all(&c.names, |n| *n == m.hostname || *n == fqdn)
        && !c.not_names.iter().any(|n| *n == m.hostname || *n == fqdn)
        && any_or_all(&c.macs, |mac| {
            m.interfaces.iter().any(|i| i.mac_address == *mac)
        })
        && any_or_all(&c.domains, |d| d == domain)
        && !c.not_domains.iter().any(|d| d == domain)
        && any_or_all(&c.agent_names, |a| *a == m.agent_name)
        && !c.not_agent_names.contains(&m.agent_name)
        && any_or_all(&c.arch, |a| arch_matches(a, &m.architecture))
        && !c.not_arch.iter().any(|a| arch_matches(a, &m.architecture))
        && c.cpu_count.is_none_or(|n| f64::from(m.cpu_count) >= n)
        && c.mem.is_none_or(|n| memory >= n)
        && c.cpu_speed.is_none_or(|n| f64::from(m.cpu_speed) >= n)
        && c.tags.iter().all(|t| m.tags.contains(t))
        && !c.not_tags.iter().any(|t| m.tags.contains(t))
        && any_or_all(&c.zones, |z| *z == m.zone)
        && !c.not_zones.contains(&m.zone)
        && any_or_all(&c.pools, |p| *p == m.pool)
        && !c.not_pools.contains(&m.pool)
        && any_or_all(&c.owners, |o| o == owner)
        && !c.not_owners.iter().any(|o| o == owner)
        && any_or_all(&c.power, |p| p == m.power_state.as_str())
        && !c.not_power.iter().any(|p| p == m.power_state.as_str())
        && any_or_all(&c.statuses, |s| *s == m.status)
        && !c.not_statuses.contains(&m.status)
        && any_or_all(&c.simple, |s| s == m.status.simple())
        && !c.not_simple.iter().any(|s| s == m.status.simple())
        && pod_fits(c, m, world)
        && storage_fits(&c.storage, m)
}

/// The cheapest Ready machine matching `c` that `may_take` allows: lowest
/// `cpu_count + memory/1024`, ties by id (MAAS orders by cost, then id).
pub(crate) fn choose(
    world: &World,
    c: &Criteria,
    may_take: impl Fn(&Machine) -> bool,
) -> Option<usize> {
    world
        .machines
        .iter()
        .enumerate()
        .filter(|(_, m)| m.status == NodeStatus::Ready && may_take(m) && matches(c, m, world))
        .min_by(|(_, a), (_, b)| a.cost().total_cmp(&b.cost()).then(a.id.cmp(&b.id)))
        .map(|(i, _)| i)
}

/// Python `repr()` of a str.
fn py_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::from(quote);
    for ch in s.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

fn float(v: f64) -> String {
    format!("{v:?}")
}

/// The 409 text of an allocation without match, exactly as MAAS words it.
pub(crate) fn no_match_message(params: &Params, c: &Criteria) -> String {
    if c.is_empty() {
        return "No machine available.".to_owned();
    }
    if let Some(id) = c.system_ids.first() {
        return format!("No machine with system ID {id} available.");
    }
    let submitted: Vec<String> = params
        .keys()
        .into_iter()
        .filter(|k| *k != "op")
        .map(|k| {
            let values: Vec<String> = params.all(k).iter().map(|v| py_repr(v)).collect();
            format!("({}, [{}])", py_repr(k), values.join(", "))
        })
        .collect();
    let mut resolved: Vec<(String, String)> = Vec::new();
    let mut push = |k: &str, v: String| {
        if !v.is_empty() {
            resolved.push((k.to_owned(), v));
        }
    };
    push("arch", c.arch.join(","));
    push("cpu_count", c.cpu_count.map(float).unwrap_or_default());
    push("cpu_speed", c.cpu_speed.map(float).unwrap_or_default());
    push("mem", c.mem.map(float).unwrap_or_default());
    push("name", c.names.join(","));
    push("not_arch", c.not_arch.join(","));
    push("not_in_pool", c.not_pools.join(","));
    push("not_in_zone", c.not_zones.join(","));
    push("not_tags", c.not_tags.join(","));
    push("pool", c.pools.join(","));
    push("storage", params.all("storage").join(","));
    push("tags", c.tags.join(","));
    push("zone", c.zones.join(","));
    resolved.sort();
    let resolved: Vec<String> = resolved
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    format!(
        "No available machine matches constraints: [{}] (resolved to \"{}\")",
        submitted.join(", "),
        resolved.join(" ")
    )
}

/// The `pod`/`pod_type` constraints against the VM host a machine was composed on.
fn pod_fits(c: &Criteria, m: &Machine, world: &World) -> bool {
    let host = m
        .vm_host_id
        .and_then(|id| world.vm_hosts.iter().find(|h| h.id == id));
    let name = host.map(|h| h.name.as_str());
    let kind = host.map(|h| h.kind.as_str());
    (c.pods.is_empty() || c.pods.iter().any(|p| Some(p.as_str()) == name))
        && !c.not_pods.iter().any(|p| Some(p.as_str()) == name)
        && (c.pod_types.is_empty() || c.pod_types.iter().any(|p| Some(p.as_str()) == kind))
        && !c.not_pod_types.iter().any(|p| Some(p.as_str()) == kind)
}

#[cfg(test)]
mod tests {
    use super::py_repr;

    #[test]
    fn py_repr_quotes_like_python() {
        assert_eq!(py_repr("it's"), "\"it's\"");
        assert_eq!(py_repr("a\\b"), "'a\\\\b'");
    }
}
