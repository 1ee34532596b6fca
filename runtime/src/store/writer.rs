//! The one writer: an OS thread that owns the write connection.
//!
//! SQLite allows one writer at a time, and an fsync per transaction is what
//! bounds write throughput. So every write goes through one thread: jobs
//! queue on a channel, and the thread drains whatever is queued (up to
//! [`MAX_BATCH`]) into ONE transaction — group commit. A job that fails
//! rolls back only itself (the batch runs again with a `SAVEPOINT` per job;
//! see [`commit_batch`]). Results are sent back only after `COMMIT`, so
//! "answered" means "durable".
//!
//! A batch that finds the database locked by someone else past the busy
//! timeout — at `BEGIN`, in a job, or at `COMMIT` — is rolled back whole
//! and run again, up to [`LOCKED_TRIES`] times in all, before its jobs are
//! told [`StoreError::Locked`]: a lock a program holds for a moment (a read
//! lock on the `-shm` file, another troupe's transaction) delays a tool
//! result's save; it neither loses it nor saves it twice.
//!
//! Work that would cost more per row than the row itself is deferred:
//! indexing the new messages and delegation entries for full-text search
//! and moving the messages' conversations' `updated_at`
//! ([`super::catch_up`]) wait until enough rows do and then until no job
//! has come for the store's idle wait
//! ([`super::OpenOptions::index_when_idle`]), so a burst of turns does not
//! wait on them; they run in a batch only when far behind. House files are
//! indexed for search after the write that made them, in transactions of
//! their own while no job is queued
//! ([`super::house_files::index`]); the pieces a write stored raw are
//! compressed once the writer has been idle for the same wait, a step at a
//! time while no job comes, by a thread of their own that hands each step
//! back to be stored ([`super::squeezer`]). Checkpoints (copying the WAL
//! back into the database) run on a thread of their own, off the writer's
//! path.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rusqlite::{Connection, Transaction, TransactionBehavior};
use tokio::sync::{mpsc, oneshot};

use super::check::Check;
use super::error::StoreError;

/// How many times in all a batch runs while the database stays locked by
/// someone else (each try waits up to the busy timeout).
pub(crate) const LOCKED_TRIES: u32 = 4;

/// Batches run again because the database was locked (for tests).
#[cfg(test)]
pub(crate) static LOCKED_RETRIES: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(0);

/// The most jobs committed in one transaction.
pub(crate) const MAX_BATCH: usize = 1024;

