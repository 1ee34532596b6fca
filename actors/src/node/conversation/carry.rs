//! What outlives one incarnation of a conversation's actor.
//!
//! ractor drops an actor's state when a handler panics, and a restart
//! builds a new actor from the store. The history is in the store; what is
//! not — who waits for the running turn, the turns queued behind it, the
//! running turn's cancel token, and the fence that tells incarnations apart
//! — lives here, one [`Carry`] per conversation, kept by the node's
//! conversation registry and handed to each incarnation. So a caller
//! waiting on a turn gets the resumed turn's report after a crash, and the
//! step tasks of the dead incarnation are cancelled and fenced off.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use troupe_runtime::protocol::AgentEvent;

use super::journal::Fence;
use super::{TurnReport, TurnRequest};

/// Who waits for the running turn.
#[derive(Debug, Default)]
pub struct Waiter {
    /// The turn's own events.
    pub events: Option<mpsc::UnboundedSender<AgentEvent>>,
    /// Told how the turn ended.
    pub done: Option<oneshot::Sender<TurnReport>>,
}

#[derive(Debug, Default)]
struct Inner {
    waiter: Option<Waiter>,
    queue: VecDeque<TurnRequest>,
    cancel: Option<CancellationToken>,
}

/// One conversation's state across incarnations of its actor.
#[derive(Debug, Default)]
pub struct Carry {
    incarnation: Arc<tokio::sync::RwLock<u64>>,
    restarts: AtomicU32,
    inner: Mutex<Inner>,
}

impl Carry {
    /// Starts a new incarnation: the previous one's running turn is
    /// cancelled and its writes are refused from now on. Says whether a
    /// turn was running (its step tasks may still have writes queued).
    pub async fn take_over(&self) -> (Fence, bool) {
        let fence = Fence::take(&self.incarnation).await;
        let cut = match self.inner.lock().cancel.take() {
            Some(cancel) => {
                cancel.cancel();
                true
            }
            None => false,
        };
        (fence, cut)
    }

    /// Counts a restart; returns the count.
    pub fn restarted(&self) -> u32 {
        self.restarts.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// How often the conversation's actor was restarted in this process.
    pub fn restarts(&self) -> u32 {
        self.restarts.load(Ordering::SeqCst)
    }

    /// A turn begins: remembers who waits for it and how to cancel it.
    pub fn begin(&self, waiter: Waiter, cancel: CancellationToken) {
        let mut inner = self.inner.lock();
        inner.waiter = Some(waiter);
        inner.cancel = Some(cancel);
    }

    /// The events sender of the turn that was running, for its resumption.
    pub fn events(&self) -> Option<mpsc::UnboundedSender<AgentEvent>> {
        self.inner
            .lock()
            .waiter
            .as_ref()
            .and_then(|w| w.events.clone())
    }

    /// Whether a caller waits for a turn that was running.
    pub fn has_waiter(&self) -> bool {
        self.inner.lock().waiter.is_some()
    }

    /// The turn ended: who waited for it.
    pub fn end(&self) -> Option<Waiter> {
        let mut inner = self.inner.lock();
        inner.cancel = None;
        inner.waiter.take()
    }

    /// Queues a turn behind the running one.
    pub fn enqueue(&self, request: TurnRequest) {
        self.inner.lock().queue.push_back(request);
    }

    /// Queues a turn before every other waiting one.
    pub fn enqueue_first(&self, request: TurnRequest) {
        self.inner.lock().queue.push_front(request);
    }

    /// The next queued turn.
    pub fn next(&self) -> Option<TurnRequest> {
        self.inner.lock().queue.pop_front()
    }

    /// How many turns wait.
    pub fn queued(&self) -> usize {
        self.inner.lock().queue.len()
    }

    /// Whether nothing waits here (it can be forgotten).
    pub fn is_idle(&self) -> bool {
        let inner = self.inner.lock();
        inner.waiter.is_none() && inner.queue.is_empty()
    }

    /// Everyone waiting — the running turn's caller and the queued turns'
    /// — gets `report`: the supervisor gave up on the conversation.
    pub fn fail_all(&self, report: &TurnReport) {
        let (waiter, queue) = {
            let mut inner = self.inner.lock();
            if let Some(cancel) = inner.cancel.take() {
                cancel.cancel();
            }
            (inner.waiter.take(), std::mem::take(&mut inner.queue))
        };
        let dones = waiter
            .and_then(|w| w.done)
            .into_iter()
            .chain(queue.into_iter().filter_map(|r| r.done));
        for done in dones {
            let _ = done.send(report.clone());
        }
    }
}
