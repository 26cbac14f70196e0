//! What every reconciler of the gateway shares during one leadership term.

use std::sync::Arc;
use std::time::Duration;

use capmaas_api::{MaasDNSRecord, MaasHost, MaasInventory};
use capmaas_runtime::controller::Base;
use k8s_openapi::api::coordination::v1::Lease;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};
use tokio::sync::mpsc;

use crate::args::GatewayConfig;
use crate::cache::MachineCache;
use crate::maas::Maas;

/// Settings the reconcilers need.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The installation part of our allocations' `agent_name`.
    pub installation_id: String,
    /// Namespace of the host bindings ([`crate::binding`]).
    pub binding_namespace: String,
    /// Sync interval override for every inventory.
    pub inventory_sync_interval: Option<Duration>,
    /// Deployment retries after a failure.
    pub deploy_retries: u32,
    /// `--maas-workload-annotations`: allocations get workload annotations for people.
    pub workload_annotations: bool,
    /// Orphan sweep period.
    pub orphan_sweep_interval: Duration,
    /// Grace period before an unclaimed allocation is released.
    pub orphan_grace_period: Duration,
    /// `--release-unclaimed-after`: hosts reporting `Unclaimed` this long are released.
    pub release_unclaimed_after: Option<Duration>,
    /// Interval of the batched observation of machines in flight ([`crate::host::watch`]).
    pub observe_interval: Duration,
    /// The namespace the gateway watches (`--namespace`); `None` = all.
    pub namespace: Option<String>,
    /// Ownership proofs under the MAAS API key ([`crate::ownership`]).
    pub proofs: crate::ownership::Proofs,
    /// How MAAS is reached, said on every inventory.
    pub transport: crate::inventory::status::Transport,
    /// `--dns-domains`: where MaasDNSRecords may publish names.
    pub dns_domains: capmaas_api::dns::AllowedDomains,
}

/// Shared state of the reconcilers; cheap to clone through `Arc`.
#[derive(Clone)]
pub struct Gateway {
    /// Rate-limited MAAS access.
    pub maas: Maas,
    /// Latest MAAS view of imported machines.
    pub cache: MachineCache,
    /// Kubernetes client, field manager, Events on the objects the gateway reconciles, and
    /// `--sync-period` (the requeue of quiet hosts and DNS records).
    pub base: Base,
    /// Settings.
    pub settings: Arc<Settings>,
    /// Wakes MaasHost reconciles (inventory sync found a change).
    pub host_trigger: mpsc::UnboundedSender<ObjectRef<MaasHost>>,
    /// Machines MAAS is changing, observed together ([`crate::host::watch`]).
    pub in_flight: crate::in_flight::InFlight,
    /// When each inventory last synced in this term ([`crate::inventory::schedule`]).
    pub inventory_syncs: crate::inventory::schedule::SyncTimes,
    /// MaasHosts as the host controller's reflector sees them.
    pub hosts: Store<MaasHost>,
    /// MaasInventories as the inventory controller's reflector sees them.
    pub inventories: Store<MaasInventory>,
    /// MaasDNSRecords as the DNS controller's reflector sees them (who holds which FQDN).
    pub dns_records: Store<MaasDNSRecord>,
    /// Host bindings of this installation ([`crate::binding`]), from a reflector.
    pub bindings: Store<Lease>,
    /// MaasHosts as this term's last reconcile of each left them, for a reconcile that starts
    /// before the watch delivered those writes ([`capmaas_runtime::own_writes`]).
    pub own_writes: capmaas_runtime::OwnWrites<MaasHost>,
    /// The MAAS user of the key (`whoami`), asked once per term when a takeover needs it.
    pub maas_user: Arc<tokio::sync::OnceCell<String>>,
    /// The compositions MAAS refused this term, by VM host ([`crate::compose`]).
    pub compose_refusals: crate::compose::refusals::Refusals,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Gateway {
    /// The username of the MAAS user the key belongs to: the owner of every allocation this
    /// installation makes (and of those CAPMAAS made with the same key).
    pub async fn maas_user(&self) -> Result<&str, maas_api_client::MaasError> {
        let name = self
            .maas_user
            .get_or_try_init(|| async { self.maas.whoami().await.map(|u| u.username) })
            .await?;
        Ok(name.as_str())
    }
}

impl Settings {
    /// The settings of one leadership term: the gateway's configuration and the runtime's.
    pub fn new(config: &GatewayConfig, runtime: &capmaas_runtime::Settings) -> Self {
        Self {
            installation_id: config.installation_id.clone(),
            binding_namespace: config.binding_namespace.clone(),
            inventory_sync_interval: config.inventory_sync_interval,
            deploy_retries: config.deploy_retries,
            workload_annotations: config.workload_annotations,
            orphan_sweep_interval: config.orphan_sweep_interval,
            orphan_grace_period: config.orphan_grace_period,
            release_unclaimed_after: config.release_unclaimed_after,
            dns_domains: config.dns_domains.clone(),
            observe_interval: config.observe_interval,
            namespace: runtime.namespace.clone(),
            proofs: crate::ownership::Proofs::new(
                config.maas.api_key.clone(),
                &config.installation_id,
            ),
            transport: if config.insecure_http {
                crate::inventory::status::Transport::PlainHttp {
                    endpoint: config.maas.api_root.to_string(),
                }
            } else {
                crate::inventory::status::Transport::Tls
            },
        }
    }
}

impl Gateway {
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
