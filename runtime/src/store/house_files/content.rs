//! Deduplicated contents: a file's bytes cut into content-defined pieces,
//! each piece stored once per home, keyed by its SHA-256.
//!
//! A content is cut where a rolling (gear) hash of the last bytes hits a
//! pattern, so an edit moves the cuts only around itself: a version of a
//! 100 KiB file with one line changed shares all its pieces but one or two
//! with the previous version. Pieces average about [`AVG_PIECE`] bytes
//! (at least [`MIN_PIECE`], at most [`MAX_PIECE`]). A new piece is stored
//! LZ4-compressed when that saves a tenth or more (codec 1; LZ4 because it
//! compresses a mebibyte in a few milliseconds and reads back faster
//! still, where deflate took tens). A content row holds the file's hash —
//! of its size and its pieces' hashes, so the bytes are hashed once;
//! identical files share one row — its size and its pieces' ids, each
//! written as the varint of its difference from the one before (format 1:
//! a new file's pieces are consecutive rows, one byte each). Rows of
//! migration 6 keep codec 0 (raw) and format 0 (8-byte ids) and read as
//! they were. Pieces and contents are counted by reference and removed
//! when nothing refers to them any more, which is what makes `delete_file`
//! irreversible.

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

/// A content's hash: the SHA-256 of its size and its pieces' hashes, so
/// the bytes are hashed once (identical bytes cut identically, so they
/// share it). Contents of migration 6 were keyed by the SHA-256 of their
/// bytes: an identical file written again is stored again, once.
fn content_hash(size: usize, pieces: &[[u8; 32]]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update((size as u64).to_le_bytes());
    for p in pieces {
        h.update(p);
    }
    h.finalize().into()
}

/// How a piece's bytes are stored: as they are.
const RAW: i64 = 0;
/// How a piece's bytes are stored: LZ4 block, its size first.
const LZ4: i64 = 1;

/// A piece list of 8-byte little-endian ids (migration 6).
const IDS_FIXED: i64 = 0;
/// A piece list of zigzag varint differences.
const IDS_DELTA: i64 = 1;

/// Stores `bytes` (once: an identical content is found by its hash) and
/// returns its content id. Each new reference is counted.
pub fn put(tx: &Transaction<'_>, bytes: &[u8]) -> Result<i64, StoreError> {
    let ends = cuts(bytes);
    let mut hashes = Vec::with_capacity(ends.len());
    let mut start = 0;
    for &end in &ends {
        hashes.push(sha256(&bytes[start..end]));
        start = end;
    }
    let hash = content_hash(bytes.len(), &hashes);
    let found: Option<i64> = tx
        .prepare_cached("UPDATE file_contents SET refs = refs + 1 WHERE hash = ?1 RETURNING id")?
        .query_row(params![&hash[..]], |r| r.get(0))
        .optional()?;
    if let Some(id) = found {
        return Ok(id);
    }
    let mut packed = Vec::with_capacity(bytes.len() / AVG_PIECE + 8);
    let mut previous = 0i64;
    let mut start = 0;
    let mut known =
        tx.prepare_cached("UPDATE file_pieces SET refs = refs + 1 WHERE hash = ?1 RETURNING id")?;
    let mut insert = tx.prepare_cached(
        "INSERT INTO file_pieces (hash, refs, codec, data) VALUES (?1, 1, ?2, ?3)",
    )?;
    for (&end, piece_hash) in ends.iter().zip(&hashes) {
        let piece = &bytes[start..end];
        start = end;
        let id = match known
            .query_row(params![&piece_hash[..]], |r| r.get(0))
            .optional()?
        {
            Some(id) => id,
            None => {
                let compressed = lz4_flex::compress_prepend_size(piece);
                if compressed.len() < piece.len() - piece.len() / 10 {
                    insert.execute(params![&piece_hash[..], LZ4, compressed])?;
                } else {
                    insert.execute(params![&piece_hash[..], RAW, piece])?;
                }
                tx.last_insert_rowid()
            }
        };
        push_varint(&mut packed, zigzag(id.wrapping_sub(previous)));
        previous = id;
    }
    tx.prepare_cached(
        "INSERT INTO file_contents (hash, size, refs, pieces, format) VALUES (?1, ?2, 1, ?3, ?4)",
    )?
    .execute(params![&hash[..], bytes.len() as i64, packed, IDS_DELTA])?;
    Ok(tx.last_insert_rowid())
}

fn zigzag(n: i64) -> u64 {
    ((n << 1) ^ (n >> 63)) as u64
}

