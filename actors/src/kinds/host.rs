//! The ractor actor that hosts one registered actor (one key of a kind):
//! it holds the program's value and its state, runs `handle` for each
//! message in order, and commits what a message's end must commit —
//! the consume of a durable message, the state, the durable sends and the
//! reply to a bot — in one transaction.

use std::marker::PhantomData;
use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use troupe_runtime::id::MsgId;
use troupe_runtime::protocol::{Address, Envelope, Payload};
use troupe_runtime::store::mailbox;

use super::state::{self, Commit};
use super::{Context, UserActor};
use crate::node::{Node, WeakNode};

/// A hosted actor's messages.
pub enum HostMsg<A: UserActor> {
    /// An in-memory message; no answer.
    Tell(A::Msg),
    /// An in-memory message whose reply (or error) goes to the port.
    Ask(A::Msg, RpcReplyPort<Result<A::Reply, String>>),
    /// A durable message (committed in the mailbox), applied once.
    Durable(Box<Envelope>),
}

// Never crosses a node: ractor's `cluster` feature asks each message type.
impl<A: UserActor> ractor::Message for HostMsg<A> {}

/// What a hosted actor is started with.
pub struct HostArgs<A: UserActor> {
    pub(crate) actor: A,
    pub(crate) kind: Arc<str>,
    pub(crate) key: Arc<str>,
    pub(crate) state: A::State,
    /// Durable messages that waited for it, handed to it first.
    pub(crate) pending: Vec<Envelope>,
    pub(crate) node: WeakNode,
}

/// The host's state: the program's actor and its state.
pub struct Hosted<A: UserActor> {
    args: HostArgs<A>,
    address: Address,
}

/// The host actor of kind `A`.
pub struct Host<A>(PhantomData<fn() -> A>);

impl<A> Host<A> {
    pub(crate) fn new() -> Self {
        Self(PhantomData)
    }
}

impl<A: UserActor> Actor for Host<A> {
    type Msg = HostMsg<A>;
    type State = Hosted<A>;
    type Arguments = HostArgs<A>;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        mut args: HostArgs<A>,
    ) -> Result<Self::State, ActorProcessingErr> {
        // What waited in the mailbox goes first, before anything sent now.
        for envelope in std::mem::take(&mut args.pending) {
            myself.send_message(HostMsg::Durable(Box::new(envelope)))?;
        }
        let address = Address::Actor {
            kind: args.kind.to_string(),
            key: args.key.to_string(),
        };
        Ok(Hosted { args, address })
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        hosted: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // Boxed: the task of every live actor is as large as the largest
        // state of its loop, and a message's handling (the program's
        // handler, the store's futures) is the largest by far. Boxed, an
        // idle actor holds only its receive loop; the box lives while one
        // message is handled.
        Box::pin(hosted.handle(msg)).await
    }
}

impl<A: UserActor> Hosted<A> {
    async fn handle(&mut self, msg: HostMsg<A>) -> Result<(), ActorProcessingErr> {
        let hosted = self;
        match msg {
            HostMsg::Tell(msg) => {
                let (result, commit) = hosted.run(msg, None).await;
                if let Err(error) = &result {
                    tracing::debug!(actor = %hosted.address, %error, "a message failed");
                }
                hosted.commit(commit).await?;
            }
            HostMsg::Ask(msg, port) => {
                let (result, commit) = hosted.run(msg, None).await;
                hosted.commit(commit).await?;
                let _ = port.send(result);
            }
            HostMsg::Durable(envelope) => hosted.apply(*envelope).await?,
        }
        Ok(())
    }

    fn node(&self) -> Option<Node> {
        self.args.node.upgrade()
    }

    /// Runs the program's handler on `msg`; what it asked to commit comes
    /// back with its result.
    async fn run(
        &mut self,
        msg: A::Msg,
        sender: Option<String>,
    ) -> (Result<A::Reply, String>, Commit) {
        let mut cx = Context::<A> {
            state: &mut self.args.state,
            address: self.address.clone(),
            kind: &self.args.kind,
            key: &self.args.key,
            sender,
            node: self.args.node.upgrade(),
            save: false,
            outbox: Vec::new(),
        };
        let result = self
            .args
            .actor
            .handle(&mut cx, msg)
            .await
            .map_err(|e| e.to_string());
        let (save, outbox) = (cx.save, cx.outbox);
        let state = match save.then(|| self.encode_state()).transpose() {
            Ok(state) => state,
            Err(error) => return (Err(error), Commit::default()),
        };
        (
            result,
            Commit {
                consumes: None,
                state,
                outbox,
            },
        )
    }

