//! The writing commands that need no node take the home's lock themselves.
//!
//! `init`, `doctor` and `proposals approve|reject` write the home (or must
//! not run beside a writer) but resume nothing, so they start no node: they
//! take the home's lock ([`HomeLock`]) as a node's runtime does, do their
//! work, and release it.

use std::path::PathBuf;

use troupe_runtime::home::{Home, HomeLock};

/// The home at `home` (else `$TROUPE_HOME`, else `~/.troupe`), locked for
/// this process; with `check`, its database is checked as a node's start
/// checks it ([`HomeLock::check_database`]).
pub async fn lock(home: Option<PathBuf>, check: bool) -> anyhow::Result<HomeLock> {
    let home = home.map(Home::new).unwrap_or_else(Home::from_env);
    let mut lock = HomeLock::acquire(&home)?;
    if check {
        lock = tokio::task::spawn_blocking(move || lock.check_database().map(|()| lock)).await??;
    }
    Ok(lock)
}

/// Releases `lock`, recording a clean end; a failure to record it is only
/// a warning (the next start checks the database once more).
pub fn release(lock: HomeLock) {
    if let Err(e) = lock.release() {
        eprintln!("troupe: warning: {e}");
    }
}
