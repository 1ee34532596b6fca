//! A house's shared files: paths with a history of versions, deduplicated
//! contents and a chunked full-text index.
//!
//! - **Versions are the house's.** Every write or delete is one new
//!   version of the house's files (1, 2, …) with its author and message;
//!   a write of several files is one version, in one transaction. A file's
//!   version is the house version that last wrote it, and reading a file
//!   "at version N" reads it as it was once version N was made.
//! - **Contents** are stored once ([`content`]): identical files share a
//!   row, and similar versions share most of their pieces.
//! - **Refusals roll the whole call back.** A bad path, a file over the
//!   size limit, a house over its quota, a stale delete: the job returns
//!   [`StoreError::Invalid`] with what to do, and the writer rolls the job
//!   back, so nothing of the call is written.
//! - **Search** covers the current version of each text file and each
//!   document's text (converted by the caller before the write), cut into
//!   chunks of about [`CHUNK_CHARS`] characters and indexed in the same
//!   transaction as the write. Binary files are kept but not indexed.
//!
//! Every query names its house: one house never sees another's files.

pub mod content;
pub mod path;

use chrono::{DateTime, Utc};
use rusqlite::{params, Connection, OptionalExtension, Transaction};
use serde::{Deserialize, Serialize};

use super::error::StoreError;
use crate::id::HouseId;

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

/// The size of a search chunk, in characters (cut at a line end when one
/// is near).
pub const CHUNK_CHARS: usize = 2000;

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

/// `text` cut into search chunks: each about [`CHUNK_CHARS`] characters,
/// ended at a line end in its last quarter when there is one. Returns each
/// chunk's first character and its text.
pub fn chunks(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let (mut start_byte, mut start_char) = (0usize, 0usize);
    while start_byte < text.len() {
        let rest = &text[start_byte..];
        let mut end = rest.len();
        let mut count = 0;
        let mut last_newline = None;
        for (i, c) in rest.char_indices() {
            if count == CHUNK_CHARS {
                end = i;
                break;
            }
            count += 1;
            if c == '\n' && count >= CHUNK_CHARS * 3 / 4 {
                last_newline = Some((i + 1, count));
            }
        }
        let (end, chars) = match (end < rest.len(), last_newline) {
            (true, Some((nl, n))) => (nl, n),
            _ => (end, count),
        };
        out.push((start_char, &rest[..end]));
        start_byte += end;
        start_char += chars;
    }
    out
}

/// The newest version of `house`'s files (0 before the first write).
pub fn latest_version(conn: &Connection, house: HouseId) -> Result<i64, StoreError> {
    Ok(conn
        .prepare_cached(
            "SELECT COALESCE(MAX(version), 0) FROM house_file_versions WHERE house_id = ?1",
        )?
        .query_row(params![house.to_string()], |r| r.get(0))?)
}