/// One queued write, type-erased so the writer can hold many kinds.
pub(crate) trait Job: Send {
    /// Runs the job inside the open transaction; true if it succeeded.
    /// Called again, from scratch, if the batch's first run is rolled back.
    fn run(&mut self, tx: &Transaction<'_>) -> bool;
    /// Answers the caller once the batch's fate is known.
    fn finish(self: Box<Self>, batch: Result<(), &StoreError>);
    /// Whether its last run failed on a lock held by someone else.
    fn locked(&self) -> bool;
    /// Whether it is the checkpointer's write that starts the log over
    /// (see `super::checkpointer`), which is not copied back on its own.
    fn restarts_log(&self) -> bool {
        false
    }
    /// Whether it is the writer's own idle work come back (a step of
    /// compressed pieces, see `super::squeezer`), which does not end the
    /// writer's idle time.
    fn idle_work(&self) -> bool {
        false
    }
}

/// A write job with its reply channel.
pub(crate) struct TypedJob<T, F> {
    f: F,
    result: Option<Result<T, StoreError>>,
    reply: oneshot::Sender<Result<T, StoreError>>,
}

impl<T, F> TypedJob<T, F>
where
    T: Send + 'static,
    F: Fn(&Transaction<'_>) -> Result<T, StoreError> + Send + 'static,
{
    /// A job and the receiver its result arrives on.
    pub(crate) fn boxed(f: F) -> (Box<dyn Job>, oneshot::Receiver<Result<T, StoreError>>) {
        let (reply, rx) = oneshot::channel();
        let job = Self {
            f,
            result: None,
            reply,
        };
        (Box::new(job), rx)
    }
}

impl<T, F> Job for TypedJob<T, F>
where
    T: Send + 'static,
    F: Fn(&Transaction<'_>) -> Result<T, StoreError> + Send + 'static,
{
    fn run(&mut self, tx: &Transaction<'_>) -> bool {
        let result = catch_unwind(AssertUnwindSafe(|| (self.f)(tx)))
            .unwrap_or_else(|panic| Err(StoreError::Panicked(panic_text(&*panic))));
        let ok = result.is_ok();
        self.result = Some(result);
        ok
    }

    fn finish(self: Box<Self>, batch: Result<(), &StoreError>) {
        let answer = match (self.result, batch) {
            (Some(Err(e)), _) => Err(e),
            (Some(Ok(value)), Ok(())) => Ok(value),
            (_, Err(e)) => Err(e.replicate()),
            (None, Ok(())) => Err(StoreError::Aborted("the job was not run".into())),
        };
        // The caller may have stopped waiting; the write stands either way.
        let _ = self.reply.send(answer);
    }

    fn locked(&self) -> bool {
        matches!(&self.result, Some(Err(e)) if e.is_locked())
    }
}

/// The text of a caught panic.
pub(crate) fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}

/// The WAL size, in pages, past which a connection checkpoints by itself:
/// only when the checkpointer thread falls far behind.
pub(crate) const FALLBACK_CHECKPOINT_PAGES: i64 = 32 * 1024;

/// Starts the writer thread and its checkpointer (`super::checkpointer`,
/// which reaches the writer's queue through `restart`);
/// both stop when every sender is dropped, after committing what was
/// queued.
///
/// Copying the WAL back into the database (a checkpoint) took a sixth of
/// the writer's time when SQLite ran it inside `COMMIT`; the checkpointer
/// runs it on its own connection (PASSIVE: it never blocks the writer or a
/// reader), woken after commits.
pub(crate) fn spawn(
    conn: Connection,
    checkpointer: super::reader::Opener,
    path: PathBuf,
    jobs: mpsc::Receiver<Box<dyn Job>>,
    restart: mpsc::WeakSender<Box<dyn Job>>,
    check: Arc<Check>,
    idle: Duration,
) -> std::io::Result<Idle> {
    let (indexed, indexed_rx) = tokio::sync::watch::channel(0);
    let (compressed, compressed_rx) = tokio::sync::watch::channel(0);
    let (given_back, given_back_rx) = tokio::sync::watch::channel(0);
    // Only to wait for a job with a timeout (the idle wait).
    let clock = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()?;
    let (wake, woken) = crate::doorbell::doorbell();
    let squeezer = super::squeezer::Squeezer::new(restart.clone());
    super::checkpointer::spawn(
        checkpointer,
        path.clone(),
        woken,
        Arc::clone(&check),
        restart,
    )?;
    std::thread::Builder::new()
        .name("troupe-store-writer".into())
        .spawn(move || {
            let mut queue = Queue {
                jobs,
                clock,
                idle,
                indexed,
                compressed,
                given_back,
            };
            run(conn, &path, &mut queue, &wake, &check, squeezer);
        })
        .map(|_| Idle {
            indexed: indexed_rx,
            compressed: compressed_rx,
            given_back: given_back_rx,
        })
}

/// What the writer's idle work tells (tests wait on it).
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) struct Idle {
    /// The last message the idle catch-up indexed.
    pub(crate) indexed: tokio::sync::watch::Receiver<i64>,
    /// How many steps of compressing pieces it has committed.
    pub(crate) compressed: tokio::sync::watch::Receiver<u64>,
    /// How many times the idle writer gave its page cache back.
    pub(crate) given_back: tokio::sync::watch::Receiver<u64>,
}

/// The writer's queue, and how it waits for the next job.
struct Queue {
    jobs: mpsc::Receiver<Box<dyn Job>>,
    /// A runtime of the writer's thread, for the idle wait's timer.
    clock: tokio::runtime::Runtime,
    /// How long no job must come before deferred work runs.
    idle: Duration,
    /// Told the last message the idle catch-up indexed.
    indexed: tokio::sync::watch::Sender<i64>,
    /// Told each step of compressing pieces committed.
    compressed: tokio::sync::watch::Sender<u64>,
    /// Told each time the idle writer gave its page cache back.
    given_back: tokio::sync::watch::Sender<u64>,
}

/// What waiting for the next job came to.
enum Next {
    Job(Box<dyn Job>),
    /// No job came within the wait: time for background work.
    Idle,
    /// Every sender is gone.
    Closed,
}

impl Queue {
    /// The next job; with `wait`, [`Next::Idle`] if none comes within it.
    /// Without, it waits as long as it takes — but with `holding` (the
    /// page cache holds what was written since it was last given back),
    /// only for [`Queue::idle`], then [`Next::Idle`] too.
    fn next(&mut self, wait: Option<Duration>, holding: bool) -> Next {
        use tokio::sync::mpsc::error::TryRecvError;
        let job = match wait {
            None => match self.spin() {
                Some(job) => Some(job),
                None if holding => return self.next(Some(self.idle), false),
                None => self.jobs.blocking_recv(),
            },
            Some(wait) if wait.is_zero() => match self.jobs.try_recv() {
                Ok(job) => Some(job),
                Err(TryRecvError::Empty) => return Next::Idle,
                Err(TryRecvError::Disconnected) => None,
            },
            Some(wait) => {
                let jobs = &mut self.jobs;
                match self
                    .clock
                    .block_on(async { tokio::time::timeout(wait, jobs.recv()).await })
                {
                    Ok(job) => job,
                    Err(_elapsed) => return Next::Idle,
                }
            }
        };
        job.map_or(Next::Closed, Next::Job)
    }

