//! Errors of the IPAM controllers, classified for metrics and the requeue policy.

use capmaas_runtime::{ErrorCategory, Requeue};

/// A failed reconcile of an `IPAddressClaim`, a `MaasIPPool` or an `IPAddress`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A Kubernetes API call failed.
    #[error("Kubernetes API call failed: {context}")]
    Kube {
        /// What was being done, e.g. `create IPAddress`.
        context: &'static str,
        /// Underlying error.
        #[source]
        source: kube::Error,
    },
    /// A status write through the runtime helpers failed (a conflict when the object moved).
    #[error("status write failed")]
    Status(#[source] capmaas_runtime::Error),
    /// Adding or removing a finalizer failed (a conflict when the list changed meanwhile).
    #[error("finalizer update failed")]
    Finalizer(#[source] capmaas_runtime::Error),
    /// The object lacks metadata the API server always sets (namespace, uid).
    #[error("object has no {0}")]
    MissingMetadata(&'static str),
    /// The address lock (named here) was created and deleted by others on every try.
    #[error("MaasIPAddressLock {0} changed hands on every try")]
    LockChurn(String),
}

impl Error {
    /// Wraps a kube error with what was being done.
    pub fn kube(context: &'static str) -> impl FnOnce(kube::Error) -> Self {
        move |source| Self::Kube { context, source }
    }

    /// Whether the error is an optimistic-concurrency conflict the next reconcile resolves.
    pub fn is_conflict(&self) -> bool {
        match self {
            Self::Kube {
                source: kube::Error::Api(s),
                ..
            } => s.code == 409,
            Self::Status(e) | Self::Finalizer(e) => e.is_conflict(),
            Self::Kube { .. } | Self::MissingMetadata(_) | Self::LockChurn(_) => false,
        }
    }
}

impl ErrorCategory for Error {
    fn category(&self) -> &'static str {
        if self.is_conflict() {
            return "conflict";
        }
        match self {
            Self::Kube { .. } => "kube_api",
            Self::Status(_) => "status_write",
            Self::Finalizer(_) => "finalizer",
            Self::MissingMetadata(_) => "missing_metadata",
            Self::LockChurn(_) => "lock_churn",
        }
    }

    fn requeue(&self) -> Requeue {
        match self {
            Self::MissingMetadata(_) => Requeue::InvalidSpec,
            Self::Kube { .. } | Self::Status(_) | Self::Finalizer(_) | Self::LockChurn(_) => {
                Requeue::Transient
            }
        }
    }

    fn quiet(&self) -> bool {
        self.is_conflict()
    }
}

/// `Result` with this module's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure("x", "Conflict")
                .with_code(code)
                .boxed(),
        )
    }

    #[test]
    fn conflicts_are_quiet_and_transient() {
        let conflict = Error::kube("create IPAddress")(api_error(409));
        assert!(conflict.quiet());
        assert_eq!(conflict.category(), "conflict");
        assert_eq!(conflict.requeue(), Requeue::Transient);
        let finalizer = Error::Finalizer(capmaas_runtime::Error::Conflict("x"));
        assert!(finalizer.quiet());
        let other = Error::kube("get")(api_error(500));
        assert!(!other.quiet());
        assert_eq!(other.category(), "kube_api");
        assert_eq!(
            Error::MissingMetadata("uid").requeue(),
            Requeue::InvalidSpec
        );
    }
}
