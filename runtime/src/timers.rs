//! Many delayed actions served by one task.
//!
//! `ractor`'s `send_after` spawns a task that sleeps and then sends: a task
//! cell and a timer entry per pending send (384 bytes, and a spawn), held for
//! the whole delay. A node sets one such timer for every conversation that
//! goes idle, to passivate it later, so 10,000 idle conversations kept 10,000
//! sleeping tasks. [`Timers`] keeps the pending actions in one heap ordered by
//! deadline instead, with one task that sleeps until the earliest; an action
//! costs its entry and its boxed closure.
//!
//! The task starts with the first action and ends when the [`Timers`] is
//! dropped; the actions still pending then are dropped without being run.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering as AtomicOrdering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

/// Delayed actions, run in deadline order by one task.
#[derive(Default)]
pub struct Timers {
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    due: Mutex<BinaryHeap<Entry>>,
    /// Told when an action becomes the earliest, or when the owner is gone.
    wake: Notify,
    /// Tells apart actions with the same deadline: the first set runs first.
    next: AtomicU64,
    started: AtomicBool,
    closed: AtomicBool,
}

struct Entry {
    at: Instant,
    seq: u64,
    action: Box<dyn FnOnce() + Send>,
}

impl Timers {
    /// No actions yet, and no task until the first.
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs `action` once `delay` has passed, on the timers' task. Must be
    /// called within a tokio runtime (the first call starts the task).
    pub fn after(&self, delay: Duration, action: impl FnOnce() + Send + 'static) {
        let entry = Entry {
            at: Instant::now() + delay,
            seq: self.shared.next.fetch_add(1, AtomicOrdering::Relaxed),
            action: Box::new(action),
        };
        let earliest = {
            let mut due = self.shared.due.lock();
            let earliest = due.peek().is_none_or(|head| entry.at < head.at);
            due.push(entry);
            earliest
        };
        if !self.shared.started.swap(true, AtomicOrdering::AcqRel) {
            tokio::spawn(run(Arc::clone(&self.shared)));
        } else if earliest {
            self.shared.wake.notify_one();
        }
    }

    /// How many actions wait.
    pub fn pending(&self) -> usize {
        self.shared.due.lock().len()
    }
}

impl Drop for Timers {
    fn drop(&mut self) {
        self.shared.closed.store(true, AtomicOrdering::Release);
        self.shared.wake.notify_one();
    }
}

impl std::fmt::Debug for Timers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Timers")
            .field("pending", &self.pending())
            .finish()
    }
}

/// Runs what is due, then sleeps until the next deadline or until told an
/// earlier one came; ends once the owner is gone.
async fn run(shared: Arc<Shared>) {
    loop {
        if shared.closed.load(AtomicOrdering::Acquire) {
            shared.due.lock().clear();
            return;
        }
        let now = Instant::now();
        let mut ready = Vec::new();
        let next = {
            let mut due = shared.due.lock();
            while due.peek().is_some_and(|head| head.at <= now) {
                ready.extend(due.pop());
            }
            due.peek().map(|head| head.at)
        };
        // Outside the lock: an action may set another.
        for entry in ready {
            (entry.action)();
        }
        match next {
            Some(at) => {
                tokio::select! {
                    () = tokio::time::sleep_until(at) => {}
                    () = shared.wake.notified() => {}
                }
            }
            None => shared.wake.notified().await,
        }
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    /// Reversed: `BinaryHeap` is a max-heap, and the earliest goes first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

#[cfg(test)]
mod tests {
    use tokio::sync::mpsc;

    use super::*;

    /// Far longer than any wait below should take.
    const PATIENCE: Duration = Duration::from_secs(10);

    #[tokio::test]
    async fn actions_run_by_deadline_not_by_when_they_were_set() {
        let timers = Timers::new();
        let (tx, mut rx) = mpsc::unbounded_channel();
        for (name, ms) in [
            ("late", 30),
            ("early", 10),
            ("middle", 20),
            ("early too", 10),
        ] {
            let tx = tx.clone();
            timers.after(Duration::from_millis(ms), move || {
                let _ = tx.send(name);
            });
        }
        let mut ran = Vec::new();
        for _ in 0..4 {
            ran.push(
                tokio::time::timeout(PATIENCE, rx.recv())
                    .await
                    .unwrap()
                    .unwrap(),
            );
        }
        // However late the task ran, it takes what is due earliest first.
        assert_eq!(ran, ["early", "early too", "middle", "late"]);
        assert_eq!(timers.pending(), 0);
    }

    #[tokio::test]
    async fn an_earlier_action_set_while_the_task_sleeps_wakes_it() {
        let timers = Timers::new();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let late = tx.clone();
        timers.after(Duration::from_secs(600), move || {
            let _ = late.send("late");
        });
        // The task is asleep until the late deadline when this comes.
        tokio::task::yield_now().await;
        timers.after(Duration::from_millis(1), move || {
            let _ = tx.send("early");
        });
        let first = tokio::time::timeout(PATIENCE, rx.recv()).await;
        assert_eq!(first.unwrap(), Some("early"));
        assert_eq!(timers.pending(), 1);
    }

    #[tokio::test]
    async fn dropped_timers_drop_what_is_pending_unrun() {
        let timers = Timers::new();
        let (tx, mut rx) = mpsc::unbounded_channel::<()>();
        timers.after(Duration::from_secs(600), move || {
            let _ = tx.send(());
        });
        tokio::task::yield_now().await;
        drop(timers);
        // The only sender was in the action: dropped, never sent.
        let closed = tokio::time::timeout(PATIENCE, rx.recv()).await;
        assert_eq!(closed.unwrap(), None);
    }
}
