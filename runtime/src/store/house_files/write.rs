//! Writing and deleting a house's files: each call is one new version of
//! the house's files, whole or not at all.
//!
//! A write is in two steps. First its files are packed ([`pack`]), on
//! the caller's thread: each content cut into pieces and hashed
//! ([`super::pieces`]; compressed later, by the writer's idle work), and each text checked to be UTF-8 —
//! the work that does not need the database. Then the writer's job
//! ([`write()`]) does only what makes the version durable and readable: the
//! contents ([`content::put`]), a revision row per file, the current-file
//! rows and the version's record. Cutting a text into search chunks and
//! indexing them is left to [`super::index`], after the commit: the file is
//! `pending` until then. [`write_files`] does both steps.

use rusqlite::{params, Connection, OptionalExtension, Transaction};

use super::pieces::Packed;
use super::{content, invalid, path, text_of, Change, FileInfo, FileLimits, FileState};
use super::{Indexing, NewFile};
use crate::id::HouseId;
use crate::store::{Store, StoreError};

/// Writes of fewer bytes than this are packed on the calling (async)
/// thread; larger ones on a blocking thread.
const PACK_INLINE_BYTES: usize = 64 * 1024;

/// A file of a write, packed: its bytes cut and hashed, its
/// kind and search state decided ([`pack`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackedFile {
    path: String,
    size: u64,
    kind: &'static str,
    state: FileState,
    pub(crate) content: Packed,
    /// A document's converted text.
    text: Option<Packed>,
}

impl PackedFile {
    /// Packs one file. Blocking: about a millisecond a mebibyte.
    pub fn new(file: NewFile) -> Self {
        let (kind, state, text) = match &file.indexing {
            Indexing::Text if text_of(&file.bytes).is_some() => ("text", FileState::Pending, None),
            Indexing::Text | Indexing::Binary => ("binary", FileState::NotIndexable, None),
            Indexing::Document(Ok(t)) => (
                "document",
                FileState::Pending,
                Some(Packed::new(t.as_bytes())),
            ),
            Indexing::Document(Err(why)) => ("document", FileState::Failed(why.clone()), None),
        };
        Self {
            size: file.bytes.len() as u64,
            content: Packed::from_vec(file.bytes),
            path: file.path,
            kind,
            state,
            text,
        }
    }
}

/// Packs the files of a write (see [`PackedFile::new`]). Blocking.
pub fn pack(files: Vec<NewFile>) -> Vec<PackedFile> {
    files.into_iter().map(PackedFile::new).collect()
}

/// Writes `files` into `house` as ONE new version, by `author` with
/// `message`: packs them (off the async threads when they are large),
/// then queues the write ([`write()`]) and returns once it is committed.
/// A bad or repeated path or a file over the size limit is refused before
/// anything is packed.
pub async fn write_files(
    store: &Store,
    house: HouseId,
    author: &str,
    message: &str,
    files: Vec<NewFile>,
    limits: FileLimits,
) -> Result<(i64, Vec<FileInfo>), StoreError> {
    checked_paths(files.iter().map(|f| (&f.path[..], f.bytes.len())), limits)?;
    let bytes: usize = files.iter().map(|f| f.bytes.len()).sum();
    let packed = if bytes < PACK_INLINE_BYTES {
        pack(files)
    } else {
        tokio::task::spawn_blocking(move || pack(files))
            .await
            .map_err(|e| StoreError::Panicked(format!("packing the files failed: {e}")))?
    };
    let (author, message) = (author.to_string(), message.to_string());
    store
        .write(move |tx| write(tx, house, &author, &message, &packed, limits))
        .await
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

/// The normalized path and key of each file, or the refusal of the whole
/// call: a bad or repeated path, a file over the size limit.
fn checked_paths<'a>(
    files: impl ExactSizeIterator<Item = (&'a str, usize)>,
    limits: FileLimits,
) -> Result<Vec<(String, String)>, StoreError> {
    if files.len() == 0 {
        return Err(invalid(
            "no files to write: give at least one path and its content.",
        ));
    }
    let mut paths: Vec<(String, String)> = Vec::with_capacity(files.len());
    for (raw, size) in files {
        let p = path::normalize(raw).map_err(invalid)?;
        let k = path::key(&p);
        if paths.iter().any(|(_, seen)| *seen == k) {
            return Err(invalid(format!(
                "`{p}` appears twice in one write (paths compare without case); nothing was written. Give each file once."
            )));
        }
        let size = size as u64;
        if size > limits.max_file_bytes {
            return Err(invalid(format!(
                "`{p}` is {size} bytes, over the limit of {} bytes per file ([files] max_file_bytes); nothing was written. Split it, or raise the limit.",
                limits.max_file_bytes
            )));
        }
        paths.push((p, k));
    }
    Ok(paths)
}

/// The bytes of `house_id`'s current files, as its usage row keeps them.
fn usage(tx: &Transaction<'_>, house_id: &str) -> Result<i64, StoreError> {
    Ok(tx
        .prepare_cached("SELECT bytes FROM house_file_usage WHERE house_id = ?1")?
        .query_row(params![house_id], |r| r.get(0))
        .optional()?
        .unwrap_or(0))
}

/// Records `bytes` as the size of `house_id`'s current files.
fn set_usage(tx: &Transaction<'_>, house_id: &str, bytes: i64) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT INTO house_file_usage (house_id, bytes) VALUES (?1, ?2)
         ON CONFLICT (house_id) DO UPDATE SET bytes = excluded.bytes",
    )?
    .execute(params![house_id, bytes])?;
    Ok(())
}

