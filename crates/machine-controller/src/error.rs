//! Errors of the machine-controller, classified for metrics and requeue.

use capmaas_runtime::Requeue;
use capmaas_runtime::controller::workload::WorkloadError;
use capmaas_runtime::error::ControllerError;
use capmaas_runtime::error::Failed;

/// Errors of one reconcile. The category of each is its variant name in snake_case; the kit's
/// failures carry their own ([`capmaas_runtime::Error`]).
#[derive(Debug, thiserror::Error, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum Error {
    /// A call to the management cluster's API or a kit write (status, finalizer) failed, lost a
    /// race, or found the object gone.
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

impl Error {
    /// Whether the step loop should read again and decide again: a write lost a race (a
    /// guarded patch, or 409 Conflict), or a kit write found the object gone meanwhile.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Self::Kit(e) if e.read_again())
    }
}

pub use capmaas_runtime::error::{is_conflict, is_not_found};

impl ControllerError for Error {
    fn kit(&self) -> Option<&Failed> {
        let Self::Kit(e) = self else { return None };
        Some(e)
    }

    fn domain_requeue(&self) -> Requeue {
        match self {
            // A person must fix the Secret; the Secret is not watched, so the long fixed delay
            // (or any change to the machine) brings the next attempt.
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

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use capmaas_runtime::ErrorCategory;
    use capmaas_runtime::error::failed;

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
            Error::from(Failed::missing("uid")),
            Error::from(Failed::conflict("claiming")),
            refused(),
            Error::WorkloadKubeconfig(WorkloadError::Missing {
                secret: "ns/c-kubeconfig".into(),
            }),
            Error::from(failed("writing the status")(
                capmaas_runtime::Error::LeaderElectionStopped,
            )),
        ];
        for e in &errors {
            assert!(
                e.category()
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c == '_')
            );
        }
        assert_eq!(errors[0].requeue(), Requeue::InvalidSpec);
        assert_eq!(errors[0].category(), "missing_metadata");
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
        assert_eq!(errors[4].category(), "leader_election_stopped");
    }

    #[test]
    fn lost_races_of_runtime_writes_are_conflicts() {
        let lost = Error::from(failed("adding the finalizer")(
            capmaas_runtime::Error::Conflict("the finalizer list changed"),
        ));
        assert!(lost.is_conflict());
        assert_eq!(lost.to_string(), "adding the finalizer");
        let gone = Error::from(failed("adding the finalizer")(
            capmaas_runtime::Error::Gone("m".into()),
        ));
        assert!(gone.is_conflict(), "gone: read again (and find nothing)");
        let api = |code: u16| {
            kube::Error::Api(
                kube::core::Status::failure("the object has been modified", "Conflict")
                    .with_code(code)
                    .boxed(),
            )
        };
        assert!(Error::from(failed("writing the status")(api(409))).is_conflict());
        let not_found = Error::from(failed("reading the MaasMachine")(api(404)));
        assert!(!not_found.is_conflict(), "a 404 read is not a lost race");
        let failed = Error::from(failed("writing the status")(api(500)));
        assert!(!failed.is_conflict());
        assert_eq!(failed.category(), "kube_api");
    }
}
