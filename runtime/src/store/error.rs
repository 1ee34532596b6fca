//! What can go wrong in the store, each failure with what to do about it.
//!
//! SQLite reports failures as result codes without the file they concern;
//! [`StoreError::at`] attaches the database path so that a locked, corrupt or
//! unreadable database is named in the message the user reads.

use std::path::{Path, PathBuf};

use rusqlite::ErrorCode;

/// A store failure. Each message says what was wrong and what to do.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database was written by a newer troupe.
    #[error(
        "{path}: schema version {found} is newer than this troupe knows ({known}); \
         upgrade troupe to open this home"
    )]
    NewerSchema {
        /// The database file.
        path: PathBuf,
        /// The version found in the file.
        found: i64,
        /// The newest version this binary knows.
        known: i64,
    },
    /// Another connection or process held a lock past the busy timeout,
    /// on every try.
    #[error(
        "{path} is locked by another writer (another troupe on this home, or a program holding \
         a lock on it or its -wal or -shm file) and stayed locked past the busy timeout on \
         every one of {tries} tries; nothing was written. Stop that process, then retry",
        tries = crate::store::writer::LOCKED_TRIES
    )]
    Locked {
        /// The database file.
        path: PathBuf,
    },
    /// The file is not a SQLite database, or it is damaged.
    #[error(
        "{path} is not a SQLite database or is damaged ({detail}); troupe left it untouched: \
         `troupe doctor` checks it and copies what can be read, or move it aside or restore a \
         backup, then start again"
    )]
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// What SQLite or the header check said.
        detail: String,
    },
    /// The database is damaged: the check at open found faults.
    #[error(
        "{path} is damaged (PRAGMA quick_check: {detail}); troupe stopped before writing into it. \
         Run `troupe doctor` to see what is wrong and `troupe doctor --recover FILE` to copy what \
         can be read, then move the damaged file aside (keep it) and put the copy in its place"
    )]
    Damaged {
        /// The database file.
        path: PathBuf,
        /// SQLite's first findings.
        detail: String,
    },
    /// The check after start found the database damaged: the store writes
    /// nothing more.
    #[error(
        "{path} is damaged (the check after start, PRAGMA quick_check: {detail}); troupe has \
         stopped writing to it so as not to spread the damage, and refuses every write. Stop \
         troupe, run `troupe doctor` to see what is wrong and `troupe doctor --recover FILE` to \
         copy what can be read (or restore troupe.db from a backup), then start again"
    )]
    WritesStopped {
        /// The database file.
        path: PathBuf,
        /// SQLite's first findings.
        detail: String,
    },
    /// The database is missing or empty, but the home shows it had one.
    #[error(
        "{path} is missing or empty, but this home had a database ({evidence} exist); troupe \
         will not start a new, empty store over it. Put the database back or restore a backup \
         (`troupe doctor` checks it); to start afresh on purpose, move those aside too"
    )]
    Missing {
        /// The database file.
        path: PathBuf,
        /// What shows the home had a database.
        evidence: String,
    },
    /// There is no database to read yet.
    #[error("there is no database at {path} yet: nothing has run in this home (`troupe run` or `troupe chat` starts)")]
    NoDatabase {
        /// The database file.
        path: PathBuf,
    },
    /// A write was asked of a store opened read-only.
    #[error(
        "{path} is open read-only here (a listing command); writes go through the process \
         that owns the home"
    )]
    ReadOnly {
        /// The database file.
        path: PathBuf,
    },
    /// A read-only open found a schema older than this binary's.
    #[error(
        "{path}: schema version {found} is older than this troupe's ({known}); a writing command \
         (`troupe run`, `chat` or `serve`) upgrades it, then listing commands read it"
    )]
    OlderSchema {
        /// The database file.
        path: PathBuf,
        /// The version found in the file.
        found: i64,
        /// The newest version this binary knows.
        known: i64,
    },
    /// The file could not be opened, read or written.
    #[error("{path}: {source}; check that the path exists, is writable and the disk is not full")]
    Io {
        /// The database file.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
    /// A setting did not take effect when the database was opened.
    #[error(
        "{path}: PRAGMA {name} is {got}, wanted {wanted}; the file system may not support it \
         (WAL needs a local disk with shared memory): put the home on a local disk"
    )]
    Setting {
        /// The database file.
        path: PathBuf,
        /// The pragma.
        name: &'static str,
        /// The value troupe set.
        wanted: String,
        /// The value SQLite reports.
        got: String,
    },
    /// A SQL statement failed.
    #[error("database: {message}")]
    Sqlite {
        /// SQLite's result code, when there is one.
        code: Option<ErrorCode>,
        /// SQLite's message.
        message: String,
    },
    /// A stored value could not be encoded or decoded.
    #[error("a stored {what} could not be encoded or decoded: {detail}; this is a bug or a database edited by hand")]
    Codec {
        /// What was being encoded or decoded (`message`, `envelope`).
        what: &'static str,
        /// The serde error.
        detail: String,
    },
    /// A write job refused its input; the message says why.
    #[error("{0}")]
    Invalid(String),
    /// A write job named a version that is no longer the current one (a
    /// row changed since it was read); nothing was written, and the
    /// message says what to read again.
    #[error("{0}")]
    Conflict(String),
    /// A read or write job panicked; its savepoint was rolled back.
    #[error(
        "a store job panicked ({0}); its changes were rolled back; this is a bug, please report it"
    )]
    Panicked(String),
    /// SQLite rolled the whole batch back after a job's failure.
    #[error("the write was rolled back with its batch because another write failed fatally ({0}); retry it")]
    Aborted(String),
    /// The store's threads have stopped.
    #[error("the store has stopped (its writer or readers are gone); restart troupe")]
    Closed,
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        Self::Sqlite {
            code: e.sqlite_error_code(),
            message: e.to_string(),
        }
    }
}

