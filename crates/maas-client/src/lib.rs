//! The MAAS gateway Deployment (binary `maas-client`): the only component that talks to MAAS.
//!
//! - [`inventory`]: one filtered MAAS list per MaasInventory per sync; MaasHosts created,
//!   relabelled, marked missing or deleted ([`inventory::decide::plan_inventory_sync`]).
//! - [`host`]: the provisioning state machine ([`host::decide::next_step`]): allocate the exact
//!   machine with our agent_name (or deploy a Ready one, which allocates it in the same call),
//!   record it, annotate, rename, deploy, release, reboot; what MAAS does meanwhile is observed
//!   for all hosts with one list per interval ([`host::watch`]).
//! - [`compose`]: LXD VMs composed on VM hosts for `MaasHost.spec.vms`, and their MaasHosts.
//! - [`dns`]: MaasDNSRecord → MAAS DNS resource, with a finalizer.
//! - [`ippool`]: MaasIPPool with `spec.maasSubnet` → MAAS reserved IP ranges, with a finalizer.
//! - [`binding`]: one MAAS machine, one MaasHost in the whole cluster (a Lease per machine).
//! - [`sweeper`]: adoption of our allocations and release of orphans after a grace period.
//! - [`maas`]: the rate-limited client and the per-operation request metrics.
//! - [`metrics_hosts`]: hosts by state, counted from the host cache when Prometheus scrapes.
//!
//! Everything runs inside [`capmaas_runtime::Runtime::run`]: only the leader's term talks to
//! MAAS; the admin server, health and shutdown come from the runtime. The three controllers
//! are driven by the kit ([`capmaas_runtime::controller::run`]: metrics, backoff, error policy,
//! stop at the end of the term); [`run_term`] wires them.

pub mod args;
pub mod binding;
pub mod cache;
pub mod compose;
pub mod context;
pub mod dns;
pub mod error;
pub mod host;
pub mod in_flight;
pub mod inventory;
pub mod ippool;
pub mod maas;
pub mod mapping;
pub mod metrics_hosts;
pub mod ownership;
pub mod sweeper;
pub mod vm_hosts;

use std::sync::Arc;

use capmaas_api::{MaasDNSRecord, MaasHost, MaasIPPool, MaasInventory};
use capmaas_runtime::controller::{
    Base, ReconcilerSettings, ready_when, run, run_traced, scoped, without_managed_fields,
};
use capmaas_runtime::{BoxError, CommonArgs, Runtime, Term};
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use kube::runtime::controller::Controller;
use kube::runtime::reflector::{self, reflector};
use kube::runtime::{WatchStreamExt, watcher};
use maas_api_client::MaasClient;
use tracing::{info, warn};

use crate::args::{Environment, GatewayArgs, GatewayConfig};
use crate::cache::MachineCache;
use crate::context::{Gateway, Settings};
use crate::maas::{Maas, MaasMetrics};

pub use args::{ABOUT, BINARY, DEFAULT_CONCURRENCY};

/// Resolves the configuration (flags and `MAAS_*` environment), builds the runtime and runs
/// until shutdown: what `main` does.
pub async fn start(common: CommonArgs, args: GatewayArgs) -> Result<(), BoxError> {
    let config = GatewayConfig::resolve(&args, &Environment::from_process())?;
    let runtime = Runtime::builder(BINARY)
        .with_args(common)
        .default_concurrency(DEFAULT_CONCURRENCY)
        .build()
        .await?;
    run_with(runtime, config).await
}

/// Runs the gateway on an already built runtime (tests and embedding build their own, e.g.
/// with [`Runtime::embedded`]).
pub async fn run_with(runtime: Runtime, config: GatewayConfig) -> Result<(), BoxError> {
    let metrics = runtime.metrics().register(MaasMetrics::register);
    metrics.set_plain_http(config.insecure_http);
    let mut maas_config = config.maas.clone();
    maas_config.observer = Arc::new(metrics.clone());
    // Every mutating MAAS call checks the leadership fence right before it is sent.
    let maas = Maas::new(MaasClient::new(maas_config)?, config.rate_limit)
        .with_fence(runtime.fence().clone())
        .with_metrics(metrics);
    info!(installation_id = %config.installation_id, endpoint = %config.maas.api_root, "MAAS gateway configured");
    if config.insecure_http {
        warn!(endpoint = %config.maas.api_root, "MAAS endpoint is plain http (--maas-allow-insecure-http): the MAAS key and every answer travel in clear; every MaasInventory says so (MAASConnectionSecure=False) and capmaas_maas_plain_http is 1");
    }
    runtime
        .run(move |term| Box::pin(run_term(term, maas.clone(), config.clone())))
        .await?;
    Ok(())
}

