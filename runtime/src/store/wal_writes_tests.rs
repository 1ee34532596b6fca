use rusqlite::{params, Connection, OpenFlags};

use super::*;

fn open(path: &std::path::Path) -> Connection {
    assert!(install(), "the log's VFS is in place");
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE,
    )
    .unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    conn.pragma_update(None, "synchronous", 1).unwrap();
    conn.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
    conn
}

fn rows(conn: &Connection) -> Vec<(i64, Vec<u8>)> {
    let mut stmt = conn.prepare("SELECT id, data FROM t ORDER BY id").unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// A row's bytes, different for every id.
fn data(id: i64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (id as usize * 31 + i * 7) as u8).collect()
}

/// The store's files copied as they are now, as a process killed now
/// leaves them, and opened anew: SQLite recovers the log by its checksums.
fn recovered(dir: &std::path::Path) -> Connection {
    let copy = dir.join("copy");
    std::fs::create_dir_all(&copy).unwrap();
    for name in ["t.db", "t.db-wal"] {
        std::fs::copy(dir.join(name), copy.join(name)).unwrap();
    }
    open(&copy.join("t.db"))
}

#[test]
fn a_commit_of_many_pages_reaches_the_log_in_one_write() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(&dir.path().join("t.db"));
    conn.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, data BLOB)")
        .unwrap();
    let before = log_writes();
    let tx = conn.unchecked_transaction().unwrap();
    for id in 0..20 {
        tx.execute("INSERT INTO t VALUES (?1, ?2)", params![id, data(id, 3000)])
            .unwrap();
    }
    tx.commit().unwrap();
    // About twenty pages: forty-odd writes frame by frame, one gathered.
    assert_eq!(log_writes() - before, 1);
    let other = open(&dir.path().join("t.db"));
    assert_eq!(rows(&other).len(), 20);
}

#[test]
fn readers_and_a_recovered_copy_see_every_commit_and_nothing_rolled_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let writer = open(&path);
    // A cache of a few pages: a large transaction spills frames into the
    // log before its commit, and rewrites their checksums at the commit.
    writer.pragma_update(None, "cache_size", 8).unwrap();
    writer
        .execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, data BLOB)")
        .unwrap();
    let reader = open(&path);
    let mut expected = Vec::new();
    for round in 0..30i64 {
        let tx = writer.unchecked_transaction().unwrap();
        let many = if round % 5 == 0 { 200 } else { 3 };
        for i in 0..many {
            let id = round * 1000 + i;
            let bytes = data(id, 1500);
            tx.execute("INSERT INTO t VALUES (?1, ?2)", params![id, bytes])
                .unwrap();
            expected.push((id, bytes));
        }
        // Pages written again in the same transaction: frames rewritten.
        tx.execute(
            "UPDATE t SET data = ?2 WHERE id = ?1",
            params![round * 1000, data(round, 1500)],
        )
        .unwrap();
        expected
            .iter_mut()
            .find(|(id, _)| *id == round * 1000)
            .unwrap()
            .1 = data(round, 1500);
        tx.commit().unwrap();
        if round % 7 == 3 {
            // A spilled transaction rolled back leaves nothing behind.
            let tx = writer.unchecked_transaction().unwrap();
            for i in 0..300 {
                tx.execute(
                    "INSERT INTO t VALUES (?1, ?2)",
                    params![-1 - i - round * 1000, data(i, 1500)],
                )
                .unwrap();
            }
            tx.rollback().unwrap();
        }
        assert_eq!(rows(&reader), expected, "round {round}");
    }
    let copy = recovered(dir.path());
    assert_eq!(rows(&copy), expected);
    let check: String = copy
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");

    // The log started over after a checkpoint: its writes are gathered
    // again from its first byte, and a recovered copy reads them.
    writer
        .query_row("PRAGMA wal_checkpoint(RESTART)", [], |_| Ok(()))
        .unwrap();
    let before = log_writes();
    writer
        .execute(
            "INSERT INTO t VALUES (?1, ?2)",
            params![99_999, data(7, 200)],
        )
        .unwrap();
    // The new log's header is flushed on its own first (SQLite syncs it),
    // then the commit's frames go in one write.
    assert_eq!(
        log_writes() - before,
        2,
        "a new log's header, then its commit"
    );
    expected.push((99_999, data(7, 200)));
    drop(copy);
    std::fs::remove_dir_all(dir.path().join("copy")).unwrap();
    assert_eq!(rows(&recovered(dir.path())), expected);
}

#[test]
fn without_power_safe_overwrite_every_write_goes_as_sqlite_wrote_it() {
    let dir = tempfile::tempdir().unwrap();
    assert!(install());
    // `psow=0`: SQLite pads a synced commit to a sector's end and writes
    // the last frame's tail after the flush; nothing is gathered then.
    let uri = format!("file:{}?psow=0", dir.path().join("t.db").display());
    let conn = Connection::open_with_flags(
        uri,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_URI,
    )
    .unwrap();
    conn.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))
        .unwrap();
    conn.pragma_update(None, "synchronous", 2).unwrap();
    conn.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, data BLOB)")
        .unwrap();
    let before = log_writes();
    let tx = conn.unchecked_transaction().unwrap();
    for id in 0..10 {
        tx.execute("INSERT INTO t VALUES (?1, ?2)", params![id, data(id, 3000)])
            .unwrap();
    }
    tx.commit().unwrap();
    assert!(log_writes() - before >= 20, "frames were gathered");
    let other = open(&dir.path().join("t.db"));
    assert_eq!(rows(&other).len(), 10);
}
