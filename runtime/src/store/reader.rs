//! The readers: a small pool of OS threads, each with its own connection.
//!
//! rusqlite blocks, so it must never run on tokio's worker threads. Reads go
//! to these threads through a bounded queue (a full queue makes callers
//! wait, which is the backpressure). In WAL mode readers never block the
//! writer nor each other, and each sees the last commit before its read began.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};

use rusqlite::Connection;
use tokio::sync::{mpsc, oneshot};

use super::check::Check;
use super::error::StoreError;
use super::writer::panic_text;

/// One queued read.
pub(crate) type ReadJob = Box<dyn FnOnce(&Connection) + Send>;

/// Wraps a read closure with its reply channel.
pub(crate) fn job<T, F>(f: F) -> (ReadJob, oneshot::Receiver<Result<T, StoreError>>)
where
    T: Send + 'static,
    F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
{
    let (reply, rx) = oneshot::channel();
    let job: ReadJob = Box::new(move |conn| {
        let result = catch_unwind(AssertUnwindSafe(|| f(conn)))
            .unwrap_or_else(|panic| Err(StoreError::Panicked(panic_text(&*panic))));
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
/// A reader whose connection cannot be opened says why and stops; reads
/// are served by the others, and fail with the store closed when none is
/// left.
///
/// With `check` (a writing store's), each leaves the file alone as it
/// closes when the check found it damaged.
pub(crate) fn spawn(
    openers: Vec<Opener>,
    jobs: mpsc::Receiver<ReadJob>,
    check: Option<Arc<Check>>,
) -> std::io::Result<()> {
    let jobs = Arc::new(Mutex::new(jobs));
    for (i, open) in openers.into_iter().enumerate() {
        let jobs = Arc::clone(&jobs);
        let check = check.clone();
        std::thread::Builder::new()
            .name(format!("troupe-store-reader-{i}"))
            .spawn(move || {
                let conn = match open() {
                    Ok(conn) => conn,
                    Err(e) => {
                        tracing::error!(error = %e, "a store reader could not open its connection");
                        return;
                    }
                };
                run(&conn, &jobs);
                if let Some(check) = check {
                    check.before_close(&conn);
                }
            })?;
    }
    Ok(())
}

fn run(conn: &Connection, jobs: &Mutex<mpsc::Receiver<ReadJob>>) {
    loop {
        // Hold the lock only while waiting for the next job, not while running it.
        let next = match jobs.lock() {
            Ok(mut rx) => rx.blocking_recv(),
            Err(_) => None,
        };
        match next {
            Some(job) => job(conn),
            None => return,
        }
    }
}
