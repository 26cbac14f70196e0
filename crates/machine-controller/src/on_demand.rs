//! Pools imported on demand: a MaasMachine asks for a MAAS resource pool that no MaasInventory
//! imports, as every cluster generated from CAPMAAS-style templates does on its first day, and
//! an inventory of that pool, open to every namespace, is created in the installation's
//! namespace (decision record 0003). The gateway imports its hosts on its next sync and the
//! waiting machines claim them across namespaces.
//!
//! Only a pool named by the machine is imported (never "every pool"), and never one that an
//! inventory already imports, whatever its namespace and `claimNamespaces`: an operator's
//! inventory decides who may claim its pool, and a second importer of one pool would split its
//! machines (the webhook refuses it). A machine without `resourcePool` waits, with a message.

use capmaas_runtime::error::failed;
use std::collections::BTreeMap;
use std::fmt::Write as _;

use capmaas_api::inventory::{ClaimNamespaces, MaasInventorySpec};
use capmaas_api::{MaasInventory, keys};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use sha1::{Digest, Sha1};
use tracing::info;

use crate::context::Ctx;
use crate::error::{Result, is_conflict};

/// Seconds between two syncs of an inventory imported on demand (the CRD's default).
const SYNC_INTERVAL_SECONDS: i32 = 30;

/// The inventory to create in `namespace` for `pool`, or `None` when some inventory already
/// imports the pool.
pub fn inventory_for<'i>(
    pool: &str,
    namespace: &str,
    inventories: impl IntoIterator<Item = &'i MaasInventory>,
) -> Option<MaasInventory> {
    if pool.is_empty()
        || inventories
            .into_iter()
            .any(|inv| inv.spec.resource_pool == pool)
    {
        return None;
    }
    let mut inventory = MaasInventory::new(
        &inventory_name(pool),
        MaasInventorySpec {
            resource_pool: pool.to_owned(),
            zones: None,
            tags: None,
            sync_interval_seconds: SYNC_INTERVAL_SECONDS,
            host_labels: None,
            claim_namespaces: Some(ClaimNamespaces::all()),
        },
    );
    inventory.metadata = ObjectMeta {
        name: Some(inventory_name(pool)),
        namespace: Some(namespace.to_owned()),
        labels: Some(BTreeMap::from([(
            keys::LABEL_INVENTORY_ON_DEMAND.to_owned(),
            "true".to_owned(),
        )])),
        ..ObjectMeta::default()
    };
    Some(inventory)
}

/// `pool-<pool>` when the pool name is a DNS label, else its closest DNS label with a hash of
/// the real name (MAAS allows names a Kubernetes object cannot have, and two of them could
/// map to the same label).
pub fn inventory_name(pool: &str) -> String {
    let label: String = pool
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '-') => c,
            _ => '-',
        })
        .take(40)
        .collect();
    let label = label.trim_matches('-');
    if label == pool {
        return format!("pool-{label}");
    }
    let digest = Sha1::digest(pool.as_bytes());
    let hash = digest.iter().take(4).fold(String::new(), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    });
    if label.is_empty() {
        format!("pool-{hash}")
    } else {
        format!("pool-{label}-{hash}")
    }
}

/// The inventory imported on demand that imports `pool`, as `namespace/name`.
pub fn importer_on_demand<'i>(
    pool: &str,
    inventories: impl IntoIterator<Item = &'i MaasInventory>,
) -> Option<String> {
    inventories
        .into_iter()
        .find(|inv| {
            inv.spec.resource_pool == pool
                && inv
                    .labels()
                    .get(keys::LABEL_INVENTORY_ON_DEMAND)
                    .is_some_and(|v| v == "true")
        })
        .map(|inv| format!("{}/{}", inv.namespace().unwrap_or_default(), inv.name_any()))
}

/// Creates the inventory of `pool` when the installation imports pools on demand and nothing
/// imports it yet. Returns the `namespace/name` of the on-demand inventory that imports the
/// pool (created now, a moment ago by another reconcile, or earlier), so the machine's
/// message says where its hosts come from for as long as it waits.
pub async fn import_pool(ctx: &Ctx, pool: &str) -> Result<Option<String>> {
    let known = ctx.inventories.state();
    if let Some(existing) = importer_on_demand(pool, known.iter().map(AsRef::as_ref)) {
        return Ok(Some(existing));
    }
    let Some(namespace) = ctx.on_demand_inventories.as_deref() else {
        return Ok(None);
    };
    let Some(inventory) = inventory_for(pool, namespace, known.iter().map(AsRef::as_ref)) else {
        return Ok(None);
    };
    let name = inventory.name_any();
    let api: Api<MaasInventory> = Api::namespaced(ctx.base.client.clone(), namespace);
    let params = PostParams {
        field_manager: Some(ctx.base.field_manager.clone()),
        ..PostParams::default()
    };
    match api.create(&params, &inventory).await {
        Ok(_) => info!(pool, inventory = %name, %namespace, "pool imported on demand"),
        // Created by another reconcile whose inventory the cache does not show yet.
        Err(e) if is_conflict(&e) => {}
        Err(e) => {
            return Err(failed(format!(
                "importing pool {pool} on demand (MaasInventory {namespace}/{name})"
            ))(e)
            .into());
        }
    }
    Ok(Some(format!("{namespace}/{name}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn existing(pool: &str, namespace: &str) -> MaasInventory {
        let mut inv = inventory_for(pool, namespace, []).unwrap();
        inv.metadata.name = Some("mine".into());
        inv
    }

    #[test]
    fn a_pool_nobody_imports_gets_an_inventory_open_to_all() {
        let inv = inventory_for("resourcepool-worker", "capmaas-system", []).unwrap();
        assert_eq!(inv.name_any(), "pool-resourcepool-worker");
        assert_eq!(inv.namespace().as_deref(), Some("capmaas-system"));
        assert_eq!(inv.spec.resource_pool, "resourcepool-worker");
        assert!(inv.admits("any-tenant"));
        assert_eq!(
            inv.labels()
                .get(keys::LABEL_INVENTORY_ON_DEMAND)
                .map(String::as_str),
            Some("true")
        );
    }

    #[test]
    fn a_pool_imported_anywhere_is_left_to_its_inventory() {
        let team = existing("gpu", "team-a");
        assert!(inventory_for("gpu", "capmaas-system", [&team]).is_none());
        assert!(inventory_for("other", "capmaas-system", [&team]).is_some());
        assert!(inventory_for("", "capmaas-system", []).is_none());
    }

    #[test]
    fn the_importer_on_demand_is_found_by_pool_and_label() {
        let made = inventory_for("gpu", "capmaas-system", []).unwrap();
        let mut by_hand = existing("cpu", "team-a");
        by_hand.metadata.labels = None;
        assert_eq!(
            importer_on_demand("gpu", [&made, &by_hand]).as_deref(),
            Some("capmaas-system/pool-gpu")
        );
        assert_eq!(importer_on_demand("cpu", [&made, &by_hand]), None);
    }

    #[test]
    fn names_are_dns_labels_and_keep_distinct_pools_apart() {
        assert_eq!(inventory_name("default"), "pool-default");
        let (a, b) = (inventory_name("Pool A"), inventory_name("pool-a"));
        assert_ne!(a, b);
        assert!(a.starts_with("pool-pool-a-"), "{a}");
        assert!(inventory_name("___").starts_with("pool-"));
        let long = inventory_name(&"x".repeat(300));
        assert!(long.len() <= 63, "{long}");
        for name in [a, b, long] {
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            );
        }
    }
}
