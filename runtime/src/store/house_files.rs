//! A house's shared files: paths with a history of versions, deduplicated
//! contents and a chunked full-text index.
//!
//! - **Versions are the house's.** Every write or delete is one new
//!   version of the house's files (1, 2, …) with its author and message;
//!   a write of several files is one version, in one transaction
//!   ([`write()`]). A file's version is the house version that last wrote
//!   it, and reading a file "at version N" reads it as it was once version
//!   N was made ([`read()`]).
//! - **Contents** are stored once ([`content`]): identical files share a
//!   row, and similar versions share most of their pieces. A write cuts,
//!   hashes and compresses its files before its transaction
//!   ([`pieces`], [`pack`]), so the store's one writer spends its time on
//!   the rows alone.
//! - **Refusals roll the whole call back.** A bad path, a file over the
//!   size limit, a house over its quota, a stale delete: the job returns
//!   [`StoreError::Invalid`] with what to do, and the writer rolls the job
//!   back, so nothing of the call is written.
//! - **Search** covers the current version of each text file and each
//!   document's text (converted by the caller before the write), cut into
//!   chunks of about [`CHUNK_CHARS`] characters ([`index`]). A write leaves
//!   its text files `pending`; the store's writer indexes them in
//!   transactions of their own right after the write commits, and a search
//!   first indexes what its house still has pending, so it never misses a
//!   committed write. Binary files are kept but not indexed.
//!
//! Every query names its house: one house never sees another's files.

pub mod compress;
pub mod content;
pub mod index;
pub mod path;
pub mod pieces;
mod read;
mod write;

pub use index::{catch_up, chunks, search, CHUNK_CHARS};
pub use read::{file, list, log, read};
pub use write::{delete, latest_version, pack, write, write_files, PackedFile};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::error::StoreError;

/// Migration 6: house files, their versions, deduplicated contents and
/// their search index.
pub const HOUSE_FILES: &str = r#"
CREATE TABLE file_pieces (
    id   INTEGER PRIMARY KEY,
    hash BLOB NOT NULL UNIQUE,
    refs INTEGER NOT NULL,
    data BLOB NOT NULL
);
CREATE TABLE file_contents (
    id     INTEGER PRIMARY KEY,
    hash   BLOB NOT NULL UNIQUE,
    size   INTEGER NOT NULL,
    refs   INTEGER NOT NULL,
    pieces BLOB NOT NULL
);
CREATE TABLE house_file_versions (
    house_id   TEXT NOT NULL REFERENCES houses(id) ON DELETE CASCADE,
    version    INTEGER NOT NULL,
    author     TEXT NOT NULL,
    message    TEXT NOT NULL DEFAULT '',
    changes    TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(changes)),
    created_at TEXT NOT NULL,
    PRIMARY KEY (house_id, version)
) WITHOUT ROWID;
CREATE TABLE house_file_revisions (
    house_id     TEXT NOT NULL REFERENCES houses(id) ON DELETE CASCADE,
    path_key     TEXT NOT NULL,
    version      INTEGER NOT NULL,
    path         TEXT NOT NULL,
    content      INTEGER NOT NULL,
    text_content INTEGER,
    PRIMARY KEY (house_id, path_key, version)
) WITHOUT ROWID;
CREATE TABLE house_files (
    house_id     TEXT NOT NULL REFERENCES houses(id) ON DELETE CASCADE,
    path_key     TEXT NOT NULL,
    path         TEXT NOT NULL,
    version      INTEGER NOT NULL,
    size         INTEGER NOT NULL,
    kind         TEXT NOT NULL CHECK (kind IN ('text', 'document', 'binary')),
    state        TEXT NOT NULL CHECK (state IN ('indexed', 'pending', 'failed', 'not_indexable')),
    state_detail TEXT NOT NULL DEFAULT '',
    author       TEXT NOT NULL,
    updated_at   TEXT NOT NULL,
    PRIMARY KEY (house_id, path_key)
) WITHOUT ROWID;
CREATE TABLE house_file_chunks (
    id       INTEGER PRIMARY KEY,
    house_id TEXT NOT NULL,
    path_key TEXT NOT NULL,
    chunk    INTEGER NOT NULL,
    text     TEXT NOT NULL
);
CREATE INDEX house_file_chunks_by_file ON house_file_chunks (house_id, path_key, chunk);
CREATE VIRTUAL TABLE house_file_fts USING fts5(
    text, content = 'house_file_chunks', content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER house_file_chunks_ai AFTER INSERT ON house_file_chunks BEGIN
    INSERT INTO house_file_fts(rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER house_file_chunks_ad AFTER DELETE ON house_file_chunks BEGIN
    INSERT INTO house_file_fts(house_file_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
"#;

/// Migration 8: search indexing after the write, and smaller contents.
///
/// A chunk keeps the version it was cut from (a search cites it, even
/// while a newer version waits to be indexed) and reaches FTS5 with the
/// rest of its file in one statement, not by a trigger per row (see
/// [`index`]); pending files are found by
/// a partial index; a piece says how its bytes are compressed and a
/// content how its piece list is written ([`content`]). Rows written
/// before keep codec and format 0 (raw bytes, 8-byte ids).
pub const HOUSE_FILES_DEFERRED: &str = r#"
ALTER TABLE house_file_chunks ADD COLUMN version INTEGER NOT NULL DEFAULT 0;
UPDATE house_file_chunks SET version = COALESCE((SELECT f.version FROM house_files f
    WHERE f.house_id = house_file_chunks.house_id AND f.path_key = house_file_chunks.path_key), 0);
CREATE INDEX house_files_pending ON house_files (house_id) WHERE state = 'pending';
DROP TRIGGER house_file_chunks_ai;
ALTER TABLE file_pieces ADD COLUMN codec INTEGER NOT NULL DEFAULT 0;
ALTER TABLE file_contents ADD COLUMN format INTEGER NOT NULL DEFAULT 0;
"#;

/// Migration 18: the pieces a write stored raw for the writer to compress
/// when idle ([`compress`]), found by a partial index that holds only
/// them.
pub const PIECES_UNTRIED: &str = r#"
CREATE INDEX file_pieces_untried ON file_pieces (id) WHERE codec = 2;
"#;

/// Migration 10: each house's current files' bytes, kept by every write
/// and delete, so the quota check reads one row rather than summing every
/// file of the house (0.8 ms a write in a house of 10,000 files).
pub const HOUSE_FILE_USAGE: &str = r#"
CREATE TABLE house_file_usage (
    house_id TEXT PRIMARY KEY REFERENCES houses(id) ON DELETE CASCADE,
    bytes    INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO house_file_usage (house_id, bytes)
    SELECT house_id, SUM(size) FROM house_files GROUP BY house_id;
"#;

/// How big files and houses may grow (`[files]` in `config.toml`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileLimits {
    /// The largest file, in bytes.
    pub max_file_bytes: u64,
    /// The most bytes of current files one house may hold.
    pub house_quota_bytes: u64,
}

impl Default for FileLimits {
    fn default() -> Self {
        Self {
            max_file_bytes: 10 * 1024 * 1024,
            house_quota_bytes: 1024 * 1024 * 1024,
        }
    }
}

/// What a file holds, which decides how it is searched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Indexing {
    /// UTF-8 text, indexed as it is.
    Text,
    /// A document and the text its converter gave, or why it could not.
    Document(Result<String, String>),
    /// Bytes that are not text: kept, not indexed.
    Binary,
}

/// One file of a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewFile {
    /// Its path, as the caller gave it (normalized by the write).
    pub path: String,
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// How it is indexed.
    pub indexing: Indexing,
}

impl NewFile {
    /// A text file.
    pub fn text(path: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            bytes: text.into().into_bytes(),
            indexing: Indexing::Text,
        }
    }
}

