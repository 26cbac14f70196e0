//! Errors of the cluster-controller, classified for metrics and the requeue policy.

use capmaas_runtime::Requeue;
use capmaas_runtime::error::ControllerError;
use capmaas_runtime::error::Failed;

/// A failed reconcile of a MaasCluster. The category of each is its variant name in
/// snake_case; the kit's failures carry their own ([`capmaas_runtime::Error`]).
#[derive(Debug, thiserror::Error, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum Error {
    /// A Kubernetes API call or a kit write (status, finalizer) failed.
    #[error(transparent)]
    Kit(#[from] Failed),
    /// The MaasCluster (or its Cluster) cannot be reconciled as written; a human must fix it.
    #[error("invalid spec: {0}")]
    InvalidSpec(String),
    /// The MaasDNSRecord this cluster needs exists and belongs to another object.
    #[error("MaasDNSRecord {0} exists and is not owned by this MaasCluster")]
    DnsRecordConflict(String),
}

impl ControllerError for Error {
    fn kit(&self) -> Option<&Failed> {
        let Self::Kit(e) = self else { return None };
        Some(e)
    }

    /// A spec a human must fix, or a record someone else owns.
    fn domain_requeue(&self) -> Requeue {
        Requeue::InvalidSpec
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use capmaas_runtime::ErrorCategory;

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
            Error::from(capmaas_runtime::error::failed("serializing a patch")(
                serde_json::from_str::<u8>("x").unwrap_err()
            ))
            .requeue(),
            Requeue::Transient
        );
        assert_eq!(
            Error::DnsRecordConflict("x".into()).category(),
            "dns_record_conflict"
        );
    }
}
