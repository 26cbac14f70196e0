//! Errors of the IPAM controllers, classified for metrics and the requeue policy.

use capmaas_runtime::error::{ControllerError, Failed};

/// A failed reconcile of an `IPAddressClaim`, a `MaasIPPool` or an `IPAddress`. The category of
/// each is its variant name in snake_case; the kit's failures carry their own
/// ([`capmaas_runtime::Error`]).
#[derive(Debug, thiserror::Error, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum Error {
    /// A Kubernetes API call or a kit write (status, finalizer) failed or lost a race.
    #[error(transparent)]
    Kit(#[from] Failed),
    /// The address lock (named here) was created and deleted by others on every try.
    #[error("MaasIPAddressLock {0} changed hands on every try")]
    LockChurn(String),
}

impl Error {
    /// Whether the error is an optimistic-concurrency conflict the next reconcile resolves.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Self::Kit(e) if e.is_conflict())
    }
}

impl ControllerError for Error {
    fn kit(&self) -> Option<&Failed> {
        let Self::Kit(e) = self else { return None };
        Some(e)
    }
}

/// `Result` with this module's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use capmaas_runtime::error::failed;
    use capmaas_runtime::{ErrorCategory, Requeue};

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
        let conflict = Error::from(failed("create IPAddress")(api_error(409)));
        assert!(conflict.quiet());
        assert_eq!(conflict.category(), "conflict");
        assert_eq!(conflict.requeue(), Requeue::Transient);
        let finalizer = Error::from(failed("updating the finalizer")(
            capmaas_runtime::Error::Conflict("x"),
        ));
        assert!(finalizer.quiet());
        let other = Error::from(failed("get")(api_error(500)));
        assert!(!other.quiet());
        assert_eq!(other.category(), "kube_api");
        assert_eq!(
            Error::from(Failed::missing("uid")).requeue(),
            Requeue::InvalidSpec
        );
    }
}
