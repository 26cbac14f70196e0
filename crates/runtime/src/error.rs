//! Error classification shared by every controller, and this crate's own error type.

use std::net::SocketAddr;

/// What the error policy should do after a failed reconcile.
///
/// Controllers classify their own errors; [`crate::backoff::ObjectBackoff`] turns the class into a
/// requeue delay, so a MAAS outage backs off exponentially per object while a broken spec waits
/// quietly for a human instead of hammering the API server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Requeue {
    /// Something outside the object failed (API server, MAAS, network): retry with per-object
    /// exponential backoff.
    Transient,
    /// The object itself is wrong; retrying soon cannot help. Requeue after a long delay (a spec
    /// change triggers a reconcile anyway) and surface the problem as a condition.
    InvalidSpec,
    /// Do not requeue; only a change to a watched object triggers the next reconcile.
    Never,
}

/// Classifies an error for metrics (`category`) and for the requeue policy (`requeue`).
///
/// `category` is a metric label: keep it low-cardinality (a fixed set of snake_case words, never an
/// object name or a message).
pub trait ErrorCategory {
    /// A short, fixed, snake_case label such as `kube_api`, `maas_unavailable`, `invalid_spec`.
    fn category(&self) -> &'static str;

    /// How the error policy should requeue the object. Most errors are transient.
    fn requeue(&self) -> Requeue {
        Requeue::Transient
    }

    /// Whether the error is part of normal operation (an optimistic-lock conflict that the next
    /// reconcile resolves): the kit's error policy logs it at debug level instead of warn.
    fn quiet(&self) -> bool {
        false
    }
}

/// A controller's error: the kit's [`Failed`] beside the controller's own domain variants
/// (`Kit(#[from] Failed)` and the rest). Implementing it gives [`ErrorCategory`]: a kit failure
/// is categorised, retried and logged as the kit says; a domain variant's category is its
/// variant name in snake_case (`strum::IntoStaticStr`), its requeue and quietness are the
/// controller's.
pub trait ControllerError {
    /// The kit failure this error is, if it is one.
    fn kit(&self) -> Option<&Failed>;

    /// The category of a domain variant: its name.
    fn variant(&self) -> &'static str
    where
        for<'a> &'a Self: Into<&'static str>,
    {
        self.into()
    }

    /// How a domain variant is requeued.
    fn domain_requeue(&self) -> Requeue {
        Requeue::Transient
    }

    /// Whether a domain variant is part of normal operation (logged at debug level).
    fn domain_quiet(&self) -> bool {
        false
    }

    /// Whether a kit failure is part of normal operation: a lost race, by default.
    fn kit_quiet(&self, failed: &Failed) -> bool {
        failed.quiet()
    }
}

impl<T> ErrorCategory for T
where
    T: ControllerError,
    for<'a> &'a T: Into<&'static str>,
{
    fn category(&self) -> &'static str {
        self.kit()
            .map_or_else(|| self.variant(), ErrorCategory::category)
    }

    fn requeue(&self) -> Requeue {
        self.kit()
            .map_or_else(|| self.domain_requeue(), ErrorCategory::requeue)
    }

    fn quiet(&self) -> bool {
        self.kit()
            .map_or_else(|| self.domain_quiet(), |failed| self.kit_quiet(failed))
    }
}

