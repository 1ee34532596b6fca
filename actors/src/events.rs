//! Where a conversation's events go: the caller of the turn (the CLI's
//! `run`, the Rust API's turn handle) and the node's bus that every other
//! subscriber (a chat screen, the server) listens on.

use tokio::sync::mpsc;
use troupe_runtime::bus::Bus;
use troupe_runtime::id::ConversationId;
use troupe_runtime::protocol::AgentEvent;

/// An event with where it came from: a conversation, or an actor of a
/// kind a program registered (then `actor` names it and `conversation`
/// is nil — [`NodeEvent::source`] tells the two apart).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct NodeEvent {
    /// The conversation; nil for an event of a registered actor.
    pub conversation: ConversationId,
    /// The registered actor it came from, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<ActorName>,
    /// What happened.
    pub event: AgentEvent,
}

impl NodeEvent {
    /// An event of `conversation`.
    pub fn of_conversation(conversation: ConversationId, event: AgentEvent) -> Self {
        Self {
            conversation,
            actor: None,
            event,
        }
    }

    /// An event of the registered actor `actor`.
    pub fn of_actor(actor: ActorName, event: AgentEvent) -> Self {
        Self {
            conversation: ConversationId::from_uuid(uuid::Uuid::nil()),
            actor: Some(actor),
            event,
        }
    }

    /// Where it came from.
    pub fn source(&self) -> Source<'_> {
        match &self.actor {
            Some(actor) => Source::Actor(actor),
            None => Source::Conversation(self.conversation),
        }
    }
}

/// Where a [`NodeEvent`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source<'a> {
    /// A conversation (a bot's, a subagent's, a routine run's, …).
    Conversation(ConversationId),
    /// An actor of a kind a program registered.
    Actor(&'a ActorName),
}

/// The identity of a registered actor on the node's bus: its kind and its
/// key (printed `KIND/KEY`, as in `troupe ps`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct ActorName {
    /// Its kind's name.
    pub kind: String,
    /// Its key.
    pub key: String,
}

impl std::fmt::Display for ActorName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.kind, self.key)
    }
}

/// Sends one conversation's events to the turn's caller and the node's bus.
#[derive(Debug, Clone)]
pub struct Emitter {
    conversation: ConversationId,
    sink: Option<mpsc::UnboundedSender<AgentEvent>>,
    bus: Bus<NodeEvent>,
}

impl Emitter {
    /// An emitter for `conversation` onto `bus`, and `sink` if given.
    pub fn new(
        conversation: ConversationId,
        sink: Option<mpsc::UnboundedSender<AgentEvent>>,
        bus: Bus<NodeEvent>,
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
        // Copied only when both listen; a caller that dropped its stream
        // does not.
        let sink = self.sink.as_ref().filter(|s| !s.is_closed());
        if self.bus.receiver_count() == 0 {
            if let Some(sink) = sink {
                let _ = sink.send(event);
            }
            return;
        }
        if let Some(sink) = sink {
            let _ = sink.send(event.clone());
        }
        let _ = self
            .bus
            .send(NodeEvent::of_conversation(self.conversation, event));
    }
}

/// A turn's emitter is its tools' channel to the user.
impl troupe_runtime::tool::services::UserChannel for Emitter {
    fn has_listeners(&self) -> bool {
        Emitter::has_listeners(self)
    }

    fn emit(&self, event: AgentEvent) {
        Emitter::emit(self, event);
    }
}
