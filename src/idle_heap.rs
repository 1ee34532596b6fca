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
//! no worker has parked for [`IDLE`], it purges every arena at once. Until
//! then, pages freed in the burst stay mapped and are reused by the burst
//! itself. Purging at every park instead (a purge delay of 0) gave each
//! freed page back and faulted it in again within the burst, about 15% of
//! its wall time (`troupe bench w3`); see docs/benchmarks.md.
//!
//! A park rings the keeper's [`Doorbell`], which wakes it only when it
//! sleeps: while it watches for quiet it looks by itself once per [`IDLE`],
//! so the parks of a burst (several a turn) wake no thread.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use troupe_runtime::doorbell::{doorbell, Doorbell, Watcher};

/// How long no worker must park before the freed pages are purged.
pub const IDLE: Duration = Duration::from_millis(10);

/// Tells the keeper a worker ran out of work.
static PARKED: OnceLock<Doorbell> = OnceLock::new();

/// Starts the keeper thread. Without it (it could not start), workers still
/// collect their heaps and mimalloc purges after its own delay.
pub fn start() -> std::io::Result<()> {
    let (parked, watcher) = doorbell();
    std::thread::Builder::new()
        .name("troupe-heap".into())
        .spawn(move || keep(&watcher))?;
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
        parked.ring();
    }
}

/// The keeper's loop: after a park, waits until no worker has parked for
/// [`IDLE`], then purges every arena.
fn keep(parked: &Watcher) {
    // `mi_collect` on a thread that never allocated does nothing: its heap
    // is not set up until its first allocation.
    let warm = std::hint::black_box(Box::new(0u64));
    let mut seen = parked.seen();
    while parked.wait(seen) {
        match parked.settle(IDLE, Instant::now(), Duration::MAX) {
            Some(last) => seen = last,
            None => break,
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
