//! The check after every start: is the file the store writes into whole?
//!
//! The check at open ([`super::health`]) runs only when the file is
//! suspect — its previous owner died, or its size or time changed since
//! its clean end. Bit rot keeps both: a flipped byte in a page, the file's
//! size and time unchanged, goes unseen, and SQLite notices damage only in
//! the pages a statement reads, so a store would write into a damaged
//! file for as long as it runs. So every store that writes checks its file
//! once more, in the background: `PRAGMA quick_check` on a read-only
//! connection of its own, on a thread of its own, while the store already
//! serves — the first turn does not wait for it. A file the store has
//! just created is not checked (nothing in it can have rotted yet); the
//! next start checks it.
//!
//! Until the check has found the file whole, nothing is written *into the
//! file*: commits go to the write-ahead log as ever, and the checkpointer
//! (which copies the log into the file) waits for the verdict. When the
//! check finds damage, it is logged at error, and the store stops writing:
//! every write is refused with [`StoreError::WritesStopped`] (what was found,
//! and `troupe doctor` or a backup as the way out), no checkpoint runs, and
//! no connection checkpoints as it closes — the file is left byte for byte
//! as it was found, the log beside it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};

use super::error::StoreError;

/// What the check after start found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// It is running.
    Checking,
    /// The file is whole (or the check could not run: logged, and taken
    /// as whole, as before the check existed).
    Whole,
    /// SQLite found damage: its first findings.
    Damaged(String),
}

/// The check of one store's file and its verdict, shared by the store's
/// threads.
#[derive(Debug)]
pub(crate) struct Check {
    path: PathBuf,
    verdict: Mutex<Verdict>,
    changed: Condvar,
}

impl Check {
    /// Starts the check of `path` on a thread of its own; `before` runs
    /// first there (tests hold the check back with it).
    pub(crate) fn start(
        path: &Path,
        before: impl FnOnce() + Send + 'static,
    ) -> std::io::Result<Arc<Check>> {
        let check = Arc::new(Check {
            path: path.to_path_buf(),
            verdict: Mutex::new(Verdict::Checking),
            changed: Condvar::new(),
        });
        let running = Arc::clone(&check);
        std::thread::Builder::new()
            .name("troupe-store-check".into())
            .spawn(move || {
                before();
                running.run();
            })?;
        Ok(check)
    }

    /// A check already ended whole: for a file the store just created.
    pub(crate) fn whole(path: &Path) -> Arc<Check> {
        Arc::new(Check {
            path: path.to_path_buf(),
            verdict: Mutex::new(Verdict::Whole),
            changed: Condvar::new(),
        })
    }

    fn run(&self) {
        let started = std::time::Instant::now();
        let verdict = match super::health::quick_check(&self.path) {
            Ok(()) => {
                tracing::debug!(
                    path = %self.path.display(),
                    millis = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                    "store checked whole after start"
                );
                Verdict::Whole
            }
            Err(StoreError::Damaged { detail, .. }) => {
                tracing::error!(
                    path = %self.path.display(),
                    found = %detail,
                    "the database is damaged: troupe stopped writing to it; stop troupe and run \
                     `troupe doctor`, or restore it from a backup"
                );
                Verdict::Damaged(detail)
            }
            Err(e) => {
                tracing::warn!(
                    path = %self.path.display(),
                    error = %e,
                    "the database could not be checked after start; going on without the check"
                );
                Verdict::Whole
            }
        };
        self.settle(verdict);
    }

    fn settle(&self, verdict: Verdict) {
        let mut now = self.verdict.lock().unwrap_or_else(|p| p.into_inner());
        *now = verdict;
        self.changed.notify_all();
    }

    /// The verdict now.
    pub(crate) fn verdict(&self) -> Verdict {
        self.verdict
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Blocks until the check has ended; its verdict.
    pub(crate) fn wait(&self) -> Verdict {
        let mut now = self.verdict.lock().unwrap_or_else(|p| p.into_inner());
        while *now == Verdict::Checking {
            now = self.changed.wait(now).unwrap_or_else(|p| p.into_inner());
        }
        now.clone()
    }

    /// The error a write gets once the check found damage.
    pub(crate) fn refusal(&self) -> Option<StoreError> {
        match self.verdict() {
            Verdict::Damaged(detail) => Some(StoreError::WritesStopped {
                path: self.path.clone(),
                detail,
            }),
            Verdict::Checking | Verdict::Whole => None,
        }
    }

    /// Makes `conn` leave the file alone as it closes when the file was
    /// found damaged (waiting for the verdict first): SQLite's last
    /// connection would otherwise copy the log into it.
    pub(crate) fn before_close(&self, conn: &rusqlite::Connection) {
        if let Verdict::Damaged(_) = self.wait() {
            let _ = conn.set_db_config(
                rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
                true,
            );
        }
    }
}

#[cfg(test)]
#[path = "check_tests.rs"]
mod tests;
