//! A content cut into pieces, each hashed and compressed: all the work a
//! write does on its bytes, done before the writer's transaction.
//!
//! The store has one writer thread (see [`crate::store`]), and a write
//! holds it from its first statement to its commit. Cutting, hashing and
//! compressing a mebibyte took most of that time when the write did it
//! inside its job; [`Packed::new`] does it on the caller's thread instead
//! (in parallel over a large content's pieces), so the writer only looks
//! the pieces up and inserts the new ones ([`super::content::put`]).
//!
//! A content is cut where a rolling (gear) hash of the last 64 bytes hits
//! a pattern, so an edit moves the cuts only around itself: a version of a
//! 100 KiB file with one line changed shares all its pieces but one or two
//! with the previous version. Pieces average about [`AVG_PIECE`] bytes (at
//! least [`MIN_PIECE`], at most [`MAX_PIECE`]). Each piece is keyed by its
//! SHA-256 and kept LZ4-compressed when that saves a tenth or more (LZ4
//! because it compresses a mebibyte in a few milliseconds and reads back
//! faster still, where deflate took tens). A content's own key is the
//! SHA-256 of its size and its pieces' hashes, so its bytes are hashed
//! once. The cuts, keys and codecs are stored: they may not change.

use std::ops::Range;

use lz4_flex::block::{compress_into_with_table, get_maximum_output_size, CompressTable};
use sha2::{Digest, Sha256};

/// The least piece, in bytes (but the last).
pub const MIN_PIECE: usize = 256;
/// The average piece, in bytes.
pub const AVG_PIECE: usize = 1024;
/// The largest piece, in bytes.
pub const MAX_PIECE: usize = 8192;

/// The bits of the rolling hash that pick a cut (1 in [`AVG_PIECE`]).
const MASK: u64 = (AVG_PIECE as u64 - 1) << 48;

/// How many bytes back the rolling hash sees: each byte's word is shifted
/// out of the 64-bit hash after 64 more.
const WINDOW: usize = 64;

/// How a piece's bytes are stored: as they are.
pub const RAW: i64 = 0;
/// How a piece's bytes are stored: LZ4 block, its size first.
pub const LZ4: i64 = 1;

/// A content of at least this many bytes per worker is packed by several
/// threads (one more thread costs tens of microseconds to start).
const BYTES_PER_WORKER: usize = 256 * 1024;

/// The most threads that pack one content.
const MAX_WORKERS: usize = 4;

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
///
/// A piece ends at the first byte, [`MIN_PIECE`] or more into it, where
/// the rolling hash restarted at the piece's start matches [`MASK`], or
/// at [`MAX_PIECE`]. The hash only sees the last [`WINDOW`] bytes, so it
/// starts that far before the first byte that may end a piece: the bytes
/// before cannot change a cut, and are not hashed.
pub fn cuts(bytes: &[u8]) -> Vec<usize> {
    let gear = gear();
    let mut ends = Vec::with_capacity(bytes.len() / AVG_PIECE + 1);
    let mut start = 0;
    while start < bytes.len() {
        let limit = bytes.len().min(start + MAX_PIECE);
        let end = if limit - start <= MIN_PIECE {
            limit
        } else {
            let first = start + MIN_PIECE - 1;
            let mut hash = 0u64;
            for &b in &bytes[first + 1 - WINDOW..first] {
                hash = (hash << 1).wrapping_add(gear[b as usize]);
            }
            let mut end = limit;
            for (i, &b) in bytes[first..limit].iter().enumerate() {
                hash = (hash << 1).wrapping_add(gear[b as usize]);
                if hash & MASK == 0 {
                    end = first + i + 1;
                    break;
                }
            }
            end
        };
        ends.push(end);
        start = end;
    }
    ends
}

/// The SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// One piece of a [`Packed`] content.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Piece {
    /// The SHA-256 of its bytes.
    hash: [u8; 32],
    /// [`RAW`] or [`LZ4`].
    codec: i64,
    /// Its stored bytes, in its part's `data`.
    stored: Range<usize>,
}