/// Boxed error returned by a controller future run under [`crate::Runtime::run`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Errors of the runtime plumbing itself (startup, admin server, leader election) and of the
/// kit's writes (status, finalizers): the vocabulary every controller shares through [`Failed`].
///
/// The metric and log category of each is its variant name in snake_case (`KubeApi` is
/// `kube_api`), so labels cannot drift from the types.
#[derive(Debug, thiserror::Error, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum Error {
    /// A command-line value could not be used.
    #[error("invalid argument {flag}: {reason}")]
    InvalidArgument {
        /// The flag, e.g. `--metrics-bind-addr`.
        flag: &'static str,
        /// Why the value was rejected.
        reason: String,
    },
    /// The kubeconfig given with `--kubeconfig` could not be read or used.
    #[error("cannot load kubeconfig {path}")]
    Kubeconfig {
        /// Path of the kubeconfig file.
        path: String,
        /// Underlying error.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// Neither a kubeconfig nor the in-cluster environment could be used.
    #[error("cannot infer Kubernetes client configuration")]
    InferConfig(#[source] kube::config::InferConfigError),
    /// A Kubernetes API call or client construction failed.
    #[error("Kubernetes API error")]
    KubeApi(#[source] kube::Error),
    /// A value could not be serialized to JSON.
    #[error("cannot serialize to JSON")]
    Serialize(#[source] serde_json::Error),
    /// A Kubernetes API call did not answer in time.
    #[error("Kubernetes API call timed out after {0:?}")]
    Timeout(std::time::Duration),
    /// A listen address could not be resolved.
    #[error("cannot resolve listen address {addr}")]
    Resolve {
        /// The address as given.
        addr: String,
        /// Underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A listener could not be bound.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The resolved address.
        addr: SocketAddr,
        /// Underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Installing signal handlers failed.
    #[error("cannot install signal handler")]
    Signal(#[source] std::io::Error),
    /// Logging or tracing could not be initialised.
    #[error("cannot initialise telemetry: {0}")]
    Telemetry(String),
    /// The leader election task ended while the process was not shutting down.
    #[error("leader election stopped unexpectedly")]
    LeaderElectionStopped,
    /// The controller future returned an error.
    #[error("controller failed")]
    Controller(#[source] BoxError),
    /// A guarded write lost a race: the object changed since it was read. Read again and decide
    /// again.
    #[error("conflict: {0}")]
    Conflict(&'static str),
    /// The object was deleted while it was being written.
    #[error("object {0} is gone")]
    Gone(String),
    /// An object from the API server lacks metadata it always has (name, namespace, uid,
    /// resourceVersion).
    #[error("object has no {0}")]
    MissingMetadata(&'static str),
    /// A serving certificate or key cannot be read, made or used.
    #[error("serving certificate {path}: {message}")]
    Certificate {
        /// File at fault (empty for a certificate made in memory).
        path: std::path::PathBuf,
        /// What is wrong.
        message: String,
    },
}

impl Error {
    /// Whether the write lost an optimistic-concurrency race (a guarded patch failed, or the API
    /// server answered 409 Conflict).
    pub fn is_conflict(&self) -> bool {
        match self {
            Self::Conflict(_) => true,
            Self::KubeApi(e) => is_conflict(e),
            _ => false,
        }
    }
}

/// Whether the API server answered 409 Conflict (an optimistic lock lost, or a create of a name
/// that exists).
pub fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// Whether the API server answered 404 Not Found.
pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

impl ErrorCategory for Error {
    /// The variant name in snake_case; a lost race is `conflict` whichever variant carries it
    /// (a 409 answer is a `KubeApi` error).
    fn category(&self) -> &'static str {
        if self.is_conflict() {
            return "conflict";
        }
        self.into()
    }

    fn requeue(&self) -> Requeue {
        match self {
            Self::InvalidArgument { .. } | Self::MissingMetadata(_) => Requeue::InvalidSpec,
            _ => Requeue::Transient,
        }
    }

    fn quiet(&self) -> bool {
        self.is_conflict()
    }
}

/// A failure of the shared vocabulary ([`Error`]) while doing `action`: the variant every
/// controller's error wraps beside its domain variants (`Kit(#[from] Failed)`), built with
/// [`failed`]. Its category, requeue class and quietness are its source's.
#[derive(Debug, thiserror::Error)]
#[error("{action}")]
pub struct Failed {
    /// What was being done, e.g. `writing the status`.
    pub action: std::borrow::Cow<'static, str>,
    /// What failed.
    #[source]
    pub source: Error,
}

/// Wraps an error of the shared vocabulary (a kube error, a kit write's error) with what was
/// being done: `.map_err(failed("patching the spec"))?`.
pub fn failed<E: Into<Error>>(
    action: impl Into<std::borrow::Cow<'static, str>>,
) -> impl FnOnce(E) -> Failed {
    let action = action.into();
    move |source| Failed {
        action,
        source: source.into(),
    }
}

impl Failed {
    /// `action` lost an optimistic-concurrency race: read again and decide again.
    pub fn conflict(action: impl Into<std::borrow::Cow<'static, str>>) -> Self {
        failed(action)(Error::Conflict("the object changed since it was read"))
    }

    /// The object lacks `what` (metadata the API server always sets).
    pub fn missing(what: &'static str) -> Self {
        failed("reading the object")(Error::MissingMetadata(what))
    }

    /// Whether the write lost an optimistic-concurrency race ([`Error::is_conflict`]).
    pub fn is_conflict(&self) -> bool {
        self.source.is_conflict()
    }

    /// Whether the object was deleted while a kit write was writing it.
    pub fn is_gone(&self) -> bool {
        matches!(self.source, Error::Gone(_))
    }

    /// Whether a step loop should read everything again and decide again: the write lost a race,
    /// or found its object gone (the fresh read then finds nothing, and the reconcile ends).
    pub fn read_again(&self) -> bool {
        self.is_conflict() || self.is_gone()
    }
}

impl ErrorCategory for Failed {
    fn category(&self) -> &'static str {
        self.source.category()
    }

    fn requeue(&self) -> Requeue {
        self.source.requeue()
    }

    fn quiet(&self) -> bool {
        self.source.quiet()
    }
}

impl From<kube::Error> for Error {
    fn from(e: kube::Error) -> Self {
        Self::KubeApi(e)
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        Self::Serialize(e)
    }
}

/// Renders an error with its whole `source()` chain, `outer: inner: root`, for log lines (a bare
/// `Display` shows only the outermost message).
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut out = error.to_string();
    let mut source = error.source();
    while let Some(s) = source {
        let text = s.to_string();
        // Some errors already include their source in Display; do not repeat it.
        if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories_are_low_cardinality_snake_case() {
        let errors = [
            Error::InvalidArgument {
                flag: "--x",
                reason: "bad".into(),
            },
            Error::Timeout(std::time::Duration::from_secs(1)),
            Error::Telemetry("x".into()),
            Error::LeaderElectionStopped,
            Error::Controller("boom".into()),
            Error::Signal(std::io::Error::other("x")),
        ];
        for e in &errors {
            let c = e.category();
            assert!(!c.is_empty());
            assert!(
                c.chars().all(|ch| ch.is_ascii_lowercase() || ch == '_'),
                "{c}"
            );
        }
        assert_eq!(errors[0].category(), "invalid_argument");
        assert_eq!(errors[1].category(), "timeout");
        assert_eq!(errors[3].category(), "leader_election_stopped");
    }

    #[test]
    fn requeue_classes() {
        let bad = Error::InvalidArgument {
            flag: "--x",
            reason: "bad".into(),
        };
        assert_eq!(bad.requeue(), Requeue::InvalidSpec);
        assert_eq!(
            Error::Timeout(std::time::Duration::from_secs(1)).requeue(),
            Requeue::Transient
        );
    }

    #[test]
    fn chain_includes_sources_once() {
        let e = Error::Controller("cache sync failed".into());
        assert_eq!(error_chain(&e), "controller failed: cache sync failed");
        let io = std::io::Error::other("connection refused");
        let e = Error::Signal(io);
        assert_eq!(
            error_chain(&e),
            "cannot install signal handler: connection refused"
        );
    }

    #[test]
    fn default_requeue_is_transient() {
        struct E;
        impl ErrorCategory for E {
            fn category(&self) -> &'static str {
                "e"
            }
        }
        assert_eq!(E.requeue(), Requeue::Transient);
    }
}
