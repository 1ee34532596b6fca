//! What the home's owner checks before it writes the database.
//!
//! The lock file tells how the previous owner ended ([`super::lock`]); the
//! home's folders tell whether it ever had a database. From both, before a
//! node opens `troupe.db` for writing: a database that is missing or empty
//! in a home that had one is refused (opening it would start a new, empty
//! store in its place), and one the previous owner did not leave cleanly,
//! or that changed since, is checked with `PRAGMA quick_check` first.

use std::path::PathBuf;

use super::{Home, HomeLock, Seal};
use crate::store::{health, StoreError};

impl HomeLock {
    /// Whether the database may be damaged: it exists, and the previous
    /// owner died (or left no record), or the file changed since its clean
    /// end. Read from the files now; [`HomeLock::check_database`] checks
    /// what was suspect when the lock was taken.
    pub fn database_suspect(&self) -> bool {
        let path = self.home().database();
        if !path.is_file() {
            return false;
        }
        match self.previous() {
            None => true,
            Some(previous) => previous.ended.is_none() || previous.database != Seal::of(&path),
        }
    }

    /// Refuses a missing or empty database in a home that had one, then
    /// checks a [suspect](HomeLock::database_suspect) database with
    /// [`health::quick_check`]. Blocking (the check reads the whole file).
    ///
    /// # Errors
    ///
    /// [`StoreError::Missing`], [`StoreError::Damaged`], or what kept the
    /// check from running.
    pub fn check_database(&mut self) -> Result<(), StoreError> {
        let home = self.home();
        let path = home.database();
        health::refuse_missing(&path, &traces_of_use(home))?;
        if self.unchecked {
            tracing::info!(path = %path.display(), "checking the database after an unclean end");
            health::quick_check(&path)?;
            self.unchecked = false;
        }
        Ok(())
    }

    /// Notes that the database was found whole by a fuller check than
    /// [`HomeLock::check_database`]'s (`troupe doctor`'s).
    pub fn mark_database_checked(&mut self) {
        self.unchecked = false;
    }
}

/// What only a home that had a database holds besides it: bots' folders
/// (a bot exists only in the database). Memory files are not counted: a
/// person may write them before the first start.
pub fn traces_of_use(home: &Home) -> Vec<PathBuf> {
    std::fs::read_dir(home.root().join("bots"))
        .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default()
}
