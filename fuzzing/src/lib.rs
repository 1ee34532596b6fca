//! What troupe's fuzz targets share: their seed corpora and a mutator that
//! edits a seed, for the runs on stable Rust.
//!
//! Every parser of outside input has a fuzz target, a `fn(&[u8])` that must
//! not panic, hang or abort on any input. Each target runs two ways from a
//! `#[test]` (see `docs/testing.md`):
//!
//! - **raw**: `bolero::check!(name = "sse")` replays the committed corpus
//!   (`src/__fuzz__/NAME/corpus/` beside the test file), then feeds random
//!   bytes; under `cargo bolero test --engine libfuzzer` (nightly) the same
//!   test is coverage-guided and grows the corpus.
//! - **edits**: random bytes are read as an *edit script* applied to one of
//!   the seeds ([`Seeds::edited`]). Random bytes alone almost never get past
//!   a zip header or a JSON brace; a realistic seed with a few bytes flipped,
//!   a token inserted or a range repeated reaches the code behind them. For
//!   zip packages (docx, xlsx, epub…) the edits apply to one part's
//!   uncompressed XML and the package is zipped again, so the converter sees
//!   a valid zip of broken XML rather than a broken zip.
//!
//! Both run for one second by default (`BOLERO_RANDOM_TEST_TIME_MS`,
//! `BOLERO_RANDOM_ITERATIONS` and `BOLERO_RANDOM_SEED` change that), which
//! is what CI runs; `docs/testing.md` has the command for long runs.

use std::io::{Cursor, Read, Write};
use std::path::{Path, PathBuf};

pub use bolero;

/// The seed corpus of a target and the tokens its edits may insert.
#[derive(Debug, Clone)]
pub struct Seeds {
    seeds: Vec<Seed>,
    tokens: Vec<Vec<u8>>,
}

/// One seed: plain bytes, or a zip package kept as its parts.
#[derive(Debug, Clone)]
enum Seed {
    Bytes(Vec<u8>),
    Zip(Vec<(String, Vec<u8>)>),
}

impl Seeds {
    /// The files of `corpus` (a folder), sorted by name, with the tokens
    /// edits may insert. Zip files (`PK\x03\x04`) are unpacked into parts.
    ///
    /// # Panics
    ///
    /// If the folder cannot be read or holds no file: a target without
    /// seeds would test nothing, which is a mistake to fix, not to skip.
    pub fn load(corpus: impl AsRef<Path>, tokens: &[&[u8]]) -> Self {
        let corpus = corpus.as_ref();
        let mut files: Vec<PathBuf> = std::fs::read_dir(corpus)
            .unwrap_or_else(|e| panic!("cannot read the corpus {}: {e}", corpus.display()))
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|path| path.is_file())
            .collect();
        files.sort();
        assert!(
            !files.is_empty(),
            "the corpus {} is empty",
            corpus.display()
        );
        let seeds = files
            .iter()
            .map(|path| {
                let bytes = std::fs::read(path)
                    .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
                unzip(&bytes).map_or(Seed::Bytes(bytes), Seed::Zip)
            })
            .collect();
        Self {
            seeds,
            tokens: tokens.iter().map(|t| t.to_vec()).collect(),
        }
    }

    /// How many seeds there are.
    pub fn len(&self) -> usize {
        self.seeds.len()
    }

    /// Whether there are none (never, after [`Seeds::load`]).
    pub fn is_empty(&self) -> bool {
        self.seeds.is_empty()
    }

    /// A seed edited by `script`: its first byte picks the seed (and, for a
    /// zip, the next picks the part), the rest is read as edits.
    pub fn edited(&self, script: &[u8]) -> Vec<u8> {
        let mut script = Script(script);
        let pick = usize::from(script.byte()) % self.seeds.len();
        match &self.seeds[pick] {
            Seed::Bytes(bytes) => {
                let mut bytes = bytes.clone();
                self.apply(&mut bytes, &mut script);
                bytes
            }
            Seed::Zip(parts) => {
                let mut parts = parts.clone();
                let which = usize::from(script.byte()) % parts.len();
                self.apply(&mut parts[which].1, &mut script);
                zip(&parts)
            }
        }
    }

    fn apply(&self, data: &mut Vec<u8>, script: &mut Script<'_>) {
        while !script.is_empty() {
            let op = script.byte();
            let at = script.index(data.len() + 1);
            match op % 8 {
                // Overwrite a byte.
                0 if at < data.len() => data[at] = script.byte(),
                // Insert a few bytes.
                1 => {
                    let n = usize::from(script.byte() % 8);
                    let bytes = script.take(n);
                    data.splice(at..at, bytes.iter().copied());
                }
                // Delete a range.
                2 => {
                    let n = usize::from(script.byte()).min(data.len() - at.min(data.len()));
                    data.drain(at.min(data.len())..at.min(data.len()) + n);
                }
                // Repeat a range (nesting, long runs).
                3 => {
                    let start = at.min(data.len());
                    let n = usize::from(script.byte()).min(data.len() - start);
                    let times = usize::from(script.byte() % 16) + 1;
                    let piece = data[start..start + n].to_vec();
                    for _ in 0..times {
                        data.splice(start..start, piece.iter().copied());
                    }
                }
                // Insert a token of the format.
                4 | 5 if !self.tokens.is_empty() => {
                    let token = &self.tokens[usize::from(script.byte()) % self.tokens.len()];
                    data.splice(at..at, token.iter().copied());
                }
                // Cut the end off.
                6 => data.truncate(at),
                // Splice in a piece of another seed.
                7 => {
                    let other = &self.seeds[usize::from(script.byte()) % self.seeds.len()];
                    let other = match other {
                        Seed::Bytes(bytes) => bytes.as_slice(),
                        Seed::Zip(parts) => parts.first().map_or(&[][..], |p| p.1.as_slice()),
                    };
                    let from = script.index(other.len() + 1).min(other.len());
                    let n = usize::from(script.byte()).min(other.len() - from);
                    data.splice(at..at, other[from..from + n].iter().copied());
                }
                _ => {}
            }
        }
    }
}

