//! Errors of the MaasDataClaim and MaasDataTemplate reconcilers, classified for metrics and
//! the requeue policy.

use capmaas_runtime::{ErrorCategory, Requeue};

/// A failed reconcile.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A Kubernetes API call failed.
    #[error("Kubernetes API call failed: {context}")]
    Kube {
        /// What was being done, e.g. `create MaasData`.
        context: &'static str,
        /// Underlying error.
        #[source]
        source: kube::Error,
    },
    /// A status write through the runtime helpers failed.
    #[error("status write failed")]
    Status(#[source] capmaas_runtime::Error),
    /// Adding or removing our finalizer failed (a conflict when the list changed meanwhile).
    #[error("finalizer update failed")]
    Finalizer(#[source] capmaas_runtime::Error),
    /// Every candidate index was taken by someone else between reading and creating.
    #[error("no index of template {template} could be taken; retrying")]
    IndexContended {
        /// The MaasDataTemplate.
        template: String,
    },
    /// A value could not be serialized.
    #[error("cannot serialize {0}")]
    Serialize(&'static str, #[source] serde_json::Error),
    /// The object lacks metadata the API server always sets (namespace, uid).
    #[error("object has no {0}")]
    MissingMetadata(&'static str),
    /// The flags name an impossible configuration (start-up only).
    #[error("invalid configuration: {0}")]
    Config(String),
}

impl Error {
    /// Wraps a kube error with what was being done.
    pub fn kube(context: &'static str) -> impl FnOnce(kube::Error) -> Self {
        move |source| Self::Kube { context, source }
    }
}

impl ErrorCategory for Error {
    fn category(&self) -> &'static str {
        match self {
            Self::Kube { .. } => "kube_api",
            Self::Status(e) | Self::Finalizer(e) if e.is_conflict() => "conflict",
            Self::Status(_) => "status_write",
            Self::Finalizer(_) => "finalizer",
            Self::IndexContended { .. } => "conflict",
            Self::Serialize(..) => "serialize",
            Self::MissingMetadata(_) => "missing_metadata",
            Self::Config(_) => "config",
        }
    }

    fn requeue(&self) -> Requeue {
        match self {
            Self::MissingMetadata(_) | Self::Config(_) => Requeue::InvalidSpec,
            _ => Requeue::Transient,
        }
    }

    fn quiet(&self) -> bool {
        matches!(self, Self::Status(e) | Self::Finalizer(e) if e.is_conflict())
            || matches!(self, Self::IndexContended { .. })
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contention_is_quiet_and_retried() {
        let e = Error::IndexContended {
            template: "t".into(),
        };
        assert!(e.quiet());
        assert_eq!(e.category(), "conflict");
        assert_eq!(e.requeue(), Requeue::Transient);
        assert_eq!(
            Error::MissingMetadata("uid").requeue(),
            Requeue::InvalidSpec
        );
    }
}
