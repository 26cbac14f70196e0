//! `PUT /machines/{system_id}/` (admin only): hostname, zone, pool, domain, hardware fields.

use super::{Call, Reply, machine_ops};
use crate::error::ApiError;
use crate::render;

/// A valid DNS label: 1-63 of `[a-z0-9-]`, not starting or ending with `-`.
pub(crate) fn valid_hostname(name: &str) -> bool {
    (1..=63).contains(&name.len())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

fn parse_size(value: &str) -> Option<u64> {
    let v = value.trim();
    let (digits, factor) = match v.chars().last()? {
        'K' | 'k' => (&v[..v.len() - 1], 1u64 << 10),
        'M' | 'm' => (&v[..v.len() - 1], 1 << 20),
        'G' | 'g' => (&v[..v.len() - 1], 1 << 30),
        'T' | 't' => (&v[..v.len() - 1], 1 << 40),
        _ => (v, 1),
    };
    digits.trim().parse::<u64>().ok()?.checked_mul(factor)
}

pub(super) fn update(call: &mut Call<'_>) -> Result<Reply, ApiError> {
    call.require_admin()?;
    let index = machine_ops::find(call)?;
    let p = call.params;
    let world = &*call.world;
    if let Some(hostname) = p.get_nonempty("hostname") {
        if !valid_hostname(hostname) {
            return Err(ApiError::field(
                "hostname",
                format!("Invalid hostname: {hostname}"),
            ));
        }
        if world
            .machines
            .iter()
            .enumerate()
            .any(|(i, m)| i != index && m.hostname == hostname)
        {
            return Err(ApiError::field(
                "hostname",
                format!("Node with hostname \"{hostname}\" already exists"),
            ));
        }
    }
    if let Some(zone) = p.get_nonempty("zone")
        && !world.zones.iter().any(|z| z.name == zone)
    {
        return Err(ApiError::invalid_choice("zone", zone));
    }
    if let Some(pool) = p.get_nonempty("pool")
        && !world.pools.iter().any(|x| x.name == pool)
    {
        return Err(ApiError::invalid_choice("pool", pool));
    }
    let domain_id = match p.get_nonempty("domain") {
        Some(d) => Some(
            world
                .domains
                .iter()
                .find(|x| x.name == d || x.id.to_string() == d)
                .map(|x| x.id)
                .ok_or_else(|| ApiError::invalid_choice("domain", d))?,
        ),
        None => None,
    };
    let number = |key: &str| -> Result<Option<u64>, ApiError> {
        p.get_nonempty(key)
            .map(|v| {
                v.trim()
                    .parse::<u64>()
                    .map_err(|_| ApiError::field(key, "Enter a whole number."))
            })
            .transpose()
    };
    let cpu_count = number("cpu_count")?;
    let memory = number("memory")?;
    let swap = p
        .get_nonempty("swap_size")
        .map(|v| {
            parse_size(v).ok_or_else(|| {
                ApiError::field("swap_size", "Invalid size for swap: ".to_owned() + v)
            })
        })
        .transpose()?;
    if p.bool("disable_ipv4")? {
        return Err(ApiError::field(
            "disable_ipv4",
            "Disabling IPv4 is no longer supported.",
        ));
    }
    let m = &mut call.world.machines[index];
    // Text fields: an empty value is ignored, except where MAAS lets it clear the field.
    for (key, field) in [
        ("hostname", &mut m.hostname),
        ("zone", &mut m.zone),
        ("pool", &mut m.pool),
        ("power_type", &mut m.power_type),
        ("architecture", &mut m.architecture),
    ] {
        if let Some(v) = p.get_nonempty(key) {
            v.clone_into(field);
        }
    }
    for (key, field) in [
        ("description", &mut m.description),
        ("min_hwe_kernel", &mut m.min_hwe_kernel),
    ] {
        if let Some(v) = p.get(key) {
            v.clone_into(field);
        }
    }
    if let Some(v) = domain_id {
        m.domain_id = v;
    }
    if let Some(v) = cpu_count {
        m.cpu_count = u32::try_from(v).unwrap_or(u32::MAX);
    }
    if let Some(v) = memory {
        m.memory = v;
    }
    if swap.is_some() {
        m.swap_size = swap;
    }
    call.world.dirty = true;
    let world = &*call.world;
    Ok(Reply::ok(render::machine(world, &world.machines[index])))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostnames_and_sizes() {
        assert!(valid_hostname("node-1"));
        assert!(!valid_hostname("-node"));
        assert!(!valid_hostname("a_b"));
        assert!(!valid_hostname(""));
        assert_eq!(parse_size("0"), Some(0));
        assert_eq!(parse_size("2G"), Some(2 << 30));
        assert_eq!(parse_size("x"), None);
    }
}
