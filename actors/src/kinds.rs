//! Actor kinds a program registers: its own actors, under troupe's
//! supervisor, addressed and durable like troupe's own.
//!
//! A Rust program writes a type implementing [`UserActor`] (a message
//! enum, a reply, a state — all serde — and one `handle` method) and
//! registers it under a kind name ([`Node::register`]). From then on an
//! actor of that kind is named by an [`ActorAddress`] (kind + key), never
//! by an `ActorRef`:
//!
//! - each kind is one instance of the generic router
//!   (`troupe_runtime::router`), a child of the node's root supervisor: a
//!   key's actor is activated on its first message from its stored state,
//!   passivated when idle, and restarted after a panic or an error under
//!   the [`KindOptions`] the program chose;
//! - [`Kind::send`] is an in-memory send (a map lookup and a mailbox
//!   push); [`Kind::call`] waits for the reply; [`Kind::send_durable`]
//!   commits the message to the durable mailbox before it returns, and the
//!   actor consumes it in the same transaction that saves its state and
//!   enqueues what it sent, so after a crash it is applied exactly once;
//! - a kind offered to bots ([`KindOptions::offer`]) is in their roster
//!   and a `message_agent` target — every house's bots' too, each house
//!   with its own keys unless the program shares them ([`houses`]); its
//!   answer goes back to the bot as a durable notice, committed with the
//!   consume;
//! - its actors are in the tree (`troupe ps`, `Runtime::tree()`) and their
//!   starts, stops and restarts are events on the node's bus.
//!
//! The actor's state is kept by troupe: it is loaded at activation and
//! saved with one call ([`Context::save`]), in the commit that ends the
//! message (always for a durable message).

mod context;
mod host;
pub mod houses;
mod registry;
mod state;

pub use context::Context;
pub use houses::HouseKeys;
pub use registry::{Kind, KindOptions, Kinds};

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Serialize;
use troupe_runtime::protocol::Address;

#[cfg(doc)]
use crate::node::Node;

/// What a handler's failure is: any error (its text is what a caller or
/// a bot is told).
pub type ActorError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// An actor kind of a program: its messages, its reply, its state and how
/// it handles a message. One value is made per key by the factory given
/// to [`Node::register`]; troupe keeps the state.
#[async_trait::async_trait]
pub trait UserActor: Send + Sync + 'static {
    /// The messages it takes (serde, to cross the durable mailbox).
    type Msg: Serialize + DeserializeOwned + Send + 'static;
    /// What it answers to each message.
    type Reply: Serialize + DeserializeOwned + Send + 'static;
    /// Its state: loaded from the store when an actor is activated (the
    /// default when it was never saved), saved by [`Context::save`].
    type State: Serialize + DeserializeOwned + Default + Send + Sync + 'static;

    /// Handles one message: change the state, send messages through `cx`,
    /// return the reply. An error is the caller's answer (the actor goes
    /// on); a panic fails the actor, which its kind's policy restarts from
    /// the stored state.
    async fn handle(
        &self,
        cx: &mut Context<'_, Self>,
        msg: Self::Msg,
    ) -> Result<Self::Reply, ActorError>;

    /// The message a bot's text (`message_agent`) or a bot's reply stands
    /// for; by default the text parsed as the message's JSON. An error is
    /// sent back to the bot, which can retry.
    #[allow(clippy::wrong_self_convention)] // it reads a bot's text, as the kind decides
    fn from_agent(&self, sender: &str, text: &str) -> Result<Self::Msg, String> {
        let _ = sender;
        serde_json::from_str(text).map_err(|e| {
            format!("the message is not one this actor takes ({e}); send it as JSON of its message type")
        })
    }

    /// How a reply reads to a bot; by default its JSON.
    fn reply_text(&self, reply: &Self::Reply) -> String {
        serde_json::to_string(reply).unwrap_or_else(|e| format!("(unprintable reply: {e})"))
    }
}

/// The address of one actor of kind `A`: its kind's name and its key.
/// Cheap to clone; it stays valid across passivations, restarts and
/// process restarts.
pub struct ActorAddress<A> {
    pub(crate) kind: Arc<str>,
    pub(crate) key: Arc<str>,
    _kind: PhantomData<fn() -> A>,
}

impl<A> ActorAddress<A> {
    /// The actor `key` of the kind registered as `kind`.
    pub fn new(kind: impl Into<Arc<str>>, key: impl Into<Arc<str>>) -> Self {
        Self {
            kind: kind.into(),
            key: key.into(),
            _kind: PhantomData,
        }
    }

    /// Its kind's name.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// Its key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// As a durable-mailbox address.
    pub fn to_address(&self) -> Address {
        Address::Actor {
            kind: self.kind.to_string(),
            key: self.key.to_string(),
        }
    }
}

impl<A> Clone for ActorAddress<A> {
    fn clone(&self) -> Self {
        Self::new(Arc::clone(&self.kind), Arc::clone(&self.key))
    }
}

impl<A> PartialEq for ActorAddress<A> {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind && self.key == other.key
    }
}

impl<A> Eq for ActorAddress<A> {}

impl<A> fmt::Debug for ActorAddress<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.kind, self.key)
    }
}

impl<A> fmt::Display for ActorAddress<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.kind, self.key)
    }
}

/// Why a registered kind could not be registered or reached.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KindError {
    /// The kind's name is not allowed.
    #[error("`{name}` cannot name an actor kind: {why}")]
    BadName {
        /// The name given.
        name: String,
        /// What is wrong with it.
        why: String,
    },
    /// A kind of that name is registered already.
    #[error("an actor kind named `{0}` is registered already; pick another name")]
    Exists(String),
    /// No kind of that name is registered (with that type).
    #[error("no actor kind `{0}` is registered with this type; register it first with `register`")]
    Unknown(String),
    /// The kind's actor did not take or answer the message.
    #[error("actor {address}: {detail}")]
    Unreachable {
        /// The actor.
        address: String,
        /// What happened.
        detail: String,
    },
    /// The actor answered with an error.
    #[error("actor {address} failed on the message: {error}")]
    Failed {
        /// The actor.
        address: String,
        /// Its error.
        error: String,
    },
    /// The message could not be encoded or stored.
    #[error("the message to {address} could not be stored: {detail}")]
    Store {
        /// The actor.
        address: String,
        /// Why.
        detail: String,
    },
}

/// Checks a kind's name: lower-case letters, digits, `-` and `_`, starting
/// with a letter, at most 40 characters (it is a `message_agent` target
/// and a child's name in the tree).
pub(crate) fn check_name(name: &str) -> Result<(), KindError> {
    let bad = |why: &str| {
        Err(KindError::BadName {
            name: name.to_string(),
            why: why.to_string(),
        })
    };
    if name.is_empty() || name.len() > 40 {
        return bad("use 1 to 40 characters");
    }
    if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        return bad("start it with a lower-case letter");
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
    {
        return bad("use only lower-case letters, digits, `-` and `_`");
    }
    Ok(())
}
