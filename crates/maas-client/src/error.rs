//! Errors of the gateway's reconcilers, classified for metrics and requeue.

use capmaas_runtime::{ErrorCategory, Requeue};
use maas_client::MaasError;

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
    /// A finalizer step failed.
    #[error("finalizer: {0}")]
    Finalizer(#[source] Box<kube::runtime::finalizer::Error<Error>>),
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
                MaasError::Unavailable { .. }
                | MaasError::Transport { .. }
                | MaasError::Timeout => "maas_unavailable",
                MaasError::Unauthorized { .. } | MaasError::Forbidden { .. } => "maas_auth",
                MaasError::Conflict { .. } | MaasError::NoMatchingMachine { .. } => "maas_conflict",
                _ => "maas_error",
            },
            Self::Kube { .. } | Self::Status(_) => "kube_api",
            Self::InvalidSpec(_) => "invalid_spec",
            Self::NotOurs { .. } => "not_ours",
            Self::Finalizer(inner) => match inner.as_ref() {
                kube::runtime::finalizer::Error::ApplyFailed(e)
                | kube::runtime::finalizer::Error::CleanupFailed(e) => e.category(),
                _ => "kube_api",
            },
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
}
