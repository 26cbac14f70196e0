//! Clients of workload clusters, built from the kubeconfig Secret CAPI writes for each cluster
//! (`<cluster>-kubeconfig`, key `value`), guarded and cached.
//!
//! The Secret lives in the management cluster, and anyone who can write Secrets there can plant
//! one. A kubeconfig may name commands and files: an exec credential plugin or an auth provider
//! would run a program in the controller's pod, and a `tokenFile` or certificate path would read
//! the pod's own files (its service-account token) and send them to a server of the writer's
//! choosing. Only inline credentials are accepted, which is what CAPI always generates; every
//! controller that talks to a workload cluster goes through [`WorkloadClients`], so the guard
//! cannot be forgotten.
//!
//! Clients are cached per cluster and keyed by the Secret's resourceVersion: a rotated
//! kubeconfig replaces the client on its next use. Neither the kubeconfig's content nor a
//! parser message (which could quote it) ever reaches an error or a log line.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};

use crate::error::{ControllerError, Failed, Requeue, is_conflict};

/// Key of the kubeconfig in the Secret (CAPI contract).
pub const KUBECONFIG_SECRET_KEY: &str = "value";

/// Name of the Secret holding the kubeconfig of `cluster`.
pub fn secret_name(cluster: &str) -> String {
    format!("{cluster}-kubeconfig")
}

/// Condition / Event reasons for [`WorkloadError`]s.
pub mod reason {
    /// The `<cluster>-kubeconfig` Secret does not exist (yet).
    pub const KUBECONFIG_MISSING: &str = "KubeconfigMissing";
    /// The Secret exists but holds no usable kubeconfig.
    pub const KUBECONFIG_INVALID: &str = "KubeconfigInvalid";
    /// The kubeconfig runs a command or reads a file; refused.
    pub const KUBECONFIG_REFUSED: &str = "KubeconfigRefused";
    /// The Secret could not be read (management API server trouble).
    pub const KUBECONFIG_UNREADABLE: &str = "KubeconfigUnreadable";
}

/// Why no client of a workload cluster could be built. Messages name the Secret and the kind of
/// problem, never the content.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// The Secret does not exist.
    #[error("Secret {secret} not found")]
    Missing {
        /// `<namespace>/<cluster>-kubeconfig`.
        secret: String,
    },
    /// The Secret could not be read.
    #[error("cannot read Secret {secret}")]
    Unreadable {
        /// `<namespace>/<cluster>-kubeconfig`.
        secret: String,
        /// Underlying error.
        #[source]
        source: kube::Error,
    },
    /// The kubeconfig runs a command or reads a file.
    #[error("Secret {secret} refused: {problem}")]
    Refused {
        /// `<namespace>/<cluster>-kubeconfig`.
        secret: String,
        /// What it asked for.
        problem: String,
    },
    /// The Secret holds no usable kubeconfig.
    #[error("Secret {secret}: {problem}")]
    Invalid {
        /// `<namespace>/<cluster>-kubeconfig`.
        secret: String,
        /// The kind of problem.
        problem: String,
    },
}

impl WorkloadError {
    /// CamelCase reason for a condition or an Event (see [`reason`]).
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Missing { .. } => reason::KUBECONFIG_MISSING,
            Self::Unreadable { .. } => reason::KUBECONFIG_UNREADABLE,
            Self::Refused { .. } => reason::KUBECONFIG_REFUSED,
            Self::Invalid { .. } => reason::KUBECONFIG_INVALID,
        }
    }

    /// Whether a person must fix the Secret (as opposed to a passing read failure).
    pub fn is_spec_problem(&self) -> bool {
        !matches!(self, Self::Unreadable { .. })
    }
}

