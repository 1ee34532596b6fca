//! The check after start, over a real SQLite file: bit rot that keeps the
//! file's size and time is found, writes stop and the file is left as it
//! was; a whole file is not affected, and nothing waits for the check.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;

use super::Verdict;
use crate::store::{OpenOptions, Store, StoreError};

const WAIT: Duration = Duration::from_secs(20);

/// A store at `dir/troupe.db` holding a table of several pages, closed
/// cleanly (every connection gone, the log copied in and removed); the
/// table's root page.
fn closed_store(dir: &Path) -> (PathBuf, u64) {
    let path = dir.join("troupe.db");
    let store = Store::open(&path).unwrap();
    store
        .write_blocking(|tx| {
            tx.execute_batch(
                "CREATE TABLE rot(x BLOB);
                 WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
                 INSERT INTO rot SELECT randomblob(100) FROM n;",
            )?;
            Ok(())
        })
        .unwrap();
    let root: i64 = store
        .read_blocking(|c| {
            Ok(c.query_row(
                "SELECT rootpage FROM sqlite_master WHERE name = 'rot'",
                [],
                |r| r.get(0),
            )?)
        })
        .unwrap();
    drop(store);
    let wal = crate::store::health::wal_of(&path);
    let started = Instant::now();
    while wal.exists() {
        assert!(started.elapsed() < WAIT, "the store did not close");
        std::thread::yield_now();
    }
    (path, u64::try_from(root).unwrap())
}

/// Changes the byte at `offset` of `page` (its size and time kept), as a
/// disk or a stray write would.
fn rot(path: &Path, page: u64, offset: u64, to: impl Fn(u8) -> u8) -> Vec<u8> {
    let modified = std::fs::metadata(path).unwrap().modified().unwrap();
    let mut bytes = std::fs::read(path).unwrap();
    let at = usize::try_from((page - 1) * 4096 + offset).unwrap();
    bytes[at] = to(bytes[at]);
    std::fs::write(path, &bytes).unwrap();
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(modified)
        .unwrap();
    bytes
}

fn verdict_after_check(store: &Store) -> Verdict {
    let started = Instant::now();
    loop {
        match store.verdict() {
            Verdict::Checking => {
                assert!(started.elapsed() < WAIT, "the check did not end");
                std::thread::yield_now();
            }
            settled => return settled,
        }
    }
}

#[test]
fn bit_rot_found_after_start_stops_every_write_and_leaves_the_file_as_it_was() {
    // The root page of a table of several pages: an interior page, whose
    // header is the type (0), the cell count (3–4) and the right-most
    // child (8–11).
    type Form = (&'static str, u64, fn(u8) -> u8);
    let forms: [Form; 3] = [
        ("the page's type", 0, |_| 0x0d),
        ("its cell count", 4, |b| b.wrapping_add(7)),
        ("its right-most child", 8, |_| 0x7f),
    ];
    for (form, offset, to) in forms {
        let dir = tempfile::tempdir().unwrap();
        let (path, root) = closed_store(dir.path());
        let rotten = rot(&path, root, offset, to);

        let store = Store::open(&path).unwrap();
        let Verdict::Damaged(found) = verdict_after_check(&store) else {
            panic!("{form}: the check found nothing");
        };
        assert!(!found.is_empty(), "{form}");
        let refused = store
            .write_blocking(|tx| {
                tx.execute_batch("CREATE TABLE never(x)")?;
                Ok(())
            })
            .unwrap_err();
        assert!(
            matches!(refused, StoreError::WritesStopped { .. }),
            "{form}: {refused}"
        );
        let said = refused.to_string();
        for what in ["is damaged", "stopped writing", "troupe doctor", "backup"] {
            assert!(said.contains(what), "{form}: {said}");
        }
        // Reads go on.
        store
            .read_blocking(|c| Ok(c.query_row("SELECT 1", [], |r| r.get::<_, i64>(0))?))
            .unwrap();
        drop(store);
        assert!(
            std::fs::read(&path).unwrap() == rotten,
            "{form}: written into"
        );
        // Started again, it is found again, and still not written into.
        let again = Store::open(&path).unwrap();
        assert!(
            matches!(verdict_after_check(&again), Verdict::Damaged(_)),
            "{form}"
        );
        drop(again);
        assert!(
            std::fs::read(&path).unwrap() == rotten,
            "{form}: written into"
        );
    }
}

#[test]
fn a_whole_file_is_found_whole_and_written_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = closed_store(dir.path());
    let store = Store::open(&path).unwrap();
    assert_eq!(verdict_after_check(&store), Verdict::Whole);
    store
        .write_blocking(|tx| {
            tx.execute_batch("INSERT INTO rot VALUES (x'00')")?;
            Ok(())
        })
        .unwrap();
}

#[test]
fn nothing_waits_for_the_check_but_the_copy_into_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = closed_store(dir.path());
    let before = std::fs::read(&path).unwrap();
    let (release, held) = std::sync::mpsc::channel::<()>();
    let store = Store::open_checked_after(&path, OpenOptions::default(), move || {
        let _ = held.recv();
    })
    .unwrap();
    // The check is held back: writes and reads are served meanwhile.
    for _ in 0..20 {
        store
            .write_blocking(|tx| {
                tx.execute_batch("INSERT INTO rot VALUES (randomblob(5000))")?;
                Ok(())
            })
            .unwrap();
    }
    let rows: i64 = store
        .read_blocking(|c| Ok(c.query_row("SELECT count(*) FROM rot", [], |r| r.get(0))?))
        .unwrap();
    assert_eq!(rows, 2020);
    assert_eq!(store.verdict(), Verdict::Checking);
    // Committed to the log only: the file waits for the verdict.
    assert!(
        std::fs::read(&path).unwrap() == before,
        "written before the verdict"
    );
    release.send(()).unwrap();
    assert_eq!(verdict_after_check(&store), Verdict::Whole);
}
