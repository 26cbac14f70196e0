//! Kubernetes clients with timeouts that suit controllers.
//!
//! kube 4+ sets no read timeout, so a request to a hung API server can block a reconcile forever.
//! A read timeout on the connection, however, also kills a quiet watch (no bytes for N seconds is
//! normal for a watch). Hence two clients built from one configuration:
//! - [`KubeClients::api`]: connect, write and read timeouts, for get/list/patch/create/delete,
//!   events and the leader Lease;
//! - [`KubeClients::watch`]: connect and write timeouts only, for watchers and `Controller::new`;
//!   kube's watcher has its own idle deadline (watch timeout + 5 s).

use std::path::Path;
use std::time::Duration;

use kube::client::ClientBuilder;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::events::Reporter;
use kube::{Client, Config};

use crate::client_spans::WriteSpanLayer;
use crate::error::{Error, Result};

/// Time allowed to open a TCP+TLS connection to the API server.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Time allowed to send a request.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// Time the API server may stay silent while answering a non-watch call. Generous enough for a
/// large paginated list page, short enough that a reconcile does not hang on a dead connection.
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Prefix of every field manager this project uses for server-side apply.
pub const FIELD_MANAGER_PREFIX: &str = "capmaas-";

/// The server-side-apply field manager of a binary, e.g. `capmaas-machine-controller`.
///
/// One stable manager per binary: field ownership then says which controller wrote what.
pub fn field_manager(binary: &str) -> String {
    if binary.starts_with(FIELD_MANAGER_PREFIX) {
        binary.to_owned()
    } else {
        format!("{FIELD_MANAGER_PREFIX}{binary}")
    }
}

/// The event reporter of a binary: controller = its field manager, instance = `pod_name`.
pub fn event_reporter(binary: &str, pod_name: Option<&str>) -> Reporter {
    Reporter {
        controller: field_manager(binary),
        instance: pod_name
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(str::to_owned),
    }
}

/// The two clients every controller needs; cheap to clone.
#[derive(Clone)]
pub struct KubeClients {
    /// For non-watch calls: has a read timeout.
    pub api: Client,
    /// For watches and controllers: no read timeout (watches are legitimately quiet).
    pub watch: Client,
}

impl std::fmt::Debug for KubeClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeClients")
            .field("default_namespace", &self.api.default_namespace())
            .finish_non_exhaustive()
    }
}

impl KubeClients {
    /// Builds both clients from `--kubeconfig` if given, else by inference (KUBECONFIG,
    /// ~/.kube/config, then the in-cluster service account).
    pub async fn from_kubeconfig(kubeconfig: Option<&Path>) -> Result<Self> {
        let config = load_config(kubeconfig).await?;
        Self::from_config(config)
    }

    /// Builds both clients from an existing configuration (tests pass the test API server's).
    pub fn from_config(config: Config) -> Result<Self> {
        let traced = |config: Config| -> Result<Client> {
            Ok(ClientBuilder::try_from(config)?
                .with_layer(&WriteSpanLayer)
                .build())
        };
        Ok(Self {
            api: traced(api_config(config.clone()))?,
            watch: traced(watch_config(config))?,
        })
    }
}

/// Loads a client configuration from an explicit kubeconfig path, or infers it.
pub async fn load_config(kubeconfig: Option<&Path>) -> Result<Config> {
    match kubeconfig {
        Some(path) => {
            let kubeconfig_error = |source| Error::Kubeconfig {
                path: path.display().to_string(),
                source,
            };
            let kc = Kubeconfig::read_from(path).map_err(kubeconfig_error)?;
            Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .map_err(kubeconfig_error)
        }
        None => Config::infer().await.map_err(Error::InferConfig),
    }
}

/// Timeouts for non-watch calls.
pub fn api_config(mut config: Config) -> Config {
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    config.write_timeout = Some(WRITE_TIMEOUT);
    config.read_timeout = Some(READ_TIMEOUT);
    // Count the read timeout from the request, not from when a pooled connection went idle.
    config.reset_reader_on_write = true;
    config
}

/// Timeouts for watches: no read timeout.
pub fn watch_config(mut config: Config) -> Config {
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    config.write_timeout = Some(WRITE_TIMEOUT);
    config.read_timeout = None;
    config
}

/// Runs a Kubernetes call with an overall deadline, covering kube's built-in retries of 429/503/504
/// (which honour `Retry-After` and may otherwise wait for minutes).
pub async fn with_deadline<T, F>(deadline: Duration, call: F) -> Result<T>
where
    F: Future<Output = Result<T, kube::Error>>,
{
    tokio::time::timeout(deadline, call)
        .await
        .map_err(|_| Error::Timeout(deadline))?
        .map_err(Error::KubeApi)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Config {
        Config::new("https://127.0.0.1:6443".parse().unwrap())
    }

    #[test]
    fn field_manager_names() {
        assert_eq!(
            field_manager("machine-controller"),
            "capmaas-machine-controller"
        );
        assert_eq!(field_manager("capmaas-webhook"), "capmaas-webhook");
    }

    #[test]
    fn reporter_names() {
        let r = event_reporter("data-controller", Some("dc-5d8-x"));
        assert_eq!(r.controller, "capmaas-data-controller");
        assert_eq!(r.instance.as_deref(), Some("dc-5d8-x"));
        assert_eq!(event_reporter("x", Some("")).instance, None);
        assert_eq!(event_reporter("x", None).instance, None);
    }

    #[test]
    fn api_client_has_read_timeout_watch_client_does_not() {
        let api = api_config(config());
        assert_eq!(api.read_timeout, Some(READ_TIMEOUT));
        assert_eq!(api.connect_timeout, Some(CONNECT_TIMEOUT));
        assert!(api.reset_reader_on_write);
        let watch = watch_config(config());
        assert_eq!(watch.read_timeout, None);
        assert_eq!(watch.connect_timeout, Some(CONNECT_TIMEOUT));
    }

    #[tokio::test]
    async fn clients_build_from_config() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let clients = KubeClients::from_config(config()).unwrap();
        assert_eq!(clients.api.default_namespace(), "default");
        assert!(format!("{clients:?}").contains("default"));
    }

    #[tokio::test]
    async fn missing_kubeconfig_file_is_an_error() {
        let err = load_config(Some(Path::new("/nonexistent/kubeconfig")))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Kubeconfig { .. }), "{err:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn deadline_cuts_slow_calls() {
        let slow = async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok::<_, kube::Error>(1)
        };
        let err = with_deadline(Duration::from_secs(5), slow)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Timeout(d) if d == Duration::from_secs(5)));
        let fast = async { Ok::<_, kube::Error>(2) };
        assert_eq!(
            with_deadline(Duration::from_secs(5), fast).await.unwrap(),
            2
        );
    }
}