/// A file's search-reading state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "state", content = "why")]
pub enum FileState {
    /// Its text is searchable.
    Indexed,
    /// Waiting to be indexed.
    Pending,
    /// Its text could not be read, and why.
    Failed(String),
    /// Binary: kept, not searchable.
    NotIndexable,
}

impl FileState {
    /// As shown: `indexed`, `pending`, `failed: why`, `not indexable`.
    pub fn label(&self) -> String {
        match self {
            Self::Indexed => "indexed".into(),
            Self::Pending => "pending".into(),
            Self::Failed(why) => format!("failed: {why}"),
            Self::NotIndexable => "not indexable (binary)".into(),
        }
    }

    /// The stored state's name and its detail.
    fn stored(&self) -> (&'static str, String) {
        match self {
            Self::Indexed => ("indexed", String::new()),
            Self::Pending => ("pending", String::new()),
            Self::Failed(why) => ("failed", why.clone()),
            Self::NotIndexable => ("not_indexable", String::new()),
        }
    }

    fn parse(state: &str, detail: String) -> Self {
        match state {
            "indexed" => Self::Indexed,
            "pending" => Self::Pending,
            "failed" => Self::Failed(detail),
            _ => Self::NotIndexable,
        }
    }
}

/// A current file of a house.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileInfo {
    /// Its path.
    pub path: String,
    /// The house version that last wrote it.
    pub version: i64,
    /// Its size in bytes.
    pub size: u64,
    /// `text`, `document` or `binary`.
    pub kind: String,
    /// Its search-reading state.
    pub state: FileState,
    /// Who wrote it last.
    pub author: String,
    /// When.
    pub updated_at: DateTime<Utc>,
}

/// One change of a version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// The file.
    pub path: String,
    /// `write` or `delete`.
    pub action: String,
}

/// One version of a house's files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionInfo {
    /// Its number.
    pub version: i64,
    /// Who made it.
    pub author: String,
    /// Its message (may be empty).
    pub message: String,
    /// What it changed.
    pub changes: Vec<Change>,
    /// When.
    pub created_at: DateTime<Utc>,
}

/// A file as read at one version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRead {
    /// Its path.
    pub path: String,
    /// The version read (the one that wrote these bytes).
    pub version: i64,
    /// The file's newest version.
    pub latest: i64,
    /// `text`, `document` or `binary` (of the current file).
    pub kind: String,
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// Its text: the bytes for a text file, the converted text of a
    /// document; `None` for a binary file.
    pub text: Option<String>,
}

/// A search hit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileHit {
    /// The file.
    pub path: String,
    /// The chunk, from 1.
    pub chunk: i64,
    /// The file's version.
    pub version: i64,
    /// The matching words in context, marked `[…]`.
    pub snippet: String,
}

fn invalid(text: impl Into<String>) -> StoreError {
    StoreError::Invalid(text.into())
}

/// The text of `bytes` if they are UTF-8 text (no NUL byte).
pub fn text_of(bytes: &[u8]) -> Option<&str> {
    if bytes.contains(&0) {
        return None;
    }
    std::str::from_utf8(bytes).ok()
}

#[cfg(test)]
#[path = "house_files_tests.rs"]
mod tests;
