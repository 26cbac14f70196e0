use std::path::PathBuf;

/// Everything that can go wrong while bringing up or using a test control plane.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "test control plane binary {path} is missing: run `just testenv` (hack/testenv/build.sh) first"
    )]
    MissingBinary { path: PathBuf },

    #[error("I/O error while {context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },

    #[error("certificate generation failed: {0}")]
    Certificate(#[from] rcgen::Error),

    #[error("{process} exited before becoming ready ({status}); log tail:\n{log_tail}")]
    ProcessExited {
        process: &'static str,
        status: String,
        log_tail: String,
    },

    #[error("timed out after {seconds}s waiting for {what}")]
    Timeout { what: String, seconds: u64 },

    #[error("kubeconfig error: {0}")]
    Kubeconfig(String),

    #[error("Kubernetes API error while {context}: {source}")]
    Kube {
        context: String,
        #[source]
        source: kube::Error,
    },

    #[error("cannot parse {path}: {message}")]
    Manifest { path: PathBuf, message: String },
}

impl Error {
    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let context = context.into();
        move |source| Self::Io { context, source }
    }

    pub(crate) fn kube(context: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let context = context.into();
        move |source| Self::Kube { context, source }
    }
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
