//! The durable store: one SQLite file per home, written by one thread.
//!
//! Everything troupe must not lose — conversations and their messages, the
//! durable mailbox between agents, usage — lives in `troupe.db`. SQLite is
//! blocking and allows one writer at a time, so the store is shaped around
//! that instead of fighting it:
//!
//! - **One writer.** A dedicated OS thread owns the write connection. Write
//!   jobs queue on a channel and the thread commits whatever is queued in ONE
//!   transaction (group commit), each job in its own savepoint so a failing
//!   job rolls back only itself. A job's result comes back only after
//!   `COMMIT`: an answered write is durable.
//! - **Readers off the async threads.** Reads run on a small pool of threads
//!   with their own connections; WAL lets them read while the writer writes.
//! - **Domain functions take a transaction or a connection**
//!   ([`conversations`], [`mailbox`], [`usage`], [`kv`], and [`search`] for
//!   recall), so a caller composes several
//!   in one job — e.g. consuming a mailbox message and appending it to a
//!   conversation atomically.
//!
//! Opening never takes an exclusive lock (the home's lock, not SQLite's,
//! decides which process writes: see [`crate::home::HomeLock`]), never
//! overwrites a file that is not a database, and refuses a schema newer
//! than this binary. A store whose file does not exist yet starts as a
//! copy of the current schema already made (`fresh.rs`), and its readers
//! open their connections on their own threads: a new home's first start
//! parses no SQL schema. [`Store::open_read_only`] opens a store for the
//! listing commands that run beside the home's owner: readers only, no
//! migration, every write refused. [`health`] checks a database whole.
//!
//! # Examples
//!
//! ```
//! use troupe_runtime::id::{BotId, ConversationId};
//! use troupe_runtime::protocol::Message;
//! use troupe_runtime::store::{conversations, Store};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let store = Store::open(&dir.path().join("troupe.db"))?;
//!
//! let (bot, conv) = (BotId::new(), ConversationId::new());
//! // One write job: both statements commit together, or neither does.
//! store
//!     .write(move |tx| {
//!         conversations::create_conversation(tx, &conversations::NewConversation::new(conv, bot, "main"))?;
//!         conversations::append_message(tx, conv, &Message::user("hello"))
//!     })
//!     .await?;
//!
//! let history = store.read(move |conn| conversations::load_messages(conn, conv)).await?;
//! assert_eq!(history[0].message, Message::user("hello"));
//! # Ok(())
//! # }
//! ```

mod answer;
pub use answer::worth_looking;
pub mod catch_up;
mod check;
mod checkpointer;
pub mod cluster;
pub mod conversations;
pub mod environments;
mod error;
pub mod executor_usage;
mod fresh;
pub mod health;
pub mod house;
pub mod house_files;
pub mod house_move;
pub mod kv;
pub mod mailbox;
pub mod migrations;
#[allow(unsafe_code)]
mod page_cache;
pub mod proposals;
mod reader;
pub mod search;
mod squeezer;
pub mod tokens;
pub mod usage;
#[allow(unsafe_code)]
mod wal_writes;
mod writer;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags, Transaction};
use tokio::sync::mpsc;

pub use check::Verdict;
pub use error::{Result, StoreError};

/// A queued write ([`Store::submit`]); [`Pending::wait`] gives its outcome.
#[derive(Debug)]
#[must_use = "a queued write's outcome is only known by waiting for it"]
pub struct Pending<T> {
    rx: tokio::sync::oneshot::Receiver<Result<T>>,
}

impl<T> Pending<T> {
    /// Waits until the write committed (or failed).
    pub async fn wait(self) -> Result<T> {
        answer::wait(self.rx).await
    }
}

/// How long a connection waits for another's lock before failing, by default.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Write jobs that may wait in the writer's queue before senders wait.
const WRITE_QUEUE: usize = 16 * 1024;

/// Read jobs that may wait for a reader before senders wait.
const READ_QUEUE: usize = 1024;

/// How a store is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenOptions {
    /// `synchronous = FULL` (survives power loss, slower commits) instead of
    /// `NORMAL` (survives a process crash; the default).
    pub synchronous_full: bool,
    /// Reader threads, at least one.
    pub readers: usize,
    /// How long to wait for another process's write lock before failing
    /// with [`StoreError::Locked`].
    pub busy_timeout: Duration,
    /// How long the writer must go without a job before it indexes the
    /// messages and delegation entries it deferred (once enough wait; see
    /// [`catch_up`]), so that a burst of writes never waits on the indexes.
    pub index_when_idle: Duration,
}

