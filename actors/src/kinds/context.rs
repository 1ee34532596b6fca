//! What a registered actor's handler works with: its state, its address,
//! who sent the message, and durable sends to bots, threads and other
//! actors — committed with the end of the message, so a message applied
//! once sends once.

use troupe_runtime::id::MsgId;
use troupe_runtime::protocol::{Address, Envelope, Payload};

use super::{ActorAddress, UserActor};
use crate::node::Node;

/// The handler's view of its actor while it handles one message.
pub struct Context<'a, A: UserActor + ?Sized> {
    pub(crate) state: &'a mut A::State,
    pub(crate) address: Address,
    pub(crate) kind: &'a str,
    pub(crate) key: &'a str,
    pub(crate) sender: Option<String>,
    pub(crate) node: Option<Node>,
    pub(crate) save: bool,
    pub(crate) outbox: Vec<Envelope>,
}

impl<A: UserActor + ?Sized> Context<'_, A> {
    /// Its state.
    pub fn state(&self) -> &A::State {
        self.state
    }

    /// Its state, to change. What changes is kept in memory until
    /// [`Context::save`] (or the end of a durable message) commits it.
    pub fn state_mut(&mut self) -> &mut A::State {
        self.state
    }

    /// Saves the state: it is committed to the store when this message's
    /// handling ends, with what the handler sent. After a crash or a
    /// passivation the actor comes back with the last saved state. (The
    /// end of a durable message always saves it.)
    pub fn save(&mut self) {
        self.save = true;
    }

    /// Its kind's name.
    pub fn kind(&self) -> &str {
        self.kind
    }

    /// Its key.
    pub fn key(&self) -> &str {
        self.key
    }

    /// The house whose key it is, for a key a house's bots reach under
    /// per-house keys (`acme` for `acme:main`; see
    /// [`HouseKeys`](super::HouseKeys)).
    pub fn house(&self) -> Option<&str> {
        super::houses::house_of(self.key)
    }

    /// Its durable-mailbox address.
    pub fn address(&self) -> &Address {
        &self.address
    }

    /// Who sent the message, when it came through the durable mailbox or
    /// from a bot (`scout`, `actor:desk/main`, …); `None` for the
    /// program's in-memory sends.
    pub fn sender(&self) -> Option<&str> {
        self.sender.as_deref()
    }

    /// The node, for what this context does not cover (bots, houses).
    pub fn node(&self) -> Option<&Node> {
        self.node.as_ref()
    }

    /// Sends `text` to the bot `bot` (into its own conversation), as
    /// `message_agent` does: durable, committed with the end of this
    /// message; the bot's reply comes back to this actor as a message
    /// ([`UserActor::from_agent`]). Returns the delivery id.
    pub fn message_bot(&mut self, bot: &str, text: impl Into<String>) -> Result<MsgId, String> {
        let node = self
            .node
            .as_ref()
            .ok_or("this actor runs without a node; it cannot reach bots")?;
        let record = node.bot(bot).map_err(|e| e.to_string())?;
        Ok(self.send(
            Address::Bot(record.id),
            Payload::Text {
                sender: self.address.to_string(),
                text: text.into(),
                expects_reply: true,
            },
        ))
    }

    /// Sends `msg` to the actor `to` (of any registered kind) through the
    /// durable mailbox, committed with the end of this message. Returns
    /// the delivery id.
    pub fn tell<B: UserActor>(
        &mut self,
        to: &ActorAddress<B>,
        msg: &B::Msg,
    ) -> Result<MsgId, String> {
        let data = serde_json::to_value(msg)
            .map_err(|e| format!("the message to {to} cannot be encoded: {e}"))?;
        Ok(self.send(
            to.to_address(),
            Payload::Custom {
                name: to.kind().to_string(),
                data,
            },
        ))
    }

    /// Sends any durable message (a post to a house thread, a notice to a
    /// conversation), committed with the end of this message. Returns the
    /// delivery id.
    pub fn send(&mut self, to: Address, body: Payload) -> MsgId {
        let id = MsgId::new();
        self.outbox.push(Envelope {
            id,
            from: self.address.clone(),
            to,
            body,
            sent_at: chrono::Utc::now(),
        });
        id
    }
}
