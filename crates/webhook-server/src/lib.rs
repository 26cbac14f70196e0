//! The admission webhook server (binary `webhook-server`), the sixth Deployment.
//!
//! Serves `/mutate-…` and `/validate-…` for all 13 kinds over HTTPS (rustls), with the serving
//! certificate read from a mounted Secret and reloaded when it is renewed. Stateless: every
//! replica answers, there is no leader. Cross-object rules read watch caches of MaasIPPools and
//! MaasInventories; the server is ready once they are filled.
//!
//! Layout: [`validate`] and [`defaults`] are pure (request in, verdict or defaulted object
//! out); [`admit`] turns an AdmissionReview into a call to them and back; [`server`], [`tls`]
//! and [`cache`] are the I/O. [`kinds`] is the table of kinds, paths and registration
//! policies, from which [`manifests`] renders the webhook configurations in `deploy/`.
//! [`cost`] estimates what decoding a review takes, so that [`server`] can refuse one that
//! would not fit its memory budget before decoding it.

pub mod admit;
pub mod args;
pub mod cache;
pub mod cost;
pub mod defaults;
pub mod error;
pub mod field;
pub mod kinds;
pub mod manifests;
pub mod metrics;
pub mod server;
pub mod validate;

use std::net::SocketAddr;
use std::sync::Arc;

use capmaas_api::dns::AllowedDomains;
use capmaas_runtime::{BoxError, CommonArgs, Runtime, Term};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tracing::{info, warn};

pub use args::{ABOUT, BINARY, WebhookArgs};
pub use error::{Error, Result};

use crate::cache::Caches;
use crate::metrics::AdmissionMetrics;
use crate::server::Admission;
use capmaas_runtime::tls::{self, CertFiles, ReloadingCert};

/// Installs the process-wide rustls crypto provider (idempotent).
pub fn install_crypto() {
    capmaas_runtime::install_crypto_provider();
}

/// Runs the binary: loads the certificate, binds the listener, serves until SIGTERM.
pub async fn start(mut common: CommonArgs, args: WebhookArgs) -> Result<(), BoxError> {
    install_crypto();
    // Every replica answers admission reviews: a leader would leave the others idle. A manifest
    // written for CAPMAAS's manager asks for one; it is ignored rather than refused.
    let leader_elect_ignored = std::mem::take(&mut common.leader_elect);
    let files = CertFiles::in_dir(&args.webhook_cert_dir);
    let cert = Arc::new(ReloadingCert::load(&files)?);
    let addr = SocketAddr::new(args.webhook_host, args.webhook_port);
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| Error::Bind { addr, source })?;
    let runtime = Runtime::builder(BINARY).with_args(common).build().await?;
    if leader_elect_ignored {
        warn!("--leader-elect ignored: webhook-server elects no leader, every replica answers");
    }
    let metrics = runtime.metrics().register(AdmissionMetrics::register);
    let mut listener = Some(listener);
    runtime
        .run(move |term| {
            let serving = listener.take().map(|l| Serving {
                listener: l,
                cert: cert.clone(),
                files: files.clone(),
                metrics: metrics.clone(),
                args: args.clone(),
            });
            run(term, serving)
        })
        .await?;
    Ok(())
}

/// Everything one run of the server needs.
#[derive(Debug)]
pub struct Serving {
    /// The bound HTTPS listener.
    pub listener: TcpListener,
    /// The serving certificate.
    pub cert: Arc<ReloadingCert>,
    /// Where it is read from.
    pub files: CertFiles,
    /// Admission metrics.
    pub metrics: AdmissionMetrics,
    /// Flags.
    pub args: WebhookArgs,
}

/// Serves admission reviews until the term is cancelled (SIGTERM).
pub async fn run(term: Term, serving: Option<Serving>) -> Result<(), BoxError> {
    let Some(serving) = serving else {
        return Err("the webhook listener was already used by an earlier run".into());
    };
    let caches = Caches::start(
        &term.clients.watch,
        term.settings.namespace.as_deref(),
        AllowedDomains::parse(&serving.args.dns_domains),
        &term.cancel,
    );
    let ready = {
        let (caches, health) = (caches.clone(), term.health.clone());
        async move {
            if caches.wait_until_ready().await {
                health.mark_ready();
                info!("caches filled; answering admission reviews");
            }
        }
    };
    tokio::spawn(tls::watch(
        serving.cert.clone(),
        serving.files.clone(),
        serving.args.cert_reload_interval,
        term.cancel.clone(),
    ));
    let (limits, admission_limits) = serving.args.limits();
    let admission = Arc::new(Admission::new(
        Arc::new(caches),
        serving.metrics,
        admission_limits,
    ));
    let acceptor = TlsAcceptor::from(serving.cert.server_config());
    let addr = serving.listener.local_addr().ok();
    info!(
        ?addr,
        max_connections = limits.max_connections,
        request_timeout = ?limits.request_timeout,
        "webhook server listening"
    );
    let serve = server::serve(
        serving.listener,
        acceptor,
        admission,
        &limits,
        term.cancel.clone(),
    );
    tokio::join!(ready, serve);
    Ok(())
}
