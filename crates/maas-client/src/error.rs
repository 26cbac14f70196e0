//! Errors of the gateway's reconcilers, classified for metrics and requeue.

use capmaas_runtime::{ErrorCategory, Requeue};
use maas_api_client::MaasError;

/// Everything a reconcile can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A MAAS call failed.
    #[error("MAAS {operation} failed: {source}")]
    Maas {
        /// What we were doing, e.g. `allocate`.
        operation: &'static str,
        /// The client error.
        #[source]
        source: MaasError,
    },
    /// A Kubernetes call failed.
    #[error("Kubernetes {operation} failed: {source}")]
    Kube {
        /// What we were doing.
        operation: &'static str,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// A status write failed.
    #[error("status update failed: {0}")]
    Status(#[from] capmaas_runtime::Error),
    /// The object cannot be acted upon as written.
    #[error("invalid spec: {0}")]
    InvalidSpec(String),
    /// The MAAS machine is held by someone else.
    #[error("MAAS machine {system_id} is not available to this installation: {reason}")]
    NotOurs {
        /// The machine.
        system_id: String,
        /// What MAAS reports.
        reason: String,
    },
    /// The binding of a machine to its host changed under every attempt to take it.
    #[error("the host binding of MAAS machine {system_id} kept changing; retrying")]
    BindingContended {
        /// The machine.
        system_id: String,
    },
    /// MAAS still shows static links the gateway unlinked (read again right after).
    #[error(
        "MAAS machine {system_id} still has {count} static link(s) after unlinking them: {detail}"
    )]
    StaticLinksLeft {
        /// The machine.
        system_id: String,
        /// How many are left.
        count: usize,
        /// The first one left.
        detail: String,
    },
    /// Adding or removing our finalizer failed; a [conflict](capmaas_runtime::Error::is_conflict)
    /// (the finalizer list changed since it was read) is quiet: the next reconcile reads again.
    #[error("finalizer update failed: {0}")]
    Finalizer(#[source] capmaas_runtime::Error),
}

impl Error {
    /// A MAAS error during `operation`.
    pub fn maas(operation: &'static str) -> impl FnOnce(MaasError) -> Self {
        move |source| Self::Maas { operation, source }
    }

    /// A Kubernetes error during `operation`.
    pub fn kube(operation: &'static str) -> impl FnOnce(kube::Error) -> Self {
        move |source| Self::Kube { operation, source }
    }
}

impl ErrorCategory for Error {
    fn category(&self) -> &'static str {
        match self {
            Self::Maas { source, .. } => match source {
                MaasError::Fenced => "fenced",
                MaasError::Unavailable { .. }
                | MaasError::Transport { .. }
                | MaasError::Timeout => "maas_unavailable",
                MaasError::Unauthorized { .. } | MaasError::Forbidden { .. } => "maas_auth",
                MaasError::Conflict { .. } | MaasError::NoMatchingMachine { .. } => "maas_conflict",
                _ => "maas_error",
            },
            Self::Status(e) | Self::Finalizer(e) if e.is_conflict() => "conflict",
            Self::BindingContended { .. } => "conflict",
            Self::Kube { .. } | Self::Status(_) | Self::Finalizer(_) => "kube_api",
            Self::InvalidSpec(_) => "invalid_spec",
            Self::NotOurs { .. } => "not_ours",
            Self::StaticLinksLeft { .. } => "maas_error",
        }
    }

    fn requeue(&self) -> Requeue {
        match self {
            Self::InvalidSpec(_)
            | Self::Maas {
                source: MaasError::BadRequest { .. },
                ..
            } => Requeue::InvalidSpec,
            _ => Requeue::Transient,
        }
    }

    /// Conflicts, and MAAS writes refused by the leadership fence (the term is ending).
    fn quiet(&self) -> bool {
        matches!(self, Self::Status(e) | Self::Finalizer(e) if e.is_conflict())
            || matches!(self, Self::BindingContended { .. })
            || matches!(
                self,
                Self::Maas {
                    source: MaasError::Fenced,
                    ..
                }
            )
    }
}

/// Result of a reconcile step.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories_are_low_cardinality() {
        let e = Error::maas("allocate")(MaasError::Timeout);
        assert_eq!(e.category(), "maas_unavailable");
        assert_eq!(e.requeue(), Requeue::Transient);
        let e = Error::InvalidSpec("no image".into());
        assert_eq!(e.category(), "invalid_spec");
        assert_eq!(e.requeue(), Requeue::InvalidSpec);
        let e = Error::maas("deploy")(MaasError::BadRequest {
            fields: std::collections::BTreeMap::default(),
            message: "bad series".into(),
        });
        assert_eq!(e.requeue(), Requeue::InvalidSpec);
    }

    #[test]
    fn finalizer_conflicts_are_quiet_and_transient() {
        let e = Error::Finalizer(capmaas_runtime::Error::Conflict(
            "the finalizer list changed",
        ));
        assert_eq!(e.category(), "conflict");
        assert_eq!(e.requeue(), Requeue::Transient);
        assert!(e.quiet());
        let e = Error::Finalizer(capmaas_runtime::Error::Gone("x".into()));
        assert_eq!(e.category(), "kube_api");
        assert!(!e.quiet());
        assert!(!Error::InvalidSpec("no image".into()).quiet());
    }

    #[test]
    fn fenced_writes_are_quiet_and_transient() {
        let e = Error::maas("allocate")(MaasError::Fenced);
        assert_eq!(e.category(), "fenced");
        assert_eq!(e.requeue(), Requeue::Transient);
        assert!(e.quiet());
        assert!(!Error::maas("allocate")(MaasError::Timeout).quiet());
    }
}
