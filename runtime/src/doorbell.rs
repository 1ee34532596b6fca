//! Activity told to a background thread that waits for quiet, with a
//! wake-up only when that thread sleeps.
//!
//! Two threads wait for a busy stretch to end before they act: the store's
//! checkpointer (after commits) and the binary's heap keeper (after the
//! runtime's workers run out of work). Each was told of every event through
//! a channel and restarted its wait on each, so every commit and every park
//! of a worker woke a sleeping thread: a `futex` wake and a context switch,
//! several per turn. On two cores that was 10% of a stream of new
//! conversations' samples, and the runtime's workers waited behind it.
//!
//! A [`Doorbell`] counts its rings and wakes its [`Watcher`] only when the
//! watcher [`wait`](Watcher::wait)s for the first ring after a quiet
//! stretch. While it [`settle`](Watcher::settle)s, the watcher wakes by
//! itself once per quiet interval and compares the count: quiet is an
//! interval without a ring, found between one and two intervals after the
//! last ring.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A doorbell and the watcher it wakes.
pub fn doorbell() -> (Doorbell, Watcher) {
    let shared = Arc::new(Shared::default());
    // One wake-up pending is enough; the count says the rest.
    let (wake, woken) = sync_channel(1);
    (
        Doorbell {
            shared: Arc::clone(&shared),
            wake,
        },
        Watcher { shared, woken },
    )
}

#[derive(Default)]
struct Shared {
    /// Every ring so far.
    rings: AtomicU64,
    /// Set while the watcher waits for a ring: the next ring wakes it.
    asleep: AtomicBool,
}

/// Tells the [`Watcher`] something happened. When every doorbell is gone,
/// the watcher's waits return `false`.
#[derive(Clone)]
pub struct Doorbell {
    shared: Arc<Shared>,
    wake: SyncSender<()>,
}

impl Doorbell {
    /// Counts a ring, and wakes the watcher if it sleeps.
    pub fn ring(&self) {
        self.shared.rings.fetch_add(1, Ordering::SeqCst);
        if self.shared.asleep.swap(false, Ordering::SeqCst) {
            // Full means a wake-up is already pending.
            let _ = self.wake.try_send(());
        }
    }
}

/// The thread that waits for rings, then for quiet.
pub struct Watcher {
    shared: Arc<Shared>,
    woken: Receiver<()>,
}

impl Watcher {
    /// Sleeps until a ring after the last one this watcher saw (at once if
    /// one came since); `false` once every doorbell is gone.
    pub fn wait(&self, seen: Seen) -> bool {
        let shared = &self.shared;
        shared.asleep.store(true, Ordering::SeqCst);
        if shared.rings.load(Ordering::SeqCst) != seen.0 {
            // A ring came since: no sleep. If it found the watcher asleep,
            // its wake-up is on the way; take it, so no later wait returns
            // for it.
            if !shared.asleep.swap(false, Ordering::SeqCst) {
                let _ = self.woken.recv();
            }
            return true;
        }
        self.woken.recv().is_ok()
    }

    /// Waits until an interval of `quiet` passes without a ring, or until
    /// `limit` after `since`, whichever is first: `Some` with what it saw
    /// last, `None` once every doorbell is gone.
    pub fn settle(&self, quiet: Duration, since: Instant, limit: Duration) -> Option<Seen> {
        loop {
            let seen = self.seen();
            let left = limit.saturating_sub(since.elapsed());
            if left.is_zero() {
                return Some(seen);
            }
            // No ring wakes it now (it is not asleep): this is a timed
            // sleep that also sees the doorbells go.
            match self.woken.recv_timeout(left.min(quiet)) {
                // A wake-up left from an earlier sleep: look again.
                Ok(()) => continue,
                Err(RecvTimeoutError::Timeout) if self.seen() == seen => return Some(seen),
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => return None,
            }
        }
    }

    /// The rings so far, for a later [`Watcher::wait`].
    pub fn seen(&self) -> Seen {
        Seen(self.shared.rings.load(Ordering::SeqCst))
    }
}

/// How many rings a watcher had seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seen(u64);

#[cfg(test)]
mod tests {
    use super::*;

    const LONG: Duration = Duration::from_secs(10);

    #[test]
    fn a_ring_wakes_a_sleeping_watcher_and_one_before_the_wait_is_not_missed() {
        let (bell, watcher) = doorbell();
        let seen = watcher.seen();
        // Rung before the wait: the wait returns at once.
        bell.ring();
        assert!(watcher.wait(seen));
        let seen = watcher.seen();
        let ringer = std::thread::spawn(move || {
            bell.ring();
            bell
        });
        assert!(watcher.wait(seen));
        let bell = ringer.join().unwrap();
        // No wake-up was left behind: with no ring, a wait sleeps until the
        // doorbell goes.
        let seen = watcher.seen();
        drop(bell);
        assert!(!watcher.wait(seen));
    }

    #[test]
    fn settle_returns_after_a_quiet_interval_and_not_while_rings_go_on() {
        let (bell, watcher) = doorbell();
        let quiet = Duration::from_millis(50);
        let ringer = std::thread::spawn(move || {
            // Each ring, between the instants before and after it.
            let mut rings = Vec::new();
            let until = Instant::now() + quiet * 6;
            while Instant::now() < until {
                let before = Instant::now();
                bell.ring();
                rings.push((before, Instant::now()));
                std::thread::yield_now();
            }
            (bell, rings)
        });
        // The ringer has begun before the first interval does.
        let before = watcher.seen();
        while watcher.seen() == before {
            std::thread::yield_now();
        }
        let seen = watcher
            .settle(quiet, Instant::now(), LONG)
            .expect("the doorbell is kept");
        let settled = Instant::now();
        let (bell, rings) = ringer.join().unwrap();
        // Settled over an interval that no ring fell in: after the last
        // ring, or in a gap a loaded machine left between two rings (the
        // ringer stopped for longer than the interval) — never while rings
        // kept coming closer together than the interval.
        let last = rings.last().expect("it rang").0;
        let gap = rings
            .windows(2)
            .any(|w| w[0].0 < settled && w[1].1.duration_since(w[0].0) >= quiet);
        assert!(
            gap || settled.duration_since(last) >= quiet,
            "settled {:?} after the last ring, with no gap of {quiet:?} between rings",
            settled.duration_since(last)
        );
        if !gap {
            assert_eq!(seen, watcher.seen());
        }
        drop(bell);
        assert_eq!(watcher.settle(quiet, Instant::now(), LONG), None);
    }

    #[test]
    fn settle_stops_at_its_limit_while_rings_go_on() {
        let (bell, watcher) = doorbell();
        let done = std::sync::Arc::new(AtomicBool::new(false));
        let ringer = {
            let done = std::sync::Arc::clone(&done);
            std::thread::spawn(move || {
                while !done.load(Ordering::SeqCst) {
                    bell.ring();
                    std::thread::yield_now();
                }
            })
        };
        let since = Instant::now();
        let limit = Duration::from_millis(50);
        // The quiet interval is longer than the limit: only the limit ends it.
        assert!(watcher.settle(LONG, since, limit).is_some());
        assert!(since.elapsed() >= limit);
        assert!(since.elapsed() < LONG);
        done.store(true, Ordering::SeqCst);
        ringer.join().unwrap();
    }
}
