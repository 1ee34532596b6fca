//! Reading a house's files: the current list, one file at any version,
//! the log of versions.

use chrono::{DateTime, Utc};
use rusqlite::{params, Connection, OptionalExtension};

use super::{content, invalid, path, text_of, FileInfo, FileRead, FileState, VersionInfo};
use crate::id::HouseId;
use crate::store::StoreError;

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
        updated_at: crate::store::parse_time(&at)?,
    })
}

const SELECT_FILE: &str =
    "SELECT path, version, size, kind, state, state_detail, author, updated_at FROM house_files";

/// The current files of `house` (under `folder` when given), by path.
///
/// One range scan of the current-file table's key (house, path key), and
/// per row only what the listing shows. The files of one write share their
/// `updated_at`, so a listing parses each distinct time once.
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
    let mut rows = stmt.query(params![house.to_string(), low, high])?;
    let mut out = Vec::new();
    let mut last_time: Option<(String, DateTime<Utc>)> = None;
    while let Some(r) = rows.next()? {
        let text = |i: usize| -> Result<&str, StoreError> {
            Ok(r.get_ref(i)?.as_str().map_err(rusqlite::Error::from)?)
        };
        let at = text(7)?;
        let updated_at = match &last_time {
            Some((seen, parsed)) if seen == at => *parsed,
            _ => {
                let parsed = crate::store::parse_time(at)?;
                last_time = Some((at.to_string(), parsed));
                parsed
            }
        };
        let state = match text(4)? {
            "failed" => FileState::Failed(text(5)?.to_string()),
            other => FileState::parse(other, String::new()),
        };
        out.push(FileInfo {
            path: text(0)?.to_string(),
            version: r.get(1)?,
            size: r.get::<_, i64>(2)? as u64,
            kind: text(3)?.to_string(),
            state,
            author: text(6)?.to_string(),
            updated_at,
        });
    }
    Ok(out)
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
///
/// # Errors
///
/// [`StoreError::Invalid`] for a version past the house's newest, naming it.
pub fn read(
    conn: &Connection,
    house: HouseId,
    raw: &str,
    at: Option<i64>,
) -> Result<Option<FileRead>, StoreError> {
    if let Some(asked) = at {
        let newest = super::latest_version(conn, house)?;
        if asked > newest {
            return Err(invalid(format!(
                "there is no version {asked} of the house's files yet: the newest is {newest}"
            )));
        }
    }
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
            created_at: crate::store::parse_time(&at)?,
        });
    }
    Ok(out)
}
