//! Errors of the machine-controller, classified for metrics and requeue.

use capmaas_runtime::{ErrorCategory, Requeue};

/// Errors of one reconcile.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A call to the management cluster's API failed.
    #[error("{action}")]
    Kube {
        /// What was being done, e.g. `claiming host h1`.
        action: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Writing the status failed.
    #[error("writing the MaasMachine status")]
    Status(#[source] capmaas_runtime::Error),
    /// A value could not be (de)serialized.
    #[error("encoding {what}")]
    Serialize {
        /// What was encoded.
        what: &'static str,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },
    /// The object lacks metadata the API server always sets (name, namespace, UID).
    #[error("object without {0}")]
    MissingMetadata(&'static str),
    /// The workload cluster's kubeconfig Secret is missing or unusable.
    #[error("workload cluster {cluster}: {reason}")]
    WorkloadKubeconfig {
        /// `<namespace>/<cluster>`.
        cluster: String,
        /// What is wrong (never the kubeconfig's content).
        reason: String,
    },
    /// A call to the workload cluster's API failed.
    #[error("workload cluster {cluster}: {action}")]
    Workload {
        /// `<namespace>/<cluster>`.
        cluster: String,
        /// What was being done.
        action: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Another writer changed the object between our read and write.
    #[error("conflict while {0}; retrying with fresh data")]
    Conflict(String),
}

impl Error {
    /// Wraps a management-cluster API error with what was being done.
    pub fn kube(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let action = action.into();
        move |source| Self::Kube { action, source }
    }

    /// Whether this is an HTTP 409 Conflict from the API server.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Self::Conflict(_))
            || matches!(self, Self::Kube { source, .. } if is_conflict(source))
    }
}

/// Whether a kube error is HTTP 409 Conflict (optimistic lock lost).
pub fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// Whether a kube error is HTTP 404 Not Found.
pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

impl ErrorCategory for Error {
    fn category(&self) -> &'static str {
        match self {
            Self::Kube { .. } => "kube_api",
            Self::Status(_) => "status_write",
            Self::Serialize { .. } => "serialize",
            Self::MissingMetadata(_) => "invalid_object",
            Self::WorkloadKubeconfig { .. } => "workload_kubeconfig",
            Self::Workload { .. } => "workload_api",
            Self::Conflict(_) => "conflict",
        }
    }

    fn requeue(&self) -> Requeue {
        match self {
            Self::MissingMetadata(_) => Requeue::InvalidSpec,
            _ => Requeue::Transient,
        }
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories_are_snake_case_and_classes_fit() {
        let errors = [
            Error::MissingMetadata("uid"),
            Error::Conflict("claiming".into()),
            Error::WorkloadKubeconfig {
                cluster: "ns/c".into(),
                reason: "no key value".into(),
            },
        ];
        for e in &errors {
            assert!(
                e.category()
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c == '_')
            );
        }
        assert_eq!(errors[0].requeue(), Requeue::InvalidSpec);
        assert_eq!(errors[1].requeue(), Requeue::Transient);
        assert!(errors[1].is_conflict());
        assert!(!errors[2].is_conflict());
        assert_eq!(errors[2].to_string(), "workload cluster ns/c: no key value");
    }
}
