//! Pages `web_fetch` read in the last 15 minutes, kept converted.
//!
//! An agent often reads a page again (a second look past the limit, a
//! subagent on the same source); the cache answers that from memory, with
//! the Markdown already made and, for a long page, the spill file already
//! written. Entries expire after [`TTL`]; past [`CAPACITY`] pages or
//! [`MAX_BYTES`] of text the oldest go first.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// How long a page is reused.
pub const TTL: Duration = Duration::from_secs(15 * 60);
/// The most pages kept.
pub const CAPACITY: usize = 128;
/// The most text kept, in bytes.
pub const MAX_BYTES: usize = 64 * 1024 * 1024;

/// A page read and converted.
#[derive(Debug)]
pub struct Page {
    /// Where it was read from, after same-site redirects.
    pub url: String,
    /// Its title (may be empty).
    pub title: String,
    /// What it was: `html`, `text`, `pdf`, `docx`, ….
    pub kind: String,
    /// What the model is shown of it: title, address, then its Markdown or
    /// text.
    pub text: String,
    /// Its length in characters.
    pub chars: usize,
    /// Whether it is all ASCII (a character is then a byte).
    pub ascii: bool,
    /// A note on how it was read (cut body, whole-page fallback).
    pub note: Option<String>,
    /// The spill file holding its whole text, once written.
    pub spill: Mutex<Option<PathBuf>>,
}

/// The cache, shared by every conversation of the process.
#[derive(Debug)]
pub struct PageCache {
    entries: Mutex<HashMap<String, (Instant, Arc<Page>)>>,
    ttl: Duration,
}

impl Default for PageCache {
    fn default() -> Self {
        Self::new(TTL)
    }
}

impl PageCache {
    /// A cache whose pages live `ttl`.
    pub fn new(ttl: Duration) -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
            ttl,
        }
    }

    /// The page read from `url` less than the TTL ago.
    pub fn get(&self, url: &str) -> Option<Arc<Page>> {
        let mut entries = self.entries.lock();
        match entries.get(url) {
            Some((at, page)) if at.elapsed() < self.ttl => Some(Arc::clone(page)),
            Some(_) => {
                entries.remove(url);
                None
            }
            None => None,
        }
    }

    /// Keeps `page` as what `url` gave, dropping expired and then the
    /// oldest pages to stay within bounds.
    pub fn put(&self, url: &str, page: Arc<Page>) {
        let mut entries = self.entries.lock();
        entries.retain(|_, (at, _)| at.elapsed() < self.ttl);
        entries.insert(url.to_owned(), (Instant::now(), page));
        loop {
            let bytes: usize = entries.values().map(|(_, p)| p.text.len()).sum();
            if entries.len() <= CAPACITY && bytes <= MAX_BYTES {
                break;
            }
            let Some(oldest) = entries
                .iter()
                .min_by_key(|(_, (at, _))| *at)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            entries.remove(&oldest);
        }
    }

    /// How many pages are kept.
    pub fn len(&self) -> usize {
        self.entries.lock().len()
    }

    /// Whether no page is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
