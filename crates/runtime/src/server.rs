//! The admin HTTP server: `/metrics` on the metrics address, `/healthz` and `/readyz` on the health
//! address (one listener serves all three when both addresses are equal). `/livez` is an alias of
//! `/healthz`.
//!
//! Through [`crate::http::serve`], drained when the shutdown token fires. Health is plain HTTP
//! (the kubelet probes it). Metrics are plain, or, with [`MetricsSecurity`], HTTPS served only to
//! callers [`MetricsAuth`] allows; the two then need their own ports.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::error::{Error, Result};
use crate::flags::ListenAddr;
use crate::health::Health;
use crate::metrics::{MetricsRegistry, OPENMETRICS_CONTENT_TYPE};
use crate::metrics_auth::{MetricsAuth, Verdict};
use crate::tls::{self, CertFiles, ReloadingCert};

pub use crate::http::DRAIN_TIMEOUT;

/// Which endpoints a listener serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Routes {
    /// `/metrics`
    pub metrics: bool,
    /// `/healthz` and `/readyz`
    pub health: bool,
}

/// How often a mounted metrics certificate is checked for a renewal.
const CERT_RELOAD_INTERVAL: Duration = Duration::from_secs(10);

/// HTTPS and authorization for `/metrics`.
#[derive(Debug, Clone)]
pub struct MetricsSecurity {
    /// The serving certificate.
    pub cert: Arc<ReloadingCert>,
    /// Where it is reloaded from; `None` for a self-signed certificate made at startup.
    pub files: Option<CertFiles>,
    /// Who may scrape.
    pub auth: Arc<MetricsAuth>,
}

impl MetricsSecurity {
    /// The certificate in `cert_dir` (reloaded when renewed), else a self-signed one for this
    /// host; scrapes reviewed with `client`.
    pub fn new(cert_dir: Option<&std::path::Path>, client: kube::Client) -> Result<Self> {
        let (cert, files) = if let Some(dir) = cert_dir {
            let files = CertFiles::in_dir(dir);
            (ReloadingCert::load(&files)?, Some(files))
        } else {
            let host = hostname::get()
                .ok()
                .and_then(|h| h.into_string().ok())
                .unwrap_or_else(|| "localhost".to_owned());
            let names = vec![host, "localhost".to_owned()];
            (ReloadingCert::self_signed(names)?, None)
        };
        Ok(Self {
            cert: Arc::new(cert),
            files,
            auth: Arc::new(MetricsAuth::new(client)),
        })
    }
}

#[derive(Clone, Debug)]
struct AdminState {
    registry: MetricsRegistry,
    health: Health,
    /// Set when `/metrics` is served securely.
    auth: Option<Arc<MetricsAuth>>,
}

/// Bound but not yet serving admin listeners. Binding happens at startup so that a port conflict
/// is a startup error, not a log line later.
#[derive(Debug)]
pub struct AdminServer {
    listeners: Vec<(TcpListener, SocketAddr, Routes)>,
    state: AdminState,
    security: Option<MetricsSecurity>,
}

impl AdminServer {
    /// Binds the metrics and health listeners (either may be [`ListenAddr::Disabled`]), metrics
    /// over HTTPS when `security` is given.
    pub async fn bind(
        metrics_addr: &ListenAddr,
        health_addr: &ListenAddr,
        registry: MetricsRegistry,
        health: Health,
        security: Option<MetricsSecurity>,
    ) -> Result<Self> {
        let metrics = metrics_addr.resolve().await?;
        let health_sock = health_addr.resolve().await?;
        let mut plan: Vec<(SocketAddr, Routes)> = Vec::new();
        match (metrics, health_sock) {
            (Some(m), Some(h)) if m == h && m.port() != 0 && security.is_some() => {
                return Err(Error::InvalidArgument {
                    flag: "--health-addr",
                    reason: format!(
                        "{h} also serves /metrics over HTTPS, where the kubelet cannot probe \
                         health: give health its own port"
                    ),
                });
            }
            // Port 0 means "any free port": two such addresses are two listeners.
            (Some(m), Some(h)) if m == h && m.port() != 0 => plan.push((
                m,
                Routes {
                    metrics: true,
                    health: true,
                },
            )),
            (m, h) => {
                if let Some(m) = m {
                    plan.push((
                        m,
                        Routes {
                            metrics: true,
                            health: false,
                        },
                    ));
                }
                if let Some(h) = h {
                    plan.push((
                        h,
                        Routes {
                            metrics: false,
                            health: true,
                        },
                    ));
                }
            }
        }
        let mut listeners = Vec::with_capacity(plan.len());
        for (addr, routes) in plan {
            let listener = TcpListener::bind(addr)
                .await
                .map_err(|source| Error::Bind { addr, source })?;
            let local = listener
                .local_addr()
                .map_err(|source| Error::Bind { addr, source })?;
            listeners.push((listener, local, routes));
        }
        Ok(Self {
            listeners,
            state: AdminState {
                registry,
                health,
                auth: security.as_ref().map(|s| s.auth.clone()),
            },
            security,
        })
    }