    /// Looks for a job for a few tens of microseconds before the thread
    /// sleeps: a caller's next job often follows its answer that soon (a
    /// turn's next step), and a sleeping thread woken again costs two
    /// context switches — on the VMs troupe is measured on, more than the
    /// wait.
    fn spin(&mut self) -> Option<Box<dyn Job>> {
        if !super::answer::worth_looking() {
            return None;
        }
        let started = std::time::Instant::now();
        loop {
            match self.jobs.try_recv() {
                Ok(job) => return Some(job),
                Err(tokio::sync::mpsc::error::TryRecvError::Disconnected) => return None,
                Err(tokio::sync::mpsc::error::TryRecvError::Empty) => {}
            }
            if started.elapsed() >= SPIN {
                return None;
            }
            std::hint::spin_loop();
        }
    }
}

/// How long the writer looks for its next job before it sleeps.
const SPIN: Duration = Duration::from_micros(50);

fn run(
    mut conn: Connection,
    path: &std::path::Path,
    queue: &mut Queue,
    wake: &crate::doorbell::Doorbell,
    check: &Check,
    mut squeezer: super::squeezer::Squeezer,
) {
    let mut batch: Vec<Box<dyn Job>> = Vec::with_capacity(MAX_BATCH);
    // What a crash left pending is indexed first.
    let mut files_pending = pending_files(&conn, path);
    let mut unindexed = unindexed_rows(&conn, path);
    let mut untried = untried_pieces(&conn, path);
    // Whether the idle catch-up of the indexes, or the compression of pieces,
    // has begun (each goes on, a step at a time, while no job comes).
    let (mut indexing, mut compressing) = (false, false);
    // Whether SQLite's page cache holds pages written since it was given
    // back: once idle with nothing left to do, the writer gives them back.
    let mut holding = false;
    loop {
        // Queued jobs go first; background work fills the gaps: house
        // files as soon as the queue is empty, messages once enough wait
        // and pieces to compress once the writer has been idle a while.
        let wait = if files_pending || indexing || compressing {
            Some(Duration::ZERO)
        } else if unindexed >= super::catch_up::CATCH_UP_ROWS || (untried && !squeezer.busy()) {
            Some(queue.idle)
        } else {
            None
        };
        let first = match queue.next(wait, holding) {
            Next::Job(job) => job,
            Next::Closed => break,
            Next::Idle if check.refusal().is_some() => {
                files_pending = false;
                (indexing, compressing, untried) = (false, false, false);
                unindexed = 0;
                continue;
            }
            Next::Idle if files_pending => {
                files_pending = index_files(&mut conn, path);
                holding = true;
                wake.ring();
                continue;
            }
            Next::Idle if unindexed >= super::catch_up::CATCH_UP_ROWS || indexing => {
                unindexed = index_deferred(&mut conn, path, &queue.indexed);
                indexing = unindexed > 0;
                holding = true;
                wake.ring();
                continue;
            }
            Next::Idle if untried && !squeezer.busy() => {
                untried = squeezer.start(&mut conn, path);
                // Done here (no thread): go on while no job comes.
                compressing = untried && !squeezer.busy();
                if !squeezer.busy() {
                    queue.compressed.send_modify(|steps| *steps += 1);
                }
                holding = true;
                wake.ring();
                continue;
            }
            Next::Idle => {
                super::page_cache::give_back(&conn, path);
                holding = false;
                queue.given_back.send_modify(|times| *times += 1);
                continue;
            }
        };
        holding = true;
        (indexing, compressing) = (false, false);
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match queue.jobs.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        // A step of compressed pieces back, stored whatever comes of it
        // (what stays untried is taken up again).
        let idle_work = batch.iter().filter(|job| job.idle_work()).count();
        let only_idle_work = idle_work == batch.len();
        if idle_work > 0 {
            squeezer.back();
        }
        if let Some(refusal) = check.refusal() {
            // Found damaged: nothing more is written.
            batch.drain(..).for_each(|job| job.finish(Err(&refusal)));
            files_pending = false;
            untried = false;
            unindexed = 0;
            continue;
        }
        // A batch that only starts the log over leaves nothing to copy
        // back: the checkpointer is not woken for it.
        let copied_back = batch.iter().any(|job| !job.restarts_log());
        match commit_batch(&mut conn, path, &mut batch) {
            Some(left) => {
                unindexed = left.unindexed;
                files_pending = left.files_pending;
                untried = untried || left.untried;
            }
            None => {
                files_pending = pending_files(&conn, path);
                untried = untried || untried_pieces(&conn, path);
            }
        }
        if copied_back {
            wake.ring();
        }
        if idle_work > 0 {
            queue.compressed.send_modify(|steps| *steps += 1);
            // Only the writer's own work: still idle, so it goes on.
            compressing = only_idle_work && untried;
        }
    }
    check.before_close(&conn);
    if check.refusal().is_some() {
        tracing::debug!(path = %path.display(), "store writer stopped over a damaged file");
        return;
    }
    // Leave nothing for the next process to index.
    let caught_up = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(StoreError::from)
        .and_then(|tx| {
            super::catch_up::catch_up(&tx)?;
            super::house_files::index::index_all(&tx)?;
            Ok(tx.commit()?)
        });
    if let Err(e) = caught_up {
        tracing::warn!(path = %path.display(), error = %e, "store could not catch up at close");
    }
    tracing::debug!(path = %path.display(), "store writer stopped");
}

/// How many rows (messages, delegation entries) wait for the full-text
/// indexes (a failure to tell is logged and taken as none: a search still
/// catches up first).
fn unindexed_rows(conn: &Connection, path: &std::path::Path) -> i64 {
    super::catch_up::unindexed(conn).unwrap_or_else(|e| {
        tracing::warn!(path = %path.display(), error = %e, "store could not count the rows to index");
        0
    })
}

/// One step of the idle catch-up of the full-text indexes, in a transaction of its own
/// (see [`super::catch_up::step`]); how many are left.
fn index_deferred(
    conn: &mut Connection,
    path: &std::path::Path,
    indexed: &tokio::sync::watch::Sender<i64>,
) -> i64 {
    let stepped = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(StoreError::from)
        .and_then(|tx| {
            let (upto, left) = super::catch_up::step(&tx)?;
            tx.commit()?;
            Ok((upto, left))
        });
    stepped
        .map(|(upto, left)| {
            indexed.send_replace(upto);
            left
        })
        .unwrap_or_else(|e| {
            // Left pending: the next batch that finds too many, a search or
            // the close catches up.
            tracing::warn!(path = %path.display(), error = %e, "store could not catch up the full-text indexes");
            0
        })
}

/// Whether pieces wait to be compressed (a failure to tell is logged and
/// taken as no: they wait for the next batch or start).
fn untried_pieces(conn: &Connection, path: &std::path::Path) -> bool {
    super::house_files::compress::any_untried(conn).unwrap_or_else(|e| {
        tracing::warn!(path = %path.display(), error = %e, "store could not look for pieces to compress");
        false
    })
}

/// Whether house files wait to be indexed (a failure to tell is logged
/// and taken as no: a search still indexes its house first).
fn pending_files(conn: &Connection, path: &std::path::Path) -> bool {
    super::house_files::index::any_pending(conn).unwrap_or_else(|e| {
        tracing::warn!(path = %path.display(), error = %e, "store could not look for files to index");
        false
    })
}

/// One step of indexing house files, in a transaction of its own (see
/// [`super::house_files::index`]); whether more is pending.
fn index_files(conn: &mut Connection, path: &std::path::Path) -> bool {
    let stepped = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(StoreError::from)
        .and_then(|tx| {
            let more = super::house_files::index::index_some(
                &tx,
                super::house_files::index::CHUNKS_PER_STEP,
            )?;
            tx.commit()?;
            Ok(more)
        });
    stepped.unwrap_or_else(|e| {
        // Left pending: the next batch or search tries again.
        tracing::warn!(path = %path.display(), error = %e, "store could not index house files");
        false
    })
}

/// Runs a batch in one transaction, then answers every job with the
/// batch's fate.
///
/// First without savepoints: a savepoint per job makes SQLite copy every
/// page the job touches before it writes (a tenth of an append's cost),
/// and jobs seldom fail. If one does, the transaction is rolled back and
/// the batch runs again with each job in its own savepoint, so a failing
/// job rolls back only itself. That is why a job must be a function of the
/// database and its inputs (`Fn`): it may run twice.
fn commit_batch(
    conn: &mut Connection,
    path: &std::path::Path,
    batch: &mut Vec<Box<dyn Job>>,
) -> Option<Left> {
    let mut tries = 1;
    let fate = loop {
        let fate = match run_batch(conn, path, batch, Isolation::Shared) {
            Ran::JobFailed => match run_batch(conn, path, batch, Isolation::PerJob) {
                Ran::Done(fate) => fate,
                // Every job ran in its own savepoint: no job failure reaches here.
                Ran::JobFailed => Err(StoreError::Aborted(
                    "a job failed outside its savepoint".into(),
                )),
            },
            Ran::Done(fate) => fate,
        };
        match fate {
            Err(e) if e.is_locked() && tries < LOCKED_TRIES => {
                tries += 1;
                #[cfg(test)]
                LOCKED_RETRIES.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tracing::warn!(path = %path.display(), tries, "store locked by someone else; running the batch again");
            }
            fate => break fate,
        }
    };
    if let Err(err) = &fate {
        tracing::warn!(path = %path.display(), error = %err, jobs = batch.len(), "store batch failed");
    }
    let left = fate.as_ref().ok().copied();
    let fate = fate.as_ref().map(|_| ());
    batch.drain(..).for_each(|job| job.finish(fate));
    left
}

/// What a committed batch left for the writer's background work, read in
/// its own transaction (not in read transactions of their own after it:
/// each costs the log's shared-memory locks again).
#[derive(Clone, Copy)]
struct Left {
    /// Rows out of the full-text indexes.
    unindexed: i64,
    /// Whether a house file waits to be indexed.
    files_pending: bool,
    /// Whether a piece waits to be compressed.
    untried: bool,
}

/// How a batch's jobs are kept apart.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Isolation {
    /// All in the transaction itself: one failure spoils the batch.
    Shared,
    /// Each in a savepoint: a failure rolls back only its job.
    PerJob,
}

