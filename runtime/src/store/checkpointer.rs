//! The checkpointer: a thread of its own that copies the write-ahead log
//! back into the database, and has the log started over while nothing
//! waits on the writer.
//!
//! **When it checkpoints.** After commits: once the writer has been quiet
//! for [`QUIET`], or [`EVERY`] after the first commit it has not copied yet
//! (a steady stream of commits), whichever comes first. A commit wakes the
//! checkpointer only when it sleeps ([`crate::doorbell`]); while it waits
//! for quiet it looks once per [`QUIET`], so it finds quiet between one and
//! two [`QUIET`]s after the last commit, and a stream of commits wakes no
//! thread but the writer. A checkpoint
//! flushes the log and the database (two `fsync`s); run right after a
//! commit, they shared the disk with whatever that commit's caller did
//! next — creating an executor's folders and files, which wait on the
//! file system's journal those flushes commit.
//!
//! **The log's restart, paid while idle.** After a checkpoint that copied
//! the whole log, SQLite starts the log over at the next write, and
//! flushes the log's new header before that write's frames (one more
//! `fsync`). That write was the next commit — a tool result, an
//! executor's first event — and its caller waited for the flush. Now the
//! checkpointer hands the writer a write of its own right then
//! ([`RestartLog`], one small row), so the flush is paid in the quiet the
//! checkpointer found, and the next commit appends to a log already
//! started over. The writer does not wake the checkpointer for a batch
//! holding only that write: an idle store restarts its log once, not
//! every [`EVERY`].
//!
//! Its connection opens when its first checkpoint is due, not at start:
//! opening one reads the whole schema (2.8M instructions), which a cold
//! start's two cores were spending beside the start itself. The first
//! checkpoint waits [`EVERY`] after the first commit; a process that ends
//! before then never opens it, and the last connection to close copies
//! the log back as it does (unless the file was found damaged: every
//! connection that closes leaves it alone then, see
//! [`Check::before_close`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rusqlite::{Connection, Transaction};
use tokio::sync::mpsc::WeakSender;

use super::check::{Check, Verdict};
use super::writer::Job;
use crate::doorbell::{Seen, Watcher};

/// The longest time between the first commit not copied back and its
/// checkpoint, so that pages rewritten by consecutive batches (index
/// tails, the FTS structure) are copied back once rather than after every
/// batch.
pub(crate) const EVERY: Duration = Duration::from_millis(250);

/// How long the writer must have committed nothing before a checkpoint
/// runs (unless [`EVERY`] passed first).
pub(crate) const QUIET: Duration = Duration::from_millis(40);

/// The `kv` key [`RestartLog`] writes: when the log was last started over
/// in idle time (unix seconds).
pub(crate) const RESTARTED_KEY: &str = "store:log_restarted_at";

/// Starts the checkpointer's thread. `woken` is rung after each commit the
/// writer wants copied back (it wakes the checkpointer only when it
/// sleeps), and is gone when the writer stops; `restart` reaches the
/// writer's queue without keeping it open.
pub(super) fn spawn(
    opener: super::reader::Opener,
    path: PathBuf,
    woken: Watcher,
    check: Arc<Check>,
    restart: WeakSender<Box<dyn Job>>,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("troupe-store-checkpoint".into())
        .spawn(move || {
            // Nothing to copy back before a commit, nor before the first
            // checkpoint is due.
            if !woken.wait(woken.seen()) {
                return;
            }
            let Some(seen) = woken.settle(EVERY, Instant::now(), EVERY) else {
                return;
            };
            let conn = match opener() {
                Ok(conn) => conn,
                Err(e) => {
                    // Connections checkpoint by themselves past the fallback.
                    tracing::error!(error = %e, "the store's checkpointer could not open its connection");
                    return;
                }
            };
            let restart = || {
                // A full queue means the writer is busy: the next batch
                // restarts the log by itself.
                if let Some(writer) = restart.upgrade() {
                    let _ = writer.try_send(Box::new(RestartLog));
                }
            };
            run(&conn, &path, &woken, seen, &check, restart);
            check.before_close(&conn);
        })
        .map(|_| ())
}

/// Checkpoints now, then after commits as the module says, until the
/// writer stops; then once more. None before the check after start found
/// the file whole, and none at all once it found it damaged (see
/// [`super::check`]).
fn run(
    conn: &Connection,
    path: &Path,
    woken: &Watcher,
    mut seen: Seen,
    check: &Check,
    restart: impl Fn(),
) {
    let checkpoint = || check.wait() == Verdict::Whole && checkpoint(conn, path);
    loop {
        if checkpoint() {
            restart();
        }
        // Quiet is a whole `QUIET` without a commit, found by the
        // checkpointer's own look once per `QUIET`.
        let next = match woken.wait(seen) {
            true => woken.settle(QUIET, Instant::now(), EVERY),
            false => None,
        };
        match next {
            Some(last) => seen = last,
            None => {
                checkpoint();
                return;
            }
        }
    }
}

/// A passive checkpoint; whether it copied the whole log back (the next
/// write starts the log over).
fn checkpoint(conn: &Connection, path: &Path) -> bool {
    let result = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
        Ok((
            r.get::<_, i64>(0)?,
            r.get::<_, i64>(1)?,
            r.get::<_, i64>(2)?,
        ))
    });
    match result {
        Ok((busy, log, copied)) => busy == 0 && log > 0 && copied == log,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "store checkpoint failed");
            false
        }
    }
}

/// How many [`RestartLog`] writes were committed in this process, and a
/// condition moved by each (for tests).
#[cfg(test)]
pub(crate) static RESTARTS: (std::sync::Mutex<u64>, std::sync::Condvar) =
    (std::sync::Mutex::new(0), std::sync::Condvar::new());

/// The writer's job that starts the log over while nothing else waits
/// (see the module): one small row, answered to no one.
pub(super) struct RestartLog;

impl Job for RestartLog {
    fn run(&mut self, tx: &Transaction<'_>) -> bool {
        super::kv::set(
            tx,
            RESTARTED_KEY,
            &chrono::Utc::now().timestamp().to_string(),
        )
        .is_ok()
    }

    fn finish(self: Box<Self>, _batch: Result<(), &super::StoreError>) {
        #[cfg(test)]
        {
            let (count, moved) = &RESTARTS;
            *count.lock().unwrap_or_else(|e| e.into_inner()) += 1;
            moved.notify_all();
        }
    }

    fn locked(&self) -> bool {
        false
    }

    fn restarts_log(&self) -> bool {
        true
    }
}

#[cfg(test)]
#[path = "checkpointer_tests.rs"]
mod tests;
