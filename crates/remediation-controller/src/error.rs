//! Errors of the remediation-controller, classified for metrics and requeue.

use capmaas_runtime::Requeue;
use capmaas_runtime::controller::workload::WorkloadError;
use capmaas_runtime::error::ControllerError;
use capmaas_runtime::error::Failed;

/// Errors of one reconcile. The category of each is its variant name in snake_case; the kit's
/// failures carry their own ([`capmaas_runtime::Error`]).
#[derive(Debug, thiserror::Error, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum Error {
    /// A call to the management cluster's API, a kit write (status, finalizer) or an encoding
    /// failed, lost a race, or found the object gone.
    #[error(transparent)]
    Kit(#[from] Failed),
    /// The workload cluster's kubeconfig Secret is missing, unreadable, unusable or refused.
    #[error(transparent)]
    WorkloadKubeconfig(#[from] WorkloadError),
    /// A call to the workload cluster's API failed: never a reason to power anything, so the
    /// remediation waits (with backoff) until the cluster answers.
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
    /// Wraps a workload-cluster API error; a 409 is a lost race like any other.
    pub fn workload(cluster: &str, action: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let (cluster, action) = (cluster.to_owned(), action.into());
        move |source| {
            if is_conflict(&source) {
                Failed::conflict(action).into()
            } else {
                Self::WorkloadApi {
                    cluster,
                    action,
                    source,
                }
            }
        }
    }

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
            // A person must fix the Secret; the long fixed delay (or any change to the
            // remediation) brings the next attempt.
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
    #![allow(clippy::unwrap_used)]
    use capmaas_runtime::ErrorCategory;

    use capmaas_runtime::error::failed;

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
        assert!(Error::from(failed("patching")(api(409))).is_conflict());
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
        let gone = Error::from(failed("adding the finalizer")(
            capmaas_runtime::Error::Gone("r".into()),
        ));
        assert!(gone.is_conflict());
        let failed_write = Error::from(failed("writing the status")(api(500)));
        assert!(!failed_write.is_conflict());
        assert_eq!(failed_write.category(), "kube_api");
        assert_eq!(
            Error::from(failed("encoding the Node backup")(
                serde_json::from_str::<u8>("x").unwrap_err()
            ))
            .category(),
            "serialize"
        );
    }
}
