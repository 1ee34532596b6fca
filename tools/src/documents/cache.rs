//! The conversion cache in the home's `documents/` folder.
//!
//! `find_files` searches every document under a folder and `read_file`
//! pages through one a piece at a time; converting on each call would redo
//! seconds of work. Each document's Markdown is kept as `<key>.md` (plain
//! Markdown, so ripgrep can search the file itself) beside `<key>.json`,
//! which records the source's canonical path, size and modification time.
//! The key is a hash of the canonical path. An entry is reused while the
//! source's size and mtime match; both files are written atomically
//! (temporary file, then rename), the header last, so a reader never
//! trusts a half-written entry.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use serde::{Deserialize, Serialize};
use troupe_runtime::home::Home;

use super::{convert_bytes, read_bounded, DocumentError, Format};

/// Bumped when the converters' output changes, so old entries are redone.
const CACHE_VERSION: u32 = 1;

/// A document's Markdown, fresh in the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedDocument {
    /// The cached Markdown file (`documents/<key>.md`), current with the
    /// source; search or read it directly.
    pub markdown_path: PathBuf,
    /// Whether this call converted the document (false: the cache held it).
    pub converted: bool,
}

/// The header kept beside each cached Markdown file.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Header {
    version: u32,
    source: String,
    format: String,
    size: u64,
    modified_secs: u64,
    modified_nanos: u32,
    markdown_bytes: u64,
}

/// Reads the document at `path` as Markdown, converting it only when the
/// cache has no current copy.
pub fn read_cached(home: &Home, path: &Path) -> Result<String, DocumentError> {
    let entry = cached(home, path)?;
    fs::read_to_string(&entry.markdown_path).map_err(|source| DocumentError::Cache {
        path: entry.markdown_path.clone(),
        source,
    })
}

/// Makes sure the cache holds the current Markdown of the document at
/// `path` and says where it is, converting only when needed.
pub fn cached(home: &Home, path: &Path) -> Result<CachedDocument, DocumentError> {
    let format = Format::of(path).ok_or_else(|| DocumentError::NotADocument {
        path: path.to_path_buf(),
    })?;
    let read_error = |source| DocumentError::Read {
        path: path.to_path_buf(),
        source,
    };
    let canonical = fs::canonicalize(path).map_err(read_error)?;
    let meta = fs::metadata(&canonical).map_err(read_error)?;
    let modified = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .unwrap_or_default();
    let wanted = Header {
        version: CACHE_VERSION,
        source: canonical.to_string_lossy().into_owned(),
        format: format.id().to_string(),
        size: meta.len(),
        modified_secs: modified.as_secs(),
        modified_nanos: modified.subsec_nanos(),
        markdown_bytes: 0,
    };
    let dir = home.documents_dir();
    let key = format!("{:016x}", fnv1a(wanted.source.as_bytes()));
    let markdown_path = dir.join(format!("{key}.md"));
    let header_path = dir.join(format!("{key}.json"));

    if is_fresh(&header_path, &markdown_path, &wanted) {
        return Ok(CachedDocument {
            markdown_path,
            converted: false,
        });
    }

    let bytes = read_bounded(&canonical, format)?;
    let markdown = convert_bytes(path, format, &bytes)?;
    let cache_error = |path: &Path| {
        let path = path.to_path_buf();
        move |source| DocumentError::Cache { path, source }
    };
    fs::create_dir_all(&dir).map_err(cache_error(&dir))?;
    write_atomic(&markdown_path, markdown.as_bytes()).map_err(cache_error(&markdown_path))?;
    let header = Header {
        markdown_bytes: markdown.len() as u64,
        ..wanted
    };
    let json = serde_json::to_vec_pretty(&header)
        .map_err(|e| cache_error(&header_path)(std::io::Error::other(e)))?;
    write_atomic(&header_path, &json).map_err(cache_error(&header_path))?;
    Ok(CachedDocument {
        markdown_path,
        converted: true,
    })
}

/// Whether the entry's header matches the source and its Markdown is whole.
fn is_fresh(header_path: &Path, markdown_path: &Path, wanted: &Header) -> bool {
    let Ok(raw) = fs::read(header_path) else {
        return false;
    };
    let Ok(header) = serde_json::from_slice::<Header>(&raw) else {
        return false;
    };
    let markdown_len = fs::metadata(markdown_path).map(|m| m.len()).ok();
    header.version == wanted.version
        && header.source == wanted.source
        && header.format == wanted.format
        && header.size == wanted.size
        && header.modified_secs == wanted.modified_secs
        && header.modified_nanos == wanted.modified_nanos
        && markdown_len == Some(header.markdown_bytes)
}

/// Writes `bytes` to a temporary file beside `path`, then renames it over.
fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", uuid::Uuid::now_v7().simple()));
    let result = (|| {
        let mut file = fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// FNV-1a, 64 bits: a stable hash for cache keys (std's hasher may change
/// between Rust releases).
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}
