//! MAAS VM hosts (LXD, MAAS 3.x) as the gateway knows them: the latest `GET /vm-hosts/` answer,
//! kept in the machine cache ([`crate::cache::MachineCache::vm_hosts`]) beside the machines, so
//! that a host's `status.vmHost` is built from the cache and never from a call per host.
//!
//! The listing is made by the inventory sync, at most once per sync of an inventory and only
//! when it can matter ([`listing_wanted`]): an installation without LXD makes no VM host call
//! at all. A MAAS without VM hosts (4.0 and later: 404 on the endpoint) is remembered for
//! [`UNSUPPORTED_RECHECK`] (or until the term ends); meanwhile no listing is made, and a
//! deployment asking for a VM host is refused without asking MAAS.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use capmaas_api::MaasHost;
use capmaas_api::lxd::{HostVmHost, VmHostResource};
use maas_api_client::{Machine, VmHost};

/// How long a MAAS found without VM hosts is believed so before the listing is tried again.
pub const UNSUPPORTED_RECHECK: Duration = Duration::from_secs(6 * 60 * 60);

#[derive(Debug, Default)]
struct State {
    /// The latest listing, by VM host id; `None` before the first one.
    hosts: Option<HashMap<i64, Arc<VmHost>>>,
    /// When the request of the latest listing was sent.
    sent_at: Option<Instant>,
    /// When MAAS was found without VM hosts, and what it said.
    unsupported: Option<(Instant, String)>,
}

/// The VM hosts of the latest listing; cheap to clone (shared).
#[derive(Debug, Clone, Default)]
pub struct VmHostCache {
    state: Arc<Mutex<State>>,
}

impl VmHostCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Replaces the listing with the answer of a request sent at `sent_at` (an older answer
    /// than the one held is dropped); returns the system ids of the machines whose VM host
    /// appeared, changed or vanished (sorted).
    pub fn sync(&self, hosts: Vec<VmHost>, sent_at: Instant) -> Vec<String> {
        let mut state = self.lock();
        if state.sent_at.is_some_and(|t| t > sent_at) {
            return Vec::new();
        }
        state.sent_at = Some(sent_at);
        state.unsupported = None;
        let new: HashMap<i64, Arc<VmHost>> =
            hosts.into_iter().map(|h| (h.id, Arc::new(h))).collect();
        let old = state.hosts.take().unwrap_or_default();
        let appeared_or_changed = new
            .iter()
            .filter(|(id, h)| old.get(id).is_none_or(|o| o != *h))
            .flat_map(|(id, h)| [Some(h), old.get(id)]);
        let vanished = old
            .iter()
            .filter(|(id, _)| !new.contains_key(id))
            .map(|(_, h)| Some(h));
        let mut machines: Vec<String> = appeared_or_changed
            .chain(vanished)
            .flatten()
            .filter_map(|h| h.host_system_id().map(str::to_owned))
            .collect();
        machines.sort();
        machines.dedup();
        state.hosts = Some(new);
        machines
    }

    /// The VM host `id` of the latest listing.
    pub fn get(&self, id: i64) -> Option<Arc<VmHost>> {
        self.lock().hosts.as_ref()?.get(&id).cloned()
    }

    /// What the cache says of the VM host running on machine `system_id`: `None` when nothing
    /// is known (no listing yet, or MAAS without VM hosts), `Some(None)` when the latest
    /// listing has no VM host on it.
    pub fn on_machine(&self, system_id: &str) -> Option<Option<Arc<VmHost>>> {
        let state = self.lock();
        let hosts = state.hosts.as_ref()?;
        Some(
            hosts
                .values()
                .find(|h| h.host_system_id() == Some(system_id))
                .cloned(),
        )
    }

    /// MAAS answered that it has no VM hosts: remembered for [`UNSUPPORTED_RECHECK`]; the
    /// listing held is dropped.
    pub fn mark_unsupported(&self, message: String) {
        let mut state = self.lock();
        state.unsupported = Some((Instant::now(), message));
        state.hosts = None;
        state.sent_at = None;
    }

    /// What MAAS said when it was found without VM hosts, within [`UNSUPPORTED_RECHECK`].
    pub fn unsupported(&self) -> Option<String> {
        self.lock()
            .unsupported
            .as_ref()
            .filter(|(at, _)| at.elapsed() < UNSUPPORTED_RECHECK)
            .map(|(_, message)| message.clone())
    }
}

/// Whether an inventory sync lists the VM hosts: some host of the inventory asks to be a VM
/// host (`spec.provisioning.registerVMHost`) or shows one (`status.vmHost`), or a listed
/// machine was composed on one (`pod`); never while MAAS is known to have none.
pub fn listing_wanted<'a>(
    hosts: impl IntoIterator<Item = &'a MaasHost>,
    machines: &[Machine],
    cache: &VmHostCache,
) -> bool {
    if cache.unsupported().is_some() {
        return false;
    }
    hosts.into_iter().any(|h| {
        h.spec
            .provisioning
            .as_ref()
            .is_some_and(|p| p.register_vm_host == Some(true))
            || h.status.as_ref().is_some_and(|s| s.vm_host.is_some())
    }) || machines.iter().any(|m| m.pod.is_some())
}

/// Bytes to whole GiB, rounded down (a VM host is never shown with more than it has).
pub fn bytes_to_gib(bytes: u64) -> i64 {
    i64::try_from(bytes / (1 << 30)).unwrap_or(i64::MAX)
}

