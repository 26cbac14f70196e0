//! What one sync of a MaasInventory starts from ([`observe`]): the one filtered MAAS list, the
//! machines it changed in the cache, and the inventory's hosts as the plan sees them; and, only
//! when VM hosts can matter, the one VM host listing ([`super::vm_hosts`]).

use std::collections::BTreeSet;
use std::time::Instant;

use capmaas_api::{MaasHost, MaasInventory};
use kube::ResourceExt;
use maas_api_client::MachineFilter;

use super::decide::{ExistingHost, Listed, ObjectVersion, Undecoded, skipped_message};
use crate::context::Gateway;
use crate::error::{Error, Result};
use crate::maas::Timed;

/// What a sync decides on.
pub(super) struct Observed {
    /// The listed machines, as the plan needs them.
    pub(super) listed: Vec<Listed>,
    /// The machines that did not decode.
    pub(super) undecoded: Undecoded,
    /// What the list skipped, for the report.
    pub(super) skipped: Option<String>,
    pub(super) skipped_count: usize,
    /// The inventory's hosts.
    pub(super) hosts: Vec<ExistingHost>,
    /// The system ids whose cached view the list changed.
    pub(super) changed: BTreeSet<String>,
    /// When the list was sent.
    pub(super) sent: Instant,
}

/// Lists the inventory's machines (one filtered call), fills the machine cache with them and
/// reads the inventory's hosts from the reflector; lists the VM hosts (one call) when some host
/// asks for or shows one, or a listed machine was composed on one.
pub(super) async fn observe(
    inventory: &MaasInventory,
    gw: &Gateway,
    key: &str,
) -> Result<Observed> {
    let namespace = inventory.namespace().unwrap_or_default();
    let name = inventory.name_any();
    let spec = &inventory.spec;
    let mut filter = MachineFilter::new().pool(spec.resource_pool.clone());
    for zone in spec.zones.iter().flatten() {
        filter = filter.zone(zone.clone());
    }
    for tag in spec.tags.iter().flatten() {
        filter = filter.tag(tag.clone());
    }
    // Lenient: a machine that does not decode is skipped and reported, the others sync.
    let Timed {
        value: listing,
        sent,
    } = gw
        .maas
        .list_machines_lenient(&filter)
        .await
        .map_err(Error::maas("list machines"))?;
    let undecoded = Undecoded::from_skipped(&listing.skipped);
    let skipped = skipped_message(&listing.skipped);
    let objects = gw.hosts_of(&namespace, &name);
    let hosts: Vec<ExistingHost> = objects.iter().map(|h| existing(h)).collect();
    // Decided before the machines move into the cache.
    let list_vm_hosts = crate::vm_hosts::listing_wanted(
        objects.iter().map(AsRef::as_ref),
        &listing.machines,
        &gw.cache.vm_hosts,
    );
    // The plan needs of each machine its system id, status and labels only: taken before the
    // machines move into the cache, so thousands of them are never held twice.
    let listed: Vec<Listed> = listing
        .machines
        .iter()
        .map(|m| Listed::new(m, &name, spec.host_labels.as_ref()))
        .collect();
    let skipped_count = listing.skipped.len();
    // The cache holds what decoded: a host whose machine did not is unlisted there, so the host
    // controller reads that machine directly (and reports the decode error on the host).
    let changed: BTreeSet<String> = gw
        .cache
        .sync_inventory(key, listing.machines, sent)
        .into_iter()
        .collect();
    if list_vm_hosts {
        super::vm_hosts::sync(gw, key, &changed).await;
    }
    Ok(Observed {
        listed,
        undecoded,
        skipped,
        skipped_count,
        hosts,
        changed,
        sent,
    })
}

/// The host as the plan sees it, with the version a delete is conditioned on.
pub fn existing(host: &MaasHost) -> ExistingHost {
    let status = host.status.as_ref();
    ExistingHost {
        name: host.name_any(),
        system_id: host.spec.system_id.clone(),
        labels: host.labels().clone(),
        consumed: host.spec.consumer_ref.is_some(),
        missing: status.and_then(|s| s.missing).unwrap_or(false),
        reserved: host.spec.reservation.is_some(),
        allocated: status.is_some_and(|s| s.allocation.is_some()),
        composed: host
            .labels()
            .contains_key(capmaas_api::keys::LABEL_COMPOSED_ON),
        version: ObjectVersion {
            uid: host.metadata.uid.clone(),
            resource_version: host.metadata.resource_version.clone(),
        },
    }
}
