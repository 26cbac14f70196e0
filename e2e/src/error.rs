/// What can go wrong while running the end-to-end environment.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("test control plane: {0}")]
    TestEnv(#[from] capmaas_testenv::Error),

    #[error("MAAS simulator: {0}")]
    Sim(#[from] maas_sim::SimError),

    #[error("Kubernetes API error while {context}: {source}")]
    Kube {
        context: String,
        #[source]
        source: kube::Error,
    },

    #[error("binary {path} is missing: run `cargo build --workspace --bins` (or `just e2e`) first")]
    MissingBinary { path: std::path::PathBuf },

    #[error("I/O error while {context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },

    #[error("timed out after {seconds}s waiting for {what}")]
    Timeout { what: String, seconds: u64 },

    #[error("invalid manifest {name}: {message}")]
    Manifest { name: String, message: String },

    #[error("invalid benchmark setting {name}: {message}")]
    BenchConfig { name: String, message: String },

    #[error("chaos run: {0}")]
    Chaos(String),

    #[error("{what} failed: {output}")]
    Command { what: String, output: String },
}

impl Error {
    pub(crate) fn kube(context: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let context = context.into();
        move |source| Self::Kube { context, source }
    }

    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let context = context.into();
        move |source| Self::Io { context, source }
    }
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
