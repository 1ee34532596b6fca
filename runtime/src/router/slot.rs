//! One key's place in the router: the live actor, or a buffer while there is none.
//!
//! Senders touch only their key's slot: look it up in the map, lock it, push
//! into the actor's mailbox. Sending under the slot's lock is what keeps
//! order: a message either reaches the live incarnation, or lands in the
//! buffer that the router flushes, in order, into the next incarnation before
//! anyone can send to it directly.

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use ractor::{ActorRef, MessagingErr};

/// Where a key's messages go right now.
pub(crate) enum SlotState<M> {
    /// The current incarnation takes messages directly.
    Live(ActorRef<M>),
    /// No incarnation takes messages (activating, restarting, passivating):
    /// they wait here, in order.
    Waiting(Vec<M>),
    /// The slot was removed from the map; the sender must look up again.
    Gone,
}

/// A key's slot: its state and when it was last used.
pub(crate) struct Slot<M> {
    pub(crate) state: Mutex<SlotState<M>>,
    /// The router epoch of the last send, for idle detection.
    pub(crate) last_used: AtomicU64,
}

impl<M: ractor::Message> Slot<M> {
    /// A slot waiting for its first incarnation, holding `first`.
    pub(crate) fn waiting(first: M, epoch: u64) -> Self {
        Self {
            state: Mutex::new(SlotState::Waiting(vec![first])),
            last_used: AtomicU64::new(epoch),
        }
    }

    /// Delivers or buffers `msg`; gives it back if the slot is gone.
    pub(crate) fn offer(&self, msg: M, epoch: u64) -> Result<(), M> {
        self.last_used.store(epoch, Ordering::Relaxed);
        let mut state = self.state.lock();
        match &mut *state {
            SlotState::Live(actor) => match actor.send_message(msg) {
                Ok(()) => Ok(()),
                // The incarnation died: hold the message for the next one.
                Err(MessagingErr::SendErr(msg)) => {
                    *state = SlotState::Waiting(vec![msg]);
                    Ok(())
                }
                Err(MessagingErr::ChannelClosed | MessagingErr::InvalidActorType) => {
                    *state = SlotState::Waiting(Vec::new());
                    Ok(())
                }
            },
            SlotState::Waiting(buffer) => {
                buffer.push(msg);
                Ok(())
            }
            SlotState::Gone => Err(msg),
        }
    }

    /// Hands the buffer to `actor` in order and makes it live. If `actor`
    /// died meanwhile, what it did not take stays buffered.
    pub(crate) fn go_live(&self, actor: &ActorRef<M>) {
        let mut state = self.state.lock();
        let buffer = match &mut *state {
            SlotState::Waiting(buffer) => std::mem::take(buffer),
            SlotState::Live(_) | SlotState::Gone => Vec::new(),
        };
        let mut pending = buffer.into_iter();
        while let Some(msg) = pending.next() {
            if let Err(MessagingErr::SendErr(msg)) = actor.send_message(msg) {
                let mut rest = vec![msg];
                rest.extend(pending);
                *state = SlotState::Waiting(rest);
                return;
            }
        }
        *state = SlotState::Live(actor.clone());
    }

    /// Stops direct delivery: the live actor (if any) is returned and new
    /// messages are buffered from now on.
    pub(crate) fn hold(&self) -> Option<ActorRef<M>> {
        let mut state = self.state.lock();
        match std::mem::replace(&mut *state, SlotState::Waiting(Vec::new())) {
            SlotState::Live(actor) => Some(actor),
            SlotState::Waiting(buffer) => {
                *state = SlotState::Waiting(buffer);
                None
            }
            SlotState::Gone => {
                *state = SlotState::Gone;
                None
            }
        }
    }

    /// The incarnation that takes messages directly, if any.
    pub(crate) fn live(&self) -> Option<ActorRef<M>> {
        match &*self.state.lock() {
            SlotState::Live(actor) => Some(actor.clone()),
            SlotState::Waiting(_) | SlotState::Gone => None,
        }
    }

    /// Whether an incarnation takes messages directly.
    pub(crate) fn is_live(&self) -> bool {
        matches!(&*self.state.lock(), SlotState::Live(_))
    }

    /// Marks the slot gone if nothing waits in it; returns whether it did.
    /// With `force`, drops what waits and returns `true`.
    pub(crate) fn close(&self, force: bool) -> (bool, usize) {
        let mut state = self.state.lock();
        let waiting = match &*state {
            SlotState::Waiting(buffer) => buffer.len(),
            SlotState::Live(_) | SlotState::Gone => 0,
        };
        if waiting > 0 && !force {
            return (false, waiting);
        }
        *state = SlotState::Gone;
        (true, waiting)
    }
}
