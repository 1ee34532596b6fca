//! A new database starts as a copy of a made one, not from SQL.
//!
//! Making the schema from `schema.sql` means SQLite parses every table,
//! index, trigger and full-text table twice (once to run the statement,
//! once to read it back into its schema): two fifths of a cold start's
//! instructions on a new home. The same file, already made, is a few
//! hundred KiB of pages that compress to about 15 KB. So a store whose file
//! does not exist yet begins as that image ([`IMAGE`]); the migrations
//! then see a database at version 0 marked by [`MARK`] and only add the
//! rows a new database holds (the home house: its id and time are this
//! home's own) before setting the version, in one transaction.
//!
//! The image holds no rows of its own, and a test (`schema_tests.rs`)
//! keeps it to what `schema.sql` makes, object for object. After a new
//! migration, `TROUPE_BLESS_SCHEMA=1 cargo test -p troupe-runtime schema`
//! writes `schema.sql` and the image again.
//!
//! Durability is SQLite's: the image is flushed to disk before it takes
//! the database's name, so a write-ahead log that survives a power loss
//! never meets a half-written file beneath it. It takes the name with a
//! hard link, which fails if the name exists: two processes opening the
//! same new store at once make one database, never one over the other.
//!
//! The migration's rows are the first commit into a new write-ahead log,
//! and SQLite flushes a new log's header and its folder at that commit
//! (two `fsync`s on the start's path) even at `synchronous
//! = NORMAL`, where commits are otherwise not flushed. That commit skips
//! them ([`migrate_unsynced`]): the log is new, so there are no older
//! frames for its header to be told apart from (why SQLite flushes it),
//! and a power loss before the first checkpoint (which flushes the log,
//! and its folder, first) loses the new rows with every later commit of
//! `NORMAL`, leaving the image, still at version 0 and marked, which the
//! next start migrates again. A store opened with `synchronous = FULL`
//! flushes it as always.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// The database `schema.sql` makes, with no rows, at version 0 and marked
/// by [`MARK`] (LZ4, its size first).
pub(crate) const IMAGE: &[u8] = include_bytes!("fresh.db.lz4");

/// The `application_id` of a database that is still the bare image: its
/// schema made, its rows not yet added. The migrations clear it.
pub(crate) const MARK: i32 = 0x7472_7570; // "trup"

/// Puts the image at `path` if nothing is there (nor a log left by an
/// earlier database of that name). Returns whether it did; when it did
/// not, the store opens whatever is there as before.
pub(crate) fn place(path: &Path) -> std::io::Result<bool> {
    if path.exists() || wal_of(path).exists() {
        return Ok(false);
    }
    let pages = lz4_flex::decompress_size_prepended(IMAGE)
        .map_err(|e| std::io::Error::other(format!("the built-in new database: {e}")))?;
    let Some(name) = path.file_name() else {
        return Ok(false);
    };
    // A name no other opener uses, in this process or another.
    static OPENERS: AtomicU64 = AtomicU64::new(0);
    let mut staged = name.to_os_string();
    let opener = OPENERS.fetch_add(1, Ordering::Relaxed);
    staged.push(format!(".new-{}-{opener}", std::process::id()));
    let staged = path.with_file_name(staged);
    let placed = write_synced(&staged, &pages).and_then(|()| std::fs::hard_link(&staged, path));
    // The staged name goes whatever happened; the database keeps its link.
    let _ = std::fs::remove_file(&staged);
    match placed {
        Ok(()) => Ok(true),
        // Another process made it first: open theirs.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}

/// Migrates the database just placed with the log's first commit not
/// flushed (see the module's documentation), then goes back to
/// `synchronous = NORMAL` for every later commit.
pub(crate) fn migrate_unsynced(conn: &mut rusqlite::Connection, path: &Path) -> super::Result<()> {
    let at = |e: rusqlite::Error| super::StoreError::from(e).at(path);
    conn.pragma_update(None, "synchronous", 0).map_err(at)?;
    let migrated = super::migrations::migrate(conn, path);
    conn.pragma_update(None, "synchronous", 1).map_err(at)?;
    migrated
}

fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?;
    file.write_all(bytes)?;
    file.sync_data()
}

fn wal_of(path: &Path) -> std::path::PathBuf {
    let mut wal = path.as_os_str().to_os_string();
    wal.push("-wal");
    wal.into()
}