/// One leadership term: the MaasHost, MaasInventory, MaasDNSRecord and MaasIPPool controllers and the
/// orphan sweeper, until the term ends. Ready once the host and inventory caches are filled.
pub async fn run_term(term: Term, maas: Maas, config: GatewayConfig) -> Result<(), BoxError> {
    let namespace = term.settings.namespace.as_deref();
    let watch = &term.clients.watch;
    // The inventory sync wakes the hosts whose machine changed in MAAS.
    let (host_trigger, mut woken) = tokio::sync::mpsc::unbounded_channel();
    let host_triggers = futures::stream::poll_fn(move |cx| woken.poll_recv(cx));
    // Hosts and bindings are kept without their managed fields: nothing here reads them, and
    // they are most of each object's memory (about 11 of 14.5 KiB per MaasHost, 4 of 6.5 KiB
    // per binding), so an installation of thousands of machines holds tens of MiB less.
    // The composition controller reconciles VM hosts off the same watch: woken by a change of
    // a VM host asking for VMs or of a composed VM's host ([`compose::wake`]).
    let (compose_trigger, mut compose_woken) = tokio::sync::mpsc::unbounded_channel();
    let compose_triggers = futures::stream::poll_fn(move |cx| compose_woken.poll_recv(cx));
    let (host_store, host_writer) = reflector::store();
    let host_objects = reflector(
        host_writer,
        watcher(
            scoped::<MaasHost>(watch, namespace),
            watcher::Config::default(),
        )
        .modify(without_managed_fields),
    )
    .applied_objects()
    .inspect(move |host| {
        if let Some(vm_host) = host.as_ref().ok().and_then(compose::wake) {
            // The receiver goes with the term, as this stream does.
            let _ = compose_trigger.send(vm_host);
        }
    });
    let compositions = Controller::for_stream(
        futures::stream::empty::<Result<MaasHost, watcher::Error>>(),
        host_store.clone(),
    )
    .reconcile_on(compose_triggers);
    let hosts = Controller::for_stream(host_objects, host_store).reconcile_on(host_triggers);
    let inventories = Controller::new(
        scoped::<MaasInventory>(watch, namespace),
        watcher::Config::default(),
    );
    let records = Controller::new(
        scoped::<MaasDNSRecord>(watch, namespace),
        watcher::Config::default(),
    );
    let pools = Controller::new(
        scoped::<MaasIPPool>(watch, namespace),
        watcher::Config::default(),
    );
    // Host bindings: one Lease per machine in the binding namespace, labelled per installation.
    let (bindings, binding_writer) = reflector::store();
    let binding_selector = format!(
        "{}={}",
        binding::LABEL_BINDING,
        binding::installation_label(&config.installation_id)
    );
    let binding_watch = reflector(
        binding_writer,
        watcher(
            Api::<Lease>::namespaced(watch.clone(), &config.binding_namespace),
            watcher::Config::default().labels(&binding_selector),
        )
        .modify(without_managed_fields),
    )
    .default_backoff()
    .take_until(term.cancel.clone().cancelled_owned())
    .for_each(|_| std::future::ready(()));
    let gw = Arc::new(Gateway {
        maas,
        cache: MachineCache::new(),
        base: Base::for_term(&term),
        settings: Arc::new(Settings::new(&config, &term.settings)),
        host_trigger,
        in_flight: in_flight::InFlight::default(),
        inventory_syncs: inventory::schedule::SyncTimes::default(),
        own_writes: capmaas_runtime::OwnWrites::default(),
        maas_user: Arc::default(),
        compose_refusals: compose::refusals::Refusals::default(),
        hosts: hosts.store(),
        inventories: inventories.store(),
        dns_records: records.store(),
        bindings: bindings.clone(),
    });
    // `capmaas_hosts` and `capmaas_host_state_oldest_seconds` read this term's host cache.
    let _host_metrics =
        metrics_hosts::HostMetrics::get_or_register(&term.metrics).attach(gw.hosts.clone());
    let synced = {
        let (hosts, inventories, records) = (
            gw.hosts.clone(),
            gw.inventories.clone(),
            gw.dns_records.clone(),
        );
        async move {
            bindings.wait_until_ready().await.is_ok()
                && hosts.wait_until_ready().await.is_ok()
                && inventories.wait_until_ready().await.is_ok()
                && records.wait_until_ready().await.is_ok()
        }
    };
    tokio::join!(
        ready_when(&term.health, &term.cancel, synced),
        run_traced(
            hosts,
            ReconcilerSettings::for_term(&term, "maashost"),
            gw.clone(),
            host::act::reconcile,
            host::decide::trace_relation,
        ),
        run(
            compositions,
            ReconcilerSettings::for_term(&term, "maashost-compose"),
            gw.clone(),
            compose::act::reconcile,
        ),
        run(
            inventories,
            ReconcilerSettings::for_term(&term, "maasinventory"),
            gw.clone(),
            inventory::act::reconcile,
        ),
        run(
            records,
            ReconcilerSettings::for_term(&term, "maasdnsrecord"),
            gw.clone(),
            dns::reconcile,
        ),
        run(
            pools,
            ReconcilerSettings::for_term(&term, "maasippool"),
            gw.clone(),
            ippool::reconcile,
        ),
        sweeper::run(gw.clone(), term.cancel.clone()),
        host::watch::run(gw.clone(), term.cancel.clone()),
        binding_watch,
    );
    Ok(())
}
