//! What a file or folder was when it was last read (its device, inode,
//! size and change times), so that what was made of it can be kept and
//! used again while the stamp is the same: one `stat` in place of
//! reading it again.
//!
//! A stamp is trusted only once it has settled ([`Stamp::settled`]): a
//! file system dates a change by a clock that ticks every few
//! milliseconds, so a write within the same tick as the read could leave
//! the stamp as it was. Our own tools replace files by renaming (a new
//! inode), which moves the stamp whatever the clock.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

/// How old a change must be before a stamp of it is trusted: longer than
/// the coarse clock's tick by which file systems date changes.
const SETTLE: Duration = Duration::from_millis(50);

/// A file's identity, size and last change, as `stat` tells them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    modified_ns: i128,
    changed_ns: i128,
}

impl Stamp {
    /// The stamp of `path` now; `None` when it cannot be read (missing).
    pub(crate) fn of(path: &Path) -> Option<Self> {
        Self::read(path).ok()
    }

    /// The stamp of `path` now, or why there is none.
    pub(crate) fn read(path: &Path) -> std::io::Result<Self> {
        std::fs::metadata(path).map(|meta| Self::from(&meta))
    }

    /// The stamp of what `meta` describes.
    pub(crate) fn from(meta: &std::fs::Metadata) -> Self {
        let ns = |secs: i64, nanos: i64| i128::from(secs) * 1_000_000_000 + i128::from(nanos);
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            modified_ns: ns(meta.mtime(), meta.mtime_nsec()),
            changed_ns: ns(meta.ctime(), meta.ctime_nsec()),
        }
    }

    /// Whether its last change is old enough that a change made from now
    /// on gives another stamp.
    #[cfg(test)]
    fn settled(&self) -> bool {
        self.settled_for(SETTLE)
    }

    fn settled_for(&self, settle: Duration) -> bool {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i128);
        now - self.modified_ns.max(self.changed_ns) >= settle.as_nanos() as i128
    }
}

/// The files something was made of, each with its stamp then (`None`:
/// it was missing).
pub(crate) type Stamps = Vec<(PathBuf, Option<Stamp>)>;

/// Entries past which a [`Kept`] starts again empty (a process keeps a
/// few folders' and files' worth: its agents' skills and memory).
const KEPT_AT_MOST: usize = 1024;

/// What was made of files, by a key, used again while every file's stamp
/// stays as it was.
pub(crate) struct Kept<T> {
    entries: Mutex<troupe_runtime::hash::FastMap<PathBuf, Arc<(Stamps, T)>>>,
    settle: Duration,
}

impl<T> Default for Kept<T> {
    fn default() -> Self {
        Self::settling(SETTLE)
    }
}

impl<T> Kept<T> {
    /// Keeps only what was made of files unchanged for `settle` (tests
    /// say zero, to keep what they just wrote).
    pub(crate) fn settling(settle: Duration) -> Self {
        Self {
            entries: Mutex::new(Default::default()),
            settle,
        }
    }
}

impl<T: Clone> Kept<T> {
    /// What was kept for `key`, when none of its files changed since.
    pub(crate) fn get(&self, key: &Path) -> Option<T> {
        let kept = Arc::clone(self.entries.lock().get(key)?);
        let (stamps, value) = &*kept;
        stamps
            .iter()
            .all(|(path, stamp)| Stamp::of(path) == *stamp)
            .then(|| value.clone())
    }

    /// Keeps `value` for `key`, made of the files `stamps` describe as they
    /// were before it was read, when each has settled; else forgets `key`.
    pub(crate) fn keep(&self, key: &Path, stamps: Stamps, value: T) {
        let mut entries = self.entries.lock();
        if !stamps
            .iter()
            .all(|(_, s)| s.is_none_or(|s| s.settled_for(self.settle)))
        {
            entries.remove(key);
            return;
        }
        if entries.len() >= KEPT_AT_MOST {
            entries.clear();
        }
        entries.insert(key.to_path_buf(), Arc::new((stamps, value)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_moves_with_a_rewrite_and_has_not_settled_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.md");
        assert_eq!(Stamp::of(&path), None);
        std::fs::write(&path, "one").unwrap();
        let first = Stamp::of(&path).unwrap();
        assert_eq!(Stamp::of(&path), Some(first), "unchanged, the same");
        assert!(!first.settled(), "a change just made is not settled");
        std::fs::write(&path, "three").unwrap();
        assert_ne!(Stamp::of(&path), Some(first), "a longer text");
        // Replaced by a rename, as our tools write: another inode.
        let before = Stamp::of(&path).unwrap();
        let tmp = dir.path().join("a.tmp");
        std::fs::write(&tmp, "three").unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        assert_ne!(Stamp::of(&path), Some(before));
    }

    #[test]
    fn a_stamp_settles_once_its_last_change_is_older_than_a_clock_tick() {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        let at = |ago: Duration| (now - ago).as_nanos() as i128;
        let stamp = |modified: Duration, changed: Duration| Stamp {
            dev: 1,
            ino: 1,
            size: 1,
            modified_ns: at(modified),
            changed_ns: at(changed),
        };
        let second = Duration::from_secs(1);
        assert!(stamp(second, second).settled());
        // The newer of the two times counts.
        assert!(!stamp(second, Duration::ZERO).settled());
        assert!(!stamp(Duration::ZERO, second).settled());
    }

    #[test]
    fn what_is_kept_is_given_until_one_of_its_files_changes() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::write(&a, "one").unwrap();
        let kept: Kept<&str> = Kept::settling(Duration::ZERO);
        let stamps = || vec![(a.clone(), Stamp::of(&a)), (b.clone(), Stamp::of(&b))];
        assert_eq!(kept.get(dir.path()), None);
        kept.keep(dir.path(), stamps(), "made");
        assert_eq!(kept.get(dir.path()), Some("made"));
        // A file that was missing appears.
        std::fs::write(&b, "").unwrap();
        assert_eq!(kept.get(dir.path()), None);
        kept.keep(dir.path(), stamps(), "again");
        assert_eq!(kept.get(dir.path()), Some("again"));
        // One is rewritten; one is removed.
        std::fs::write(&a, "longer").unwrap();
        assert_eq!(kept.get(dir.path()), None);
        kept.keep(dir.path(), stamps(), "third");
        std::fs::remove_file(&b).unwrap();
        assert_eq!(kept.get(dir.path()), None);
        // What has not settled is not kept, and forgets what was.
        let settling: Kept<&str> = Kept::default();
        settling.keep(dir.path(), stamps(), "fresh");
        assert_eq!(settling.get(dir.path()), None);
    }
}
