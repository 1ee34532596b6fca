//! The search index of a house's files: chunks of text in FTS5, built
//! after the write that made them.
//!
//! Tokenizing a file for FTS5 costs several times what storing it does (a
//! 1 MiB text: most of the write's time when it was done inside it), and
//! nothing about a version's atomicity needs it. So a write leaves its text
//! files `pending` ([`super::write()`]), and indexing happens here, each
//! file in transactions of its own:
//!
//! - the store's writer runs [`index_some`] between batches while files
//!   are pending — right after the write commits, at open (what a crash
//!   left pending) and at close — a bounded number of chunks at a time, so
//!   a large file never holds other writes up for long;
//! - a search first indexes what its own house has pending ([`catch_up`]),
//!   so it sees every committed write.
//!
//! A chunk row keeps the version it was cut from: until a newer version is
//! indexed, the older one's chunks stay searchable and are cited with their
//! own version, which `read_file` opens. Indexing a file is resumable: its
//! older chunks go first, then its chunks are added in order, and the file
//! becomes `indexed` with the last one.

use rusqlite::{params, Connection, OptionalExtension, Transaction};

use super::{content, text_of, FileHit};
use crate::id::HouseId;
use crate::store::{Store, StoreError};

/// The size of a search chunk, in characters (cut at a line end when one
/// is near).
pub const CHUNK_CHARS: usize = 2000;

/// The most chunks the writer indexes in one transaction of its own
/// (about 1 MiB of text).
pub(crate) const CHUNKS_PER_STEP: usize = 512;

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

/// Removes every chunk of the file `path_key` from the index.
pub(crate) fn forget(
    tx: &Transaction<'_>,
    house_id: &str,
    path_key: &str,
) -> Result<(), StoreError> {
    tx.prepare_cached("DELETE FROM house_file_chunks WHERE house_id = ?1 AND path_key = ?2")?
        .execute(params![house_id, path_key])?;
    Ok(())
}

/// Whether any file of any house waits to be indexed.
pub fn any_pending(conn: &Connection) -> Result<bool, StoreError> {
    Ok(conn
        .prepare_cached(&format!("SELECT {ANY_PENDING}"))?
        .query_row([], |r| r.get(0))?)
}

/// [`any_pending`] as an expression.
pub(crate) const ANY_PENDING: &str = "EXISTS (SELECT 1 FROM house_files WHERE state = 'pending')";

/// Whether a file of `house` waits to be indexed.
pub fn pending_in(conn: &Connection, house: HouseId) -> Result<bool, StoreError> {
    Ok(conn
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM house_files WHERE house_id = ?1 AND state = 'pending')",
        )?
        .query_row(params![house.to_string()], |r| r.get(0))?)
}

/// One pending file: its house, key and the version to index.
type Pending = (String, String, i64);

