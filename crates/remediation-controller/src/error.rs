//! Errors of the remediation-controller, classified for metrics and requeue.

use capmaas_runtime::controller::workload::WorkloadError;
use capmaas_runtime::{ErrorCategory, Requeue};

/// Errors of one reconcile.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A call to the management cluster's API failed.
    #[error("{action}")]
    Kube {
        /// What was being done, e.g. `reading Machine m1`.
        action: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// A write through the runtime's helpers (status apply, finalizer patch) failed for another
    /// reason than an API error or a conflict.
    #[error("{action}")]
    Runtime {
        /// What was being done.
        action: &'static str,
        /// The runtime error.
        #[source]
        source: capmaas_runtime::Error,
    },
    /// The object lacks metadata the API server always sets (namespace, UID).
    #[error("object without {0}")]
    MissingMetadata(&'static str),
    /// A value could not be encoded or decoded (a backup, a Machine).
    #[error("cannot encode or decode {0}")]
    Json(&'static str, #[source] serde_json::Error),
    /// The workload cluster's kubeconfig Secret is missing, unreadable, unusable or refused.
    #[error(transparent)]
    WorkloadKubeconfig(#[from] WorkloadError),
    /// A call to the workload cluster's API failed: never a reason to power anything, so the
    /// remediation waits (with backoff) until the cluster answers.
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
    /// Another writer changed an object between our read and write.
    #[error("conflict while {0}; retrying with fresh data")]
    Conflict(String),
}

impl Error {
    /// Wraps a management-cluster API error with what was being done; a 409 becomes
    /// [`Error::Conflict`] so the step loop reads again.
    pub fn kube(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let action = action.into();
        move |source| {
            if is_conflict(&source) {
                Self::Conflict(action)
            } else {
                Self::Kube { action, source }
            }
        }
    }

    /// Maps an error of the runtime's write helpers: a lost race or an object gone meanwhile
    /// becomes [`Error::Conflict`], so the step loop reads again and decides again.
    pub fn runtime(action: &'static str) -> impl FnOnce(capmaas_runtime::Error) -> Self {
        move |source| match source {
            e if e.is_conflict() => Self::Conflict(action.to_owned()),
            capmaas_runtime::Error::Gone(_) => Self::Conflict(action.to_owned()),
            capmaas_runtime::Error::Kube(source) => Self::Kube {
                action: action.to_owned(),
                source,
            },
            source => Self::Runtime { action, source },
        }
    }

    /// Wraps a workload-cluster API error; a 409 becomes [`Error::Conflict`].
    pub fn workload(cluster: &str, action: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let (cluster, action) = (cluster.to_owned(), action.into());
        move |source| {
            if is_conflict(&source) {
                Self::Conflict(action)
            } else {
                Self::Workload {
                    cluster,
                    action,
                    source,
                }
            }
        }
    }

    /// Whether the step loop should read again and decide again.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Self::Conflict(_))
    }
}

pub use capmaas_runtime::error::{is_conflict, is_not_found};

impl ErrorCategory for Error {
    fn category(&self) -> &'static str {
        match self {
            Self::Kube { .. } => "kube_api",
            Self::Runtime { .. } => "runtime",
            Self::MissingMetadata(_) => "invalid_object",
            Self::Json(..) => "json",
            Self::WorkloadKubeconfig(_) => "workload_kubeconfig",
            Self::Workload { .. } => "workload_api",
            Self::Conflict(_) => "conflict",
        }
    }

    fn requeue(&self) -> Requeue {
        match self {
            // A person must fix the object or the Secret; the long fixed delay (or any change
            // to the remediation) brings the next attempt.
            Self::MissingMetadata(_)
            | Self::WorkloadKubeconfig(
                WorkloadError::Refused { .. } | WorkloadError::Invalid { .. },
            ) => Requeue::InvalidSpec,
            _ => Requeue::Transient,
        }
    }

    fn quiet(&self) -> bool {
        self.is_conflict()
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn api(code: u16) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure("x", "Conflict")
                .with_code(code)
                .boxed(),
        )
    }

    #[test]
    fn conflicts_are_quiet_and_spec_problems_wait() {
        assert!(Error::kube("patching")(api(409)).is_conflict());
        assert!(Error::workload("ns/c", "patching Node n")(api(409)).quiet());
        let down = Error::workload("ns/c", "reading Node n")(api(503));
        assert_eq!(down.category(), "workload_api");
        assert_eq!(down.requeue(), Requeue::Transient, "an unreachable cluster");
        let refused = Error::WorkloadKubeconfig(WorkloadError::Refused {
            secret: "ns/c-kubeconfig".into(),
            problem: "exec".into(),
        });
        assert_eq!(refused.requeue(), Requeue::InvalidSpec);
        let missing = Error::WorkloadKubeconfig(WorkloadError::Missing {
            secret: "ns/c-kubeconfig".into(),
        });
        assert_eq!(missing.requeue(), Requeue::Transient);
        let gone = Error::runtime("adding the finalizer")(capmaas_runtime::Error::Gone("r".into()));
        assert!(gone.is_conflict());
        assert!(matches!(
            Error::runtime("writing the status")(capmaas_runtime::Error::Kube(api(500))),
            Error::Kube { .. }
        ));
        assert_eq!(
            Error::Json("backup", serde_json::from_str::<u8>("x").unwrap_err()).category(),
            "json"
        );
    }
}
