//! metaData: a flat map of string keys to string values, serialised as YAML.

use std::collections::BTreeMap;
use std::net::IpAddr;

use capmaas_api::data_checks::meta_data_issues;
use capmaas_api::data_meta::{MetaData, MetaDataFromPool, MetaDataIndex};

use super::error::{RenderError, RenderProblem};
use super::{AllocatedAddress, RenderInput};

/// Renders the metaData items as a YAML mapping (`key: value`, keys sorted).
pub fn render_meta_data(meta: &MetaData, input: &RenderInput<'_>) -> Result<String, RenderError> {
    to_yaml(&render_meta_data_map(meta, input)?)
}

/// Renders the metaData items as a map (for [`super::hostname_of`] without re-parsing YAML).
///
/// Items are taken kind by kind in the order of the CRD fields (strings, objectNames,
/// namespaces, indexes, ipAddressesFromPool, prefixesFromPool, gatewaysFromPool,
/// dnsServersFromPool, fromHostInterfaces, fromLabels, fromAnnotations); the first problem
/// found is returned. Two items with the same key, in one list or in two, are an error
/// (`capmaas_api::data_checks`, checked first).
pub fn render_meta_data_map(
    meta: &MetaData,
    input: &RenderInput<'_>,
) -> Result<BTreeMap<String, String>, RenderError> {
    if let Some(issue) = meta_data_issues(meta).into_iter().next() {
        return Err(issue.into());
    }
    let mut out = BTreeMap::new();
    for item in meta.strings.iter().flatten() {
        out.insert(item.key.clone(), item.value.clone());
    }
    for (i, item) in meta.object_names.iter().flatten().enumerate() {
        let field = path("objectNames", i);
        let name = input.object(item.object, &field)?.name.clone();
        out.insert(item.key.clone(), name);
    }
    for item in meta.namespaces.iter().flatten() {
        out.insert(item.key.clone(), input.namespace.to_owned());
    }
    for (i, item) in meta.indexes.iter().flatten().enumerate() {
        let field = path("indexes", i);
        let value = render_index(item, input.index, &field)?;
        out.insert(item.key.clone(), value);
    }
    // In the order of the CRD fields, so the first problem reported is the first in the spec.
    let pool_lists: [(&str, Option<&Vec<MetaDataFromPool>>, PoolValue); 4] = [
        (
            "ipAddressesFromPool",
            meta.ip_addresses_from_pool.as_ref(),
            |a, _| Ok(a.address.to_string()),
        ),
        (
            "prefixesFromPool",
            meta.prefixes_from_pool.as_ref(),
            |a, _| Ok(a.prefix.to_string()),
        ),
        (
            "gatewaysFromPool",
            meta.gateways_from_pool.as_ref(),
            gateway,
        ),
        (
            "dnsServersFromPool",
            meta.dns_servers_from_pool.as_ref(),
            dns_servers,
        ),
    ];
    for (list, items, value) in pool_lists {
        from_pool(&mut out, input, list, items, value)?;
    }
    for (i, item) in meta.from_host_interfaces.iter().flatten().enumerate() {
        let field = path("fromHostInterfaces", i);
        let mac = input.interface_mac(&item.interface, &field)?;
        out.insert(item.key.clone(), mac);
    }
    for (i, item) in meta.from_labels.iter().flatten().enumerate() {
        let field = path("fromLabels", i);
        let object = input.object(item.object, &field)?;
        let value = entry(&object.labels, &item.label, &field, || {
            RenderProblem::MissingLabel {
                object: item.object,
                label: item.label.clone(),
            }
        })?;
        out.insert(item.key.clone(), value);
    }
    for (i, item) in meta.from_annotations.iter().flatten().enumerate() {
        let field = path("fromAnnotations", i);
        let object = input.object(item.object, &field)?;
        let value = entry(&object.annotations, &item.annotation, &field, || {
            RenderProblem::MissingAnnotation {
                object: item.object,
                annotation: item.annotation.clone(),
            }
        })?;
        out.insert(item.key.clone(), value);
    }
    Ok(out)
}