/// The kubeconfig in `secret`, refusing commands and file references.
pub fn kubeconfig_from_secret(secret: &Secret, label: &str) -> Result<Kubeconfig, WorkloadError> {
    let invalid = |problem: String| WorkloadError::Invalid {
        secret: label.to_owned(),
        problem,
    };
    let bytes = secret
        .data
        .as_ref()
        .and_then(|d| d.get(KUBECONFIG_SECRET_KEY))
        .map(|b| b.0.as_slice())
        .ok_or_else(|| invalid(format!("key {KUBECONFIG_SECRET_KEY} is missing")))?;
    let text = std::str::from_utf8(bytes)
        .map_err(|_| invalid(format!("key {KUBECONFIG_SECRET_KEY} is not UTF-8")))?;
    let kubeconfig = Kubeconfig::from_yaml(text)
        .map_err(|_| invalid(format!("key {KUBECONFIG_SECRET_KEY} is not a kubeconfig")))?;
    check_inline_only(&kubeconfig).map_err(|problem| WorkloadError::Refused {
        secret: label.to_owned(),
        problem,
    })?;
    Ok(kubeconfig)
}

/// Refuses kubeconfigs that run commands or read local files.
pub fn check_inline_only(kubeconfig: &Kubeconfig) -> Result<(), String> {
    for user in &kubeconfig.auth_infos {
        let Some(auth) = &user.auth_info else {
            continue;
        };
        let forbidden = [
            (auth.exec.is_some(), "an exec credential plugin"),
            (auth.auth_provider.is_some(), "an auth provider"),
            (auth.token_file.is_some(), "a tokenFile"),
            (
                auth.client_certificate.is_some(),
                "a client-certificate file",
            ),
            (auth.client_key.is_some(), "a client-key file"),
        ];
        if let Some((_, what)) = forbidden.iter().find(|(present, _)| *present) {
            return Err(format!(
                "user {:?} uses {what}; only inline credentials are accepted",
                user.name
            ));
        }
    }
    for cluster in &kubeconfig.clusters {
        if cluster
            .cluster
            .as_ref()
            .is_some_and(|c| c.certificate_authority.is_some())
        {
            return Err(format!(
                "cluster {:?} uses a certificate-authority file; only inline data is accepted",
                cluster.name
            ));
        }
    }
    Ok(())
}

/// `(namespace, cluster)` → `(Secret resourceVersion, client)`.
type ClientCache = HashMap<(String, String), (String, Client)>;

/// Guarded, cached workload cluster clients; cheap to clone (clones share the cache).
#[derive(Clone)]
pub struct WorkloadClients {
    management: Client,
    timeout: Option<Duration>,
    cache: Arc<Mutex<ClientCache>>,
}

