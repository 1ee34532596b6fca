//! Which files a conversation has read, and what they held then.
//!
//! `write_file` and `edit_file` change a file only when the conversation has
//! read it and it has not changed since: a model that writes from memory, or
//! over an edit made by the user in the meantime, loses someone's work. The
//! ledger keeps, per conversation, each read file's content hash; the node
//! holds one, shared by its conversations (so what a conversation read
//! survives its passivation): a typed service of the node
//! ([`NodeServices::read_ledger`](super::services::NodeServices::read_ledger)).
//! Here, below the tools that read and write files, so that it is typed.

use std::collections::HashMap;
use std::hash::Hasher;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use parking_lot::Mutex;

use crate::id::ConversationId;
use crate::tool::Services;

/// What a file held when it was read or written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStamp {
    /// A hash of its bytes.
    pub hash: u64,
    /// Its length in bytes.
    pub len: u64,
    /// When it was last modified, if the system says.
    pub modified: Option<SystemTime>,
}

impl FileStamp {
    /// The stamp of `bytes`, modified at `modified`.
    pub fn of(bytes: &[u8], modified: Option<SystemTime>) -> Self {
        let mut hasher = ContentHasher::default();
        hasher.update(bytes);
        hasher.finish(modified)
    }

    /// Whether two stamps describe the same content.
    pub fn same_content(&self, other: &FileStamp) -> bool {
        self.hash == other.hash && self.len == other.len
    }
}

/// Hashes a file's content as it streams past, in chunks of any size.
#[derive(Default)]
pub struct ContentHasher {
    hasher: std::collections::hash_map::DefaultHasher,
    len: u64,
}

impl ContentHasher {
    /// Adds the next chunk.
    pub fn update(&mut self, chunk: &[u8]) {
        self.hasher.write(chunk);
        self.len += chunk.len() as u64;
    }

    /// The stamp of everything added.
    pub fn finish(self, modified: Option<SystemTime>) -> FileStamp {
        FileStamp {
            hash: self.hasher.finish(),
            len: self.len,
            modified,
        }
    }
}

/// Why a file may not be changed yet.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LedgerError {
    /// The conversation never read it.
    #[error("`{0}` already exists and has not been read in this conversation; read it with read_file first, then write")]
    NotRead(PathBuf),
    /// It changed after it was read.
    #[error("`{0}` has changed since it was last read in this conversation; read it again with read_file before changing it")]
    Changed(PathBuf),
}

/// The files each conversation has read.
#[derive(Debug, Default)]
pub struct ReadLedger {
    reads: Mutex<HashMap<ConversationId, HashMap<PathBuf, FileStamp>>>,
}

impl ReadLedger {
    /// The node's ledger, which `services` share.
    pub fn of(services: &Services) -> Arc<Self> {
        services.node().read_ledger()
    }

    /// Records that `conversation` read (or wrote) `path` as `stamp`.
    pub fn record(&self, conversation: ConversationId, path: &Path, stamp: FileStamp) {
        self.reads
            .lock()
            .entry(conversation)
            .or_default()
            .insert(path.to_path_buf(), stamp);
    }

    /// What `conversation` last saw of `path`.
    pub fn stamp(&self, conversation: ConversationId, path: &Path) -> Option<FileStamp> {
        self.reads
            .lock()
            .get(&conversation)
            .and_then(|files| files.get(path).copied())
    }

    /// Ok when `conversation` read `path` and it still holds what was read.
    pub fn check_unchanged(
        &self,
        conversation: ConversationId,
        path: &Path,
        current: &FileStamp,
    ) -> Result<(), LedgerError> {
        match self.stamp(conversation, path) {
            None => Err(LedgerError::NotRead(path.to_path_buf())),
            Some(seen) if seen.same_content(current) => Ok(()),
            Some(_) => Err(LedgerError::Changed(path.to_path_buf())),
        }
    }

    /// Forgets a conversation (when it ends or is compacted away).
    pub fn forget(&self, conversation: ConversationId) {
        self.reads.lock().remove(&conversation);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_hashing_equals_whole_hashing() {
        let bytes: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let mut chunked = ContentHasher::default();
        for chunk in bytes.chunks(777) {
            chunked.update(chunk);
        }
        assert_eq!(chunked.finish(None), FileStamp::of(&bytes, None));
    }

    #[test]
    fn ledger_is_per_conversation_and_detects_changes() {
        let ledger = ReadLedger::default();
        let (a, b) = (ConversationId::new(), ConversationId::new());
        let path = Path::new("/x/f.txt");
        let stamp = FileStamp::of(b"one", None);
        ledger.record(a, path, stamp);
        assert_eq!(ledger.check_unchanged(a, path, &stamp), Ok(()));
        assert_eq!(
            ledger.check_unchanged(b, path, &stamp),
            Err(LedgerError::NotRead(path.to_path_buf()))
        );
        assert_eq!(
            ledger.check_unchanged(a, path, &FileStamp::of(b"two", None)),
            Err(LedgerError::Changed(path.to_path_buf()))
        );
        ledger.forget(a);
        assert!(ledger.stamp(a, path).is_none());
    }
}