    /// Whether `/metrics` is served over HTTPS to authorized callers only.
    pub fn metrics_secure(&self) -> bool {
        self.security.is_some()
    }

    /// The bound address serving `/metrics`, if enabled.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.listeners
            .iter()
            .find(|(_, _, r)| r.metrics)
            .map(|(_, a, _)| *a)
    }

    /// The bound address serving `/healthz` and `/readyz`, if enabled.
    pub fn health_addr(&self) -> Option<SocketAddr> {
        self.listeners
            .iter()
            .find(|(_, _, r)| r.health)
            .map(|(_, a, _)| *a)
    }

    /// Serves until `shutdown` is cancelled, then drains open connections (at most
    /// [`DRAIN_TIMEOUT`]).
    pub async fn serve(self, shutdown: CancellationToken) {
        let acceptor = self.security.as_ref().map(|security| {
            if let Some(files) = &security.files {
                tokio::spawn(tls::watch(
                    security.cert.clone(),
                    files.clone(),
                    CERT_RELOAD_INTERVAL,
                    shutdown.clone(),
                ));
            }
            TlsAcceptor::from(security.cert.server_config())
        });
        let tasks: Vec<_> = self
            .listeners
            .into_iter()
            .map(|(listener, addr, routes)| {
                let state = self.state.clone();
                let shutdown = shutdown.clone();
                // Only a listener of its own serves metrics securely (`bind` refuses a shared one).
                let tls = acceptor.clone().filter(|_| routes.metrics);
                async move {
                    info!(%addr, metrics = routes.metrics, health = routes.health, https = tls.is_some(), "admin server listening");
                    accept_loop(listener, tls, routes, state, shutdown).await;
                }
            })
            .collect();
        futures::future::join_all(tasks).await;
    }
}

async fn accept_loop(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    routes: Routes,
    state: AdminState,
    shutdown: CancellationToken,
) {
    let handler = move |req: Request<Incoming>| {
        let state = state.clone();
        async move {
            if routes.metrics
                && req.uri().path() == "/metrics"
                && let Some(auth) = &state.auth
                && let Some(refusal) = refusal(auth, &req).await
            {
                return refusal;
            }
            route(&req, routes, &state)
        }
    };
    crate::http::serve(listener, tls, handler, shutdown, "admin").await;
}

/// The answer to a scrape `auth` does not allow, `None` when it may proceed.
async fn refusal<B>(auth: &MetricsAuth, req: &Request<B>) -> Option<Response<Full<Bytes>>> {
    match auth.review(req.headers()).await {
        Ok(Verdict::Allowed) => None,
        Ok(Verdict::Unauthenticated) => {
            let mut r = text(StatusCode::UNAUTHORIZED, PLAIN, "Unauthorized\n");
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
            Some(r)
        }
        Ok(Verdict::Forbidden { user }) => Some(text(
            StatusCode::FORBIDDEN,
            PLAIN,
            format!("user {user:?} may not get /metrics\n"),
        )),
        Err(e) => {
            warn!(error = %e, "cannot review a metrics scrape with the API server");
            Some(text(
                StatusCode::SERVICE_UNAVAILABLE,
                PLAIN,
                "cannot review the request's token now\n",
            ))
        }
    }
}

fn text(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    response
}

const PLAIN: &str = "text/plain; charset=utf-8";

