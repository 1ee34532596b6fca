//! Layered configuration (being built: see issue 2).

/// A configuration failure.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A file is wrong.
    #[error("{0}")]
    Invalid(String),
}
