//! What a conversation lends its tools for the turn in progress: its
//! channel to the user (`ask_user`, the gate's approvals) and its budget
//! scope (what `delegate` charges).
//!
//! The conversation sets both when a turn begins; the channel goes with
//! the turn (its caller's stream ends), the scope stays until the next
//! turn replaces it. Typed fields of
//! [`ConversationServices`](super::ConversationServices): the channel's
//! type is the actors' event emitter, which the tools reach through
//! [`UserChannel`].

use crate::protocol::AgentEvent;

/// The turn's channel to whoever watches the conversation (its caller, a
/// subscriber to the node's events).
pub trait UserChannel: Send + Sync + std::fmt::Debug {
    /// Whether anyone receives the turn's events.
    fn has_listeners(&self) -> bool;

    /// Sends one event to whoever watches (nobody watching is fine).
    fn emit(&self, event: AgentEvent);
}
