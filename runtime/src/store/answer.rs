//! How a task waits for the answer of one of the store's threads (the
//! writer's commit, a reader's read).
//!
//! One waiter at a time first looks for its answer for up to [`SPIN`],
//! yielding to the runtime's other tasks between looks, before it sleeps
//! on it. A commit or a read takes a few tens of microseconds; a worker
//! thread that slept meanwhile is woken by the store's thread, which on
//! the VMs troupe is measured on takes 20–30 µs more before it runs, and a
//! durable turn waits for four commits (`troupe bench w2 --durable on`:
//! p50 267–307 → 157–176 µs). Only one waiter spins, so a burst of a
//! thousand waiters costs one task's polls, not a thousand; the store's
//! writer does the same on its side (it looks for its next job before it
//! sleeps). With one core neither looks: the thread that would bring the
//! answer could not run meanwhile.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::oneshot::{self, error::TryRecvError};

use super::{Result, StoreError};

/// How long the one spinning waiter looks for its answer before it sleeps.
pub(super) const SPIN: Duration = Duration::from_micros(100);

/// Waits for the answer `rx` brings; [`StoreError::Closed`] if its thread
/// is gone.
pub(super) async fn wait<T>(mut rx: oneshot::Receiver<Result<T>>) -> Result<T> {
    let spinner = if worth_looking() {
        Spinner::take()
    } else {
        None
    };
    if let Some(_spinner) = spinner {
        let started = Instant::now();
        loop {
            match rx.try_recv() {
                Ok(answer) => return answer,
                Err(TryRecvError::Closed) => return Err(StoreError::Closed),
                Err(TryRecvError::Empty) if started.elapsed() >= SPIN => break,
                Err(TryRecvError::Empty) => tokio::task::yield_now().await,
            }
        }
    }
    rx.await.map_err(|_| StoreError::Closed)?
}

/// Whether looking for an answer, a job or work before sleeping can pay:
/// with one core, the thread that would bring it cannot run while another
/// looks. (The store's waiters and writer ask it, and so does the binary's
/// async runtime before a worker parks.)
pub fn worth_looking() -> bool {
    static CORES: std::sync::LazyLock<bool> = std::sync::LazyLock::new(|| {
        std::thread::available_parallelism().is_ok_and(|n| n.get() > 1)
    });
    *CORES
}

/// The one waiter allowed to spin, until dropped (also when its wait is
/// cancelled).
pub(super) struct Spinner;

static SPINNING: AtomicBool = AtomicBool::new(false);

impl Spinner {
    pub(super) fn take() -> Option<Self> {
        (!SPINNING.swap(true, Ordering::Acquire)).then_some(Self)
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        SPINNING.store(false, Ordering::Release);
    }
}

#[cfg(test)]
#[path = "answer_tests.rs"]
mod tests;
