//! Where a conversation's events go: the caller of the turn (the CLI's
//! `run`, the Rust API's turn handle) and the node's bus that every other
//! subscriber (a chat screen, the server) listens on.

use tokio::sync::{broadcast, mpsc};
use troupe_runtime::id::ConversationId;
use troupe_runtime::protocol::AgentEvent;

/// An event with the conversation it came from.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct NodeEvent {
    /// The conversation.
    pub conversation: ConversationId,
    /// What happened.
    pub event: AgentEvent,
}

/// Sends one conversation's events to the turn's caller and the node's bus.
#[derive(Debug, Clone)]
pub struct Emitter {
    conversation: ConversationId,
    sink: Option<mpsc::UnboundedSender<AgentEvent>>,
    bus: broadcast::Sender<NodeEvent>,
}

impl Emitter {
    /// An emitter for `conversation` onto `bus`, and `sink` if given.
    pub fn new(
        conversation: ConversationId,
        sink: Option<mpsc::UnboundedSender<AgentEvent>>,
        bus: broadcast::Sender<NodeEvent>,
    ) -> Self {
        Self {
            conversation,
            sink,
            bus,
        }
    }

    /// Whether anyone receives these events (the turn's caller or a bus subscriber).
    pub fn has_listeners(&self) -> bool {
        self.sink.as_ref().is_some_and(|s| !s.is_closed()) || self.bus.receiver_count() > 0
    }

    /// Sends one event. Nobody listening is fine: events are a view, the
    /// store is the record.
    pub fn emit(&self, event: AgentEvent) {
        if let Some(sink) = &self.sink {
            let _ = sink.send(event.clone());
        }
        if self.bus.receiver_count() > 0 {
            let _ = self.bus.send(NodeEvent {
                conversation: self.conversation,
                event,
            });
        }
    }
}
