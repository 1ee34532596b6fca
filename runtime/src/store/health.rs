//! Is the database whole? Checks at open, and `troupe doctor`'s.
//!
//! SQLite notices damage only in the pages a statement reads, so a store
//! can run for a long time over a damaged file, writing into it. Damage
//! comes from outside troupe's control (a crash on a file system that lies
//! about syncs, a disk error, a tool or person writing into the file), so
//! it is looked for when it is likely: after the previous owner of the
//! home died, or when the file changed since its clean end (see
//! [`HomeLock::database_suspect`](crate::home::HomeLock::database_suspect)),
//! with `PRAGMA quick_check` ([`quick_check`]). A damaged database is
//! refused, and `troupe doctor` ([`diagnose`], [`recover_into`]) says what
//! is wrong and makes a copy of what can be read.
//!
//! A database that is missing or empty while the home shows it had one (a
//! write-ahead log beside it, bots) is refused too ([`refuse_missing`]):
//! opening it would silently start a new, empty store and the data in the
//! log would be lost for good.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};

use super::error::{Result, StoreError};

/// Lines of a failed check kept in an error message.
const DETAIL_LINES: usize = 5;

/// Refuses a database file that is missing or empty while `other_data`
/// (files only a used home has) or a non-empty write-ahead log beside it
/// exist.
///
/// # Errors
///
/// [`StoreError::Missing`] naming what was found.
pub fn refuse_missing(path: &Path, other_data: &[PathBuf]) -> Result<()> {
    let size = match std::fs::metadata(path) {
        Ok(meta) => meta.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(source) => {
            return Err(StoreError::Io {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    if size > 0 {
        return Ok(());
    }
    let mut evidence = Vec::new();
    let wal = wal_of(path);
    if std::fs::metadata(&wal).is_ok_and(|m| m.len() > 0) {
        evidence.push(wal);
    }
    evidence.extend(other_data.iter().cloned());
    if evidence.is_empty() {
        return Ok(());
    }
    Err(StoreError::Missing {
        path: path.to_path_buf(),
        evidence: evidence
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
    })
}

/// Runs `PRAGMA quick_check` on the database at `path` through a read-only
/// connection.
///
/// # Errors
///
/// [`StoreError::Damaged`] with SQLite's first findings, or the error that
/// kept the check from running.
pub fn quick_check(path: &Path) -> Result<()> {
    // A check that cannot even run (SQLite calls the file malformed) found
    // damage too.
    let damaged = |e: StoreError| match e.at(path) {
        StoreError::Corrupt { path, detail } => StoreError::Damaged { path, detail },
        other => other,
    };
    let conn = open_read_only(path).map_err(damaged)?;
    let findings = pragma_lines(&conn, "PRAGMA quick_check").map_err(damaged)?;
    if findings == ["ok"] {
        return Ok(());
    }
    Err(StoreError::Damaged {
        path: path.to_path_buf(),
        detail: summary(&findings),
    })
}

/// What `troupe doctor` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnosis {
    /// `PRAGMA integrity_check`'s lines: `["ok"]` when the file is whole.
    pub integrity: Vec<String>,
    /// Each full-text index and the outcome of its own integrity check.
    pub full_text: Vec<(String, std::result::Result<(), String>)>,
}

impl Diagnosis {
    /// Whether every check passed.
    pub fn healthy(&self) -> bool {
        self.integrity == ["ok"] && self.full_text.iter().all(|(_, r)| r.is_ok())
    }
}

/// Checks the whole database at `path`: `PRAGMA integrity_check`, then each
/// FTS5 index's `integrity-check` command. Nothing is changed (the index
/// checks run in a transaction that is rolled back). Run it only while no
/// other process writes the home (hold its lock).
///
/// # Errors
///
/// What kept the checks from running at all (no such file, not a database).
pub fn diagnose(path: &Path) -> Result<Diagnosis> {
    if !path.is_file() {
        return Err(StoreError::NoDatabase {
            path: path.to_path_buf(),
        });
    }
    let at = |e: rusqlite::Error| StoreError::from(e).at(path);
    // Read-write without create: the FTS5 check is an INSERT, and only a
    // file that exists is checked.
    super::install_sqlite_layers();
    let mut conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(at)?;
    // A check SQLite cannot finish (it calls the file malformed) is a
    // finding, not a failure to check.
    let integrity = match pragma_lines(&conn, "PRAGMA integrity_check").map_err(|e| e.at(path)) {
        Ok(lines) => lines,
        Err(StoreError::Corrupt { detail, .. }) => vec![detail],
        Err(e) => return Err(e),
    };
    let tables = full_text_tables(&conn).unwrap_or_default();
    let tx = conn.transaction().map_err(at)?;
    let full_text = tables
        .into_iter()
        .map(|table| {
            let quoted = table.replace('"', "\"\"");
            let outcome = tx
                .execute_batch(&format!(
                    "INSERT INTO \"{quoted}\"(\"{quoted}\") VALUES ('integrity-check')"
                ))
                .map_err(|e| e.to_string());
            (table, outcome)
        })
        .collect();
    tx.rollback().map_err(at)?;
    Ok(Diagnosis {
        integrity,
        full_text,
    })
}

/// Copies what can be read of the database at `path` into a new database
/// at `out` (`VACUUM INTO`), leaving `path` as it is. `out` must not exist.
///
/// # Errors
///
/// [`StoreError::Io`] if `out` exists, or SQLite's failure (a copy stops at
/// the first page it cannot read: then `sqlite3 troupe.db .recover` gets
/// more back).
pub fn recover_into(path: &Path, out: &Path) -> Result<()> {
    if out.exists() {
        return Err(StoreError::Io {
            path: out.to_path_buf(),
            source: std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "the copy's file exists already; name a new file",
            ),
        });
    }
    let conn = open_read_only(path)?;
    conn.execute("VACUUM INTO ?1", [out.to_string_lossy()])
        .map_err(|e| StoreError::from(e).at(path))?;
    Ok(())
}

/// The FTS5 tables of the schema.
fn full_text_tables(conn: &Connection) -> Result<Vec<String>> {
    let mut stmt = conn.prepare(
        "SELECT name FROM sqlite_master WHERE type = 'table' \
         AND sql LIKE 'CREATE VIRTUAL TABLE%USING fts5%' ORDER BY name",
    )?;
    let names = stmt
        .query_map([], |r| r.get::<_, String>(0))?
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(names)
}

/// A read-only connection to an existing database.
fn open_read_only(path: &Path) -> Result<Connection> {
    if !path.is_file() {
        return Err(StoreError::NoDatabase {
            path: path.to_path_buf(),
        });
    }
    super::install_sqlite_layers();
    Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| StoreError::from(e).at(path))
}

/// Every line a check pragma returns.
fn pragma_lines(conn: &Connection, sql: &str) -> Result<Vec<String>> {
    let mut stmt = conn.prepare(sql)?;
    let lines = stmt
        .query_map([], |r| r.get::<_, String>(0))?
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(lines)
}

/// A check's first findings on one line.
fn summary(findings: &[String]) -> String {
    let mut text = findings
        .iter()
        .take(DETAIL_LINES)
        .cloned()
        .collect::<Vec<_>>()
        .join("; ");
    if findings.len() > DETAIL_LINES {
        text.push_str(&format!("; and {} more", findings.len() - DETAIL_LINES));
    }
    text
}

/// The write-ahead log beside a database: `troupe.db-wal`.
pub fn wal_of(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push("-wal");
    PathBuf::from(name)
}

#[cfg(test)]
#[path = "health_tests.rs"]
mod tests;
