//! The writer's helper thread that compresses house files' pieces, so a
//! job that comes while the writer's idle work compresses does not wait
//! for the LZ4 (see [`super::house_files::compress`]).
//!
//! The writer, idle, reads a step's untried pieces and hands them to the
//! `troupe-store-squeeze` thread ([`Squeezer::start`]); that thread
//! compresses them and queues them back to the writer as a job of its own
//! ([`Stored`]), which the writer runs in a batch like any other. One step
//! is out at a time. The thread starts at the first step and ends with the
//! writer; when it cannot be started, the writer compresses a step itself,
//! in a transaction of its own, as it did before the thread.

use std::path::Path;
use std::sync::mpsc as std_mpsc;

use rusqlite::{Connection, Transaction, TransactionBehavior};
use tokio::sync::mpsc;

use super::error::StoreError;
use super::house_files::compress::{self, Squeezed, Untried};
use super::writer::Job;

/// The writer's end: where steps go, and whether one is out.
pub(super) struct Squeezer {
    /// The thread's queue of steps, once started.
    steps: Option<std_mpsc::Sender<Vec<Untried>>>,
    /// The writer's own queue, where a step comes back as a job.
    queue: mpsc::WeakSender<Box<dyn Job>>,
    /// Whether a step is out: read, not yet back as a job.
    out: bool,
}

impl Squeezer {
    /// A squeezer handing its steps back through `queue`.
    pub(super) fn new(queue: mpsc::WeakSender<Box<dyn Job>>) -> Self {
        Self {
            steps: None,
            queue,
            out: false,
        }
    }

    /// Whether a step is out.
    pub(super) fn busy(&self) -> bool {
        self.out
    }

    /// The step that was out came back (stored or not: what is left
    /// untried is taken up again).
    pub(super) fn back(&mut self) {
        self.out = false;
    }

    /// Reads the next step and hands it to the thread; without the
    /// thread, compresses it here. Whether pieces still wait: the step
    /// out, or those after the one done here.
    pub(super) fn start(&mut self, conn: &mut Connection, path: &Path) -> bool {
        let step = match compress::untried_step(conn) {
            Ok(step) if step.is_empty() => return false,
            Ok(step) => step,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "store could not read file pieces to compress");
                return false;
            }
        };
        if self.steps.is_none() {
            self.steps = thread(self.queue.clone());
        }
        let step = match &self.steps {
            Some(steps) => match steps.send(step) {
                Ok(()) => {
                    self.out = true;
                    return true;
                }
                Err(std_mpsc::SendError(step)) => step,
            },
            None => step,
        };
        self.steps = None;
        here(conn, path, step)
    }
}

/// Starts the thread that compresses steps and queues them back; `None`
/// when it cannot be started.
fn thread(queue: mpsc::WeakSender<Box<dyn Job>>) -> Option<std_mpsc::Sender<Vec<Untried>>> {
    let (steps, rx) = std_mpsc::channel::<Vec<Untried>>();
    let started = std::thread::Builder::new()
        .name("troupe-store-squeeze".into())
        .spawn(move || {
            for step in rx {
                let stored = Box::new(Stored {
                    step: compress::squeeze(step),
                    locked: false,
                });
                // The writer gone, or going: the pieces stay untried.
                let Some(queue) = queue.upgrade() else { return };
                if queue.blocking_send(stored).is_err() {
                    return;
                }
            }
        });
    match started {
        Ok(_) => Some(steps),
        Err(e) => {
            tracing::warn!(error = %e, "no thread to compress file pieces: the store's writer does it");
            None
        }
    }
}

/// Compresses and stores a step on the writer's thread, in a transaction
/// of its own; whether more pieces wait.
fn here(conn: &mut Connection, path: &Path, step: Vec<Untried>) -> bool {
    let stored = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(StoreError::from)
        .and_then(|tx| {
            compress::store_squeezed(&tx, &compress::squeeze(step))?;
            let more = compress::any_untried(&tx)?;
            tx.commit()?;
            Ok(more)
        });
    stored.unwrap_or_else(|e| {
        tracing::warn!(path = %path.display(), error = %e, "store could not compress file pieces");
        false
    })
}

/// A step compressed, back in the writer's queue to be stored.
struct Stored {
    step: Vec<Squeezed>,
    locked: bool,
}

impl Job for Stored {
    fn run(&mut self, tx: &Transaction<'_>) -> bool {
        match compress::store_squeezed(tx, &self.step) {
            Ok(()) => {
                self.locked = false;
                true
            }
            Err(e) => {
                self.locked = e.is_locked();
                tracing::warn!(error = %e, "store could not keep compressed file pieces; they stay raw for now");
                false
            }
        }
    }

    fn finish(self: Box<Self>, _batch: Result<(), &StoreError>) {}

    fn locked(&self) -> bool {
        self.locked
    }

    fn idle_work(&self) -> bool {
        true
    }
}