fn route<B>(req: &Request<B>, routes: Routes, state: &AdminState) -> Response<Full<Bytes>> {
    let path = req.uri().path();
    let known = (routes.metrics && path == "/metrics")
        || (routes.health && (path == "/healthz" || path == "/readyz" || path == "/livez"));
    if !known {
        return text(StatusCode::NOT_FOUND, PLAIN, "not found\n");
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = text(
            StatusCode::METHOD_NOT_ALLOWED,
            PLAIN,
            "method not allowed\n",
        );
        r.headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    match path {
        "/metrics" => match state.registry.encode() {
            Ok(body) => text(StatusCode::OK, OPENMETRICS_CONTENT_TYPE, body),
            Err(_) => text(
                StatusCode::INTERNAL_SERVER_ERROR,
                PLAIN,
                "metrics encoding failed\n",
            ),
        },
        "/readyz" if state.health.is_ready() => text(StatusCode::OK, PLAIN, "ok\n"),
        "/readyz" => text(StatusCode::SERVICE_UNAVAILABLE, PLAIN, "not ready\n"),
        _ => {
            let silent = state.health.stale_watchdogs();
            if silent.is_empty() {
                text(StatusCode::OK, PLAIN, "ok\n")
            } else {
                text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    PLAIN,
                    format!("stale watchdogs: {}\n", silent.join(", ")),
                )
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::metrics::ReconcileMetrics;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Minimal HTTP/1.1 client: returns (status, headers+body text).
    pub(crate) async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(
            format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        let status = out[9..12].parse().unwrap();
        (status, out)
    }

    fn loopback() -> ListenAddr {
        "127.0.0.1:0".parse().unwrap()
    }

    #[tokio::test]
    async fn serves_metrics_health_and_readiness_on_separate_ports() {
        let registry = MetricsRegistry::new();
        let m = registry
            .register(ReconcileMetrics::register)
            .controller("test");
        m.reconcile_succeeded();
        let health = Health::new();
        let server = AdminServer::bind(&loopback(), &loopback(), registry, health.clone(), None)
            .await
            .unwrap();
        let metrics_addr = server.metrics_addr().unwrap();
        let health_addr = server.health_addr().unwrap();
        assert_ne!(metrics_addr, health_addr);
        let token = CancellationToken::new();
        let task = tokio::spawn(server.serve(token.clone()));

        let (status, body) = get(metrics_addr, "/metrics").await;
        assert_eq!(status, 200);
        assert!(body.contains(OPENMETRICS_CONTENT_TYPE), "{body}");
        assert!(
            body.contains(r#"capmaas_reconcile_total{controller="test",result="success"} 1"#),
            "{body}"
        );
        assert_eq!(get(metrics_addr, "/healthz").await.0, 404);

        assert_eq!(get(health_addr, "/healthz").await.0, 200);
        assert_eq!(get(health_addr, "/readyz").await.0, 503);
        health.mark_ready();
        assert_eq!(get(health_addr, "/readyz").await.0, 200);
        assert_eq!(get(health_addr, "/metrics").await.0, 404);

        let dog = health.watchdog("w", Duration::ZERO);
        tokio::time::sleep(Duration::from_millis(5)).await;
        let (status, body) = get(health_addr, "/healthz").await;
        assert_eq!(status, 503);
        assert!(body.contains("stale watchdogs: w"), "{body}");
        drop(dog);
        assert_eq!(get(health_addr, "/healthz").await.0, 200);

        token.cancel();
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .unwrap()
            .unwrap();
        assert!(tokio::net::TcpStream::connect(health_addr).await.is_err());
    }

    #[tokio::test]
    async fn one_listener_when_addresses_are_equal() {
        // Find a free port, release it, then ask for it on both addresses.
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let addr: ListenAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let server = AdminServer::bind(&addr, &addr, MetricsRegistry::new(), Health::new(), None)
            .await
            .unwrap();
        assert_eq!(server.metrics_addr(), server.health_addr());
        let a = server.metrics_addr().unwrap();
        let token = CancellationToken::new();
        let task = tokio::spawn(server.serve(token.clone()));
        assert_eq!(get(a, "/metrics").await.0, 200);
        assert_eq!(get(a, "/healthz").await.0, 200);
        assert_eq!(get(a, "/nope").await.0, 404);
        token.cancel();
        task.await.unwrap();
    }

    #[tokio::test]
    async fn disabled_metrics_and_port_conflicts() {
        let server = AdminServer::bind(
            &ListenAddr::Disabled,
            &loopback(),
            MetricsRegistry::new(),
            Health::new(),
            None,
        )
        .await
        .unwrap();
        assert_eq!(server.metrics_addr(), None);
        let taken = server.health_addr().unwrap();
        let conflict: ListenAddr = taken.to_string().parse().unwrap();
        let err = AdminServer::bind(
            &ListenAddr::Disabled,
            &conflict,
            MetricsRegistry::new(),
            Health::new(),
            None,
        )
        .await
        .unwrap_err();
        assert!(matches!(err, Error::Bind { .. }), "{err:?}");
    }

    #[test]
    fn rejects_other_methods() {
        let state = AdminState {
            registry: MetricsRegistry::new(),
            health: Health::new(),
            auth: None,
        };
        let routes = Routes {
            metrics: true,
            health: true,
        };
        let req = Request::post("/metrics").body(()).unwrap();
        let r = route(&req, routes, &state);
        assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
        let req = Request::head("/healthz").body(()).unwrap();
        assert_eq!(route(&req, routes, &state).status(), StatusCode::OK);
    }
}
