//! Deduplicated contents: a file's bytes cut into content-defined pieces,
//! each piece stored once per home, keyed by its SHA-256.
//!
//! A content is cut where a rolling (gear) hash of the last bytes hits a
//! pattern, so an edit moves the cuts only around itself: a version of a
//! 100 KiB file with one line changed shares all its pieces but one or two
//! with the previous version. Pieces average about [`AVG_PIECE`] bytes
//! (at least [`MIN_PIECE`], at most [`MAX_PIECE`]). A content row holds the
//! whole file's hash (identical files share one row), its size and its
//! pieces' ids packed as 8-byte integers. Pieces and contents are counted
//! by reference and removed when nothing refers to them any more, which is
//! what makes `delete_file` irreversible.

use rusqlite::{params, Connection, OptionalExtension, Transaction};
use sha2::{Digest, Sha256};

use crate::store::StoreError;

/// The least piece, in bytes (but the last).
pub const MIN_PIECE: usize = 256;
/// The average piece, in bytes.
pub const AVG_PIECE: usize = 1024;
/// The largest piece, in bytes.
pub const MAX_PIECE: usize = 8192;

const MASK: u64 = (AVG_PIECE as u64 - 1) << 48;

/// The gear table: 256 pseudo-random words, the same in every build.
fn gear() -> &'static [u64; 256] {
    static GEAR: std::sync::OnceLock<[u64; 256]> = std::sync::OnceLock::new();
    GEAR.get_or_init(|| {
        let mut table = [0u64; 256];
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        for slot in &mut table {
            // splitmix64
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            *slot = z ^ (z >> 31);
        }
        table
    })
}

/// Where `bytes` is cut into pieces: the end of each piece.
pub fn cuts(bytes: &[u8]) -> Vec<usize> {
    let gear = gear();
    let mut ends = Vec::with_capacity(bytes.len() / AVG_PIECE + 1);
    let (mut start, mut hash) = (0usize, 0u64);
    for (i, &b) in bytes.iter().enumerate() {
        hash = (hash << 1).wrapping_add(gear[b as usize]);
        let len = i + 1 - start;
        if (len >= MIN_PIECE && hash & MASK == 0) || len >= MAX_PIECE {
            ends.push(i + 1);
            start = i + 1;
            hash = 0;
        }
    }
    if start < bytes.len() {
        ends.push(bytes.len());
    }
    ends
}

/// The SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// Stores `bytes` (once: an identical content is found by its hash) and
/// returns its content id. Each new reference is counted.
pub fn put(tx: &Transaction<'_>, bytes: &[u8]) -> Result<i64, StoreError> {
    let hash = sha256(bytes);
    let found: Option<i64> = tx
        .prepare_cached("SELECT id FROM file_contents WHERE hash = ?1")?
        .query_row(params![&hash[..]], |r| r.get(0))
        .optional()?;
    if let Some(id) = found {
        tx.prepare_cached("UPDATE file_contents SET refs = refs + 1 WHERE id = ?1")?
            .execute(params![id])?;
        return Ok(id);
    }
    let mut packed = Vec::new();
    let mut start = 0;
    for end in cuts(bytes) {
        let piece = &bytes[start..end];
        start = end;
        let piece_hash = sha256(piece);
        let id: Option<i64> = tx
            .prepare_cached("SELECT id FROM file_pieces WHERE hash = ?1")?
            .query_row(params![&piece_hash[..]], |r| r.get(0))
            .optional()?;
        let id = match id {
            Some(id) => {
                tx.prepare_cached("UPDATE file_pieces SET refs = refs + 1 WHERE id = ?1")?
                    .execute(params![id])?;
                id
            }
            None => {
                tx.prepare_cached("INSERT INTO file_pieces (hash, refs, data) VALUES (?1, 1, ?2)")?
                    .execute(params![&piece_hash[..], piece])?;
                tx.last_insert_rowid()
            }
        };
        packed.extend_from_slice(&id.to_le_bytes());
    }
    tx.prepare_cached(
        "INSERT INTO file_contents (hash, size, refs, pieces) VALUES (?1, ?2, 1, ?3)",
    )?
    .execute(params![&hash[..], bytes.len() as i64, packed])?;
    Ok(tx.last_insert_rowid())
}

fn piece_ids(packed: &[u8]) -> impl Iterator<Item = i64> + '_ {
    packed
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
}

/// The bytes of content `id`.
pub fn get(conn: &Connection, id: i64) -> Result<Vec<u8>, StoreError> {
    let (size, packed): (i64, Vec<u8>) = conn
        .prepare_cached("SELECT size, pieces FROM file_contents WHERE id = ?1")?
        .query_row(params![id], |r| Ok((r.get(0)?, r.get(1)?)))?;
    let mut out = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    let mut stmt = conn.prepare_cached("SELECT data FROM file_pieces WHERE id = ?1")?;
    for piece in piece_ids(&packed) {
        let data: Vec<u8> = stmt.query_row(params![piece], |r| r.get(0))?;
        out.extend_from_slice(&data);
    }
    Ok(out)
}

/// Drops one reference to content `id`; the content and the pieces only it
/// held go when the last reference does.
pub fn release(tx: &Transaction<'_>, id: i64) -> Result<(), StoreError> {
    let (refs, packed): (i64, Vec<u8>) = tx
        .prepare_cached("SELECT refs, pieces FROM file_contents WHERE id = ?1")?
        .query_row(params![id], |r| Ok((r.get(0)?, r.get(1)?)))?;
    if refs > 1 {
        tx.prepare_cached("UPDATE file_contents SET refs = refs - 1 WHERE id = ?1")?
            .execute(params![id])?;
        return Ok(());
    }
    tx.prepare_cached("DELETE FROM file_contents WHERE id = ?1")?
        .execute(params![id])?;
    for piece in piece_ids(&packed) {
        tx.prepare_cached("UPDATE file_pieces SET refs = refs - 1 WHERE id = ?1")?
            .execute(params![piece])?;
        tx.prepare_cached("DELETE FROM file_pieces WHERE id = ?1 AND refs <= 0")?
            .execute(params![piece])?;
    }
    Ok(())
}
