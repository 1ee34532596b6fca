//! The readers: a small pool of OS threads, each with its own connection.
//!
//! rusqlite blocks, so it must never run on tokio's worker threads. Reads go
//! to these threads through a bounded queue (a full queue makes callers
//! wait, which is the backpressure). In WAL mode readers never block the
//! writer nor each other, and each sees the last commit before its read began.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use rusqlite::Connection;
use tokio::sync::{mpsc, oneshot};

use super::check::Check;
use super::error::StoreError;
use super::writer::panic_text;

/// One queued read: runs on a connection, calls its second argument once
/// the read is done, then answers.
pub(crate) type ReadJob = Box<dyn FnOnce(&Connection, &dyn Fn()) + Send>;

/// Wraps a read closure with its reply channel.
pub(crate) fn job<T, F>(f: F) -> (ReadJob, oneshot::Receiver<Result<T, StoreError>>)
where
    T: Send + 'static,
    F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
{
    let (reply, rx) = oneshot::channel();
    let job: ReadJob = Box::new(move |conn, done| {
        let result = catch_unwind(AssertUnwindSafe(|| f(conn)))
            .unwrap_or_else(|panic| Err(StoreError::Panicked(panic_text(&*panic))));
        // The reader is free before the caller, answered, can queue its
        // next read.
        done();
        let _ = reply.send(result);
    });
    (job, rx)
}

/// Opens a reader's connection, on the reader's own thread: a store's
/// start does not wait for its readers to read the schema.
pub(crate) type Opener = Box<dyn FnOnce() -> Result<Connection, StoreError> + Send>;

/// Starts one reader thread per opener; they stop when every sender of
/// the queue is dropped.
///
/// The first reader opens its connection at once; each other one when a
/// read is queued while every open reader is busy ([`Pool::sent`]), not at
/// start. Every connection reads the whole schema as it opens (2.8M
/// instructions), and a one-turn start, whose reads mostly come one at a
/// time, paid for a second reader beside the start on its two cores. Reads
/// that come together open the next reader, up to all of them.
///
/// A reader whose connection cannot be opened says why, asks the next one
/// to open instead, and stops; reads are served by the others, and fail
/// with the store closed when none is left.
///
/// With `check` (a writing store's), each leaves the file alone as it
/// closes when the check found it damaged.
pub(crate) fn spawn(
    openers: Vec<Opener>,
    jobs: mpsc::Receiver<ReadJob>,
    check: Option<Arc<Check>>,
) -> std::io::Result<Arc<Pool>> {
    let pool = Arc::new(Pool {
        jobs: Mutex::new(jobs),
        // The first reader, opening.
        free: AtomicUsize::new(usize::from(!openers.is_empty())),
        unasked: AtomicUsize::new(openers.len().saturating_sub(1)),
        waiting: Mutex::new(Waiting {
            idle: openers.len().saturating_sub(1),
            asked: 0,
            closed: false,
        }),
        asked: Condvar::new(),
    });
    for (i, open) in openers.into_iter().enumerate() {
        let pool = Arc::clone(&pool);
        let check = check.clone();
        std::thread::Builder::new()
            .name(format!("troupe-store-reader-{i}"))
            .spawn(move || {
                if i > 0 && !pool.wait_until_asked() {
                    return;
                }
                let conn = match open() {
                    Ok(conn) => conn,
                    Err(e) => {
                        tracing::error!(error = %e, "a store reader could not open its connection");
                        pool.free.fetch_sub(1, Ordering::SeqCst);
                        pool.ask_another();
                        return;
                    }
                };
                pool.run(&conn);
                if let Some(check) = check {
                    check.before_close(&conn);
                }
            })?;
    }
    Ok(pool)
}

/// The readers' shared queue, and the readers not opened yet.
pub(crate) struct Pool {
    jobs: Mutex<mpsc::Receiver<ReadJob>>,
    /// Readers open or opening, not running a read.
    free: AtomicUsize,
    /// Readers not asked to open yet ([`Waiting::idle`], read without its lock).
    unasked: AtomicUsize,
    waiting: Mutex<Waiting>,
    asked: Condvar,
}

/// The readers that have not opened their connection yet.
struct Waiting {
    /// Not asked to open yet.
    idle: usize,
    /// Asked to open, not yet woken.
    asked: usize,
    /// The queue is closed: no reader is needed any more.
    closed: bool,
}

impl Pool {
    /// Called after a read was queued: opens one more reader when every
    /// open one is busy (at worst one more than needed, when a read ends
    /// meanwhile).
    pub(crate) fn sent(&self) {
        // Once every reader is open, a busy pool is only a queue.
        if self.free.load(Ordering::SeqCst) == 0 && self.unasked.load(Ordering::SeqCst) > 0 {
            self.ask_another();
        }
    }

    fn waiting(&self) -> std::sync::MutexGuard<'_, Waiting> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Blocks a reader not opened yet until it is asked to open (`true`)
    /// or the queue closed first (`false`).
    fn wait_until_asked(&self) -> bool {
        let mut waiting = self.waiting();
        loop {
            if waiting.asked > 0 {
                waiting.asked -= 1;
                return true;
            }
            if waiting.closed {
                return false;
            }
            waiting = self.asked.wait(waiting).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Asks one more reader to open its connection, if one is left.
    fn ask_another(&self) {
        let mut waiting = self.waiting();
        if waiting.idle > 0 {
            waiting.idle -= 1;
            self.unasked.store(waiting.idle, Ordering::SeqCst);
            waiting.asked += 1;
            self.free.fetch_add(1, Ordering::SeqCst);
            self.asked.notify_one();
        }
    }

    fn close(&self) {
        self.waiting().closed = true;
        self.asked.notify_all();
    }

    fn run(&self, conn: &Connection) {
        loop {
            // Hold the lock only while waiting for the next job, not while
            // running it.
            let next = match self.jobs.lock() {
                Ok(mut rx) => {
                    let next = rx.blocking_recv();
                    if next.is_some() {
                        self.free.fetch_sub(1, Ordering::SeqCst);
                    }
                    next
                }
                Err(_) => None,
            };
            match next {
                Some(job) => job(conn, &|| {
                    self.free.fetch_add(1, Ordering::SeqCst);
                }),
                None => return self.close(),
            }
        }
    }
}

#[cfg(test)]
#[path = "reader_tests.rs"]
mod tests;