fn record_version(
    tx: &Transaction<'_>,
    house: &str,
    version: i64,
    author: &str,
    message: &str,
    changes: &[Change],
    now: &str,
) -> Result<(), StoreError> {
    let changes = serde_json::to_string(changes).map_err(|e| invalid(e.to_string()))?;
    tx.prepare_cached(
        "INSERT INTO house_file_versions (house_id, version, author, message, changes, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![house, version, author, message, changes, now])?;
    Ok(())
}

/// Writes `files` into `house` as ONE new version, by `author` with
/// `message`; returns the version and the files as they now are. Refuses
/// the whole call (nothing written) on a bad or repeated path, a file over
/// the size limit, or a house over its quota.
pub fn write(
    tx: &Transaction<'_>,
    house: HouseId,
    author: &str,
    message: &str,
    files: &[NewFile],
    limits: FileLimits,
) -> Result<(i64, Vec<FileInfo>), StoreError> {
    if files.is_empty() {
        return Err(invalid(
            "no files to write: give at least one path and its content.",
        ));
    }
    let house_id = house.to_string();
    let mut paths: Vec<(String, String)> = Vec::with_capacity(files.len());
    for f in files {
        let p = path::normalize(&f.path).map_err(invalid)?;
        let k = path::key(&p);
        if paths.iter().any(|(_, seen)| *seen == k) {
            return Err(invalid(format!(
                "`{p}` appears twice in one write (paths compare without case); nothing was written. Give each file once."
            )));
        }
        let size = f.bytes.len() as u64;
        if size > limits.max_file_bytes {
            return Err(invalid(format!(
                "`{p}` is {size} bytes, over the limit of {} bytes per file ([files] max_file_bytes); nothing was written. Split it, or raise the limit.",
                limits.max_file_bytes
            )));
        }
        paths.push((p, k));
    }
    let mut total: i64 = tx
        .prepare_cached("SELECT COALESCE(SUM(size), 0) FROM house_files WHERE house_id = ?1")?
        .query_row(params![house_id], |r| r.get(0))?;
    for ((_, k), f) in paths.iter().zip(files) {
        let old: Option<i64> = tx
            .prepare_cached("SELECT size FROM house_files WHERE house_id = ?1 AND path_key = ?2")?
            .query_row(params![house_id, k], |r| r.get(0))
            .optional()?;
        total += f.bytes.len() as i64 - old.unwrap_or(0);
    }
    if total as u64 > limits.house_quota_bytes {
        return Err(invalid(format!(
            "this write would bring the house's files to {total} bytes, over its quota of {} bytes ([files] house_quota_bytes); nothing was written. Delete files with delete_file, or raise the quota.",
            limits.house_quota_bytes
        )));
    }
    let version = latest_version(tx, house)? + 1;
    let now = super::now();
    let mut changes = Vec::with_capacity(files.len());
    let mut written = Vec::with_capacity(files.len());
    for ((p, k), f) in paths.iter().zip(files) {
        let content = content::put(tx, &f.bytes)?;
        let (kind, text, state) = match &f.indexing {
            Indexing::Text => match text_of(&f.bytes) {
                Some(t) => ("text", Some(t.to_string()), FileState::Indexed),
                None => ("binary", None, FileState::NotIndexable),
            },
            Indexing::Document(Ok(t)) => ("document", Some(t.clone()), FileState::Indexed),
            Indexing::Document(Err(why)) => ("document", None, FileState::Failed(why.clone())),
            Indexing::Binary => ("binary", None, FileState::NotIndexable),
        };
        let text_content = match (&f.indexing, &text) {
            (Indexing::Document(_), Some(t)) => Some(content::put(tx, t.as_bytes())?),
            _ => None,
        };
        tx.prepare_cached(
            "INSERT INTO house_file_revisions (house_id, path_key, version, path, content, text_content)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )?
        .execute(params![house_id, k, version, p, content, text_content])?;
        let (state_name, detail) = match &state {
            FileState::Indexed => ("indexed", String::new()),
            FileState::Pending => ("pending", String::new()),
            FileState::Failed(why) => ("failed", why.clone()),
            FileState::NotIndexable => ("not_indexable", String::new()),
        };
        tx.prepare_cached(
            "INSERT INTO house_files (house_id, path_key, path, version, size, kind, state, state_detail, author, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
             ON CONFLICT (house_id, path_key) DO UPDATE SET path = excluded.path,
                 version = excluded.version, size = excluded.size, kind = excluded.kind,
                 state = excluded.state, state_detail = excluded.state_detail,
                 author = excluded.author, updated_at = excluded.updated_at",
        )?
        .execute(params![
            house_id, k, p, version, f.bytes.len() as i64, kind, state_name, detail, author, now
        ])?;
        tx.prepare_cached("DELETE FROM house_file_chunks WHERE house_id = ?1 AND path_key = ?2")?
            .execute(params![house_id, k])?;
        if let Some(t) = &text {
            let mut insert = tx.prepare_cached(
                "INSERT INTO house_file_chunks (house_id, path_key, chunk, text) VALUES (?1, ?2, ?3, ?4)",
            )?;
            for (i, (_, chunk)) in chunks(t).into_iter().enumerate() {
                insert.execute(params![house_id, k, i as i64 + 1, chunk])?;
            }
        }
        changes.push(Change {
            path: p.clone(),
            action: "write".into(),
        });
        written.push(FileInfo {
            path: p.clone(),
            version,
            size: f.bytes.len() as u64,
            kind: kind.into(),
            state,
            author: author.into(),
            updated_at: super::parse_time(&now)?,
        });
    }
    record_version(tx, &house_id, version, author, message, &changes, &now)?;
    Ok((version, written))
}

/// Deletes each `(path, version seen)` of `files` from `house`, with all
/// their earlier versions, as one new version. Refuses the whole call when
/// any file is missing or changed since the version named.
pub fn delete(
    tx: &Transaction<'_>,
    house: HouseId,
    author: &str,
    message: &str,
    files: &[(String, i64)],
) -> Result<i64, StoreError> {
    if files.is_empty() {
        return Err(invalid(
            "no files to delete: give each file's path and the version you saw.",
        ));
    }
    let house_id = house.to_string();
    let mut found = Vec::with_capacity(files.len());
    let mut problems = Vec::new();
    for (raw, seen) in files {
        let p = path::normalize(raw).map_err(invalid)?;
        let k = path::key(&p);
        let current: Option<(String, i64)> = tx
            .prepare_cached(
                "SELECT path, version FROM house_files WHERE house_id = ?1 AND path_key = ?2",
            )?
            .query_row(params![house_id, k], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        match current {
            None => problems.push(format!("`{p}` does not exist")),
            Some((p, v)) if v != *seen => problems.push(format!(
                "`{p}` changed since version {seen} (it is now version {v})"
            )),
            Some((p, _)) => found.push((p, k)),
        }
    }
    if !problems.is_empty() {
        return Err(invalid(format!(
            "nothing was deleted: {}. Read the files again (list_files shows their versions) and retry with the versions you saw.",
            problems.join("; ")
        )));
    }
    let version = latest_version(tx, house)? + 1;
    let now = super::now();
    let mut changes = Vec::with_capacity(found.len());
    for (p, k) in found {
        let held: Vec<(i64, Option<i64>)> = tx
            .prepare_cached(
                "SELECT content, text_content FROM house_file_revisions WHERE house_id = ?1 AND path_key = ?2",
            )?
            .query_map(params![house_id, k], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<_, _>>()?;
        for (c, t) in held {
            content::release(tx, c)?;
            if let Some(t) = t {
                content::release(tx, t)?;
            }
        }
        for sql in [
            "DELETE FROM house_file_revisions WHERE house_id = ?1 AND path_key = ?2",
            "DELETE FROM house_file_chunks WHERE house_id = ?1 AND path_key = ?2",
            "DELETE FROM house_files WHERE house_id = ?1 AND path_key = ?2",
        ] {
            tx.prepare_cached(sql)?.execute(params![house_id, k])?;
        }
        changes.push(Change {
            path: p,
            action: "delete".into(),
        });
    }
    record_version(tx, &house_id, version, author, message, &changes, &now)?;
    Ok(version)
}

type FileRow = (String, i64, i64, String, String, String, String, String);

fn parse_file(
    (path, version, size, kind, state, detail, author, at): FileRow,
) -> Result<FileInfo, StoreError> {
    Ok(FileInfo {
        path,
        version,
        size: size as u64,
        kind,
        state: FileState::parse(&state, detail),
        author,
        updated_at: super::parse_time(&at)?,
    })
}

const SELECT_FILE: &str =
    "SELECT path, version, size, kind, state, state_detail, author, updated_at FROM house_files";

/// The current files of `house` (under `folder` when given), by path.
pub fn list(
    conn: &Connection,
    house: HouseId,
    folder: Option<&str>,
) -> Result<Vec<FileInfo>, StoreError> {
    let prefix = path::folder_prefix(folder).map_err(invalid)?;
    let (low, high) = match &prefix {
        Some(p) => (p.clone(), format!("{}\u{10FFFF}", p)),
        None => (String::new(), "\u{10FFFF}".to_string()),
    };
    let mut stmt = conn.prepare_cached(&format!(
        "{SELECT_FILE} WHERE house_id = ?1 AND path_key >= ?2 AND path_key < ?3 ORDER BY path_key"
    ))?;
    let rows = stmt.query_map(params![house.to_string(), low, high], |r| {
        Ok((
            r.get(0)?,
            r.get(1)?,
            r.get(2)?,
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
            r.get(6)?,
            r.get(7)?,
        ))
    })?;
    rows.map(|r| parse_file(r?)).collect()
}

/// The current file at `path` in `house`, if there is one.
pub fn file(conn: &Connection, house: HouseId, raw: &str) -> Result<Option<FileInfo>, StoreError> {
    let k = path::key(&path::normalize(raw).map_err(invalid)?);
    conn.prepare_cached(&format!(
        "{SELECT_FILE} WHERE house_id = ?1 AND path_key = ?2"
    ))?
    .query_row(params![house.to_string(), k], |r| {
        Ok((
            r.get(0)?,
            r.get(1)?,
            r.get(2)?,
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
            r.get(6)?,
            r.get(7)?,
        ))
    })
    .optional()?
    .map(parse_file)
    .transpose()
}

/// The file at `path` as it was at house version `at` (the current one
/// when `None`); `None` when it does not exist (or did not then).
pub fn read(
    conn: &Connection,
    house: HouseId,
    raw: &str,
    at: Option<i64>,
) -> Result<Option<FileRead>, StoreError> {
    let Some(current) = file(conn, house, raw)? else {
        return Ok(None);
    };
    let k = path::key(&current.path);
    let row: Option<(i64, String, i64, Option<i64>)> = conn
        .prepare_cached(
            "SELECT version, path, content, text_content FROM house_file_revisions
             WHERE house_id = ?1 AND path_key = ?2 AND version <= ?3 ORDER BY version DESC LIMIT 1",
        )?
        .query_row(params![house.to_string(), k, at.unwrap_or(i64::MAX)], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })
        .optional()?;
    let Some((version, path, content_id, text_id)) = row else {
        return Ok(None);
    };
    let bytes = content::get(conn, content_id)?;
    let text = match text_id {
        Some(t) => Some(String::from_utf8_lossy(&content::get(conn, t)?).into_owned()),
        None if current.kind == "document" => None,
        None => text_of(&bytes).map(str::to_string),
    };
    Ok(Some(FileRead {
        path,
        version,
        latest: current.version,
        kind: current.kind,
        bytes,
        text,
    }))
}

/// The versions of `house`'s files, newest first (only those touching
/// `path` when given), at most `limit`.
pub fn log(
    conn: &Connection,
    house: HouseId,
    path_filter: Option<&str>,
    limit: usize,
) -> Result<Vec<VersionInfo>, StoreError> {
    let key = path_filter
        .map(|p| path::normalize(p).map(|p| path::key(&p)))
        .transpose()
        .map_err(invalid)?;
    let mut stmt = conn.prepare_cached(
        "SELECT version, author, message, changes, created_at FROM house_file_versions v
         WHERE house_id = ?1 AND (?2 IS NULL OR EXISTS (
             SELECT 1 FROM json_each(v.changes) c WHERE lower(json_extract(c.value, '$.path')) = ?2))
         ORDER BY version DESC LIMIT ?3",
    )?;
    let rows = stmt.query_map(params![house.to_string(), key, limit as i64], |r| {
        Ok((
            r.get::<_, i64>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
            r.get::<_, String>(3)?,
            r.get::<_, String>(4)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (version, author, message, changes, at) = row?;
        out.push(VersionInfo {
            version,
            author,
            message,
            changes: serde_json::from_str(&changes).map_err(|e| StoreError::Codec {
                what: "file changes",
                detail: e.to_string(),
            })?,
            created_at: super::parse_time(&at)?,
        });
    }
    Ok(out)
}

/// Keyword search over the current text of `house`'s files, best first:
/// every word required, or, when that finds nothing, any word.
pub fn search(
    conn: &Connection,
    house: HouseId,
    query: &str,
    top_k: usize,
) -> Result<Vec<FileHit>, StoreError> {
    let words: Vec<String> = query
        .split_whitespace()
        .map(|w| format!("\"{}\"", w.replace('"', "\"\"")))
        .collect();
    if words.is_empty() {
        return Ok(Vec::new());
    }
    let mut stmt = conn.prepare_cached(
        "SELECT f.path, c.chunk, f.version, snippet(house_file_fts, 0, '[', ']', '…', 24)
         FROM house_file_fts JOIN house_file_chunks c ON c.id = house_file_fts.rowid
         JOIN house_files f ON f.house_id = c.house_id AND f.path_key = c.path_key
         WHERE house_file_fts MATCH ?1 AND c.house_id = ?2 ORDER BY rank LIMIT ?3",
    )?;
    let mut run = |q: String| -> Result<Vec<FileHit>, StoreError> {
        let rows = stmt.query_map(params![q, house.to_string(), top_k as i64], |r| {
            Ok(FileHit {
                path: r.get(0)?,
                chunk: r.get(1)?,
                version: r.get(2)?,
                snippet: r.get(3)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    };
    let hits = run(words.join(" "))?;
    if hits.is_empty() && words.len() > 1 {
        return run(words.join(" OR "));
    }
    Ok(hits)
}

#[cfg(test)]
#[path = "house_files_tests.rs"]
mod tests;
