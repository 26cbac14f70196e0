//! The HTTP(S) server: hyper 1 + hyper-util, optional rustls, graceful shutdown, ticker.

use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::app;
use crate::auth::NonceStore;
use crate::config::{ApiKey, SimConfig, TlsFiles};
use crate::error::SimError;
use crate::handle::SimHandle;
use crate::latency::Region;
use crate::shared::Shared;
use crate::{inventory, persist};

/// Starts simulators.
#[derive(Debug)]
pub struct Simulator;

/// A running simulator. Dropping it without [`RunningSim::shutdown`] stops accepting too.
pub struct RunningSim {
    addr: SocketAddr,
    scheme: &'static str,
    default_key: ApiKey,
    shared: Arc<Shared>,
    cancel: CancellationToken,
    tasks: TaskTracker,
}

impl fmt::Debug for RunningSim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunningSim")
            .field("addr", &self.addr)
            .field("scheme", &self.scheme)
            .finish_non_exhaustive()
    }
}

impl Drop for RunningSim {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

fn tls_acceptor(files: &TlsFiles) -> Result<TlsAcceptor, SimError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert)
        .map_err(|e| SimError::Tls(format!("{}: {e}", files.cert.display())))?
        .collect::<Result<_, _>>()
        .map_err(|e| SimError::Tls(format!("{}: {e}", files.cert.display())))?;
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .map_err(|e| SimError::Tls(format!("{}: {e}", files.key.display())))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| SimError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| SimError::Tls(e.to_string()))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

impl Simulator {
    /// Builds the world (state file, inventory or generator), binds and starts serving.
    pub async fn start(cfg: SimConfig) -> Result<RunningSim, SimError> {
        if cfg.api_keys.is_empty() {
            return Err(SimError::Config(
                "at least one API key is needed".to_owned(),
            ));
        }
        cfg.faults.validate().map_err(SimError::Config)?;
        let mut world = match &cfg.state_file {
            Some(path) => persist::load(path)?,
            None => None,
        }
        .map_or_else(|| inventory::build_world(&cfg), Ok)?;
        world.timings = cfg.timings;
        world.seed = cfg.seed;
        world.vm_hosts_supported = cfg.vm_hosts;
        // The statuses the machines start with are the baseline of their histories.
        world.note_statuses();
        let acceptor = cfg.tls.as_ref().map(tls_acceptor).transpose()?;
        let listen = cfg
            .listen
            .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0)));
        let listener = TcpListener::bind(listen)
            .await
            .map_err(|e| SimError::io(format!("listen {listen}"), e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| SimError::io("local address", e))?;
        let scheme = if acceptor.is_some() { "https" } else { "http" };
        let shared = Arc::new(Shared {
            world: Mutex::new(world),
            keys: cfg.api_keys.clone(),
            strict_auth: cfg.strict_auth,
            auth_window: cfg.auth_window,
            nonces: Mutex::new(NonceStore::default()),
            scheme,
            state_file: cfg.state_file.clone(),
            api_hash: crate::describe::api_hash(),
            region: Region::new(cfg.latency.clone()),
        });
        let cancel = CancellationToken::new();
        let tasks = TaskTracker::new();
        tasks.spawn(accept_loop(
            listener,
            acceptor,
            shared.clone(),
            cancel.clone(),
            tasks.clone(),
        ));
        tasks.spawn(ticker(shared.clone(), cancel.clone()));
        tracing::info!(%addr, scheme, machines = shared.lock().machines.len(), "MAAS simulator listening");
        Ok(RunningSim {
            addr,
            scheme,
            default_key: cfg.api_keys[0].clone(),
            shared,
            cancel,
            tasks,
        })
    }
}

impl RunningSim {
    /// The MAAS root URL, e.g. `http://127.0.0.1:41234/MAAS/`.
    pub fn url(&self) -> String {
        format!("{}://{}/MAAS/", self.scheme, self.addr)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The default (first, admin) user's key: `consumer_key:token_key:token_secret`.
    pub fn api_key(&self) -> String {
        self.default_key.credential()
    }

    /// Direct state access for tests.
    pub fn state(&self) -> SimHandle {
        SimHandle {
            shared: self.shared.clone(),
        }
    }

    /// Stops accepting, lets open requests finish (2 s at most), saves the state file.
    pub async fn shutdown(self) {
        self.cancel.cancel();
        self.tasks.close();
        if tokio::time::timeout(Duration::from_secs(2), self.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!("connections still open after 2 s; closing anyway");
        }
        save_if_dirty(&self.shared, true).await;
    }
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: Option<TlsAcceptor>,
    shared: Arc<Shared>,
    cancel: CancellationToken,
    tasks: TaskTracker,
) {
    loop {
        let accepted = tokio::select! {
            () = cancel.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, _) = match accepted {
            Ok(pair) => pair,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let shared = shared.clone();
        let cancel = cancel.clone();
        let acceptor = acceptor.clone();
        tasks.spawn(async move {
            match acceptor {
                Some(acceptor) => match acceptor.accept(stream).await {
                    Ok(tls) => serve(tls, shared, cancel).await,
                    Err(e) => tracing::debug!(error = %e, "TLS handshake failed"),
                },
                None => serve(stream, shared, cancel).await,
            }
        });
    }
}

async fn serve<S>(stream: S, shared: Arc<Shared>, cancel: CancellationToken)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |req| {
        let shared = shared.clone();
        // An `Err` (a withheld answer) makes hyper close the connection without a response.
        async move { app::handle(shared, req).await }
    });
    let builder = auto::Builder::new(TokioExecutor::new());
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    let result = tokio::select! {
        result = conn.as_mut() => result,
        () = cancel.cancelled() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        tracing::debug!(error = %e, "connection ended with an error");
    }
}

/// Advances time even without requests and writes the state file after changes.
async fn ticker(shared: Arc<Shared>, cancel: CancellationToken) {
    let mut interval = tokio::time::interval(Duration::from_millis(100));
    loop {
        tokio::select! {
            () = cancel.cancelled() => break,
            _ = interval.tick() => {}
        }
        shared.lock().advance();
        save_if_dirty(&shared, false).await;
    }
}

async fn save_if_dirty(shared: &Shared, force: bool) {
    let Some(path) = shared.state_file.clone() else {
        return;
    };
    let bytes = {
        let mut world = shared.lock();
        if !(world.dirty || force) {
            return;
        }
        world.dirty = false;
        persist::serialize(&world)
    };
    let result = match bytes {
        Ok(bytes) => persist::write(&path, bytes).await,
        Err(e) => Err(e),
    };
    if let Err(e) = result {
        tracing::warn!(error = %e, category = e.category(), "could not save the state file");
    }
}
