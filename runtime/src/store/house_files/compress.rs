//! Compressing the pieces a write stored raw: the writer's idle work.
//!
//! LZ4 costs about 3 ms a mebibyte of text — most of a 1 MiB write's time
//! to committed when the write did it — and a write is as durable and as
//! readable without it. So a write stores its new pieces as they are, as
//! [`UNTRIED`] ([`super::content::put`]), and the store's writer compresses
//! them afterwards, once no job has come for its idle wait
//! ([`crate::store::OpenOptions::index_when_idle`]), a step of
//! [`PIECES_PER_STEP`] pieces in a transaction of its own while no job
//! comes. Each piece is rewritten whole by one `UPDATE` (as [`LZ4`], or as
//! [`RAW`] for good when LZ4 saves less than a tenth), so a crash leaves
//! every piece either untried or done, and the untried ones, found by a
//! partial index, are taken up at the next idle turn. Reads take all
//! three codecs ([`super::content::get`]). Dedup is by the hash of a
//! piece's bytes, whatever its codec, so it is unaffected.

use rusqlite::{params, Connection, Transaction};

use super::pieces::{compress, LZ4, RAW, UNTRIED};
use crate::store::{Store, StoreError};

/// The most pieces compressed in one step of the writer's idle work.
pub(crate) const PIECES_PER_STEP: usize = 64;

/// A step ends once it has compressed this many bytes (under a millisecond
/// of LZ4), so a job that comes meanwhile waits little whatever the
/// pieces' grain.
const BYTES_PER_STEP: usize = 256 * 1024;

// The statements name codec 2 ([`UNTRIED`]) as a literal: SQLite uses the
// partial index `file_pieces_untried` only for a term it can match to its
// own, not for a bound parameter.
const _: () = assert!(UNTRIED == 2);

/// Whether any piece waits to be compressed.
pub fn any_untried(conn: &Connection) -> Result<bool, StoreError> {
    Ok(conn
        .prepare_cached(&format!("SELECT {ANY_UNTRIED}"))?
        .query_row([], |r| r.get(0))?)
}

/// [`any_untried`] as an expression.
pub(crate) const ANY_UNTRIED: &str = "EXISTS (SELECT 1 FROM file_pieces WHERE codec = 2)";

/// Compresses up to `max` untried pieces, oldest first; returns whether
/// more wait.
pub(crate) fn compress_some(tx: &Transaction<'_>, max: usize) -> Result<bool, StoreError> {
    let untried: Vec<(i64, Vec<u8>)> = tx
        .prepare_cached("SELECT id, data FROM file_pieces WHERE codec = 2 ORDER BY id LIMIT ?1")?
        .query_map(params![max as i64], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    let mut set_codec = tx.prepare_cached("UPDATE file_pieces SET codec = ?2 WHERE id = ?1")?;
    let mut set_data =
        tx.prepare_cached("UPDATE file_pieces SET codec = ?2, data = ?3 WHERE id = ?1")?;
    let mut bytes = 0;
    for (id, data) in &untried {
        match compress(data) {
            Some(stored) => set_data.execute(params![id, LZ4, stored])?,
            None => set_codec.execute(params![id, RAW])?,
        };
        bytes += data.len();
        if bytes >= BYTES_PER_STEP {
            return any_untried(tx);
        }
    }
    if untried.len() < max {
        return Ok(false);
    }
    any_untried(tx)
}

/// Compresses every untried piece now, in one write: what the writer's
/// idle work would come to (the `files` benchmark measures the storage
/// of versions after it). On a read-only store it does nothing.
pub async fn settle(store: &Store) -> Result<(), StoreError> {
    if store.is_read_only() || !store.read(any_untried).await? {
        return Ok(());
    }
    store
        .write(|tx| {
            while compress_some(tx, PIECES_PER_STEP)? {}
            Ok(())
        })
        .await
}
