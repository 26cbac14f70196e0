//! Errors of the webhook server.

use capmaas_runtime::{ErrorCategory, Requeue};

/// Everything that can go wrong while serving admission reviews.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request body is not an AdmissionReview.
    #[error("the request body is not an AdmissionReview: {0}")]
    BadReview(#[source] serde_json::Error),
    /// The AdmissionReview carries no request.
    #[error("the AdmissionReview carries no request")]
    NoRequest,
    /// An object could not be turned into JSON (cannot happen for decoded JSON).
    #[error("encoding the object: {0}")]
    Encode(#[source] serde_json::Error),
    /// The defaults patch could not be serialized.
    #[error("encoding the defaults patch: {0}")]
    Patch(#[source] kube::core::admission::SerializePatchError),
    /// The webhook listener cannot be bound.
    #[error("binding the webhook listener on {addr}: {source}")]
    Bind {
        /// Address.
        addr: std::net::SocketAddr,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
}

impl ErrorCategory for Error {
    fn category(&self) -> &'static str {
        match self {
            Self::BadReview(_) | Self::NoRequest => "bad_review",
            Self::Encode(_) | Self::Patch(_) => "serialize",
            Self::Bind { .. } => "listen",
        }
    }

    fn requeue(&self) -> Requeue {
        // Nothing here is retried by a controller; a bad review is the caller's to fix.
        Requeue::Never
    }
}

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
