//! Deduplicated contents: a file's pieces, each stored once per home,
//! keyed by its SHA-256.
//!
//! How a content is cut, hashed and compressed is [`super::pieces`]; that
//! work is done before the write's transaction, and [`put`] only stores
//! what it made. A content row holds the content's key (identical files
//! share one row), its size and its pieces' ids, each written as the
//! varint of its difference from the one before (format 1: a new file's
//! pieces are consecutive rows, one byte each). A piece row holds its
//! hash, its codec (raw, LZ4, or raw until the writer's idle work
//! compresses it: [`super::compress`]) and its bytes. Rows of migration 6 keep
//! codec 0 (raw) and format 0 (8-byte ids) and read as they were; their
//! contents were keyed by the SHA-256 of their bytes, so an identical file
//! written again is stored again, once. Pieces and contents are counted
//! by reference and removed when nothing refers to them any more, which is
//! what makes `delete_file` irreversible.

use rusqlite::{params, Connection, OptionalExtension, Transaction};

use super::pieces::{Packed, LZ4, RAW, UNTRIED};
use crate::store::StoreError;

/// A piece list of 8-byte little-endian ids (migration 6).
const IDS_FIXED: i64 = 0;
/// A piece list of zigzag varint differences.
const IDS_DELTA: i64 = 1;

/// Stores the content `packed` (once: an identical content is found by
/// its key) and returns its content id. Each new reference is counted: to
/// the content when it is already stored, else to each of its pieces,
/// each looked up by its hash, then counted when known or inserted.
///
/// The pieces' statements are a plain look-up, `UPDATE` and `INSERT`, not
/// one upsert with `RETURNING`: SQLite runs a `RETURNING` as a trigger, in
/// a statement journal that copies every page the statement touches
/// before it writes it, and keeps its rows in a table of its own — about
/// half of a 1 MiB write's transaction (docs/benchmarks.md).
pub fn put(tx: &Transaction<'_>, packed: &Packed) -> Result<i64, StoreError> {
    let found: Option<i64> = tx
        .prepare_cached("SELECT id FROM file_contents WHERE hash = ?1")?
        .query_row(params![&packed.hash()[..]], |r| r.get(0))
        .optional()?;
    if let Some(id) = found {
        tx.prepare_cached("UPDATE file_contents SET refs = refs + 1 WHERE id = ?1")?
            .execute(params![id])?;
        return Ok(id);
    }
    let mut list = Vec::with_capacity(packed.len() + 8);
    let mut previous = 0i64;
    let mut known = tx.prepare_cached("SELECT id FROM file_pieces WHERE hash = ?1")?;
    let mut count = tx.prepare_cached("UPDATE file_pieces SET refs = refs + 1 WHERE id = ?1")?;
    let mut insert = tx.prepare_cached(
        "INSERT INTO file_pieces (hash, refs, codec, data) VALUES (?1, 1, ?2, ?3)",
    )?;
    for (hash, codec, data) in packed.pieces() {
        let id = match known
            .query_row(params![&hash[..]], |r| r.get::<_, i64>(0))
            .optional()?
        {
            Some(id) => {
                count.execute(params![id])?;
                id
            }
            None => {
                insert.execute(params![&hash[..], codec, data])?;
                tx.last_insert_rowid()
            }
        };
        push_varint(&mut list, zigzag(id.wrapping_sub(previous)));
        previous = id;
    }
    tx.prepare_cached(
        "INSERT INTO file_contents (hash, size, refs, pieces, format) VALUES (?1, ?2, 1, ?3, ?4)",
    )?
    .execute(params![
        &packed.hash()[..],
        packed.size() as i64,
        list,
        IDS_DELTA
    ])?;
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
            RAW | UNTRIED => out.extend_from_slice(data),
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

/// Counts one more reference to content `id`, stored already.
pub fn retain(tx: &Transaction<'_>, id: i64) -> Result<(), StoreError> {
    tx.prepare_cached("UPDATE file_contents SET refs = refs + 1 WHERE id = ?1")?
        .execute(params![id])?;
    Ok(())
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
