//! A content cut into pieces, each hashed and compressed: all the work a
//! write does on its bytes, done before the writer's transaction.
//!
//! The store has one writer thread (see [`crate::store`]), and a write
//! holds it from its first statement to its commit. Cutting, hashing and
//! compressing a mebibyte took most of that time when the write did it
//! inside its job; [`Packed::new`] does it before, on the caller's side
//! (a large content's pieces split over a small pool of threads), so the
//! writer only looks the pieces up and inserts the new ones
//! ([`super::content::put`]).
//!
//! A content is cut where a rolling (gear) hash of the last 64 bytes hits
//! a pattern, so an edit moves the cuts only around itself: a version of a
//! 100 KiB file with one line changed shares all its pieces but one or two
//! with the previous version. How fine the pieces are is the content's
//! [`Grain`], chosen by its size (as rsync sizes its blocks by the file's):
//! pieces of about 1 KiB below 512 KiB, 4 KiB below 4 MiB, 16 KiB above.
//! Each piece is one row and one entry of the hash index that the writer
//! inserts, so the grain keeps a file at a few hundred pieces: a 1 MiB
//! write is about 210 rows, not 830. A one-line edit then stores about
//! one or two pieces of the file's grain again — under 1% of a file of
//! 512 KiB or more. A file that crosses a grain's bound is cut anew, and
//! shares no piece with its versions on the other side once.
//!
//! Each piece is keyed by its SHA-256 and kept LZ4-compressed when that saves a tenth or more (LZ4
//! because it compresses a mebibyte in a few milliseconds and reads back
//! faster still, where deflate took tens). A content's own key is the
//! SHA-256 of its size and its pieces' hashes, so its bytes are hashed
//! once. The cuts, keys and codecs are stored: they may not change.

use std::ops::Range;

use lz4_flex::block::{compress_into_with_table, get_maximum_output_size, CompressTable};
use sha2::{Digest, Sha256};

/// How finely a content is cut: the least piece (but the last), the
/// average and the largest, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grain {
    /// The least piece (but the last).
    pub min: usize,
    /// The average piece: a cut falls 1 in `avg` bytes past `min`.
    pub avg: usize,
    /// The largest piece (under 64 KiB: LZ4's small table).
    pub max: usize,
}

impl Grain {
    /// Contents under 512 KiB: pieces of about 1 KiB.
    pub const FINE: Self = Self {
        min: 256,
        avg: 1024,
        max: 8192,
    };
    /// Contents from 512 KiB to under 4 MiB: about 4 KiB.
    pub const MEDIUM: Self = Self {
        min: 1024,
        avg: 4096,
        max: 32 * 1024,
    };
    /// Contents of 4 MiB and more: about 16 KiB.
    pub const COARSE: Self = Self {
        min: 4096,
        avg: 16 * 1024,
        max: 60 * 1024,
    };

    /// The grain of a content of `len` bytes.
    pub fn of(len: usize) -> Self {
        match len {
            0..0x8_0000 => Self::FINE,
            0x8_0000..0x40_0000 => Self::MEDIUM,
            _ => Self::COARSE,
        }
    }

    /// The bits of the rolling hash that pick a cut (1 in `avg`): bits 48
    /// and up, which the last [`WINDOW`] bytes alone decide.
    fn mask(self) -> u64 {
        (self.avg as u64 - 1) << 48
    }
}

/// How many bytes back the rolling hash sees: each byte's word is shifted
/// out of the 64-bit hash after 64 more.
const WINDOW: usize = 64;

/// How a piece's bytes are stored: as they are.
pub const RAW: i64 = 0;
/// How a piece's bytes are stored: LZ4 block, its size first.
pub const LZ4: i64 = 1;

/// A content of at least this many bytes per worker is packed by several
/// threads (handing a part to another thread costs tens of microseconds).
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

