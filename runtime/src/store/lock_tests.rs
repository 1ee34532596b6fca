//! A write that finds the database locked by another connection or another
//! process: run again while the lock lasts, a clear error once it does not go.

use std::path::Path;
use std::time::Duration;

use pretty_assertions::assert_eq;

use super::*;

/// A store in a new file that waits `busy_timeout` for a lock, with one
/// row written (so its -shm file exists).
fn written_store(busy_timeout: Duration) -> (tempfile::TempDir, std::path::PathBuf, Store) {
    let (dir, path) = temp_db();
    let options = OpenOptions {
        busy_timeout,
        ..OpenOptions::default()
    };
    let store = Store::open_with(&path, options).unwrap();
    store
        .write_blocking(|tx| Ok(tx.execute("INSERT INTO kv VALUES ('before', 'x')", [])?))
        .unwrap();
    (dir, path, store)
}

/// Someone else holding a lock on the database: a second connection's
/// write transaction, or another process's `fcntl` read lock on the
/// `-shm` file's write-lock byte (what a sandboxed command did).
enum Locker {
    Connection(rusqlite::Connection),
    Process(std::process::Child),
}

impl Locker {
    fn hold(kind: &str, path: &Path) -> Locker {
        match kind {
            "connection" => {
                let other = rusqlite::Connection::open(path).unwrap();
                other.execute_batch("BEGIN IMMEDIATE").unwrap();
                Locker::Connection(other)
            }
            _ => {
                // WAL_WRITE_LOCK is byte 120 of the -shm file. The process
                // says "held" once it holds it, and lets go when told.
                let shm = format!("{}-shm", path.display());
                let mut child = std::process::Command::new("python3")
                    .args([
                        "-c",
                        "import fcntl, os, sys\n\
                         fd = os.open(sys.argv[1], os.O_RDWR)\n\
                         fcntl.lockf(fd, fcntl.LOCK_SH, 1, 120)\n\
                         print('held', flush=True)\n\
                         sys.stdin.read()\n",
                        &shm,
                    ])
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped())
                    .spawn()
                    .unwrap();
                let mut line = String::new();
                std::io::BufRead::read_line(
                    &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
                    &mut line,
                )
                .unwrap();
                assert_eq!(line, "held\n");
                Locker::Process(child)
            }
        }
    }

    fn release(self) {
        match self {
            Locker::Connection(other) => other.execute_batch("ROLLBACK").unwrap(),
            Locker::Process(mut child) => {
                drop(child.stdin.take());
                child.wait().unwrap();
            }
        }
    }
}

fn python3_present() -> bool {
    std::process::Command::new("python3")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn a_write_that_finds_the_database_locked_is_run_again_once_the_lock_goes() {
    use std::sync::atomic::Ordering;
    let _serial = LOCK_TESTS.lock();
    for kind in ["connection", "shm read lock"] {
        if kind != "connection" && !python3_present() {
            eprintln!("skipping the -shm lock form: no python3 here");
            continue;
        }
        let (_dir, path, store) = written_store(Duration::from_millis(200));
        let locker = Locker::hold(kind, &path);
        let retried = writer::LOCKED_RETRIES.load(Ordering::SeqCst);
        let writing = {
            let store = store.clone();
            std::thread::spawn(move || {
                store.write_blocking(|tx| {
                    Ok(tx.execute("INSERT INTO kv VALUES ('result', 'saved')", [])?)
                })
            })
        };
        // The lock goes once the writer has found it and tried again.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while writer::LOCKED_RETRIES.load(Ordering::SeqCst) == retried {
            assert!(
                std::time::Instant::now() < deadline,
                "{kind}: no retry seen"
            );
            std::thread::yield_now();
        }
        locker.release();
        assert_eq!(writing.join().unwrap().unwrap(), 1, "{kind}");
        let saved: Vec<String> = store
            .read_blocking(|c| {
                let mut s = c.prepare("SELECT key FROM kv WHERE value = 'saved'")?;
                let keys = s
                    .query_map([], |r| r.get(0))?
                    .collect::<rusqlite::Result<Vec<String>>>()?;
                Ok(keys)
            })
            .unwrap();
        assert_eq!(saved, ["result"], "{kind}: saved once, nothing lost");
    }
}

#[test]
fn a_lock_that_never_goes_is_a_clear_error_after_every_try() {
    let _serial = LOCK_TESTS.lock();
    for kind in ["connection", "shm read lock"] {
        if kind != "connection" && !python3_present() {
            continue;
        }
        let (_dir, path, store) = written_store(Duration::from_millis(50));
        let locker = Locker::hold(kind, &path);
        let err = store
            .write_blocking(|tx| Ok(tx.execute("INSERT INTO kv VALUES ('result', 'x')", [])?))
            .unwrap_err();
        let text = err.to_string();
        assert!(
            matches!(err, StoreError::Locked { .. })
                && text.contains(&format!("{} tries", writer::LOCKED_TRIES))
                && text.contains("nothing was written"),
            "{kind}: {text}"
        );
        locker.release();
        // Nothing half-written, and the store works again.
        store
            .write_blocking(|tx| Ok(tx.execute("INSERT INTO kv VALUES ('result', 'y')", [])?))
            .unwrap();
    }
}

/// The retry counter is process-wide: the lock tests take turns.
static LOCK_TESTS: parking_lot::Mutex<()> = parking_lot::Mutex::new(());