impl From<serde_json::Error> for StoreError {
    fn from(e: serde_json::Error) -> Self {
        Self::Codec {
            what: "value",
            detail: e.to_string(),
        }
    }
}

impl StoreError {
    /// Whether this is a lock held by someone else (`SQLITE_BUSY` or
    /// `SQLITE_LOCKED`), which may be gone at the next try.
    pub fn is_locked(&self) -> bool {
        match self {
            Self::Locked { .. } => true,
            Self::Sqlite { code, .. } => {
                matches!(
                    code,
                    Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
                )
            }
            _ => false,
        }
    }

    /// Names the database file in a bare SQLite failure and sorts it into
    /// the variant the user can act on (locked, corrupt, I/O).
    pub fn at(self, path: &Path) -> Self {
        let Self::Sqlite { code, message } = self else {
            return self;
        };
        let path = path.to_path_buf();
        match code {
            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => Self::Locked { path },
            Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => Self::Corrupt {
                path,
                detail: message,
            },
            Some(
                ErrorCode::SystemIoFailure
                | ErrorCode::DiskFull
                | ErrorCode::CannotOpen
                | ErrorCode::PermissionDenied
                | ErrorCode::ReadOnly,
            ) => Self::Io {
                path,
                source: std::io::Error::other(message),
            },
            _ => Self::Sqlite { code, message },
        }
    }

    /// A copy of this error for another waiter of the same failed batch.
    pub(crate) fn replicate(&self) -> Self {
        match self {
            Self::NewerSchema { path, found, known } => Self::NewerSchema {
                path: path.clone(),
                found: *found,
                known: *known,
            },
            Self::Locked { path } => Self::Locked { path: path.clone() },
            Self::Corrupt { path, detail } => Self::Corrupt {
                path: path.clone(),
                detail: detail.clone(),
            },
            Self::Damaged { path, detail } => Self::Damaged {
                path: path.clone(),
                detail: detail.clone(),
            },
            Self::WritesStopped { path, detail } => Self::WritesStopped {
                path: path.clone(),
                detail: detail.clone(),
            },
            Self::Missing { path, evidence } => Self::Missing {
                path: path.clone(),
                evidence: evidence.clone(),
            },
            Self::NoDatabase { path } => Self::NoDatabase { path: path.clone() },
            Self::ReadOnly { path } => Self::ReadOnly { path: path.clone() },
            Self::OlderSchema { path, found, known } => Self::OlderSchema {
                path: path.clone(),
                found: *found,
                known: *known,
            },
            Self::Io { path, source } => Self::Io {
                path: path.clone(),
                source: std::io::Error::new(source.kind(), source.to_string()),
            },
            Self::Setting {
                path,
                name,
                wanted,
                got,
            } => Self::Setting {
                path: path.clone(),
                name,
                wanted: wanted.clone(),
                got: got.clone(),
            },
            Self::Sqlite { code, message } => Self::Sqlite {
                code: *code,
                message: message.clone(),
            },
            Self::Codec { what, detail } => Self::Codec {
                what,
                detail: detail.clone(),
            },
            Self::Invalid(m) => Self::Invalid(m.clone()),
            Self::Conflict(m) => Self::Conflict(m.clone()),
            Self::Panicked(m) => Self::Panicked(m.clone()),
            Self::Aborted(m) => Self::Aborted(m.clone()),
            Self::Closed => Self::Closed,
        }
    }

    /// Whether SQLite reported a constraint violation (a duplicate key, a
    /// missing parent row).
    pub fn is_constraint(&self) -> bool {
        matches!(
            self,
            Self::Sqlite {
                code: Some(ErrorCode::ConstraintViolation),
                ..
            }
        )
    }
}

/// The store's result type.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;
