//! Errors of the cluster-controller, classified for metrics and the requeue policy.

use capmaas_runtime::{ErrorCategory, Requeue};

/// A failed reconcile of a MaasCluster.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A Kubernetes API call failed.
    #[error("Kubernetes API call failed: {context}")]
    Kube {
        /// What was being done, e.g. `patch MaasCluster spec`.
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
    /// The MaasCluster (or its Cluster) cannot be reconciled as written; a human must fix it.
    #[error("invalid spec: {0}")]
    InvalidSpec(String),
    /// The MaasDNSRecord this cluster needs exists and belongs to another object.
    #[error("MaasDNSRecord {0} exists and is not owned by this MaasCluster")]
    DnsRecordConflict(String),
    /// A value could not be serialized for a patch.
    #[error("cannot serialize patch")]
    Serialize(#[source] serde_json::Error),
    /// The object lacks metadata the API server always sets (namespace, uid).
    #[error("object has no {0}")]
    MissingMetadata(&'static str),
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
            Self::Status(_) => "status_write",
            Self::Finalizer(e) if e.is_conflict() => "conflict",
            Self::Finalizer(_) => "finalizer",
            Self::InvalidSpec(_) => "invalid_spec",
            Self::DnsRecordConflict(_) => "dns_record_conflict",
            Self::Serialize(_) => "serialize",
            Self::MissingMetadata(_) => "missing_metadata",
        }
    }

    fn requeue(&self) -> Requeue {
        match self {
            Self::InvalidSpec(_) | Self::DnsRecordConflict(_) | Self::MissingMetadata(_) => {
                Requeue::InvalidSpec
            }
            Self::Kube { .. } | Self::Status(_) | Self::Finalizer(_) | Self::Serialize(_) => {
                Requeue::Transient
            }
        }
    }

    fn quiet(&self) -> bool {
        matches!(self, Self::Finalizer(e) if e.is_conflict())
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_problems_are_not_retried_quickly() {
        assert_eq!(
            Error::InvalidSpec("x".into()).requeue(),
            Requeue::InvalidSpec
        );
        assert_eq!(
            Error::DnsRecordConflict("x".into()).requeue(),
            Requeue::InvalidSpec
        );
        assert_eq!(
            Error::Serialize(serde_json::from_str::<u8>("x").unwrap_err()).requeue(),
            Requeue::Transient
        );
        assert_eq!(
            Error::DnsRecordConflict("x".into()).category(),
            "dns_record_conflict"
        );
    }
}
