//! The MaasHost specs this process wrote, so that a cached host is used only once it shows them
//! ([`HostWrites`]). The MaasMachines our reconciles wrote are remembered by the kit's
//! [`capmaas_runtime::OwnWrites`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use capmaas_api::MaasHost;
use capmaas_api::host::MaasHostSpec;
use kube::ResourceExt;

/// How long a remembered spec is kept when the cache never shows our write (the host was
/// deleted meanwhile): long past any watch delay.
const KEEP: Duration = Duration::from_secs(600);

/// The spec this process last wrote on each MaasHost (by namespace and name), so that a
/// reconcile can take a host from the cache instead of reading it fresh.
///
/// machine-controller is the only writer of a host's spec (the gateway writes its status and
/// annotations): a cached host whose spec is the one we last wrote is at least as new as our
/// write, and the watch brings every later change. A cached spec that differs (our write not
/// seen yet, or someone else's) sends the reconcile to the API server as before. Without a
/// remembered write (none since this process started: its reflector listed everything then)
/// the cache is taken.
#[derive(Debug, Default, Clone)]
pub struct HostWrites {
    by_host: Arc<Mutex<HostSpecs>>,
}

/// Written spec and when, by (namespace, name).
type HostSpecs = HashMap<(String, String), (MaasHostSpec, Instant)>;

impl HostWrites {
    /// Records the spec of a host as our write left it.
    pub fn remember(&self, written: &MaasHost) {
        let (Some(namespace), Some(name)) = (written.namespace(), written.metadata.name.clone())
        else {
            return;
        };
        let now = Instant::now();
        let mut map = self.lock();
        map.retain(|_, (_, at)| now.duration_since(*at) < KEEP);
        map.insert((namespace, name), (written.spec.clone(), now));
    }

    /// Whether `cached` may be used as it is: it shows our last write of its spec, or we
    /// remember none. A cache that caught up ends the memory.
    pub fn cache_is_current(&self, cached: &MaasHost) -> bool {
        let (Some(namespace), Some(name)) = (cached.namespace(), cached.metadata.name.clone())
        else {
            return false;
        };
        let key = (namespace, name);
        let mut map = self.lock();
        match map.get(&key) {
            None => true,
            Some((spec, _)) if *spec == cached.spec => {
                map.remove(&key);
                true
            }
            Some(_) => false,
        }
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<(String, String), (MaasHostSpec, Instant)>> {
        self.by_host.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::maas_machine;

    #[test]
    fn a_cached_host_is_current_once_it_shows_our_last_write() {
        use crate::test_support::{claimed, host};
        let writes = HostWrites::default();
        let free = host("h1", None);
        assert!(writes.cache_is_current(&free), "nothing written: the cache");
        let ours = claimed(free.clone(), &maas_machine("m"));
        writes.remember(&ours);
        assert!(!writes.cache_is_current(&free), "our claim not seen yet");
        assert!(writes.cache_is_current(&ours));
        assert!(
            writes.cache_is_current(&free),
            "caught up once: memory ended"
        );
        writes.remember(&free);
        assert!(!writes.cache_is_current(&ours), "our release not seen yet");
    }
}
