use rusqlite::{params, Connection};

use super::install;

/// Pseudo-random bytes: keys that land all over an index, so inserts
/// split pages in its middle (the splits that swap pages through the
/// spare number).
fn noise(seed: &mut u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|_| {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            (*seed >> 24) as u8
        })
        .collect()
}

fn count(conn: &Connection) -> i64 {
    conn.query_row("SELECT count(*) FROM t", [], |r| r.get(0))
        .unwrap()
}

/// The pages a rolled-back transaction added past the database's end are
/// dropped from the cache, so the next transaction that grows the file
/// reads none of them: the skipped walk must skip only when nothing lies
/// past the end.
#[test]
fn pages_past_the_end_are_dropped_after_a_rollback_when_splits_swapped_pages() {
    // Each test runs in a process of its own (nextest): no connection has
    // started SQLite before this one.
    assert!(
        install(),
        "the page cache is installed before any connection"
    );
    let dir = tempfile::tempdir().unwrap();
    let mut conn = Connection::open(dir.path().join("t.db")).unwrap();
    conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))
        .unwrap();
    conn.execute_batch(
        "CREATE TABLE t (id INTEGER PRIMARY KEY, k BLOB NOT NULL UNIQUE, v BLOB NOT NULL)",
    )
    .unwrap();
    let mut seed = 0x2545_F491_4F6C_DD1D;
    let insert = |conn: &Connection, n: usize, seed: &mut u64| {
        let mut stmt = conn
            .prepare_cached("INSERT INTO t (k, v) VALUES (?1, ?2)")
            .unwrap();
        for _ in 0..n {
            stmt.execute(params![noise(seed, 32), noise(seed, 900)])
                .unwrap();
        }
    };
    for _ in 0..5 {
        let tx = conn.transaction().unwrap();
        insert(&tx, 400, &mut seed);
        tx.commit().unwrap();
    }
    let grown = conn.transaction().unwrap();
    insert(&grown, 1500, &mut seed);
    grown.rollback().unwrap();
    assert_eq!(count(&conn), 2000);
    let tx = conn.transaction().unwrap();
    insert(&tx, 700, &mut seed);
    tx.commit().unwrap();
    assert_eq!(count(&conn), 2700);
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
    // And as another connection reads the file.
    let other = Connection::open(dir.path().join("t.db")).unwrap();
    assert_eq!(count(&other), 2700);
}
