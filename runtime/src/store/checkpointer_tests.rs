use std::time::{Duration, Instant};

use super::*;
use crate::store::{kv, Store};

/// The salts in the log's header: SQLite changes them each time it
/// starts the log over.
fn log_salts(path: &Path) -> [u8; 8] {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let header = std::fs::read(wal).unwrap();
    header[16..24].try_into().unwrap()
}

/// Waits until this store's restart write has committed (other tests'
/// stores move the same count, so its row is read too).
fn wait_for_restart(store: &Store, within: Duration) {
    let deadline = Instant::now() + within;
    let (count, moved) = &RESTARTS;
    let mut seen = count.lock().unwrap();
    loop {
        let written = store
            .read_blocking(|c| kv::get(c, RESTARTED_KEY))
            .unwrap()
            .is_some();
        if written {
            return;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "the log was not started over within {within:?}"
        );
        let before = *seen;
        seen = moved
            .wait_timeout_while(seen, left, |now| *now == before)
            .unwrap()
            .0;
    }
}

#[test]
fn a_checkpointed_log_is_started_over_while_idle_not_by_the_next_commit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("troupe.db");
    let store = Store::open(&path).unwrap();
    for i in 0..50 {
        store
            .write_blocking(move |tx| kv::set(tx, &format!("test:{i}"), "x"))
            .unwrap();
    }
    let before = log_salts(&path);

    // The checkpointer copies them back once the writer is quiet, and has
    // the writer start the log over with a small write of its own.
    wait_for_restart(&store, Duration::from_secs(10));
    let restarted = log_salts(&path);
    assert_ne!(restarted, before, "the log was not started over");

    // The next commit appends to the log started over: it does not start
    // it over itself (nor flush its header).
    store
        .write_blocking(|tx| kv::set(tx, "test:after", "y"))
        .unwrap();
    assert_eq!(
        log_salts(&path),
        restarted,
        "the commit after the restart started the log over"
    );
}