/// What running a batch came to.
enum Ran {
    /// Committed, with what it left for the background work, or failed
    /// as a whole (the fate every job is told).
    Done(Result<Left, StoreError>),
    /// A job failed in a [`Isolation::Shared`] run; nothing was committed.
    JobFailed,
}

/// Runs `batch` in one transaction, its jobs kept apart as `isolation`
/// says, then catches up what appends defer if far behind, and commits.
/// Dropping the transaction on an early return rolls it back.
fn run_batch(
    conn: &mut Connection,
    path: &std::path::Path,
    batch: &mut [Box<dyn Job>],
    isolation: Isolation,
) -> Ran {
    let tx = match conn.transaction_with_behavior(TransactionBehavior::Immediate) {
        Ok(tx) => tx,
        Err(e) => return Ran::Done(Err(StoreError::from(e).at(path))),
    };
    let per_job = isolation == Isolation::PerJob;
    for job in batch.iter_mut() {
        if per_job {
            if let Err(e) = savepoint(&tx, "SAVEPOINT job") {
                return Ran::Done(Err(e.at(path)));
            }
        }
        let ok = job.run(&tx);
        // A fatal error (disk full, I/O) makes SQLite roll back the whole
        // transaction: then nothing of the batch stands.
        if tx.is_autocommit() {
            return Ran::Done(Err(StoreError::Aborted(
                "SQLite rolled the transaction back".into(),
            )));
        }
        // A lock held by someone else spoils the whole batch: it runs
        // again, every job with it (see `commit_batch`).
        if !ok && job.locked() {
            return Ran::Done(Err(StoreError::Locked {
                path: path.to_path_buf(),
            }));
        }
        if !per_job {
            if !ok {
                return Ran::JobFailed;
            }
            continue;
        }
        let ended = if ok {
            savepoint(&tx, "RELEASE job")
        } else {
            savepoint(&tx, "ROLLBACK TO job").and_then(|()| savepoint(&tx, "RELEASE job"))
        };
        if let Err(e) = ended {
            return Ran::Done(Err(e.at(path)));
        }
    }
    // What appends defer (the full-text index, `updated_at`), when far
    // behind; if catching up fails, nothing of the batch stands.
    let left = match backlog(&tx, path) {
        Ok(left) => left,
        Err(e) => return Ran::Done(Err(e.at(path))),
    };
    Ran::Done(
        tx.commit()
            .map(|()| left)
            .map_err(|e| StoreError::from(e).at(path)),
    )
}