/// Edit instructions read from random bytes; reads past the end give 0.
struct Script<'a>(&'a [u8]);

impl Script<'_> {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((first, rest)) => {
                self.0 = rest;
                *first
            }
            None => 0,
        }
    }

    /// A position below `len` (which is at least 1), from two bytes.
    fn index(&mut self, len: usize) -> usize {
        let raw = usize::from(u16::from_le_bytes([self.byte(), self.byte()]));
        raw % len.max(1)
    }

    fn take(&mut self, n: usize) -> Vec<u8> {
        let n = n.min(self.0.len());
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        head.to_vec()
    }
}

/// The parts of a zip package, or `None` if `bytes` is not one.
fn unzip(bytes: &[u8]) -> Option<Vec<(String, Vec<u8>)>> {
    if !bytes.starts_with(b"PK\x03\x04") {
        return None;
    }
    let mut archive = zip::ZipArchive::new(Cursor::new(bytes)).ok()?;
    let mut parts = Vec::new();
    for i in 0..archive.len() {
        let mut file = archive.by_index(i).ok()?;
        let mut content = Vec::new();
        file.read_to_end(&mut content).ok()?;
        let name = file.name().ok()?.to_string();
        parts.push((name, content));
    }
    (!parts.is_empty()).then_some(parts)
}

/// A zip package of `parts`, stored uncompressed.
///
/// # Panics
///
/// Never in practice: writing to memory cannot fail.
pub fn zip(parts: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for (name, content) in parts {
        #[allow(clippy::expect_used)]
        {
            writer
                .start_file(name.as_str(), options)
                .expect("in memory");
            writer.write_all(content).expect("in memory");
        }
    }
    #[allow(clippy::expect_used)]
    writer.finish().expect("in memory").into_inner()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seeds(dir: &Path) -> Seeds {
        std::fs::write(dir.join("a"), b"hello world").unwrap();
        std::fs::write(
            dir.join("b.zip"),
            zip(&[("x.xml".into(), b"<a>text</a>".to_vec())]),
        )
        .unwrap();
        Seeds::load(dir, &[b"<b>"])
    }

    #[test]
    fn an_empty_script_gives_the_seed_back() {
        let dir = tempfile::tempdir().unwrap();
        let seeds = seeds(dir.path());
        assert_eq!(seeds.len(), 2);
        assert_eq!(seeds.edited(&[]), b"hello world");
        let package = seeds.edited(&[1]);
        assert_eq!(
            unzip(&package).unwrap(),
            vec![("x.xml".to_string(), b"<a>text</a>".to_vec())]
        );
    }

    #[test]
    fn edits_change_a_zip_part_and_keep_the_package_valid() {
        let dir = tempfile::tempdir().unwrap();
        let seeds = seeds(dir.path());
        // Seed 1, part 0, insert token 0 at position 3.
        let package = seeds.edited(&[1, 0, 4, 3, 0, 0]);
        assert_eq!(
            unzip(&package).unwrap(),
            vec![("x.xml".to_string(), b"<a><b>text</a>".to_vec())]
        );
    }

    #[test]
    fn any_script_is_applied_without_panicking() {
        let dir = tempfile::tempdir().unwrap();
        let seeds = seeds(dir.path());
        bolero::check!().for_each(|script: &[u8]| {
            seeds.edited(script);
        });
    }
}
