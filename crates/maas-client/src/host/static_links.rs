//! The static addresses a host linked on its machine: recorded before they are linked
//! ([`STATIC_ADDRESSES`](ann::STATIC_ADDRESSES) on the MaasHost), unlinked once MAAS has
//! released the machine (MAAS keeps static links, and their addresses, after a release), and
//! settled before another deployment links other ones.
//!
//! Crash-safe: the record is written before the first `link_subnet` and removed only after
//! MAAS shows none of its links any more; the unlinks are computed from the machine's current
//! links, so repeating them only finds what is left.

use std::collections::BTreeSet;
use std::net::IpAddr;

use maas_api_client::{MaasError, MachineStatus};
use tracing::{info, warn};

use super::annotations::{self as ann, StaticAddresses};
use super::run::Run;
use crate::error::{Error, Result};

impl Run<'_> {
    /// Before network data is applied to the (Allocated) machine: unlinks the recorded
    /// addresses the data no longer asks for (an earlier deployment's, e.g. before a retry
    /// with other data or for another consumer), then records exactly `wanted`. Returns
    /// whether MAAS interfaces changed (the machine was read again).
    pub(super) async fn settle_static_addresses(
        &mut self,
        wanted: &BTreeSet<IpAddr>,
    ) -> Result<bool> {
        let mut changed = false;
        if let Some(recorded) = self.facts.static_addresses.clone() {
            changed = self.unlink_recorded(&recorded, wanted).await?;
        }
        let target = (!wanted.is_empty()).then(|| StaticAddresses::Listed(wanted.clone()));
        if self.facts.static_addresses != target {
            let value = (!wanted.is_empty()).then(|| ann::encode_static_addresses(wanted));
            self.patch_annotation(ann::STATIC_ADDRESSES, value).await?;
            self.facts.static_addresses = target;
        }
        Ok(changed)
    }

    /// The step on a released machine nobody wants deployed: reads it fresh, unlinks every
    /// recorded static link, and forgets the record once MAAS shows none. A machine that is
    /// no longer Ready is left for the next step to decide.
    pub(super) async fn unlink_static_addresses(&mut self) -> Result<()> {
        self.refresh().await?;
        let ready = self
            .machine
            .as_ref()
            .is_some_and(|m| m.status == MachineStatus::Ready);
        let Some(recorded) = self.facts.static_addresses.clone().filter(|_| ready) else {
            return Ok(());
        };
        if self.unlink_recorded(&recorded, &BTreeSet::new()).await? {
            let note = format!(
                "removed the static addresses of released MAAS machine {}",
                self.system_id
            );
            self.gw
                .base
                .events
                .normal(self.host, "StaticAddressesReleased", &note)
                .await;
        }
        self.forget_static_addresses().await
    }

    /// Removes the record (its links are gone, or so is the machine).
    pub(super) async fn forget_static_addresses(&mut self) -> Result<()> {
        self.patch_annotation(ann::STATIC_ADDRESSES, None).await?;
        self.facts.static_addresses = None;
        Ok(())
    }

    /// Unlinks the static links `recorded` covers, except addresses in `keep`, from the
    /// machine as last read; then reads it again and fails unless none is left. Returns
    /// whether anything was unlinked.
    async fn unlink_recorded(
        &mut self,
        recorded: &StaticAddresses,
        keep: &BTreeSet<IpAddr>,
    ) -> Result<bool> {
        let links = |run: &Self| {
            run.machine.as_ref().map_or_else(Vec::new, |m| {
                ann::recorded_static_links(&m.interface_set, recorded, keep)
            })
        };
        let doomed = links(self);
        if doomed.is_empty() {
            return Ok(false);
        }
        if let StaticAddresses::Unreadable(value) = recorded {
            let note = format!(
                "annotation {} is unreadable ({value:?}): unlinking every static address of \
                 MAAS machine {}",
                ann::STATIC_ADDRESSES,
                self.system_id
            );
            warn!(system_id = %self.system_id, %value, "unreadable static-address record");
            self.gw
                .base
                .events
                .warning(self.host, "StaticAddressesUnreadable", &note)
                .await;
        }
        for link in &doomed {
            match self
                .gw
                .maas
                .unlink_subnet(&self.system_id, link.interface, link.link)
                .await
            {
                // Gone already (a repeat after a lost answer): the read below tells.
                Ok(_) | Err(MaasError::NotFound { .. } | MaasError::BadRequest { .. }) => {}
                Err(e) => return Err(Error::maas("unlink static address")(e)),
            }
            info!(system_id = %self.system_id, ip = ?link.ip, "unlinked static address");
        }
        self.refresh().await?;
        let left = links(self);
        if let Some(first) = left.first() {
            return Err(Error::StaticLinksLeft {
                system_id: self.system_id.clone(),
                count: left.len(),
                detail: format!("link {} on interface {}", first.link, first.interface),
            });
        }
        Ok(true)
    }
}
