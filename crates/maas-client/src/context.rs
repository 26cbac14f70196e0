//! What every reconciler of the gateway shares during one leadership term.

use std::sync::Arc;
use std::time::Duration;

use capmaas_api::{MaasHost, MaasInventory};
use capmaas_runtime::{ControllerMetrics, ObjectBackoff};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};
use tokio::sync::mpsc;
use tracing::debug;

use crate::cache::MachineCache;
use crate::maas::Maas;

/// Settings the reconcilers need.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `agent_name` of our allocations.
    pub installation_id: String,
    /// Server-side apply field manager (`capmaas-maas-client`).
    pub field_manager: String,
    /// Sync interval override for every inventory.
    pub inventory_sync_interval: Option<Duration>,
    /// Deployment retries after a failure.
    pub deploy_retries: u32,
    /// Orphan sweep period.
    pub orphan_sweep_interval: Duration,
    /// Grace period before an unclaimed allocation is released.
    pub orphan_grace_period: Duration,
    /// Requeue of quiet hosts and DNS records (`--sync-period`).
    pub resync: Duration,
}

/// Shared state of the reconcilers; cheap to clone through `Arc`.
#[derive(Clone)]
pub struct Gateway {
    /// Rate-limited MAAS access.
    pub maas: Maas,
    /// Latest MAAS view of imported machines.
    pub cache: MachineCache,
    /// Kubernetes client for calls (has a read timeout).
    pub kube: kube::Client,
    /// Settings.
    pub settings: Arc<Settings>,
    /// Event recorder.
    pub recorder: Recorder,
    /// Per-object backoff after errors.
    pub backoff: ObjectBackoff,
    /// Wakes MaasHost reconciles (inventory sync found a change).
    pub host_trigger: mpsc::UnboundedSender<ObjectRef<MaasHost>>,
    /// MaasHosts as the host controller's reflector sees them.
    pub hosts: Store<MaasHost>,
    /// MaasInventories as the inventory controller's reflector sees them.
    pub inventories: Store<MaasInventory>,
    /// Reconcile metrics of the host controller.
    pub host_metrics: ControllerMetrics,
    /// Reconcile metrics of the inventory controller.
    pub inventory_metrics: ControllerMetrics,
    /// Reconcile metrics of the DNS record controller.
    pub dns_metrics: ControllerMetrics,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Gateway {
    /// Publishes an Event on `obj`; a failure is logged, never fatal (events are best effort).
    pub async fn event<K>(&self, obj: &K, warning: bool, reason: &str, note: String)
    where
        K: Resource<DynamicType = ()>,
    {
        let event = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.to_owned(),
            note: Some(note),
            action: reason.to_owned(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &obj.object_ref(&())).await {
            debug!(object = %obj.meta().name.as_deref().unwrap_or(""), error = %e, "event not recorded");
        }
    }

    /// Asks the host controller to look at `name` in `namespace` again.
    pub fn refresh_host(&self, namespace: &str, name: &str) {
        // A closed channel means the term is ending; nothing to wake.
        let _ = self
            .host_trigger
            .send(ObjectRef::new(name).within(namespace));
    }

    /// The hosts of inventory `name` in `namespace`, from the reflector.
    pub fn hosts_of(&self, namespace: &str, inventory: &str) -> Vec<Arc<MaasHost>> {
        self.hosts
            .state()
            .into_iter()
            .filter(|h| {
                h.namespace().as_deref() == Some(namespace)
                    && h.labels()
                        .get(capmaas_api::keys::LABEL_HOST_INVENTORY)
                        .map(String::as_str)
                        == Some(inventory)
            })
            .collect()
    }
}
