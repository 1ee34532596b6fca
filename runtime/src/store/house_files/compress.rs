//! Compressing the pieces a write stored raw: the writer's idle work.
//!
//! LZ4 costs about 3 ms a mebibyte of text — most of a 1 MiB write's time
//! to committed when the write did it — and a write is as durable and as
//! readable without it. So a write stores its new pieces as they are, as
//! [`UNTRIED`] ([`super::content::put`]), and the store's writer has them
//! compressed afterwards, once no job has come for its idle wait
//! ([`crate::store::OpenOptions::index_when_idle`]), a step at a time while
//! no job comes: it reads a step's pieces ([`untried_step`]), another
//! thread compresses them ([`squeeze`], see `crate::store::squeezer`), and
//! a job of the writer's own stores them ([`store_squeezed`]) — so a job
//! that comes meanwhile waits for neither the LZ4 nor a step's whole
//! transaction. Each piece is rewritten whole by one `UPDATE` (as [`LZ4`],
//! or as [`RAW`] for good when LZ4 saves less than a tenth), so a crash
//! leaves every piece either untried or done, and the untried ones, found
//! by a partial index, are taken up at the next idle turn. Reads take all
//! three codecs ([`super::content::get`]). Dedup is by the hash of a
//! piece's bytes, whatever its codec, so it is unaffected; and a piece is
//! found again by that hash, so one removed or stored anew between its
//! step's read and its `UPDATE` is left as it is.

use rusqlite::{params, Connection, Transaction};

use super::pieces::{compress, LZ4, RAW, UNTRIED};
use crate::store::{Store, StoreError};

/// The most pieces compressed in one step of the writer's idle work.
const PIECES_PER_STEP: usize = 64;

/// A step ends once it holds this many bytes (about a millisecond of
/// LZ4, and a quarter of a millisecond of the writer's to store them).
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

/// A piece to compress: its hash and its bytes.
pub(crate) type Untried = (Vec<u8>, Vec<u8>);

/// A piece compressed: its hash, and its bytes as LZ4 (`None`: kept raw
/// for good).
pub(crate) type Squeezed = (Vec<u8>, Option<Vec<u8>>);

/// The next step's pieces, oldest first: at most [`PIECES_PER_STEP`], and
/// no more once they hold [`BYTES_PER_STEP`] bytes.
pub(crate) fn untried_step(conn: &Connection) -> Result<Vec<Untried>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT hash, data FROM file_pieces WHERE codec = 2 ORDER BY id LIMIT ?1",
    )?;
    let mut rows = stmt.query(params![PIECES_PER_STEP as i64])?;
    let (mut step, mut bytes) = (Vec::new(), 0);
    while bytes < BYTES_PER_STEP {
        let Some(row) = rows.next()? else { break };
        let piece: Untried = (row.get(0)?, row.get(1)?);
        bytes += piece.1.len();
        step.push(piece);
    }
    Ok(step)
}

/// Compresses a step's pieces (CPU only: LZ4 by [`compress`]'s rule).
pub(crate) fn squeeze(step: Vec<Untried>) -> Vec<Squeezed> {
    step.into_iter()
        .map(|(hash, data)| {
            let stored = compress(&data);
            (hash, stored)
        })
        .collect()
}

/// Stores a step's compressed pieces, each only if still untried.
pub(crate) fn store_squeezed(tx: &Transaction<'_>, step: &[Squeezed]) -> Result<(), StoreError> {
    let mut set_codec =
        tx.prepare_cached("UPDATE file_pieces SET codec = ?2 WHERE hash = ?1 AND codec = 2")?;
    let mut set_data = tx.prepare_cached(
        "UPDATE file_pieces SET codec = ?2, data = ?3 WHERE hash = ?1 AND codec = 2",
    )?;
    for (hash, stored) in step {
        match stored {
            Some(stored) => set_data.execute(params![hash, LZ4, stored])?,
            None => set_codec.execute(params![hash, RAW])?,
        };
    }
    Ok(())
}

/// Compresses every untried piece now, in one write: what the writer's
/// idle work would come to (the `files` benchmark measures the storage
/// of versions after it). On a read-only store it does nothing.
pub async fn settle(store: &Store) -> Result<(), StoreError> {
    if store.is_read_only() || !store.read(any_untried).await? {
        return Ok(());
    }
    store
        .write(|tx| loop {
            let step = untried_step(tx)?;
            if step.is_empty() {
                return Ok(());
            }
            store_squeezed(tx, &squeeze(step))?;
        })
        .await
}
