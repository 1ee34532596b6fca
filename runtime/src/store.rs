//! The SQLite store (being built: see issue 2).

/// A store failure.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite failed.
    #[error("database: {0}")]
    Sqlite(String),
}
