//! The static addresses a host linked on its machine: recorded before they are linked
//! ([`STATIC_ADDRESSES`](ann::STATIC_ADDRESSES) on the MaasHost), unlinked once MAAS has
//! released the machine (MAAS keeps static links, and their addresses, after a release), and
//! settled before another deployment links other ones.
//!
//! Crash-safe: the record is written before the first `link_subnet` and removed only after
//! MAAS shows none of its links any more; the unlinks are computed from the machine's current
//! links, so repeating them only finds what is left. The unlinking works through the narrow
//! [`Machines`] handle; the record is the host reconcile's to write.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::Arc;

use maas_api_client::{MaasError, Machine};
use tracing::info;

use super::annotations::{self as ann, StaticAddresses, StaticLink};
use super::machines::Machines;
use crate::error::{Error, Result};

/// The static links of `machine` that `recorded` covers, except addresses in `keep`.
pub(super) fn doomed(
    machine: Option<&Machine>,
    recorded: &StaticAddresses,
    keep: &BTreeSet<IpAddr>,
) -> Vec<StaticLink> {
    machine.map_or_else(Vec::new, |m| {
        ann::recorded_static_links(&m.interface_set, recorded, keep)
    })
}

/// Unlinks `links` from the machine, then reads it again and fails unless none of the links
/// `recorded` covers (except `keep`) is left. Returns the machine as read then.
pub(super) async fn unlink(
    machines: Machines<'_>,
    system_id: &str,
    links: &[StaticLink],
    recorded: &StaticAddresses,
    keep: &BTreeSet<IpAddr>,
) -> Result<Option<Arc<Machine>>> {
    for link in links {
        match machines
            .maas
            .unlink_subnet(system_id, link.interface, link.link)
            .await
        {
            // Gone already (a repeat after a lost answer): the read below tells.
            Ok(_) | Err(MaasError::NotFound { .. } | MaasError::BadRequest { .. }) => {}
            Err(e) => return Err(Error::maas("unlink static address")(e)),
        }
        info!(%system_id, ip = ?link.ip, "unlinked static address");
    }
    let machine = machines.read(system_id).await?;
    let left = doomed(machine.as_deref(), recorded, keep);
    if let Some(first) = left.first() {
        return Err(Error::StaticLinksLeft {
            system_id: system_id.to_owned(),
            count: left.len(),
            detail: format!("link {} on interface {}", first.link, first.interface),
        });
    }
    Ok(machine)
}