/// Consecutive pieces packed by one thread, their stored bytes end to end.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Part {
    data: Vec<u8>,
    pieces: Vec<Piece>,
}

/// A content ready to store: its size, its key, and its pieces hashed and
/// compressed, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packed {
    size: usize,
    hash: [u8; 32],
    parts: Vec<Part>,
}

impl Packed {
    /// Cuts, hashes and compresses `bytes`. Blocking (a few milliseconds a
    /// mebibyte): from async code, run it off the async threads.
    pub fn new(bytes: &[u8]) -> Self {
        let ends = cuts(bytes);
        let parts = pack_parts(bytes, &ends, workers(bytes.len()));
        let mut key = Sha256::new();
        key.update((bytes.len() as u64).to_le_bytes());
        for piece in parts.iter().flat_map(|p| &p.pieces) {
            key.update(piece.hash);
        }
        Self {
            size: bytes.len(),
            hash: key.finalize().into(),
            parts,
        }
    }

    /// The content's size, in bytes.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The content's key: the SHA-256 of its size and its pieces' hashes
    /// (identical bytes cut identically, so they share it).
    pub fn hash(&self) -> &[u8; 32] {
        &self.hash
    }

    /// How many pieces it has.
    pub fn len(&self) -> usize {
        self.parts.iter().map(|p| p.pieces.len()).sum()
    }

    /// Whether it has no piece (an empty content).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Each piece in order: its hash, its codec and its stored bytes.
    pub fn pieces(&self) -> impl Iterator<Item = (&[u8; 32], i64, &[u8])> {
        self.parts.iter().flat_map(|part| {
            part.pieces
                .iter()
                .map(move |p| (&p.hash, p.codec, &part.data[p.stored.clone()]))
        })
    }
}

/// How many threads pack `len` bytes.
fn workers(len: usize) -> usize {
    let wanted = (len / BYTES_PER_WORKER).clamp(1, MAX_WORKERS);
    if wanted == 1 {
        return 1;
    }
    std::thread::available_parallelism().map_or(1, |n| wanted.min(n.get()))
}

/// The pieces ending at `ends`, packed in parts: one per worker, each of
/// about the same number of bytes.
fn pack_parts(bytes: &[u8], ends: &[usize], workers: usize) -> Vec<Part> {
    if workers <= 1 {
        return vec![pack(bytes, 0, ends)];
    }
    // Split the pieces where the bytes cross each worker's share.
    let mut groups: Vec<(usize, &[usize])> = Vec::with_capacity(workers);
    let (mut from, mut first) = (0usize, 0usize);
    for w in 1..workers {
        let share = bytes.len() * w / workers;
        let last = ends.partition_point(|&e| e <= share).max(first);
        groups.push((from, &ends[first..last]));
        from = last.checked_sub(1).map_or(from, |l| ends[l]);
        first = last;
    }
    groups.push((from, &ends[first..]));
    std::thread::scope(|scope| {
        // The first group is packed here; the others on threads of their
        // own (or here too, when a thread cannot be started).
        let started: Vec<_> = groups[1..]
            .iter()
            .map(|&(start, ends)| {
                std::thread::Builder::new()
                    .name("troupe-files-pack".into())
                    .spawn_scoped(scope, move || pack(bytes, start, ends))
                    .map_err(|_| (start, ends))
            })
            .collect();
        let mut parts = vec![pack(bytes, groups[0].0, groups[0].1)];
        for (handle, &(start, ends)) in started.into_iter().zip(&groups[1..]) {
            let part = match handle {
                Ok(h) => h.join().unwrap_or_else(|_| pack(bytes, start, ends)),
                Err((start, ends)) => pack(bytes, start, ends),
            };
            parts.push(part);
        }
        parts
    })
}

