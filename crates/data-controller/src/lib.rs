//! The data-controller Deployment (binary `data-controller`): per-machine data templates and
//! the MaasIPPool IPAM provider.
//!
//! - [`claim`]: the MaasDataClaim reconciler: one IPAddressClaim per pool the template uses,
//!   the lowest free index of the template as a MaasData named `<template>-<index>`, rendering
//!   ([`render`], pure) into Secrets owned by the MaasData, status.
//! - [`template`]: the MaasDataTemplate reconciler: `status.indexes` and a finalizer that keeps
//!   a template while MaasData use it.
//! - [`ipam`]: the IPAM provider for `MaasIPPool` through the CAPI IPAM contract
//!   (`IPAddressClaim` → `IPAddress`).
//! - [`lookup`]: store lookups the watch mappers share.
//! - [`metrics_pools`]: pool usage gauges, read from the pool statuses when Prometheus scrapes.
//!
//! Layout as every controller crate (`docs/architecture.md`); the plumbing comes from
//! [`capmaas_runtime::controller`].

pub mod args;
pub mod claim;
pub mod context;
pub mod error;
pub mod hold;
pub mod ipam;
pub mod lookup;
pub mod metrics_pools;
pub mod render;
pub mod template;
pub mod writes;

use std::sync::Arc;

use capmaas_api::capi_ipam::{IPAddress, IPAddressClaim};
use capmaas_api::{MaasData, MaasDataClaim, MaasDataTemplate, MaasHost, MaasIPPool, keys};
use capmaas_runtime::controller::{
    self as kit, Base, Keep, ReconcilerSettings, cached, ready_when, scoped,
};
use capmaas_runtime::{BoxError, CommonArgs};
use futures::StreamExt;
use kube::runtime::{Controller, watcher};

pub use args::{ABOUT, BINARY, ControllerArgs, DEFAULT_CONCURRENCY};
pub use error::{Error, Result};

use crate::claim::{act, watch};
use crate::context::Ctx;

/// The `controller` label of the claim controller's metrics and logs.
pub const CONTROLLER: &str = "maasdataclaim";
/// The `controller` label of the template controller.
pub const TEMPLATE_CONTROLLER: &str = "maasdatatemplate";
/// The `controller` label of the address hold controller.
pub const HOLD_CONTROLLER: &str = "addresshold";

/// Runs the binary: the runtime from the common flags, then [`run`] in each leadership term.
pub async fn start(common: CommonArgs, args: ControllerArgs) -> Result<(), BoxError> {
    args.validate()?;
    capmaas_runtime::serve(BINARY, DEFAULT_CONCURRENCY, common, args, |term, args| {
        Box::pin(run(term, args))
    })
    .await
}

/// One leadership term: the IPAM provider and the data template controllers, as enabled.
/// `/readyz` turns ready once the caches of every enabled half are filled.
pub async fn run(term: capmaas_runtime::Term, args: ControllerArgs) -> Result<(), BoxError> {
    let ipam = args.ipam.then(|| ipam::Ipam::new(&term));
    // `capmaas_ippool_*` read this term's MaasIPPool cache (the IPAM provider's).
    let _pool_metrics = ipam.as_ref().map(|ipam| {
        metrics_pools::PoolMetrics::get_or_register(&term.metrics)
            .attach(ipam.context().pools.clone())
    });
    let ipam_synced = ipam.as_ref().map(ipam::Ipam::synced);
    let ipam_synced = async move {
        match ipam_synced {
            Some(synced) => synced.await,
            None => true,
        }
    };
    let run_ipam = async move {
        if let Some(ipam) = ipam {
            Box::pin(ipam.run()).await;
        }
    };
    if args.data_templates {
        tokio::join!(Box::pin(run_data(&term, ipam_synced)), run_ipam);
    } else {
        tokio::join!(
            ready_when(&term.health, &term.cancel, ipam_synced),
            run_ipam
        );
    }
    Ok(())
}

