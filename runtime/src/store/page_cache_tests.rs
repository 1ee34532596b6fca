use rusqlite::{params, Connection};

use super::{install, PENDING_BYTE};

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

/// The wrapper's own rule, against SQLite's cache: a truncation drops the
/// pages at or past its limit, the parked one included, and only a
/// truncation with nothing there is skipped.
#[test]
#[allow(unsafe_code)]
fn a_truncation_drops_the_pages_past_its_limit_and_the_parked_one() {
    assert!(
        install(),
        "the page cache is installed before any connection"
    );
    // SAFETY: the cache is used as SQLite's pager uses it, from one
    // thread: pages fetched, unpinned, rekeyed and truncated by key.
    unsafe {
        // What opening a first connection does: SQLite's cache set up.
        assert_eq!(
            rusqlite::ffi::sqlite3_initialize(),
            rusqlite::ffi::SQLITE_OK
        );
        let cache = super::create(4096, 64, 1);
        assert!(!cache.is_null());
        super::cachesize(cache, 1000);
        let spare = PENDING_BYTE / 4096 + 1;
        let held = |key| !super::fetch(cache, key, 0).is_null();
        for key in 1..=100 {
            let page = super::fetch(cache, key, 2);
            assert!(!page.is_null());
            super::unpin(cache, page, 0);
        }
        // A split's swap: 10 through the spare number to 10 again.
        let ten = super::fetch(cache, 10, 0);
        super::rekey(cache, ten, 10, spare);
        super::rekey(cache, ten, spare, 10);
        super::unpin(cache, ten, 0);
        super::truncate(cache, 101);
        assert!(held(100) && held(10));
        super::truncate(cache, 51);
        assert!(!held(60) && !held(51) && held(50));
        // A page left parked on the spare number goes with any truncation.
        let five = super::fetch(cache, 5, 0);
        super::rekey(cache, five, 5, spare);
        super::unpin(cache, five, 0);
        super::truncate(cache, 51);
        assert!(!held(spare) && held(4));
        super::destroy(cache);
    }
}
