//! Errors of the MaasDataClaim and MaasDataTemplate reconcilers, classified for metrics and
//! the requeue policy.

use capmaas_runtime::Requeue;
use capmaas_runtime::error::{ControllerError, Failed};

/// A failed reconcile. The category of each is its variant name in snake_case; the kit's
/// failures carry their own ([`capmaas_runtime::Error`]).
#[derive(Debug, thiserror::Error, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum Error {
    /// A Kubernetes API call, a kit write (status, finalizer) or an encoding failed.
    #[error(transparent)]
    Kit(#[from] Failed),
    /// Every candidate index was taken by someone else between reading and creating.
    #[error("no index of template {template} could be taken; retrying")]
    IndexContended {
        /// The MaasDataTemplate.
        template: String,
    },
    /// An IPAddressClaim changed between reading it and keeping its address for the host; the
    /// next pass reads it again.
    #[error("IPAddressClaim {0} changed while its address was being kept for its host; retrying")]
    HoldRaced(String),
    /// The flags name an impossible configuration (start-up only).
    #[error("invalid configuration: {0}")]
    Config(String),
}

impl ControllerError for Error {
    fn kit(&self) -> Option<&Failed> {
        let Self::Kit(e) = self else { return None };
        Some(e)
    }

    fn domain_requeue(&self) -> Requeue {
        match self {
            Self::Config(_) => Requeue::InvalidSpec,
            _ => Requeue::Transient,
        }
    }

    /// Losing an index race is normal operation: the next pass takes another index (or reads
    /// the IPAddressClaim to hold again).
    fn domain_quiet(&self) -> bool {
        matches!(self, Self::IndexContended { .. } | Self::HoldRaced(_))
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use capmaas_runtime::ErrorCategory;

    #[test]
    fn contention_is_quiet_and_retried() {
        let e = Error::IndexContended {
            template: "t".into(),
        };
        assert!(e.quiet());
        assert_eq!(e.category(), "index_contended");
        assert_eq!(e.requeue(), Requeue::Transient);
        assert_eq!(
            Error::from(Failed::missing("uid")).requeue(),
            Requeue::InvalidSpec
        );
    }
}