fn pending(
    tx: &Transaction<'_>,
    house: Option<&str>,
    limit: usize,
) -> Result<Vec<Pending>, StoreError> {
    let mut stmt = tx.prepare_cached(
        "SELECT house_id, path_key, version FROM house_files
         WHERE state = 'pending' AND (?1 IS NULL OR house_id = ?1) LIMIT ?2",
    )?;
    let rows = stmt.query_map(params![house, limit as i64], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?))
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The text of the file `path_key` at exactly `version`, if it has any.
fn text_at(
    tx: &Transaction<'_>,
    house_id: &str,
    path_key: &str,
    version: i64,
) -> Result<Option<String>, StoreError> {
    let row: Option<(i64, Option<i64>)> = tx
        .prepare_cached(
            "SELECT content, text_content FROM house_file_revisions
             WHERE house_id = ?1 AND path_key = ?2 AND version = ?3",
        )?
        .query_row(params![house_id, path_key, version], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()?;
    Ok(match row {
        None => None,
        Some((_, Some(text))) => {
            Some(String::from_utf8_lossy(&content::get(tx, text)?).into_owned())
        }
        Some((bytes, None)) => {
            let bytes = content::get(tx, bytes)?;
            text_of(&bytes).map(str::to_string)
        }
    })
}

/// Indexes up to `budget` more chunks of one pending file; returns how
/// many it added. The file is `indexed` once its last chunk is in.
fn index_file(
    tx: &Transaction<'_>,
    (house_id, path_key, version): &Pending,
    budget: usize,
) -> Result<usize, StoreError> {
    let Some(text) = text_at(tx, house_id, path_key, *version)? else {
        tx.prepare_cached(
            "UPDATE house_files SET state = 'failed', state_detail = 'its text was not found'
             WHERE house_id = ?1 AND path_key = ?2 AND version = ?3",
        )?
        .execute(params![house_id, path_key, version])?;
        return Ok(0);
    };
    tx.prepare_cached(
        "DELETE FROM house_file_chunks WHERE house_id = ?1 AND path_key = ?2 AND version != ?3",
    )?
    .execute(params![house_id, path_key, version])?;
    let done: i64 = tx
        .prepare_cached(
            "SELECT COALESCE(MAX(chunk), 0) FROM house_file_chunks WHERE house_id = ?1 AND path_key = ?2",
        )?
        .query_row(params![house_id, path_key], |r| r.get(0))?;
    let all = chunks(&text);
    let from = usize::try_from(done).unwrap_or(0).min(all.len());
    let to = all.len().min(from + budget.max(1));
    let mut insert = tx.prepare_cached(
        "INSERT INTO house_file_chunks (house_id, path_key, version, chunk, text) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?;
    for (i, (_, chunk)) in all.iter().enumerate().take(to).skip(from) {
        insert.execute(params![house_id, path_key, version, i as i64 + 1, chunk])?;
    }
    // Into FTS5 in one statement: FTS5 flushes what it holds to a new
    // segment (and merges) at every statement that writes to it, which a
    // trigger per chunk made several times the cost of tokenizing.
    tx.prepare_cached(
        "INSERT INTO house_file_fts (rowid, text) SELECT id, text FROM house_file_chunks
         WHERE house_id = ?1 AND path_key = ?2 AND version = ?3 AND chunk > ?4",
    )?
    .execute(params![house_id, path_key, version, from as i64])?;
    if to == all.len() {
        tx.prepare_cached(
            "UPDATE house_files SET state = 'indexed', state_detail = ''
             WHERE house_id = ?1 AND path_key = ?2 AND version = ?3 AND state = 'pending'",
        )?
        .execute(params![house_id, path_key, version])?;
    }
    Ok(to - from)
}

/// Indexes pending files, about `max_chunks` chunks' worth (at least one
/// step of one file); returns whether files are still pending. The
/// writer's background work, each call in a transaction of its own.
pub(crate) fn index_some(tx: &Transaction<'_>, max_chunks: usize) -> Result<bool, StoreError> {
    let mut left = max_chunks.max(1);
    for file in pending(tx, None, 16)? {
        let added = index_file(tx, &file, left)?;
        left = left.saturating_sub(added.max(1));
        if left == 0 {
            break;
        }
    }
    any_pending(tx)
}

/// Indexes every pending file of `house` (all of each).
pub fn index_house(tx: &Transaction<'_>, house: HouseId) -> Result<(), StoreError> {
    let house_id = house.to_string();
    for file in pending(tx, Some(&house_id), usize::MAX >> 1)? {
        index_file(tx, &file, usize::MAX >> 1)?;
    }
    Ok(())
}

/// Indexes every pending file of every house (at close).
pub fn index_all(tx: &Transaction<'_>) -> Result<(), StoreError> {
    for file in pending(tx, None, usize::MAX >> 1)? {
        index_file(tx, &file, usize::MAX >> 1)?;
    }
    Ok(())
}

/// Makes every committed file of `house` searchable before a search: one
/// read when nothing is pending, else a write that indexes the rest. On a
/// read-only store it does nothing (the writing process indexes).
pub async fn catch_up(store: &Store, house: HouseId) -> Result<(), StoreError> {
    if store.is_read_only() || !store.read(move |c| pending_in(c, house)).await? {
        return Ok(());
    }
    store.write(move |tx| index_house(tx, house)).await
}

/// Makes every committed file of every house searchable: at a node's
/// shutdown, so that the next process, or a read-only reader of the file
/// such as `troupe files search`, finds them indexed.
pub async fn catch_up_all(store: &Store) -> Result<(), StoreError> {
    if store.is_read_only() || !store.read(any_pending).await? {
        return Ok(());
    }
    store.write(index_all).await
}

/// Keyword search over the indexed text of `house`'s files, best first:
/// every word required, or, when that finds nothing, any word. Call
/// [`catch_up`] first to include what is still pending.
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
        "SELECT f.path, c.chunk, c.version, snippet(house_file_fts, 0, '[', ']', '…', 24)
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
