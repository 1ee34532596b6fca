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
//! Each piece is keyed by its SHA-256. A content's own key is the SHA-256
//! of its size and its pieces' hashes, so its bytes are hashed once. The
//! cuts and keys are stored: they may not change.
//!
//! A piece is stored as it is ([`UNTRIED`]) by the write that brings it,
//! and compressed afterwards by the store's writer while it is idle
//! ([`super::compress`]): LZ4 cost 3 ms a mebibyte, most of a 1 MiB
//! write's time to committed, and nothing about the write's durability
//! needs it. [`compress`] is that step's rule: LZ4 when it saves a tenth or
//! more (LZ4 because it compresses a mebibyte in a few milliseconds and
//! reads back faster still, where deflate took tens), else raw for good.

use lz4_flex::block::{compress_into, get_maximum_output_size};
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
/// How a piece's bytes are stored: as they are, not yet offered to LZ4
/// (the writer's idle work makes it [`LZ4`] or [`RAW`]).
pub const UNTRIED: i64 = 2;

/// A piece's bytes as stored for good: LZ4 (its size first) when that
/// saves a tenth or more, else `None` (kept raw).
pub fn compress(piece: &[u8]) -> Option<Vec<u8>> {
    let mut out = vec![0u8; 4 + get_maximum_output_size(piece.len())];
    out[..4].copy_from_slice(&(piece.len() as u32).to_le_bytes());
    match compress_into(piece, &mut out[4..]) {
        Ok(n) if 4 + n < piece.len() - piece.len() / 10 => {
            out.truncate(4 + n);
            Some(out)
        }
        _ => None,
    }
}

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

/// A content ready to store: its bytes, its key, and where its pieces
/// end with each one's hash, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packed {
    bytes: Vec<u8>,
    hash: [u8; 32],
    ends: Vec<usize>,
    hashes: Vec<[u8; 32]>,
}

impl Packed {
    /// Cuts and hashes `bytes` (a copy of them). Blocking (about a
    /// millisecond a mebibyte): from async code, run it off the async
    /// threads.
    pub fn new(bytes: &[u8]) -> Self {
        Self::from_vec(bytes.to_vec())
    }

    /// [`Packed::new`] keeping `bytes` themselves.
    pub fn from_vec(bytes: Vec<u8>) -> Self {
        let ends = cuts(&bytes, Grain::of(bytes.len()));
        let hashes = hash_pieces(&bytes, &ends, workers(bytes.len()));
        let mut key = Sha256::new();
        key.update((bytes.len() as u64).to_le_bytes());
        for hash in &hashes {
            key.update(hash);
        }
        Self {
            bytes,
            hash: key.finalize().into(),
            ends,
            hashes,
        }
    }

    /// The content's size, in bytes.
    pub fn size(&self) -> usize {
        self.bytes.len()
    }

    /// The content's key: the SHA-256 of its size and its pieces' hashes
    /// (identical bytes cut identically, so they share it).
    pub fn hash(&self) -> &[u8; 32] {
        &self.hash
    }

    /// How many pieces it has.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether it has no piece (an empty content).
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Each piece in order: its hash, its codec ([`UNTRIED`]) and its
    /// stored bytes.
    pub fn pieces(&self) -> impl Iterator<Item = (&[u8; 32], i64, &[u8])> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        self.hashes
            .iter()
            .zip(starts.zip(self.ends.iter().copied()))
            .map(|(hash, (start, end))| (hash, UNTRIED, &self.bytes[start..end]))
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

/// The SHA-256 of each piece of `bytes` ending at `ends`, the pieces
/// split in `workers` groups of about the same number of bytes: the
/// calling thread hashes the first group itself while pool threads hash
/// the others.
fn hash_pieces(bytes: &[u8], ends: &[usize], workers: usize) -> Vec<[u8; 32]> {
    let mut hashes = vec![[0u8; 32]; ends.len()];
    let pool = match packers() {
        Some(pool) if workers > 1 => pool,
        _ => {
            hash_group(bytes, 0, ends, &mut hashes);
            return hashes;
        }
    };
    // Split the pieces where the bytes cross each worker's share.
    let mut groups = Vec::with_capacity(workers);
    let (mut from, mut first) = (0usize, 0usize);
    let mut rest = &mut hashes[..];
    for w in 1..=workers {
        let last = if w == workers {
            ends.len()
        } else {
            let share = bytes.len() * w / workers;
            ends.partition_point(|&e| e <= share).max(first)
        };
        let (out, tail) = rest.split_at_mut(last - first);
        rest = tail;
        groups.push((from, &ends[first..last], out));
        from = last.checked_sub(1).map_or(from, |l| ends[l]);
        first = last;
    }
    let mut groups = groups.into_iter();
    pool.in_place_scope(|scope| {
        let mine = groups.next();
        for (start, ends, out) in groups {
            scope.spawn(move |_| hash_group(bytes, start, ends, out));
        }
        if let Some((start, ends, out)) = mine {
            hash_group(bytes, start, ends, out);
        }
    });
    hashes
}

/// The SHA-256 of the pieces of `bytes` from `start` to each of `ends`,
/// into `out`.
fn hash_group(bytes: &[u8], mut start: usize, ends: &[usize], out: &mut [[u8; 32]]) {
    for (&end, slot) in ends.iter().zip(out) {
        *slot = sha256(&bytes[start..end]);
        start = end;
    }
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
    fn a_content_hashed_by_several_threads_is_the_one_hashed_by_one() {
        let text: String = (0..120_000)
            .map(|i| format!("w{} ", i * 7919 % 5000))
            .collect();
        let mut bytes = text.into_bytes();
        bytes.extend(noise(200_000, 42));
        let ends = cuts(&bytes, Grain::of(bytes.len()));
        let alone = hash_pieces(&bytes, &ends, 1);
        assert_eq!(hash_pieces(&bytes, &ends, 3), alone);
        assert_eq!(hash_pieces(&bytes, &ends, 4), alone);
        let packed = Packed::new(&bytes);
        assert_eq!(packed.len(), ends.len());
        let mut back = Vec::new();
        for (hash, codec, data) in packed.pieces() {
            assert_eq!(codec, UNTRIED);
            assert_eq!(sha256(data), *hash);
            back.extend_from_slice(data);
        }
        assert_eq!(back, bytes);
    }

    #[test]
    fn text_compresses_and_noise_stays_raw() {
        let text: String = (0..2_000).map(|i| format!("w{} ", i % 50)).collect();
        let stored = compress(text.as_bytes()).unwrap();
        assert!(stored.len() < text.len() / 2);
        assert_eq!(
            lz4_flex::decompress_size_prepended(&stored).unwrap(),
            text.as_bytes()
        );
        assert_eq!(compress(&noise(8_000, 9)), None);
        assert_eq!(compress(&[]), None);
    }
}
