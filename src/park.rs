//! What a worker of the async runtime does as it runs out of work.
//!
//! It looks for new work for up to [`LOOK`] before it parks, giving its
//! core to any other thread that wants it meanwhile. A chain of tasks that
//! wake one another (a turn's steps, a message and its reply) runs on one
//! worker, but tokio's scheduler wakes the other worker at every fourth
//! hand-off to share the chain, and on the VMs troupe is measured on,
//! waking a parked worker costs a system call (`eventfd` or `futex`) and
//! tens of microseconds before it runs: more than the hand-off's own work.
//! A worker that still looks counts as searching, so no hand-off wakes it
//! and the chain stays where it runs. Work from outside the runtime (a
//! store thread's answer, a task spawned by another thread) ends the look
//! at once; the worker then parks, and tokio's last searcher finds that
//! work and runs it. With one core nothing looks: the work it waits for
//! could not run meanwhile.
//!
//! The look yields its core (`sched_yield`) between checks rather than
//! spinning on it: the store's writer and readers are threads of their own,
//! and a spinning worker took the core a commit needed (`troupe bench w2
//! --durable on`: p99 0.9–1.1 ms spinning, 0.6–0.7 ms yielding).

use std::time::{Duration, Instant};

/// How long a worker that ran out of work looks for more before it parks.
pub const LOOK: Duration = Duration::from_micros(100);

/// Run when a worker thread is about to park.
pub fn on_park() {
    if troupe_runtime::store::worth_looking() {
        look(LOOK);
    }
    crate::idle_heap::on_park();
}

/// Yields the core until `limit` passes or work comes from outside the
/// runtime.
fn look(limit: Duration) {
    let Ok(handle) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let metrics = handle.metrics();
    let started = Instant::now();
    while started.elapsed() < limit {
        if metrics.global_queue_depth() > 0 {
            return;
        }
        std::thread::yield_now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_look_ends_when_work_comes_from_outside_the_runtime() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap();
        // The one worker is held (its thread blocked on purpose), so a task
        // spawned from outside waits in the runtime's global queue.
        let (release, held) = std::sync::mpsc::channel::<()>();
        let (started, running) = std::sync::mpsc::channel::<()>();
        runtime.spawn(async move {
            started.send(()).unwrap();
            let _ = held.recv();
        });
        running.recv().unwrap();
        let _in_runtime = runtime.enter();
        // Nothing from outside yet: the look lasts its limit.
        let quiet = Duration::from_millis(20);
        let began = Instant::now();
        look(quiet);
        assert!(began.elapsed() >= quiet);
        runtime.spawn(async {});
        // Far longer than the test may take: only the work ends it.
        let began = Instant::now();
        look(Duration::from_secs(60));
        assert!(began.elapsed() < Duration::from_secs(30));
        release.send(()).unwrap();
    }
}