    fn encode_state(&self) -> Result<String, String> {
        serde_json::to_string(&self.args.state)
            .map_err(|e| format!("the state of {} cannot be encoded: {e}", self.address))
    }

    /// Commits `commit` and hands its durable sends over; `false` when the
    /// message it consumes was consumed already.
    async fn commit(&self, commit: Commit) -> Result<bool, ActorProcessingErr> {
        if commit.is_empty() {
            return Ok(true);
        }
        let node = self.node().ok_or("the node is stopping")?;
        let address = self.address.clone();
        let outbox = commit.outbox.clone();
        let applied = node
            .store()
            .write(move |tx| state::apply(tx, &address, &commit))
            .await?;
        if applied && !outbox.is_empty() {
            // Committed: handing over is off this actor's path, and
            // harmless to repeat (the post office does, if this fails).
            tokio::spawn(async move {
                for envelope in outbox {
                    if let Err(e) = node.route(envelope).await {
                        tracing::debug!(error = %e, "a committed message waits in the mailbox");
                    }
                }
            });
        }
        Ok(applied)
    }

    /// Applies durable message `envelope` once: skipped when consumed
    /// already; otherwise handled, and consumed in the transaction that
    /// saves the state and enqueues what it sent and its reply.
    async fn apply(&mut self, envelope: Envelope) -> Result<(), ActorProcessingErr> {
        let node = self.node().ok_or("the node is stopping")?;
        let id = envelope.id;
        let pending = node
            .store()
            .read(move |c| mailbox::is_pending(c, id))
            .await?;
        if !pending {
            return Ok(());
        }
        let (sender, decoded) = self.decode(&envelope);
        let (result, mut commit) = match decoded {
            Ok(msg) => self.run(msg, Some(sender.clone())).await,
            Err(error) => (Err(error), Commit::default()),
        };
        commit.consumes = Some(id);
        commit.state = Some(self.encode_state()?);
        if let Some(reply) = self.reply(&envelope, &result) {
            commit.outbox.push(reply);
        }
        if !self.commit(commit).await? {
            // Consumed meanwhile by an earlier incarnation: what this run
            // changed in memory must not stand.
            return Err(format!("message {id} to {} was applied twice", self.address).into());
        }
        if let Err(error) = result {
            tracing::debug!(actor = %self.address, message = %id, %error, "a durable message failed");
        }
        Ok(())
    }

    /// Who sent `envelope`, and the message it stands for.
    fn decode(&self, envelope: &Envelope) -> (String, Result<A::Msg, String>) {
        let sender = match (&envelope.body, &envelope.from) {
            (Payload::Text { sender, .. }, _) => sender.clone(),
            (Payload::Notice { data, .. }, _) if data["from"].is_string() => {
                data["from"].as_str().unwrap_or_default().to_string()
            }
            (_, Address::Actor { kind, key }) => format!("actor:{kind}/{key}"),
            (_, from) => from.to_string(),
        };
        let actor = &self.args.actor;
        let msg = match &envelope.body {
            Payload::Text { text, .. } | Payload::Notice { text, .. } => {
                actor.from_agent(&sender, text)
            }
            Payload::Custom { data, .. } => serde_json::from_value(data.clone()).map_err(|e| {
                format!(
                    "the message is not one {} takes ({e}); send its message type",
                    self.address
                )
            }),
            Payload::Post(_) | Payload::Offer(_) => Err(format!(
                "{} takes no house posts or offers; send it a message",
                self.address
            )),
        };
        (sender, msg)
    }

    /// The answer to a bot's message that expects one: a notice into the
    /// sender's conversation (or to the sending actor).
    fn reply(&self, answered: &Envelope, result: &Result<A::Reply, String>) -> Option<Envelope> {
        let Payload::Text {
            expects_reply: true,
            ..
        } = &answered.body
        else {
            return None;
        };
        let to = match &answered.from {
            Address::Conversation(_) | Address::Actor { .. } => answered.from.clone(),
            Address::Bot(_) | Address::Service(_) | Address::Thread(_) => return None,
        };
        let name = format!("{}/{}", self.args.kind, self.args.key);
        let text = match result {
            Ok(reply) => format!("`{name}` replied:\n{}", self.args.actor.reply_text(reply)),
            Err(error) => format!("`{name}` could not answer your message: {error}"),
        };
        Some(Envelope {
            id: MsgId::new(),
            from: self.address.clone(),
            to,
            body: Payload::Notice {
                topic: "reply".into(),
                text,
                data: serde_json::json!({"from": name, "in_reply_to": answered.id.to_string()}),
            },
            sent_at: chrono::Utc::now(),
        })
    }
}
