//! Errors of the gateway's reconcilers, classified for metrics and requeue.

use capmaas_runtime::Requeue;
use capmaas_runtime::error::{ControllerError, Failed, failed};
use maas_api_client::MaasError;

/// Everything a reconcile can fail with. The category of each is its variant name in
/// snake_case, but for the kit's failures, which carry their own ([`capmaas_runtime::Error`]),
/// and MAAS's, classified by what MAAS answered.
#[derive(Debug, thiserror::Error, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum Error {
    /// A Kubernetes call or a kit write (status, finalizer) failed or lost a race.
    #[error(transparent)]
    Kit(#[from] Failed),
    /// A MAAS call failed.
    #[error("MAAS {operation} failed")]
    Maas {
        /// What we were doing, e.g. `allocate`.
        operation: &'static str,
        /// The client error.
        #[source]
        source: MaasError,
    },
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
    /// A deployment asking for a VM host (`spec.provisioning.registerVMHost`) that MAAS
    /// cannot serve: no VM hosts in this MAAS, or a key without admin rights
    /// ([`crate::host::vm_host`]). Reported on the host, retried only much later.
    #[error("{message}")]
    VmHostRefused {
        /// The `Provisioned` condition reason.
        reason: &'static str,
        /// What to tell people.
        message: String,
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
}

impl Error {
    /// A MAAS error during `operation`.
    pub fn maas(operation: &'static str) -> impl FnOnce(MaasError) -> Self {
        move |source| Self::Maas { operation, source }
    }
}

impl From<capmaas_runtime::Error> for Error {
    /// A status write of the kit's that failed ([`capmaas_runtime::status`]).
    fn from(e: capmaas_runtime::Error) -> Self {
        Self::Kit(failed("writing the status")(e))
    }
}

impl ControllerError for Error {
    fn kit(&self) -> Option<&Failed> {
        let Self::Kit(e) = self else { return None };
        Some(e)
    }

    /// The variant name, but for MAAS's failures, classified by what MAAS answered.
    fn variant(&self) -> &'static str {
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
            domain => domain.into(),
        }
    }

    fn domain_requeue(&self) -> Requeue {
        match self {
            Self::InvalidSpec(_)
            | Self::VmHostRefused { .. }
            | Self::Maas {
                source: MaasError::BadRequest { .. },
                ..
            } => Requeue::InvalidSpec,
            _ => Requeue::Transient,
        }
    }

    /// A lost binding race, and MAAS writes refused by the leadership fence (the term is
    /// ending).
    fn domain_quiet(&self) -> bool {
        matches!(
            self,
            Self::BindingContended { .. }
                | Self::Maas {
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
    use capmaas_runtime::ErrorCategory;

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
        let e = crate::host::vm_host::unsupported("gone");
        assert_eq!(e.category(), "vm_host_refused");
        assert_eq!(e.requeue(), Requeue::InvalidSpec);
    }

    #[test]
    fn finalizer_conflicts_are_quiet_and_transient() {
        let e = Error::from(failed("updating the finalizer")(
            capmaas_runtime::Error::Conflict("the finalizer list changed"),
        ));
        assert_eq!(e.category(), "conflict");
        assert_eq!(e.requeue(), Requeue::Transient);
        assert!(e.quiet());
        let e = Error::from(failed("updating the finalizer")(
            capmaas_runtime::Error::Gone("x".into()),
        ));
        assert_eq!(e.category(), "gone");
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
