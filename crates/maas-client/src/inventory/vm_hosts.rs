//! The VM host part of an inventory sync: at most one `GET /vm-hosts/` per sync, only when VM
//! hosts can matter to the inventory ([`crate::vm_hosts::listing_wanted`]), its answer kept in
//! the cache beside the machines, and the hosts whose `status.vmHost` it changes woken.
//!
//! The listing never fails the sync: a MAAS without VM hosts is remembered
//! ([`crate::vm_hosts::VmHostCache::mark_unsupported`]) and any other error keeps the previous
//! listing until the next sync (hosts keep the `status.vmHost` they show).

use std::collections::BTreeSet;

use kube::ResourceExt;
use maas_api_client::MaasError;
use tracing::{info, warn};

use crate::context::Gateway;
use crate::maas::Timed;

/// Lists the VM hosts (one call) and wakes the hosts whose VM host view changed: the machines
/// a changed VM host runs on, and those a machine of `changed` (this sync's changed machines)
/// was composed on (a VM composed or gone changes the host's `machines`).
pub(super) async fn sync(gw: &Gateway, inventory: &str, changed: &BTreeSet<String>) {
    let vm_hosts = &gw.cache.vm_hosts;
    let mut wake: BTreeSet<String> = match gw.maas.list_vm_hosts().await {
        Ok(Timed { value, sent }) => vm_hosts.sync(value, sent).into_iter().collect(),
        Err(MaasError::VmHostsUnsupported { message }) => {
            info!(
                inventory,
                %message,
                "this MAAS has no VM hosts (4.0 or later): not asked again for {} hours",
                crate::vm_hosts::UNSUPPORTED_RECHECK.as_secs() / 3600
            );
            vm_hosts.mark_unsupported(message);
            return;
        }
        Err(e) => {
            warn!(inventory, error = %e, "cannot list the MAAS VM hosts; the previous listing is kept");
            BTreeSet::new()
        }
    };
    for system_id in changed {
        let host_machine = gw
            .cache
            .get(system_id)
            .and_then(|m| m.vm_host_id())
            .and_then(|id| vm_hosts.get(id))
            .and_then(|h| h.host_system_id().map(str::to_owned));
        wake.extend(host_machine);
    }
    if wake.is_empty() {
        return;
    }
    // Rare (a VM host changed): one pass over the reflector for all of them.
    for host in gw.hosts.state() {
        if wake.contains(&host.spec.system_id) {
            gw.refresh_host(&host.namespace().unwrap_or_default(), &host.name_any());
        }
    }
}