/// YAML of the rendered map: block mapping, keys sorted, strings quoted where a YAML 1.1
/// reader (cloud-init's PyYAML) would read them as another type.
pub(super) fn to_yaml(map: &BTreeMap<String, String>) -> Result<String, RenderError> {
    let options = serde_saphyr::ser_options! { prefer_block_scalars: false };
    serde_saphyr::to_string_with_options(map, options)
        .map_err(|e| RenderError::new("spec.metaData", RenderProblem::Serialize(e.to_string())))
}

fn path(list: &str, i: usize) -> String {
    format!("spec.metaData.{list}[{i}]")
}

/// A label or annotation of an object, at `field`; `missing` says which one is not there.
fn entry(
    map: &BTreeMap<String, String>,
    key: &str,
    field: &str,
    missing: impl FnOnce() -> RenderProblem,
) -> Result<String, RenderError> {
    map.get(key)
        .cloned()
        .ok_or_else(|| RenderError::new(field, missing()))
}

/// The value a `*FromPool` item takes from the address allocated in its pool.
type PoolValue = fn(&AllocatedAddress, &MetaDataFromPool) -> Result<String, RenderProblem>;

/// `gatewaysFromPool`: the pool's gateway, which it must have.
fn gateway(address: &AllocatedAddress, item: &MetaDataFromPool) -> Result<String, RenderProblem> {
    address
        .gateway
        .map(|g| g.to_string())
        .ok_or_else(|| RenderProblem::NoGateway(item.pool()))
}

/// `dnsServersFromPool`: the pool's DNS servers, comma-separated; there must be one.
fn dns_servers(
    address: &AllocatedAddress,
    item: &MetaDataFromPool,
) -> Result<String, RenderProblem> {
    if address.dns_servers.is_empty() {
        return Err(RenderProblem::NoDnsServers(item.pool()));
    }
    Ok(address
        .dns_servers
        .iter()
        .map(IpAddr::to_string)
        .collect::<Vec<_>>()
        .join(","))
}

/// Renders one list of `*FromPool` items with `value`.
fn from_pool(
    out: &mut BTreeMap<String, String>,
    input: &RenderInput<'_>,
    list: &str,
    items: Option<&Vec<MetaDataFromPool>>,
    value: PoolValue,
) -> Result<(), RenderError> {
    for (i, item) in items.into_iter().flatten().enumerate() {
        let field = path(list, i);
        let address = input.address(&item.pool(), &field)?;
        let rendered = value(address, item).map_err(|p| RenderError::new(&field, p))?;
        out.insert(item.key.clone(), rendered);
    }
    Ok(())
}

/// `prefix + (offset + index * step) + suffix`.
fn render_index(item: &MetaDataIndex, index: i32, field: &str) -> Result<String, RenderError> {
    let range = |name, value: i32, bound, min| {
        if value < min {
            Err(RenderError::new(
                field,
                RenderProblem::OutOfRange {
                    name,
                    value: i64::from(value),
                    bound,
                },
            ))
        } else {
            Ok(i64::from(value))
        }
    };
    let index = range("index", index, ">= 0", 0)?;
    let offset = range("offset", item.offset, ">= 0", 0)?;
    let step = range("step", item.step, ">= 1", 1)?;
    let number = index_value(offset, index, step).ok_or_else(|| {
        RenderError::new(
            field,
            RenderProblem::IndexOverflow {
                offset,
                index,
                step,
            },
        )
    })?;
    Ok(format!(
        "{}{number}{}",
        item.prefix.as_deref().unwrap_or_default(),
        item.suffix.as_deref().unwrap_or_default()
    ))
}

/// `offset + index * step`, checked.
pub(super) fn index_value(offset: i64, index: i64, step: i64) -> Option<i64> {
    index.checked_mul(step)?.checked_add(offset)
}

#[cfg(test)]
#[path = "meta_tests.rs"]
mod tests;
