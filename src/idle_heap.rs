//! The allocator's memory given back once the runtime is idle, not during a
//! burst.
//!
//! A burst (a thousand agents each taking a turn) frees much of what it
//! allocates, and a server left idle after it should not keep that memory.
//! Two things hold it back in mimalloc: a block freed by another thread is
//! merged into its owner's page only when the owner allocates or collects
//! again, and a page freed to the arena goes back to the system (is purged)
//! only after a delay that a later call into the allocator must find
//! expired. After a burst the runtime's workers sleep, so neither happens
//! by itself.
//!
//! The first is what each worker does when it runs out of work
//! ([`on_park`]): it collects its own heap, which frees its empty pages to
//! the arena. The second is left to a thread of its own, the keeper: once
//! no worker has woken for [`IDLE`], it purges every arena at once. Until
//! then, pages freed in the burst stay mapped and are reused by the burst
//! itself. Purging at every park instead (a purge delay of 0) gave each
//! freed page back and faulted it in again within the burst, about 15% of
//! its wall time (`troupe bench w3`); see docs/benchmarks.md.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::OnceLock;
use std::time::Duration;

/// How long no worker must wake before the freed pages are purged.
pub const IDLE: Duration = Duration::from_millis(10);

/// Bumped each time a worker wakes: the keeper purges only when it did not
/// move for [`IDLE`].
static WAKES: AtomicU64 = AtomicU64::new(0);

/// Tells the keeper a worker ran out of work (capacity 1: a wake-up
/// pending is enough).
static PARKED: OnceLock<SyncSender<()>> = OnceLock::new();

/// Starts the keeper thread. Without it (it could not start), workers still
/// collect their heaps and mimalloc purges after its own delay.
pub fn start() -> std::io::Result<()> {
    let (parked, woken) = sync_channel(1);
    std::thread::Builder::new()
        .name("troupe-heap".into())
        .spawn(move || keep(&woken))?;
    // Only `start` sets it, once: a second call keeps the first keeper.
    let _ = PARKED.set(parked);
    Ok(())
}

/// Run when a worker thread of the async runtime runs out of work: collects
/// its own heap (its empty pages go back to the arena, to be purged by the
/// keeper) and tells the keeper.
#[allow(unsafe_code)]
pub fn on_park() {
    // SAFETY: `mi_collect` only reorganises the calling thread's own heap
    // and the process's arenas; any thread may call it at any time.
    unsafe { libmimalloc_sys::mi_collect(false) };
    if let Some(parked) = PARKED.get() {
        // Full means a wake-up is already pending.
        let _ = parked.try_send(());
    }
}

/// Run when a worker thread wakes.
pub fn on_unpark() {
    WAKES.fetch_add(1, Ordering::Relaxed);
}

/// The keeper's loop: after each park, waits until no worker has woken for
/// [`IDLE`], then purges every arena.
fn keep(parked: &Receiver<()>) {
    // `mi_collect` on a thread that never allocated does nothing: its heap
    // is not set up until its first allocation.
    let warm = std::hint::black_box(Box::new(0u64));
    while parked.recv().is_ok() {
        loop {
            let seen = WAKES.load(Ordering::Relaxed);
            match parked.recv_timeout(IDLE) {
                // Another park: the burst goes on.
                Ok(()) => continue,
                Err(RecvTimeoutError::Timeout) if WAKES.load(Ordering::Relaxed) == seen => break,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
        purge();
    }
    drop(warm);
}

/// Gives every arena's freed pages back to the system now.
#[allow(unsafe_code)]
fn purge() {
    // SAFETY: as in `on_park`; forced, the collection also purges every
    // arena's freed pages whatever their delay (process-wide).
    unsafe { libmimalloc_sys::mi_collect(true) };
}