impl std::fmt::Debug for WorkloadClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkloadClients")
            .field("clusters", &self.lock().len())
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl WorkloadClients {
    /// Clients with the project's default connect/read/write timeouts, reading the Secrets
    /// through `management`.
    pub fn new(management: Client) -> Self {
        Self {
            management,
            timeout: None,
            cache: Arc::default(),
        }
    }

    /// Clients whose connect, read and write timeouts are all `timeout` (probes).
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ClientCache> {
        // Entries are replaced whole; a panic elsewhere cannot leave one half-written.
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The client of `namespace/cluster`: reads the kubeconfig Secret (one GET), reuses the
    /// cached client while the Secret is unchanged, else checks the new kubeconfig and builds a
    /// client from it.
    pub async fn client(&self, namespace: &str, cluster: &str) -> Result<Client, WorkloadError> {
        let name = secret_name(cluster);
        let label = format!("{namespace}/{name}");
        let secret = Api::<Secret>::namespaced(self.management.clone(), namespace)
            .get_opt(&name)
            .await
            .map_err(|source| WorkloadError::Unreadable {
                secret: label.clone(),
                source,
            })?
            .ok_or_else(|| WorkloadError::Missing {
                secret: label.clone(),
            })?;
        let version = secret.metadata.resource_version.clone().unwrap_or_default();
        let key = (namespace.to_owned(), cluster.to_owned());
        if let Some((cached, client)) = self.lock().get(&key)
            && *cached == version
        {
            return Ok(client.clone());
        }
        // A changed or broken Secret must not leave the old client in use.
        self.forget(namespace, cluster);
        let kubeconfig = kubeconfig_from_secret(&secret, &label)?;
        let client = self.build(kubeconfig, &label).await?;
        self.lock().insert(key, (version, client.clone()));
        Ok(client)
    }

    /// Forgets a cluster's client (its calls failed, or the cluster is gone).
    pub fn forget(&self, namespace: &str, cluster: &str) {
        self.lock()
            .remove(&(namespace.to_owned(), cluster.to_owned()));
    }

    async fn build(&self, kubeconfig: Kubeconfig, label: &str) -> Result<Client, WorkloadError> {
        let invalid = |problem: &str| WorkloadError::Invalid {
            secret: label.to_owned(),
            problem: problem.to_owned(),
        };
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(|_| {
                    invalid("the kubeconfig has no usable context, cluster or credentials")
                })?;
        let config = match self.timeout {
            None => crate::client::api_config(config),
            Some(t) => {
                let mut config = config;
                config.connect_timeout = Some(t);
                config.read_timeout = Some(t);
                config.write_timeout = Some(t);
                config
            }
        };
        Client::try_from(config).map_err(|_| invalid("cannot build a client (TLS settings?)"))
    }
}

/// The error of a controller that works in workload clusters (machine-controller,
/// remediation-controller): the kit's failures, an unusable kubeconfig, or a refused call to the
/// workload cluster's API. Its category is the variant name (`workload_kubeconfig`,
/// `workload_api`) or the kit failure's own.
#[derive(Debug, thiserror::Error, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum ReconcileError {
    /// A call to the management cluster's API, a kit write (status, finalizer) or an encoding
    /// failed, lost a race, or found the object gone.
    #[error(transparent)]
    Kit(#[from] Failed),
    /// The workload cluster's kubeconfig Secret is missing, unreadable, unusable or refused
    /// (it names a command or a file); the message never quotes its content.
    #[error(transparent)]
    WorkloadKubeconfig(#[from] WorkloadError),
    /// A call to the workload cluster's API failed.
    #[error("workload cluster {cluster}: {action}")]
    WorkloadApi {
        /// `<namespace>/<cluster>`.
        cluster: String,
        /// What was being done.
        action: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

impl ReconcileError {
    /// Wraps an error of the workload cluster's API; a 409 is a lost race like any other.
    pub fn workload(cluster: &str, action: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let (cluster, action) = (cluster.to_owned(), action.into());
        move |source| {
            if is_conflict(&source) {
                Failed::conflict(action).into()
            } else {
                Self::WorkloadApi {
                    cluster,
                    action,
                    source,
                }
            }
        }
    }

    /// Whether the step loop should read again and decide again: a write lost a race (a
    /// guarded patch, or 409 Conflict), or a kit write found the object gone meanwhile.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Self::Kit(e) if e.read_again())
    }
}

impl ControllerError for ReconcileError {
    fn kit(&self) -> Option<&Failed> {
        let Self::Kit(e) = self else { return None };
        Some(e)
    }

    fn domain_requeue(&self) -> Requeue {
        match self {
            // A person must fix the Secret, which is not watched: the long fixed delay (or any
            // change to the object) brings the next attempt. A missing Secret may yet appear.
            Self::WorkloadKubeconfig(
                WorkloadError::Refused { .. } | WorkloadError::Invalid { .. },
            ) => Requeue::InvalidSpec,
            _ => Requeue::Transient,
        }
    }

    /// Lost races and objects gone meanwhile are normal operation: the step loop reads again.
    fn kit_quiet(&self, failed: &Failed) -> bool {
        failed.read_again()
    }
}

#[cfg(test)]
#[path = "workload_tests.rs"]
mod tests;