/// The MaasDataClaim and MaasDataTemplate controllers for one term; ready once their caches
/// and `also_synced` (the IPAM provider's, when it runs in the same term) are filled.
async fn run_data(term: &capmaas_runtime::Term, also_synced: impl Future<Output = bool>) {
    let ns = term.settings.namespace.as_deref();
    let watch = &term.clients.watch;
    let wc = watcher::Config::default();
    let (data, data_stream) = cached(scoped::<MaasData>(watch, ns), wc.clone(), Keep::Everything);
    let (templates, template_stream) = cached(
        scoped::<MaasDataTemplate>(watch, ns),
        wc.clone(),
        Keep::Everything,
    );
    let (ip_claims, ip_claim_stream) = cached(
        scoped::<IPAddressClaim>(watch, ns),
        wc.clone().labels(keys::LABEL_DATA_CLAIM),
        Keep::Everything,
    );
    let (ip_addresses, ip_address_stream) =
        cached(scoped::<IPAddress>(watch, ns), wc.clone(), Keep::Everything);
    let (pools, pool_stream) = cached(
        scoped::<MaasIPPool>(watch, ns),
        wc.clone(),
        Keep::Everything,
    );
    let claims = Controller::new(scoped::<MaasDataClaim>(watch, ns), wc.clone());
    let claim_store = claims.store();
    let ctx = Arc::new(Ctx {
        base: Base::for_term(term),
        claims: claim_store.clone(),
        templates: templates.clone(),
        data: data.clone(),
        ip_claims: ip_claims.clone(),
        ip_addresses: ip_addresses.clone(),
        pools: pools.clone(),
        reservations: Arc::default(),
    });
    let (for_templates, for_hosts) = (claim_store.clone(), claim_store.clone());
    // An address served for an IPAddressClaim wakes the data claim through the IPAddressClaim's
    // status change; the IPAddress and pool streams only keep their stores filled.
    let keep_filled =
        futures::stream::select(ip_address_stream.map(|_| ()), pool_stream.map(|_| ()))
            .take_until(term.cancel.clone().cancelled_owned())
            .for_each(|()| std::future::ready(()));
    let claims = claims
        .watches_stream(data_stream, |d| watch::map_data(&d))
        .watches_stream(ip_claim_stream, |c| watch::map_ip_claim(&c))
        .watches_stream(template_stream, move |t| {
            watch::map_template(&for_templates, &t)
        })
        .watches(scoped::<MaasHost>(watch, ns), wc.clone(), move |h| {
            watch::map_host(&for_hosts, &h)
        });
    let template_controller = Controller::new(scoped::<MaasDataTemplate>(watch, ns), wc.clone())
        .watches(scoped::<MaasData>(watch, ns), wc.clone(), |d| {
            template::watch::map_data(&d)
        });
    // Address holds: the IPAddressClaims of released data claims kept for their host.
    let (holds_by_host, holds_by_claim) = (ip_claims.clone(), ip_claims.clone());
    let hold_controller = Controller::new(
        scoped::<IPAddressClaim>(watch, ns),
        wc.clone().labels(keys::LABEL_DATA_CLAIM),
    )
    .watches(scoped::<MaasHost>(watch, ns), wc.clone(), move |h| {
        hold::watch::map_host(&holds_by_host, &h)
    })
    .watches(scoped::<MaasDataClaim>(watch, ns), wc, move |c| {
        hold::watch::map_claim(&holds_by_claim, &c)
    });
    let stores_ready = {
        let (claims, data, templates, ip_claims, ip_addresses, pools) = (
            claim_store.clone(),
            data.clone(),
            templates.clone(),
            ip_claims.clone(),
            ip_addresses.clone(),
            pools.clone(),
        );
        async move {
            also_synced.await
                && claims.wait_until_ready().await.is_ok()
                && data.wait_until_ready().await.is_ok()
                && templates.wait_until_ready().await.is_ok()
                && ip_claims.wait_until_ready().await.is_ok()
                && ip_addresses.wait_until_ready().await.is_ok()
                && pools.wait_until_ready().await.is_ok()
        }
    };
    tokio::join!(
        ready_when(&term.health, &term.cancel, stores_ready),
        keep_filled,
        kit::run_traced(
            claims,
            ReconcilerSettings::for_term(term, CONTROLLER),
            ctx.clone(),
            act::reconcile,
            watch::trace_relation
        ),
        kit::run(
            template_controller,
            ReconcilerSettings::for_term(term, TEMPLATE_CONTROLLER),
            ctx.clone(),
            template::act::reconcile
        ),
        kit::run(
            hold_controller,
            ReconcilerSettings::for_term(term, HOLD_CONTROLLER),
            ctx,
            hold::act::reconcile
        ),
    );
}