/// Reads what `tx` leaves for the background work, in one statement (six
/// statements' lookups in the cache cost more than their reads), and
/// catches up the indexes that are far behind. A failure to read is logged
/// and taken as nothing left: the next batch, start or search looks again.
fn backlog(tx: &Transaction<'_>, path: &std::path::Path) -> Result<Left, StoreError> {
    use super::catch_up::{self, DEFERRED};
    use super::house_files::{compress, index};
    static SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!(
            "SELECT {}, {}, {}",
            catch_up::position_columns(),
            index::ANY_PENDING,
            compress::ANY_UNTRIED
        )
    });
    let mut positions = [(0, 0); DEFERRED];
    let read = tx.prepare_cached(&SQL).and_then(|mut stmt| {
        stmt.query_row([], |r| {
            for (i, position) in positions.iter_mut().enumerate() {
                *position = (r.get(2 * i)?, r.get(2 * i + 1)?);
            }
            Ok((r.get(2 * DEFERRED)?, r.get(2 * DEFERRED + 1)?))
        })
    });
    let (files_pending, untried) = read.unwrap_or_else(|e| {
        tracing::warn!(path = %path.display(), error = %e, "store could not read what waits for its background work");
        positions = [(0, 0); DEFERRED];
        (false, false)
    });
    Ok(Left {
        unindexed: catch_up::if_due(tx, positions)?,
        files_pending,
        untried,
    })
}

fn savepoint(tx: &Transaction<'_>, sql: &str) -> Result<(), StoreError> {
    tx.prepare_cached(sql)?.execute([])?;
    Ok(())
}