/// Where `bytes` is cut into pieces of `grain`: the end of each piece.
///
/// A piece ends at the first byte, `grain.min` or more into it, where
/// the rolling hash restarted at the piece's start matches the grain's
/// mask, or at `grain.max`. The hash only sees the last [`WINDOW`] bytes,
/// so it starts that far before the first byte that may end a piece: the
/// bytes before cannot change a cut, and are not hashed.
pub fn cuts(bytes: &[u8], grain: Grain) -> Vec<usize> {
    let (gear, mask) = (gear(), grain.mask());
    let mut ends = Vec::with_capacity(bytes.len() / grain.avg + 1);
    let mut start = 0;
    while start < bytes.len() {
        let limit = bytes.len().min(start + grain.max);
        let end = if limit - start <= grain.min {
            limit
        } else {
            let first = start + grain.min - 1;
            let mut hash = 0u64;
            for &b in &bytes[first + 1 - WINDOW..first] {
                hash = (hash << 1).wrapping_add(gear[b as usize]);
            }
            let mut end = limit;
            for (i, &b) in bytes[first..limit].iter().enumerate() {
                hash = (hash << 1).wrapping_add(gear[b as usize]);
                if hash & mask == 0 {
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
        let ends = cuts(bytes, Grain::of(bytes.len()));
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

/// The threads that pack large contents, started at the first one: kept,
/// so that a write wakes a sleeping thread — which the kernel places on an
/// idle core — rather than starting one, which it often placed beside
/// its parent on a 2-core machine, where the two halves then ran one
/// after the other. `None` when no thread could be started.
fn packers() -> Option<&'static rayon::ThreadPool> {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(MAX_WORKERS));
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("troupe-pack-{i}"))
            .build()
            .map_err(
                |e| tracing::warn!(error = %e, "no threads to pack files: packed on the caller's"),
            )
            .ok()
    })
    .as_ref()
}

/// The pieces ending at `ends`, packed in parts: one per worker, each of
/// about the same number of bytes.
fn pack_parts(bytes: &[u8], ends: &[usize], workers: usize) -> Vec<Part> {
    let pool = match packers() {
        Some(pool) if workers > 1 => pool,
        _ => return vec![pack(bytes, 0, ends)],
    };
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
    use rayon::prelude::*;
    pool.install(|| {
        groups
            .par_iter()
            .map(|&(start, ends)| pack(bytes, start, ends))
            .collect()
    })
}

/// The pieces of `bytes` from `start` to each of `ends`, hashed and
/// compressed (kept raw when LZ4 saves less than a tenth).
fn pack(bytes: &[u8], mut start: usize, ends: &[usize]) -> Part {
    let total = ends.last().map_or(0, |&e| e - start);
    let mut data = Vec::with_capacity(total + total / 8 + 64);
    let mut pieces = Vec::with_capacity(ends.len());
    // Every piece is under 64 KiB (see `Grain`): the small table, reused.
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
    fn cuts_hashing_every_byte(bytes: &[u8], grain: Grain) -> Vec<usize> {
        let (gear, mask) = (gear(), grain.mask());
        let mut ends = Vec::new();
        let (mut start, mut hash) = (0usize, 0u64);
        for (i, &b) in bytes.iter().enumerate() {
            hash = (hash << 1).wrapping_add(gear[b as usize]);
            let len = i + 1 - start;
            if (len >= grain.min && hash & mask == 0) || len >= grain.max {
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
        let text: String = (0..20_000)
            .map(|i| format!("w{} ", i * 7919 % 5000))
            .collect();
        for grain in [Grain::FINE, Grain::MEDIUM, Grain::COARSE] {
            let inputs = [
                Vec::new(),
                vec![7u8; 100],
                vec![7u8; grain.min],
                vec![7u8; grain.min + 1],
                vec![0u8; 3 * grain.max + 5],
                noise(300_000, 0x2545_F491_4F6C_DD1D),
                text.clone().into_bytes(),
            ];
            for bytes in inputs {
                assert_eq!(
                    cuts(&bytes, grain),
                    cuts_hashing_every_byte(&bytes, grain),
                    "{} bytes, {grain:?}",
                    bytes.len()
                );
            }
        }
    }

    /// The cuts are stored (a new version shares pieces with the last only
    /// if both are cut alike): these may not change.
    #[test]
    fn the_cuts_of_each_grain_are_the_ones_stored() {
        let bytes = noise(200_000, 7);
        let sum = |grain| -> (usize, usize) {
            let ends = cuts(&bytes, grain);
            let weighted = ends.iter().enumerate().map(|(i, e)| (i + 1) * e).sum();
            (ends.len(), weighted)
        };
        // Figures from an independent implementation of the rolling hash.
        assert_eq!(sum(Grain::FINE), (161, 1_748_342_399));
        assert_eq!(sum(Grain::MEDIUM), (46, 144_707_996));
        assert_eq!(sum(Grain::COARSE), (10, 7_739_357));
        assert_eq!(Grain::of(512 * 1024 - 1), Grain::FINE);
        assert_eq!(Grain::of(512 * 1024), Grain::MEDIUM);
        assert_eq!(Grain::of(4 << 20), Grain::COARSE);
    }

    #[test]
    fn a_content_packed_by_several_threads_is_the_one_packed_by_one() {
        let text: String = (0..120_000)
            .map(|i| format!("w{} ", i * 7919 % 5000))
            .collect();
        let mut bytes = text.into_bytes();
        bytes.extend(noise(200_000, 42));
        let ends = cuts(&bytes, Grain::of(bytes.len()));
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