/// The bytes of the house's current files once `files` are written, or
/// the refusal of a write that would bring the house over its quota.
fn check_quota(
    tx: &Transaction<'_>,
    house_id: &str,
    paths: &[(String, String)],
    files: &[PackedFile],
    limits: FileLimits,
) -> Result<i64, StoreError> {
    let mut total = usage(tx, house_id)?;
    for ((_, k), f) in paths.iter().zip(files) {
        let old: Option<i64> = tx
            .prepare_cached("SELECT size FROM house_files WHERE house_id = ?1 AND path_key = ?2")?
            .query_row(params![house_id, k], |r| r.get(0))
            .optional()?;
        total += f.size as i64 - old.unwrap_or(0);
    }
    if total as u64 > limits.house_quota_bytes {
        return Err(invalid(format!(
            "this write would bring the house's files to {total} bytes, over its quota of {} bytes ([files] house_quota_bytes); nothing was written. Delete files with delete_file, or raise the quota.",
            limits.house_quota_bytes
        )));
    }
    Ok(total)
}

/// Writes the packed `files` into `house` as ONE new version, by `author`
/// with `message`; returns the version and the files as they now are. Refuses
/// the whole call (nothing written) on a bad or repeated path, a file over
/// the size limit, or a house over its quota.
///
/// Text files and documents with text come out `pending`: the store's
/// writer indexes them right after this commits ([`super::index`]).
pub fn write(
    tx: &Transaction<'_>,
    house: HouseId,
    author: &str,
    message: &str,
    files: &[PackedFile],
    limits: FileLimits,
) -> Result<(i64, Vec<FileInfo>), StoreError> {
    let paths = checked_paths(files.iter().map(|f| (&f.path[..], f.size as usize)), limits)?;
    let house_id = house.to_string();
    let total = check_quota(tx, &house_id, &paths, files, limits)?;
    set_usage(tx, &house_id, total)?;
    let version = latest_version(tx, house)? + 1;
    let now = crate::store::now();
    let updated_at = crate::store::parse_time(&now)?;
    let mut changes = Vec::with_capacity(files.len());
    let mut written = Vec::with_capacity(files.len());
    for ((p, k), f) in paths.iter().zip(files) {
        let content = content::put(tx, &f.content)?;
        let text_content = f.text.as_ref().map(|t| content::put(tx, t)).transpose()?;
        let (kind, state) = (f.kind, f.state.clone());
        tx.prepare_cached(
            "INSERT INTO house_file_revisions (house_id, path_key, version, path, content, text_content)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )?
        .execute(params![house_id, k, version, p, content, text_content])?;
        let (state_name, detail) = state.stored();
        tx.prepare_cached(
            "INSERT INTO house_files (house_id, path_key, path, version, size, kind, state, state_detail, author, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
             ON CONFLICT (house_id, path_key) DO UPDATE SET path = excluded.path,
                 version = excluded.version, size = excluded.size, kind = excluded.kind,
                 state = excluded.state, state_detail = excluded.state_detail,
                 author = excluded.author, updated_at = excluded.updated_at",
        )?
        .execute(params![
            house_id, k, p, version, f.size as i64, kind, state_name, detail, author, now
        ])?;
        if state != FileState::Pending {
            // Nothing of this version is searchable: the last one's chunks go now.
            super::index::forget(tx, &house_id, k)?;
        }
        changes.push(Change {
            path: p.clone(),
            action: "write".into(),
        });
        written.push(FileInfo {
            path: p.clone(),
            version,
            size: f.size,
            kind: kind.into(),
            state,
            author: author.into(),
            updated_at,
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
    let mut missing = false;
    for (raw, seen) in files {
        let p = path::normalize(raw).map_err(invalid)?;
        let k = path::key(&p);
        let current: Option<(String, i64, i64)> = tx
            .prepare_cached(
                "SELECT path, version, size FROM house_files WHERE house_id = ?1 AND path_key = ?2",
            )?
            .query_row(params![house_id, k], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .optional()?;
        match current {
            None => {
                missing = true;
                problems.push(format!("`{p}` does not exist"))
            }
            Some((p, v, _)) if v != *seen => problems.push(format!(
                "`{p}` changed since version {seen} (it is now version {v})"
            )),
            Some((p, _, size)) if !found.iter().any(|(_, seen_key, _)| *seen_key == k) => {
                found.push((p, k, size))
            }
            Some(_) => {}
        }
    }
    if !problems.is_empty() {
        let text = format!(
            "nothing was deleted: {}. Read the files again (list_files shows their versions) and retry with the versions you saw.",
            problems.join("; ")
        );
        // Only versions that moved: the files changed since they were read.
        return Err(if missing {
            invalid(text)
        } else {
            StoreError::Conflict(text)
        });
    }
    let version = latest_version(tx, house)? + 1;
    let now = crate::store::now();
    let freed: i64 = found.iter().map(|(_, _, size)| size).sum();
    set_usage(tx, &house_id, usage(tx, &house_id)? - freed)?;
    let mut changes = Vec::with_capacity(found.len());
    for (p, k, _) in found {
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
        super::index::forget(tx, &house_id, &k)?;
        for sql in [
            "DELETE FROM house_file_revisions WHERE house_id = ?1 AND path_key = ?2",
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
