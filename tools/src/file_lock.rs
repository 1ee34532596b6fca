//! Per-file serialized, version-checked edits.
//!
//! Memory files and the skill library are written by every conversation of an
//! agent at once, and by every troupe process that shares a home. A plain
//! read-modify-write would lose one of two concurrent edits. So an edit here:
//!
//! 1. takes the path's lock: an async mutex inside this process (waiters do not
//!    hold a thread), then an `flock` on a sidecar file `.<name>.lock` beside
//!    the target, which serializes with other processes;
//! 2. reads the file and a hash of its bytes, computes the new text;
//! 3. re-reads the hash and writes atomically (a temp file in the same folder,
//!    synced, then renamed over the target) only if it is unchanged — a writer
//!    that ignores the lock (a person's editor) makes the edit start again, a
//!    few times at most.
//!
//! On systems without `flock` only the in-process mutex applies.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};

use tokio::sync::{Mutex, OwnedMutexGuard};

/// How many times an edit starts again when the file changed under it.
pub const EDIT_ATTEMPTS: usize = 4;

/// One async mutex per lock file, for the waiters inside this process.
static LOCKS: LazyLock<parking_lot::Mutex<HashMap<PathBuf, Arc<Mutex<()>>>>> =
    LazyLock::new(Default::default);

/// Why a lock could not be taken or an edit could not be written.
#[derive(Debug, thiserror::Error)]
pub enum FileLockError {
    /// The lock file or the target could not be opened, read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
    /// The blocking task holding the lock was lost (the runtime is shutting down).
    #[error("the file task stopped before it finished: {0}")]
    Task(String),
}

/// Why an edit did not land.
#[derive(Debug, thiserror::Error)]
pub enum EditError<E> {
    /// The lock or the file failed.
    #[error(transparent)]
    Lock(#[from] FileLockError),
    /// The computation refused the edit; nothing was written.
    #[error("{0}")]
    Rejected(E),
    /// Another writer, ignoring the lock, kept changing the file.
    #[error("{path} kept changing while it was being edited ({attempts} attempts); try again")]
    Contended {
        /// The file.
        path: PathBuf,
        /// How many times the edit was tried.
        attempts: usize,
    },
}

/// A held lock on a path; dropping it releases both the flock and the mutex.
#[derive(Debug)]
pub struct PathLock {
    _guard: OwnedMutexGuard<()>,
    #[cfg(unix)]
    _file: std::fs::File,
}

/// The sidecar lock file of `target`: `.<name>.lock` in the same folder.
pub fn lock_file_for(target: &Path) -> PathBuf {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "root".into());
    let parent = target.parent().unwrap_or_else(|| Path::new("."));
    parent.join(format!(".{name}.lock"))
}

/// Takes the lock of `target` (a file or a folder), waiting for other holders
/// in this process and in other processes.
pub async fn lock(target: &Path) -> Result<PathLock, FileLockError> {
    let key = lock_file_for(target);
    let mutex = Arc::clone(LOCKS.lock().entry(key.clone()).or_default());
    let guard = mutex.lock_owned().await;
    #[cfg(unix)]
    {
        let file = tokio::task::spawn_blocking(move || flock_file(&key, true))
            .await
            .map_err(|e| FileLockError::Task(e.to_string()))??;
        Ok(PathLock {
            _guard: guard,
            _file: file.ok_or_else(|| FileLockError::Task("lock not taken".into()))?,
        })
    }
    #[cfg(not(unix))]
    {
        let _ = key;
        Ok(PathLock { _guard: guard })
    }
}

/// Opens (creating it and its folder) the lock file at `path` and locks it
/// exclusively; `wait: false` answers `None` instead of waiting.
#[cfg(unix)]
fn flock_file(path: &Path, wait: bool) -> Result<Option<std::fs::File>, FileLockError> {
    use rustix::fs::FlockOperation;
    let io = |source| FileLockError::Io {
        path: path.to_path_buf(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(io)?;
    let op = if wait {
        FlockOperation::LockExclusive
    } else {
        FlockOperation::NonBlockingLockExclusive
    };
    match rustix::fs::flock(&file, op) {
        Ok(()) => Ok(Some(file)),
        Err(e) if !wait && e == rustix::io::Errno::WOULDBLOCK => Ok(None),
        Err(e) => Err(io(e.into())),
    }
}

/// A file's text (empty when it does not exist) and the hash of its bytes.
pub fn read_versioned(path: &Path) -> Result<(String, u64), FileLockError> {
    match std::fs::read(path) {
        Ok(bytes) => {
            let hash = hash_bytes(Some(&bytes));
            Ok((String::from_utf8_lossy(&bytes).into_owned(), hash))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((String::new(), hash_bytes(None))),
        Err(source) => Err(FileLockError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

fn hash_bytes(bytes: Option<&[u8]>) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut hasher);
    hasher.finish()
}

/// Writes `bytes` to `path` atomically: a synced temp file in the same
/// folder, renamed over the target. Creates the folder.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), FileLockError> {
    let io = |source| FileLockError::Io {
        path: path.to_path_buf(),
        source,
    };
    let parent = path.parent().unwrap_or_else(|| Path::new("."));
    std::fs::create_dir_all(parent).map_err(io)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = parent.join(format!(".{name}.tmp-{}", uuid::Uuid::now_v7().simple()));
    let written = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(e));
    }
    Ok(())
}

/// Edits the text file at `path` under its lock.
///
/// `compute` gets the current text (empty when the file does not exist) and
/// answers the new text (`None`: leave the file as it is) with a value to
/// return, or refuses with `E`, in which case nothing is written. It may be
/// called more than once if another writer ignoring the lock changes the file
/// meanwhile.
pub async fn edit<T, E, F>(path: &Path, mut compute: F) -> Result<T, EditError<E>>
where
    F: FnMut(&str) -> Result<(Option<String>, T), E> + Send + 'static,
    T: Send + 'static,
    E: Send + 'static,
{
    let guard = lock(path).await?;
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let _held = guard;
        for _ in 0..EDIT_ATTEMPTS {
            let (text, version) = read_versioned(&path)?;
            let (new, out) = compute(&text).map_err(EditError::Rejected)?;
            let Some(new) = new else {
                return Ok(out);
            };
            if read_versioned(&path)?.1 != version {
                tracing::debug!(path = %path.display(), "file changed during an edit; starting again");
                continue;
            }
            write_atomic(&path, new.as_bytes())?;
            return Ok(out);
        }
        Err(EditError::Contended {
            path,
            attempts: EDIT_ATTEMPTS,
        })
    })
    .await
    .map_err(|e| EditError::Lock(FileLockError::Task(e.to_string())))?
}

#[cfg(test)]
#[path = "file_lock_tests.rs"]
mod tests;
