//! The runtime's error type.

use crate::model::ModelError;

/// A failure in the runtime. Each variant's text says what was wrong and,
/// where there is something to do, what to do.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// A configuration file or value is wrong.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// A model call failed.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// An actor could not be started, reached or stopped.
    #[error("actor: {0}")]
    Actor(String),
    /// A file of the home could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// The failure.
        source: std::io::Error,
    },
}

/// The runtime's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
