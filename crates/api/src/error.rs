//! Errors of CRD rendering and file generation.

use std::path::PathBuf;

/// Errors of this crate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A CRD could not be rendered as YAML.
    #[error("rendering CRD {name} as YAML: {source}")]
    Yaml {
        /// CRD name.
        name: String,
        /// Serializer error.
        #[source]
        source: serde_saphyr::SerializeError,
    },
    /// A CRD or schema could not be converted to JSON.
    #[error("converting {what} to JSON: {source}")]
    Json {
        /// What was converted.
        what: String,
        /// Serializer error.
        #[source]
        source: serde_json::Error,
    },
    /// A CRD has no OpenAPI schema (a derive misconfiguration).
    #[error("CRD {name} has no openAPIV3Schema")]
    MissingSchema {
        /// CRD name.
        name: String,
    },
    /// Reading or writing a generated file failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// `reading` or `writing`.
        action: &'static str,
        /// File path.
        path: PathBuf,
        /// I/O error.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// Low-cardinality label for metrics and logs.
    pub fn category(&self) -> &'static str {
        match self {
            Self::Yaml { .. } => "yaml",
            Self::Json { .. } => "json",
            Self::MissingSchema { .. } => "schema",
            Self::Io { .. } => "io",
        }
    }
}
