//! The MAAS gateway Deployment (binary `maas-client`): the only component that talks to MAAS.
//!
//! - [`inventory`]: one filtered MAAS list per MaasInventory per sync; MaasHosts created,
//!   relabelled, marked missing or deleted ([`inventory::plan::plan_inventory_sync`]).
//! - [`host`]: the provisioning state machine ([`host::step::next_step`]): allocate the exact
//!   machine with our agent_name, record it, annotate, rename, deploy, poll, release, reboot.
//! - [`dns`]: MaasDNSRecord → MAAS DNS resource, with a finalizer.
//! - [`sweeper`]: adoption of our allocations and release of orphans after a grace period.
//! - [`maas`]: the rate-limited client and the per-operation request metrics.
//!
//! Everything runs inside [`capmaas_runtime::Runtime::run`]: only the leader's term talks to
//! MAAS; the admin server, health and shutdown come from the runtime.

pub mod cache;
pub mod config;
pub mod context;
pub mod dns;
pub mod error;
pub mod host;
pub mod inventory;
pub mod maas;
pub mod mapping;
pub mod sweeper;

use std::sync::Arc;

use capmaas_api::{MaasDNSRecord, MaasHost, MaasInventory};
use capmaas_runtime::{BoxError, Context, ObjectBackoff, Runtime, event_recorder};
use futures::StreamExt;
use kube::Api;
use kube::Resource;
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use maas_client::MaasClient;
use tracing::{debug, info};

use crate::config::{Args, Environment, GatewayConfig};
use crate::context::{Gateway, Settings};
use crate::error::Error;
use crate::maas::{Maas, MaasMetrics};

/// Binary name; the field manager is `capmaas-maas-client`.
pub const BINARY: &str = "maas-client";

/// Resolves the configuration, builds the runtime and runs until shutdown.
pub async fn run(args: Args) -> Result<(), BoxError> {
    let config = GatewayConfig::resolve(&args, &Environment::from_process())?;
    let runtime = Runtime::builder(BINARY)
        .with_args(args.common)
        .default_concurrency(8)
        .build()
        .await?;
    run_with(runtime, config).await
}

/// Runs the gateway on an already built runtime (tests and embedding build their own).
pub async fn run_with(runtime: Runtime, config: GatewayConfig) -> Result<(), BoxError> {
    let metrics = runtime.metrics().register(MaasMetrics::register);
    let mut maas_config = config.maas.clone();
    maas_config.observer = Arc::new(metrics);
    let maas = Maas::new(MaasClient::new(maas_config)?, config.rate_limit);
    info!(installation_id = %config.installation_id, endpoint = %config.maas.api_root, "MAAS gateway configured");
    runtime
        .run(move |ctx| run_term(ctx, maas.clone(), config.clone()))
        .await?;
    Ok(())
}

fn api<K>(client: &kube::Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

#[allow(clippy::needless_pass_by_value)] // the signature kube's Controller::run expects
fn error_policy<K>(obj: Arc<K>, error: &Error, gw: Arc<Gateway>) -> Action
where
    K: Resource<DynamicType = ()>,
{
    debug!(error = %error, "reconcile failed");
    gw.backoff
        .error_action(&ObjectRef::from_obj(obj.as_ref()), error)
}

/// One leadership term: three controllers and the sweeper.
pub async fn run_term(ctx: Context, maas: Maas, config: GatewayConfig) -> Result<(), BoxError> {
    let namespace = ctx.settings.namespace.as_deref();
    let watch = &ctx.clients.watch;
    let controller_config = ControllerConfig::default().concurrency(ctx.settings.concurrency);
    let (host_tx, mut host_rx) = tokio::sync::mpsc::unbounded_channel();
    let host_triggers = futures::stream::poll_fn(move |cx| host_rx.poll_recv(cx));
    let hosts = Controller::new(
        api::<MaasHost>(watch, namespace),
        watcher::Config::default(),
    )
    .with_config(controller_config.clone())
    .reconcile_on(host_triggers);
    let inventories = Controller::new(
        api::<MaasInventory>(watch, namespace),
        watcher::Config::default(),
    )
    .with_config(controller_config.clone());
    let records = Controller::new(
        api::<MaasDNSRecord>(watch, namespace),
        watcher::Config::default(),
    )
    .with_config(controller_config);
    let gw = Arc::new(Gateway {
        maas,
        cache: cache::MachineCache::new(),
        kube: ctx.clients.api.clone(),
        settings: Arc::new(Settings {
            installation_id: config.installation_id.clone(),
            field_manager: ctx.settings.field_manager.clone(),
            inventory_sync_interval: config.inventory_sync_interval,
            deploy_retries: config.deploy_retries,
            orphan_sweep_interval: config.orphan_sweep_interval,
            orphan_grace_period: config.orphan_grace_period,
            resync: ctx.settings.sync_period,
        }),
        recorder: event_recorder(ctx.clients.api.clone(), BINARY),
        backoff: ObjectBackoff::default(),
        host_trigger: host_tx,
        hosts: hosts.store(),
        inventories: inventories.store(),
        host_metrics: ctx.reconcile.controller("maashost"),
        inventory_metrics: ctx.reconcile.controller("maasinventory"),
        dns_metrics: ctx.reconcile.controller("maasdnsrecord"),
    });
    let cancel = ctx.cancel.clone();
    let ready = {
        let (gw, health) = (gw.clone(), ctx.health.clone());
        async move {
            if gw.hosts.wait_until_ready().await.is_ok()
                && gw.inventories.wait_until_ready().await.is_ok()
            {
                health.mark_ready();
            }
        }
    };
    let host_run = hosts
        .graceful_shutdown_on(cancel.clone().cancelled_owned())
        .run(host::controller::reconcile, error_policy, gw.clone())
        .for_each(|result| async move {
            if let Err(e) = result {
                debug!(controller = "maashost", error = %e, "reconcile error");
            }
        });
    let inventory_run = inventories
        .graceful_shutdown_on(cancel.clone().cancelled_owned())
        .run(inventory::controller::reconcile, error_policy, gw.clone())
        .for_each(|result| async move {
            if let Err(e) = result {
                debug!(controller = "maasinventory", error = %e, "reconcile error");
            }
        });
    let dns_run = records
        .graceful_shutdown_on(cancel.clone().cancelled_owned())
        .run(dns::reconcile, error_policy, gw.clone())
        .for_each(|result| async move {
            if let Err(e) = result {
                debug!(controller = "maasdnsrecord", error = %e, "reconcile error");
            }
        });
    let sweep = sweeper::run(gw.clone(), cancel.clone());
    tokio::join!(ready, host_run, inventory_run, dns_run, sweep);
    Ok(())
}