/// The pieces of `bytes` from `start` to each of `ends`, hashed and
/// compressed (kept raw when LZ4 saves less than a tenth).
fn pack(bytes: &[u8], mut start: usize, ends: &[usize]) -> Part {
    let total = ends.last().map_or(0, |&e| e - start);
    let mut data = Vec::with_capacity(total + total / 8 + 64);
    let mut pieces = Vec::with_capacity(ends.len());
    // Every piece is under 64 KiB: the small table, reused.
    let mut table = CompressTable::small();
    for &end in ends {
        let piece = &bytes[start..end];
        start = end;
        let at = data.len();
        data.resize(at + 4 + get_maximum_output_size(piece.len()), 0);
        data[at..at + 4].copy_from_slice(&(piece.len() as u32).to_le_bytes());
        let codec = match compress_into_with_table(piece, &mut data[at + 4..], &mut table) {
            Ok(n) if 4 + n < piece.len() - piece.len() / 10 => {
                data.truncate(at + 4 + n);
                LZ4
            }
            _ => {
                data.truncate(at);
                data.extend_from_slice(piece);
                RAW
            }
        };
        pieces.push(Piece {
            hash: sha256(piece),
            codec,
            stored: at..data.len(),
        });
    }
    Part { data, pieces }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cuts as first written: the rolling hash over every byte.
    fn cuts_hashing_every_byte(bytes: &[u8]) -> Vec<usize> {
        let gear = gear();
        let mut ends = Vec::new();
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

    fn noise(len: usize, mut seed: u64) -> Vec<u8> {
        (0..len)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                (seed >> 24) as u8
            })
            .collect()
    }

    #[test]
    fn cuts_skipping_the_first_bytes_of_a_piece_are_the_stored_ones() {
        let mut inputs = vec![
            Vec::new(),
            vec![7u8; 100],
            vec![7u8; MIN_PIECE],
            vec![7u8; MIN_PIECE + 1],
            vec![0u8; 3 * MAX_PIECE + 5],
            noise(300_000, 0x2545_F491_4F6C_DD1D),
        ];
        let text: String = (0..20_000)
            .map(|i| format!("w{} ", i * 7919 % 5000))
            .collect();
        inputs.push(text.into_bytes());
        for bytes in inputs {
            assert_eq!(
                cuts(&bytes),
                cuts_hashing_every_byte(&bytes),
                "{} bytes",
                bytes.len()
            );
        }
    }

    #[test]
    fn a_content_packed_by_several_threads_is_the_one_packed_by_one() {
        let text: String = (0..120_000)
            .map(|i| format!("w{} ", i * 7919 % 5000))
            .collect();
        let mut bytes = text.into_bytes();
        bytes.extend(noise(200_000, 42));
        let ends = cuts(&bytes);
        let packed = |workers| Packed {
            size: bytes.len(),
            hash: [0; 32],
            parts: pack_parts(&bytes, &ends, workers),
        };
        let (alone, packed) = (packed(1), packed(3));
        assert_eq!(packed.parts.len(), 3);
        let flat = |p: &Packed| -> Vec<([u8; 32], i64, Vec<u8>)> {
            p.pieces().map(|(h, c, d)| (*h, c, d.to_vec())).collect()
        };
        assert_eq!(flat(&packed), flat(&alone));
        assert_eq!(packed.len(), ends.len());
        assert_eq!(Packed::new(&bytes).pieces().count(), ends.len());
        let codecs: Vec<i64> = packed.pieces().map(|(_, c, _)| c).collect();
        assert!(
            codecs.contains(&LZ4) && codecs.contains(&RAW),
            "text compresses, noise does not"
        );
        let mut back = Vec::new();
        for (hash, codec, data) in packed.pieces() {
            let piece = if codec == LZ4 {
                lz4_flex::decompress_size_prepended(data).unwrap()
            } else {
                data.to_vec()
            };
            assert_eq!(sha256(&piece), *hash);
            back.extend(piece);
        }
        assert_eq!(back, bytes);
    }
}