fn count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// `status.vmHost` of the machine `host` runs on: id, name, zone, pool, cores, memory (MiB)
/// and storage (GiB, rounded down from MAAS's local storage bytes), total and used, and the
/// sorted system ids of `composed`, the machines the gateway sees composed on it.
pub fn host_status(host: &VmHost, composed: impl IntoIterator<Item = String>) -> HostVmHost {
    let mut machines: Vec<String> = composed.into_iter().collect();
    machines.sort();
    machines.dedup();
    HostVmHost {
        id: host.id,
        name: host.name.clone(),
        zone: host
            .zone
            .as_ref()
            .map(|z| z.name.clone())
            .filter(|z| !z.is_empty()),
        pool: host
            .pool
            .as_ref()
            .map(|p| p.name.clone())
            .filter(|p| !p.is_empty()),
        cores: VmHostResource {
            total: count(host.total.cores),
            used: count(host.used.cores),
        },
        memory_mib: VmHostResource {
            total: count(host.total.memory),
            used: count(host.used.memory),
        },
        storage_gib: VmHostResource {
            total: bytes_to_gib(host.total.local_storage),
            used: bytes_to_gib(host.used.local_storage),
        },
        machines: Some(machines),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn vm_host(id: i64, on: Option<&str>, used_cores: u64) -> VmHost {
        serde_json::from_value(serde_json::json!({
            "id": id, "name": format!("lxd{id}"), "type": "lxd",
            "zone": {"id": 1, "name": "z1"}, "pool": {"id": 0, "name": "default"},
            "host": on.map(|s| serde_json::json!({"system_id": s})),
            "total": {"cores": 8, "memory": 16384, "local_storage": 100_000_000_000_u64},
            "used": {"cores": used_cores, "memory": 2048, "local_storage": 8_000_000_000_u64},
        }))
        .unwrap()
    }

    #[test]
    fn sync_reports_changes_and_ignores_older_answers() {
        let cache = VmHostCache::default();
        assert_eq!(cache.on_machine("m1"), None, "nothing known yet");
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_millis(10);
        assert_eq!(cache.sync(vec![vm_host(1, Some("m1"), 0)], t0), ["m1"]);
        assert!(cache.sync(vec![vm_host(1, Some("m1"), 0)], t1).is_empty());
        assert_eq!(
            cache.sync(
                vec![
                    vm_host(1, Some("m1"), 2),
                    vm_host(2, Some("m2"), 0),
                    vm_host(3, None, 0)
                ],
                t1
            ),
            ["m1", "m2"]
        );
        assert!(cache.sync(vec![], t0).is_empty(), "older answer dropped");
        assert_eq!(cache.on_machine("m1").flatten().map(|h| h.id), Some(1));
        assert_eq!(cache.on_machine("m3"), Some(None));
        assert_eq!(cache.sync(vec![vm_host(2, Some("m2"), 0)], t1), ["m1"]);
        assert!(cache.get(1).is_none() && cache.get(2).is_some());
    }

    #[test]
    fn unsupported_is_remembered_and_stops_the_listing() {
        let cache = VmHostCache::default();
        cache.sync(vec![vm_host(1, Some("m1"), 0)], Instant::now());
        cache.mark_unsupported("Unknown API endpoint".into());
        assert_eq!(cache.unsupported().as_deref(), Some("Unknown API endpoint"));
        assert_eq!(cache.on_machine("m1"), None);
        let machine = crate::cache::tests::machine("m1", 4);
        let mut host = MaasHost::new(
            "h",
            serde_json::from_value(serde_json::json!({"systemID": "m1"})).unwrap(),
        );
        host.status = Some(capmaas_api::host::MaasHostStatus {
            vm_host: Some(HostVmHost::default()),
            ..Default::default()
        });
        assert!(!listing_wanted([&host], &[machine], &cache));
    }

    #[test]
    fn the_listing_is_wanted_only_where_lxd_is() {
        let cache = VmHostCache::default();
        let plain = crate::cache::tests::machine("m1", 4);
        let spec = |register: Option<bool>| {
            serde_json::from_value(serde_json::json!({
                "systemID": "m1",
                "consumerRef": {"apiVersion": "v", "kind": "K", "name": "n", "namespace": "ns", "uid": "u"},
                "provisioning": {"image": "ubuntu/jammy", "registerVMHost": register},
            }))
            .unwrap()
        };
        let host = MaasHost::new("h", spec(None));
        assert!(!listing_wanted(
            [&host],
            std::slice::from_ref(&plain),
            &cache
        ));
        assert!(!listing_wanted(
            [&MaasHost::new("h", spec(Some(false)))],
            &[],
            &cache
        ));
        assert!(listing_wanted(
            [&MaasHost::new("h", spec(Some(true)))],
            &[],
            &cache
        ));
        let mut composed = plain;
        composed.pod = Some(maas_api_client::PodRef {
            id: 3,
            ..Default::default()
        });
        assert!(listing_wanted([&host], &[composed], &cache));
    }

    #[test]
    fn status_rounds_storage_down_and_sorts_machines() {
        let status = host_status(&vm_host(4, Some("m1"), 3), ["b".to_owned(), "a".to_owned()]);
        assert_eq!(status.id, 4);
        assert_eq!(status.name, "lxd4");
        assert_eq!(
            (status.zone.as_deref(), status.pool.as_deref()),
            (Some("z1"), Some("default"))
        );
        assert_eq!((status.cores.total, status.cores.used), (8, 3));
        assert_eq!(
            (status.memory_mib.total, status.memory_mib.used),
            (16384, 2048)
        );
        // 100 GB = 93.13 GiB, 8 GB = 7.45 GiB.
        assert_eq!((status.storage_gib.total, status.storage_gib.used), (93, 7));
        assert_eq!(status.machines, Some(vec!["a".to_owned(), "b".to_owned()]));
    }
}
