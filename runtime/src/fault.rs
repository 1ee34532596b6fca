//! Fault points: places in the runtime where a test can make the code
//! panic, to check that its supervisor does what docs/runtime-semantics.md
//! says (a review, a routine run or a background command that panics).
//!
//! A point is a name and a key (a conversation, a run, a command): a test
//! [`arm`]s it, and the next [`check`] of that point with that key panics
//! once. Nothing is armed in a program that never calls [`arm`], and then a
//! check is one relaxed atomic load.
//!
//! ```
//! use troupe_runtime::fault;
//!
//! fault::arm("example", "key-1");
//! fault::check("example", "key-2"); // another key: nothing happens
//! let hit = std::panic::catch_unwind(|| fault::check("example", "key-1"));
//! assert!(hit.is_err());
//! fault::check("example", "key-1"); // it fired once, and is gone
//! ```

use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

static ARMED: AtomicBool = AtomicBool::new(false);
static POINTS: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());

/// Makes the next [`check`] of `point` with `key` panic (once).
pub fn arm(point: &str, key: impl Into<String>) {
    POINTS.lock().push((point.to_string(), key.into()));
    ARMED.store(true, Ordering::SeqCst);
}

/// Whether any fault is armed for `point`, whatever its key.
pub fn armed(point: &str) -> bool {
    ARMED.load(Ordering::Relaxed) && POINTS.lock().iter().any(|(p, _)| p == point)
}

/// Panics if `point` was armed for `key`, disarming it.
pub fn check(point: &str, key: &str) {
    if !ARMED.load(Ordering::Relaxed) {
        return;
    }
    let hit = {
        let mut points = POINTS.lock();
        let found = points.iter().position(|(p, k)| p == point && k == key);
        found.map(|at| points.swap_remove(at))
    };
    if hit.is_some() {
        #[allow(clippy::panic)]
        {
            panic!("fault injected at `{point}` for {key}");
        }
    }
}

/// Kills this process with SIGKILL — as `kill -9` would, at an exact step —
/// when the environment variable `TROUPE_KILL_AT` names `point` (a comma-
/// separated list). How a test of several `troupe serve` processes stops a
/// node between two commits it must survive (a house move's steps).
pub fn kill_point(point: &str) {
    static NAMED: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    let named = NAMED.get_or_init(|| {
        std::env::var("TROUPE_KILL_AT")
            .map(|v| v.split(',').map(|p| p.trim().to_string()).collect())
            .unwrap_or_default()
    });
    if named.iter().any(|n| n == point) {
        eprintln!("troupe: killed at `{point}` (TROUPE_KILL_AT)");
        let _ =
            rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
    }
}
