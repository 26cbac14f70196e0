//! Errors of the machine-controller, classified for metrics and requeue.

use capmaas_runtime::controller::workload::WorkloadError;
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
    /// A write through the runtime's helpers (status apply, finalizer patch) failed for another
    /// reason than an API error or a conflict (e.g. the body could not be encoded).
    #[error("{action}")]
    Runtime {
        /// What was being done, e.g. `writing the status`.
        action: &'static str,
        /// The runtime error.
        #[source]
        source: capmaas_runtime::Error,
    },
    /// The object lacks metadata the API server always sets (name, namespace, UID).
    #[error("object without {0}")]
    MissingMetadata(&'static str),
    /// The workload cluster's kubeconfig Secret is missing, unreadable, unusable or refused
    /// (it names a command or a file); the message never quotes its content.
    #[error(transparent)]
    WorkloadKubeconfig(#[from] WorkloadError),
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

    /// Maps an error of the runtime's write helpers ([`capmaas_runtime::apply_status_at`],
    /// [`capmaas_runtime::controller::finalizer`]): a lost race
    /// ([`capmaas_runtime::Error::is_conflict`]) or an object gone meanwhile becomes
    /// [`Error::Conflict`], so the step loop reads again and decides again.
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

    /// Whether this is an HTTP 409 Conflict from the API server.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Self::Conflict(_))
            || matches!(self, Self::Kube { source, .. } if is_conflict(source))
    }
}

pub use capmaas_runtime::error::{is_conflict, is_not_found};

impl ErrorCategory for Error {
    fn category(&self) -> &'static str {
        match self {
            Self::Kube { .. } => "kube_api",
            Self::Runtime { .. } => "runtime",
            Self::MissingMetadata(_) => "invalid_object",
            Self::WorkloadKubeconfig { .. } => "workload_kubeconfig",
            Self::Workload { .. } => "workload_api",
            Self::Conflict(_) => "conflict",
        }
    }

    fn requeue(&self) -> Requeue {
        match self {
            // A person must fix the object or the Secret; the Secret is not watched, so the
            // long fixed delay (or any change to the machine) brings the next attempt.
            Self::MissingMetadata(_)
            | Self::WorkloadKubeconfig(
                WorkloadError::Refused { .. } | WorkloadError::Invalid { .. },
            ) => Requeue::InvalidSpec,
            _ => Requeue::Transient,
        }
    }

    /// Conflicts are normal operation (the next pass reads again): logged at debug level.
    fn quiet(&self) -> bool {
        self.is_conflict()
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    fn refused() -> Error {
        Error::WorkloadKubeconfig(WorkloadError::Refused {
            secret: "ns/c-kubeconfig".into(),
            problem: "user \"u\" uses an exec credential plugin".into(),
        })
    }

    #[test]
    fn categories_are_snake_case_and_classes_fit() {
        let errors = [
            Error::MissingMetadata("uid"),
            Error::Conflict("claiming".into()),
            refused(),
            Error::WorkloadKubeconfig(WorkloadError::Missing {
                secret: "ns/c-kubeconfig".into(),
            }),
            Error::runtime("writing the status")(capmaas_runtime::Error::LeaderElectionStopped),
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
        assert!(errors[1].is_conflict() && errors[1].quiet());
        assert!(!errors[2].is_conflict() && !errors[2].quiet());
        assert_eq!(
            errors[2].requeue(),
            Requeue::InvalidSpec,
            "a refused kubeconfig"
        );
        assert_eq!(errors[2].category(), "workload_kubeconfig");
        assert!(
            errors[2].to_string().contains("exec credential plugin"),
            "{}",
            errors[2]
        );
        assert_eq!(
            errors[3].requeue(),
            Requeue::Transient,
            "the Secret may appear"
        );
        assert_eq!(errors[4].category(), "runtime");
    }

    #[test]
    fn lost_races_of_runtime_writes_are_conflicts() {
        let lost = Error::runtime("adding the finalizer")(capmaas_runtime::Error::Conflict(
            "the finalizer list changed",
        ));
        assert!(matches!(&lost, Error::Conflict(what) if what == "adding the finalizer"));
        let gone = Error::runtime("adding the finalizer")(capmaas_runtime::Error::Gone("m".into()));
        assert!(gone.is_conflict(), "gone: read again (and find nothing)");
        let api = |code: u16| {
            capmaas_runtime::Error::Kube(kube::Error::Api(
                kube::core::Status::failure("the object has been modified", "Conflict")
                    .with_code(code)
                    .boxed(),
            ))
        };
        assert!(matches!(
            Error::runtime("writing the status")(api(409)),
            Error::Conflict(_)
        ));
        let failed = Error::runtime("writing the status")(api(500));
        assert!(matches!(failed, Error::Kube { .. }));
        assert_eq!(failed.category(), "kube_api");
    }
}