fn unzigzag(n: u64) -> i64 {
    ((n >> 1) as i64) ^ -((n & 1) as i64)
}

fn push_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// The piece ids of a content's list, written in `format`.
fn piece_ids(packed: &[u8], format: i64) -> Result<Vec<i64>, StoreError> {
    let damaged = |detail: &str| StoreError::Codec {
        what: "file content's piece list",
        detail: detail.to_string(),
    };
    if format == IDS_FIXED {
        if !packed.len().is_multiple_of(8) {
            return Err(damaged("its length is not a multiple of 8"));
        }
        return Ok(packed
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
            .collect());
    }
    if format != IDS_DELTA {
        return Err(damaged(&format!("unknown format {format}")));
    }
    let mut ids = Vec::with_capacity(packed.len());
    let (mut previous, mut n, mut shift) = (0i64, 0u64, 0u32);
    for &b in packed {
        if shift > 63 {
            return Err(damaged("a varint runs past 64 bits"));
        }
        n |= u64::from(b & 0x7F) << shift;
        if b & 0x80 == 0 {
            previous = previous.wrapping_add(unzigzag(n));
            ids.push(previous);
            (n, shift) = (0, 0);
        } else {
            shift += 7;
        }
    }
    if shift != 0 {
        return Err(damaged("it ends inside a varint"));
    }
    Ok(ids)
}

/// The bytes of content `id`.
pub fn get(conn: &Connection, id: i64) -> Result<Vec<u8>, StoreError> {
    let (size, packed, format): (i64, Vec<u8>, i64) = conn
        .prepare_cached("SELECT size, pieces, format FROM file_contents WHERE id = ?1")?
        .query_row(params![id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    let mut out = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    let mut stmt = conn.prepare_cached("SELECT codec, data FROM file_pieces WHERE id = ?1")?;
    for piece in piece_ids(&packed, format)? {
        let mut rows = stmt.query(params![piece])?;
        let row = rows.next()?.ok_or(rusqlite::Error::QueryReturnedNoRows)?;
        let codec: i64 = row.get(0)?;
        let data = row.get_ref(1)?.as_blob().map_err(rusqlite::Error::from)?;
        match codec {
            RAW => out.extend_from_slice(data),
            LZ4 => {
                out.extend_from_slice(&lz4_flex::decompress_size_prepended(data).map_err(|e| {
                    StoreError::Codec {
                        what: "file piece",
                        detail: e.to_string(),
                    }
                })?)
            }
            other => {
                return Err(StoreError::Codec {
                    what: "file piece",
                    detail: format!("unknown codec {other}"),
                })
            }
        }
    }
    Ok(out)
}

/// Drops one reference to content `id`; the content and the pieces only it
/// held go when the last reference does.
pub fn release(tx: &Transaction<'_>, id: i64) -> Result<(), StoreError> {
    let (refs, packed, format): (i64, Vec<u8>, i64) = tx
        .prepare_cached("SELECT refs, pieces, format FROM file_contents WHERE id = ?1")?
        .query_row(params![id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    if refs > 1 {
        tx.prepare_cached("UPDATE file_contents SET refs = refs - 1 WHERE id = ?1")?
            .execute(params![id])?;
        return Ok(());
    }
    tx.prepare_cached("DELETE FROM file_contents WHERE id = ?1")?
        .execute(params![id])?;
    for piece in piece_ids(&packed, format)? {
        tx.prepare_cached("UPDATE file_pieces SET refs = refs - 1 WHERE id = ?1")?
            .execute(params![piece])?;
        tx.prepare_cached("DELETE FROM file_pieces WHERE id = ?1 AND refs <= 0")?
            .execute(params![piece])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn piece_lists_read_back_in_both_formats() {
        let ids = vec![1, 2, 3, 40, 7, i64::MAX, 0, 5];
        let mut packed = Vec::new();
        let mut previous = 0i64;
        for id in &ids {
            push_varint(&mut packed, zigzag(id.wrapping_sub(previous)));
            previous = *id;
        }
        assert_eq!(piece_ids(&packed, IDS_DELTA).unwrap(), ids);
        let fixed: Vec<u8> = ids.iter().flat_map(|id| id.to_le_bytes()).collect();
        assert_eq!(piece_ids(&fixed, IDS_FIXED).unwrap(), ids);
        assert!(
            piece_ids(&[0x80], IDS_DELTA).is_err(),
            "cut inside a varint"
        );
        assert!(piece_ids(&[0xFF; 11], IDS_DELTA).is_err(), "over 64 bits");
    }
}