/// The writer's idle wait before it indexes deferred messages, by default:
/// longer than the gaps between the batches of a burst.
pub const INDEX_WHEN_IDLE: Duration = Duration::from_millis(10);

impl Default for OpenOptions {
    fn default() -> Self {
        Self {
            synchronous_full: false,
            readers: 2,
            busy_timeout: BUSY_TIMEOUT,
            index_when_idle: INDEX_WHEN_IDLE,
        }
    }
}

/// A handle to the store; cheap to clone, share it freely.
///
/// The writer and reader threads stop once the last handle is dropped,
/// after committing the writes already queued.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    /// `None` when the store was opened read-only.
    writes: Option<mpsc::Sender<Box<dyn writer::Job>>>,
    /// The check after start (`None` read-only: such a store writes nothing).
    check: Option<Arc<check::Check>>,
    reads: mpsc::Sender<reader::ReadJob>,
    /// The readers serving `reads` (told of each read queued).
    readers: Arc<reader::Pool>,
    /// What the writer's idle work tells (`None` read-only); only tests
    /// wait on it.
    #[cfg_attr(not(test), allow(dead_code))]
    idle: Option<writer::Idle>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.inner.path)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Opens (creating if missing) the database at `path` with the default
    /// options, migrating its schema to the latest version.
    ///
    /// Blocking: from async code call it in `spawn_blocking`.
    pub fn open(path: &Path) -> Result<Store> {
        Self::open_with(path, OpenOptions::default())
    }

    /// Opens the database at `path` with `options`, and starts checking it
    /// in the background ([`Store::verdict`]).
    ///
    /// A database this call creates is not checked: there is nothing in it
    /// to have rotted yet, and the next start checks it (a cold start on a
    /// new home does not pay for a check of its empty file).
    pub fn open_with(path: &Path, options: OpenOptions) -> Result<Store> {
        let created = std::fs::metadata(path).map_or(true, |m| m.len() == 0);
        Self::open_inner(path, options, (!created).then_some(|| {}))
    }

    /// [`Store::open_with`], its background check started after `before`
    /// (tests hold the check back with it).
    #[doc(hidden)]
    pub fn open_checked_after(
        path: &Path,
        options: OpenOptions,
        before: impl FnOnce() + Send + 'static,
    ) -> Result<Store> {
        Self::open_inner(path, options, Some(before))
    }

    /// Opens, migrates and starts the store's threads; checks the file in
    /// the background after `check`'s hook when given, else takes it whole.
    fn open_inner(
        path: &Path,
        options: OpenOptions,
        check: Option<impl FnOnce() + Send + 'static>,
    ) -> Result<Store> {
        let placed = fresh::place(path).map_err(|source| StoreError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        check_header(path)?;
        let mut conn = connect(path, &options, false)?;
        if placed && !options.synchronous_full {
            fresh::migrate_unsynced(&mut conn, path)?;
        } else {
            migrations::migrate(&mut conn, path)?;
        }
        // The readers and the checkpointer open their connections on their
        // own threads, beside the rest of the start.
        let readers = (0..options.readers.max(1))
            .map(|_| {
                let path = path.to_path_buf();
                Box::new(move || connect(&path, &options, true)) as reader::Opener
            })
            .collect();

        let io = |source| StoreError::Io {
            path: path.to_path_buf(),
            source,
        };
        // Opened, migrated: what is checked is the file this store writes.
        let check = match check {
            Some(before) => check::Check::start(path, before).map_err(io)?,
            None => check::Check::whole(path),
        };
        let (writes, write_rx) = mpsc::channel(WRITE_QUEUE);
        let checkpointer = {
            let path = path.to_path_buf();
            Box::new(move || {
                let conn = connect(&path, &options, false)?;
                // It only copies WAL frames back; it needs no cache of its own.
                conn.pragma_update(None, "cache_size", -1024)
                    .map_err(|e| StoreError::from(e).at(&path))?;
                Ok(conn)
            }) as reader::Opener
        };
        let idle = writer::spawn(
            conn,
            checkpointer,
            path.to_path_buf(),
            write_rx,
            writes.downgrade(),
            Arc::clone(&check),
            options.index_when_idle,
        )
        .map_err(io)?;
        let (reads, read_rx) = mpsc::channel(READ_QUEUE);
        let readers = reader::spawn(readers, read_rx, Some(Arc::clone(&check))).map_err(io)?;
        Ok(Store {
            inner: Arc::new(Inner {
                path: path.to_path_buf(),
                writes: Some(writes),
                check: Some(check),
                reads,
                readers,
                idle: Some(idle),
            }),
        })
    }

    /// Opens the existing database at `path` for reading only: no writer,
    /// no migration, connections opened with `SQLITE_OPEN_READ_ONLY`, so
    /// it runs beside the process that writes it and cannot change it.
    /// Every write fails with [`StoreError::ReadOnly`]; [`Store::catch_up`]
    /// does nothing (searches see what the writer indexed).
    ///
    /// # Errors
    ///
    /// [`StoreError::NoDatabase`] when there is no database (or an empty
    /// file) at `path`; [`StoreError::OlderSchema`] or
    /// [`StoreError::NewerSchema`] when its schema is not this binary's.
    pub fn open_read_only(path: &Path, options: OpenOptions) -> Result<Store> {
        let no_database = || StoreError::NoDatabase {
            path: path.to_path_buf(),
        };
        match std::fs::metadata(path) {
            Ok(meta) if meta.len() > 0 => {}
            Ok(_) => return Err(no_database()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(no_database()),
            Err(source) => {
                return Err(StoreError::Io {
                    path: path.to_path_buf(),
                    source,
                })
            }
        }
        check_header(path)?;
        let readers = (0..options.readers.max(1))
            .map(|_| connect_read_only(path, &options))
            .collect::<Result<Vec<_>>>()?;
        if let Some(first) = readers.first() {
            let found: i64 = first
                .query_row("PRAGMA user_version", [], |r| r.get(0))
                .map_err(|e| StoreError::from(e).at(path))?;
            let known = migrations::latest();
            if found == 0 {
                return Err(no_database());
            }
            if found > known {
                return Err(StoreError::NewerSchema {
                    path: path.to_path_buf(),
                    found,
                    known,
                });
            }
            if found < known {
                return Err(StoreError::OlderSchema {
                    path: path.to_path_buf(),
                    found,
                    known,
                });
            }
        }
        let (reads, read_rx) = mpsc::channel(READ_QUEUE);
        let readers = readers
            .into_iter()
            .map(|conn| Box::new(move || Ok(conn)) as reader::Opener)
            .collect();
        let readers = reader::spawn(readers, read_rx, None).map_err(|source| StoreError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(Store {
            inner: Arc::new(Inner {
                path: path.to_path_buf(),
                writes: None,
                check: None,
                reads,
                readers,
                idle: None,
            }),
        })
    }

    /// Whether the store was opened read-only ([`Store::open_read_only`]).
    pub fn is_read_only(&self) -> bool {
        self.inner.writes.is_none()
    }

    /// What the check after start found ([`Verdict::Whole`] for a
    /// read-only store, which writes nothing). Once it is
    /// [`Verdict::Damaged`], every write fails with
    /// [`StoreError::WritesStopped`].
    pub fn verdict(&self) -> Verdict {
        self.inner
            .check
            .as_ref()
            .map_or(Verdict::Whole, |c| c.verdict())
    }

    /// The writer's queue, or [`StoreError::ReadOnly`], or
    /// [`StoreError::WritesStopped`] once the file was found damaged.
    fn writes(&self) -> Result<&mpsc::Sender<Box<dyn writer::Job>>> {
        if let Some(refusal) = self.inner.check.as_ref().and_then(|c| c.refusal()) {
            return Err(refusal);
        }
        self.inner
            .writes
            .as_ref()
            .ok_or_else(|| StoreError::ReadOnly {
                path: self.inner.path.clone(),
            })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Runs `f` in a write transaction and returns its result once committed.
    ///
    /// `f` runs on the writer thread, batched with other jobs; if it returns
    /// an error its changes (only its own) are rolled back. It may run more
    /// than once (when another job of its batch fails, the batch runs
    /// again), so it must depend only on the database and what it captured,
    /// and do nothing outside the transaction. Keep it short: it holds up
    /// every other write. If the caller stops waiting, the write still
    /// happens.
    pub async fn write<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: Fn(&Transaction<'_>) -> Result<T> + Send + 'static,
    {
        self.submit(f).await?.wait().await
    }

    /// Queues `f` for the writer and returns once it is queued, not done.
    /// Writes run in the order they are queued, so a caller may go on with
    /// work that does not depend on it (a model call after the user's
    /// message was queued), queue its next write, and learn both outcomes
    /// in one group commit.
    pub async fn submit<T, F>(&self, f: F) -> Result<Pending<T>>
    where
        T: Send + 'static,
        F: Fn(&Transaction<'_>) -> Result<T> + Send + 'static,
    {
        let (job, rx) = writer::TypedJob::boxed(f);
        self.writes()?
            .send(job)
            .await
            .map_err(|_| StoreError::Closed)?;
        Ok(Pending { rx })
    }

    /// Makes every committed message and delegation entry searchable and
    /// every conversation's `updated_at` current (the writer defers them;
    /// see [`catch_up`]). Searches and "latest conversation" lookups call
    /// it first; it costs one small read when nothing waits.
    /// On a read-only store it does nothing.
    pub async fn catch_up(&self) -> Result<()> {
        if self.is_read_only() {
            return Ok(());
        }
        if self.read(catch_up::unindexed).await? > 0 {
            self.write(catch_up::catch_up).await?;
        }
        Ok(())
    }

    /// The last message `seq` the writer's idle catch-up indexed, changed
    /// after each of its steps (tests wait on it); `None` read-only.
    #[cfg(test)]
    pub(crate) fn idle_indexed(&self) -> Option<tokio::sync::watch::Receiver<i64>> {
        self.inner.idle.as_ref().map(|idle| idle.indexed.clone())
    }

    /// The steps of compressing file pieces the writer's idle work has
    /// committed, changed after each (tests wait on it); `None` read-only.
    #[cfg(test)]
    pub(crate) fn idle_compressed(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.inner.idle.as_ref().map(|idle| idle.compressed.clone())
    }

    /// How many times the idle writer gave its page cache back (tests wait
    /// on it); `None` read-only.
    #[cfg(test)]
    pub(crate) fn idle_given_back(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.inner.idle.as_ref().map(|idle| idle.given_back.clone())
    }

    /// [`Store::write`] for code outside an async runtime (it blocks; it
    /// panics if called on an async worker thread, like any blocking wait).
    pub fn write_blocking<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: Fn(&Transaction<'_>) -> Result<T> + Send + 'static,
    {
        let (job, rx) = writer::TypedJob::boxed(f);
        self.writes()?
            .blocking_send(job)
            .map_err(|_| StoreError::Closed)?;
        rx.blocking_recv().map_err(|_| StoreError::Closed)?
    }

    /// Runs `f` on a reader thread; it sees every write committed before it
    /// started.
    pub async fn read<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let (job, rx) = reader::job(f);
        self.inner
            .reads
            .send(job)
            .await
            .map_err(|_| StoreError::Closed)?;
        self.inner.readers.sent();
        answer::wait(rx).await
    }

    /// [`Store::read`] for code outside an async runtime.
    pub fn read_blocking<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let (job, rx) = reader::job(f);
        self.inner
            .reads
            .blocking_send(job)
            .map_err(|_| StoreError::Closed)?;
        self.inner.readers.sent();
        rx.blocking_recv().map_err(|_| StoreError::Closed)?
    }
}

/// The 16 bytes every SQLite database file starts with.
const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";

/// Refuses an existing, non-empty file that is not a SQLite database before
/// SQLite touches it, so it is never rewritten.
fn check_header(path: &Path) -> Result<()> {
    let mut file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(StoreError::Io {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    let mut head = Vec::with_capacity(16);
    file.by_ref()
        .take(16)
        .read_to_end(&mut head)
        .map_err(|source| StoreError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    if head.is_empty() || head == SQLITE_HEADER {
        return Ok(());
    }
    Err(StoreError::Corrupt {
        path: path.to_path_buf(),
        detail: "the file does not start with the SQLite header".into(),
    })
}

/// Puts troupe's page cache and log writes under SQLite (once per process),
/// before a connection opens.
pub(crate) fn install_sqlite_layers() {
    page_cache::install();
    wal_writes::install();
}

/// Opens one connection, applies the settings and checks they took effect.
fn connect(path: &Path, options: &OpenOptions, reader: bool) -> Result<Connection> {
    let at = |e: rusqlite::Error| StoreError::from(e).at(path);
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI;
    install_sqlite_layers();
    let conn = Connection::open_with_flags(path, flags).map_err(at)?;
    conn.busy_timeout(options.busy_timeout).map_err(at)?;
    conn.set_prepared_statement_cache_capacity(64);
    plan_once(&conn).map_err(at)?;
    // Read before any write: a damaged file fails here, untouched.
    conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| {
        r.get::<_, i64>(0)
    })
    .map_err(at)?;

    let journal: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .map_err(at)?;
    expect(path, "journal_mode", "wal", &journal.to_ascii_lowercase())?;
    conn.pragma_update(None, "foreign_keys", true).map_err(at)?;
    // SQLite checks each cell's size against its page as it reads it: a
    // damaged page is an error, not data written back (no measurable cost:
    // docs/security.md).
    conn.pragma_update(None, "cell_size_check", true)
        .map_err(at)?;
    let sync = if options.synchronous_full { 2 } else { 1 };
    conn.pragma_update(None, "synchronous", sync).map_err(at)?;
    if reader {
        conn.pragma_update(None, "query_only", true).map_err(at)?;
    }
    // Savepoint journals and sorts in memory, and a page cache that holds a
    // large store's index pages (negative: KiB).
    conn.pragma_update(None, "temp_store", 2).map_err(at)?;
    // Both grow only as pages are used: a small store costs little, a large
    // one keeps its indexes (the writer's B-trees and full-text segments,
    // the readers' search paths) in memory.
    let cache_kib: i64 = if reader { 32 * 1024 } else { 64 * 1024 };
    conn.pragma_update(None, "cache_size", -cache_kib)
        .map_err(at)?;
    if !reader {
        // The writer's checkpointer thread copies the WAL back (see
        // `writer`); a connection checkpoints by itself only past ~128 MiB
        // of WAL, when that thread falls far behind.
        conn.pragma_update(
            None,
            "wal_autocheckpoint",
            writer::FALLBACK_CHECKPOINT_PAGES,
        )
        .map_err(at)?;
    }

    let get = |name: &str| -> Result<i64> {
        conn.query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))
            .map_err(at)
    };
    expect(path, "foreign_keys", "1", &get("foreign_keys")?.to_string())?;
    expect(
        path,
        "synchronous",
        &sync.to_string(),
        &get("synchronous")?.to_string(),
    )?;
    expect(
        path,
        "busy_timeout",
        &options.busy_timeout.as_millis().to_string(),
        &get("busy_timeout")?.to_string(),
    )?;
    Ok(conn)
}

/// Opens one read-only connection: no journal mode is set (the file keeps
/// the writer's WAL) and nothing is written.
fn connect_read_only(path: &Path, options: &OpenOptions) -> Result<Connection> {
    let at = |e: rusqlite::Error| StoreError::from(e).at(path);
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI;
    install_sqlite_layers();
    let conn = Connection::open_with_flags(path, flags).map_err(at)?;
    conn.busy_timeout(options.busy_timeout).map_err(at)?;
    conn.set_prepared_statement_cache_capacity(64);
    plan_once(&conn).map_err(at)?;
    conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| {
        r.get::<_, i64>(0)
    })
    .map_err(at)?;
    conn.pragma_update(None, "query_only", true).map_err(at)?;
    conn.pragma_update(None, "temp_store", 2).map_err(at)?;
    conn.pragma_update(None, "cache_size", -(32 * 1024))
        .map_err(at)?;
    Ok(conn)
}

/// Plans each statement once, when it is prepared. Otherwise SQLite reads
/// the bound value of a `LIMIT ?` (and of some other parameters) to plan
/// with, marks the statement stale when that parameter is bound again, and
/// parses and plans it anew at its next step: a cached statement costs as
/// much as an uncached one (a house post's read of a seat's unseen messages:
/// 208k instructions, three quarters of them the re-prepare). No query of
/// ours depends on a bound value for its plan: partial indexes are matched by
/// literals, and the store keeps no `ANALYZE` samples.
fn plan_once(conn: &Connection) -> rusqlite::Result<()> {
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)
        .map(|_| ())
}

fn expect(path: &Path, name: &'static str, wanted: &str, got: &str) -> Result<()> {
    if wanted == got {
        return Ok(());
    }
    Err(StoreError::Setting {
        path: path.to_path_buf(),
        name,
        wanted: wanted.to_string(),
        got: got.to_string(),
    })
}

/// The current time as stored: RFC 3339, UTC, microseconds (sorts as text).
pub fn now() -> String {
    timestamp(chrono::Utc::now())
}

/// A time as stored: RFC 3339, UTC, microseconds (sorts as text).
pub fn timestamp(at: chrono::DateTime<chrono::Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

/// Parses a stored time.
pub(crate) fn parse_time(text: &str) -> Result<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&chrono::Utc))
        .map_err(|e| StoreError::Codec {
            what: "timestamp",
            detail: format!("`{text}`: {e}"),
        })
}

#[cfg(test)]
#[path = "store/store_tests.rs"]
mod tests;
