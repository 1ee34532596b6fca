//! Conversations by id: the node starts a conversation's actor on its
//! first message (from the store, or fresh), and every send, steer, stop
//! and delivery goes through here, so no caller holds an actor across a
//! restart or a passivation.

use std::sync::Arc;

use ractor::{Actor, ActorRef};
use tokio::sync::{mpsc, oneshot};
use troupe_runtime::id::{ConversationId, MsgId};
use troupe_runtime::protocol::{ActorKind, Address, AgentEvent, Envelope};
use troupe_runtime::store::conversations;

use super::{bots, Node, NodeError, Opening};
use crate::bot::BotRecord;
use crate::budget::Scope;
use crate::conversation::{
    Conversation, ConversationArgs, ConversationMsg, Input, TurnReport, TurnRequest,
};
use crate::toolset::Narrowing;

impl Node {
    /// Starts a new conversation `id` of `bot` (nothing to load).
    pub(super) async fn spawn(
        &self,
        id: ConversationId,
        bot: BotRecord,
        narrowing: Narrowing,
        title: Option<String>,
    ) -> Result<ActorRef<ConversationMsg>, NodeError> {
        let kind = bot.spec.kind();
        self.open(Opening {
            id,
            kind,
            narrowing,
            title: title.unwrap_or_default(),
            fresh: true,
            ..Opening::new(bot)
        })
        .await
    }

    /// Starts (or finds) a conversation as `opening` describes it: a
    /// subagent, a routine run, or a bot's own conversation.
    pub async fn open(&self, opening: Opening) -> Result<ActorRef<ConversationMsg>, NodeError> {
        let id = opening.id;
        if let Some(actor) = self.ctx.conversations.get(&id) {
            return Ok(actor.clone());
        }
        let lock = Arc::clone(self.ctx.starting.entry(id).or_default().value());
        let _starting = lock.lock().await;
        if let Some(actor) = self.ctx.conversations.get(&id) {
            return Ok(actor.clone());
        }
        let model = self.ctx.resolve_model(&opening.bot.spec.model)?;
        let budget = opening.budget.unwrap_or_else(|| {
            Scope::root(
                format!("bot:{}", opening.bot.spec.name),
                self.ctx.settings.bot_budget,
            )
        });
        let services = self.ctx.services.fork();
        for extra in opening.services {
            extra(&services);
        }
        let args = ConversationArgs {
            id,
            kind: opening.kind,
            model,
            node: Arc::clone(&self.ctx),
            narrowing: opening.narrowing,
            budget,
            parent: opening.parent,
            services,
            title: opening.title,
            bot: opening.bot,
            gate: opening.gate,
            briefing: opening.briefing,
            label: opening.label,
            fresh: opening.fresh,
        };
        let (actor, _) = Actor::spawn(None, Conversation, args)
            .await
            .map_err(|e| NodeError::Actor(format!("conversation {id} could not start: {e}")))?;
        self.ctx.conversations.insert(id, actor.clone());
        self.ctx.starting.remove(&id);
        Ok(actor)
    }

    /// The live actor of `id`, activated from the store if needed.
    pub(super) async fn activate(
        &self,
        id: ConversationId,
    ) -> Result<ActorRef<ConversationMsg>, NodeError> {
        if let Some(actor) = self.ctx.conversations.get(&id) {
            return Ok(actor.clone());
        }
        let row = self
            .ctx
            .store
            .read(move |c| conversations::get_conversation(c, id))
            .await?
            .ok_or(NodeError::NoSuchConversation(id))?;
        if row.kind == crate::review::LABEL {
            return Err(NodeError::Review(id));
        }
        let bot_id = row.bot;
        let bot = self
            .ctx
            .store
            .read(move |c| bots::by_id(c, bot_id))
            .await?
            .ok_or_else(|| NodeError::NoSuchBot(bot_id.to_string()))?;
        let kind = ActorKind::parse(&row.kind).unwrap_or_else(|| bot.spec.kind());
        self.open(Opening {
            id,
            kind,
            parent: row.parent,
            title: row.title,
            ..Opening::new(bot)
        })
        .await
    }

    /// Sends a user message to a conversation and returns where its events
    /// and its end will arrive.
    pub async fn send(
        &self,
        conversation: ConversationId,
        text: impl Into<String>,
    ) -> Result<
        (
            mpsc::UnboundedReceiver<AgentEvent>,
            oneshot::Receiver<TurnReport>,
        ),
        NodeError,
    > {
        let text = text.into();
        self.ctx.settings.check_user_message(&text)?;
        self.request(conversation, Input::User(text)).await
    }

    /// Starts a turn with any input.
    pub async fn request(
        &self,
        conversation: ConversationId,
        input: Input,
    ) -> Result<
        (
            mpsc::UnboundedReceiver<AgentEvent>,
            oneshot::Receiver<TurnReport>,
        ),
        NodeError,
    > {
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let (done_tx, done_rx) = oneshot::channel();
        self.resend(
            conversation,
            ConversationMsg::Turn(Box::new(TurnRequest {
                input,
                events: Some(events_tx),
                done: Some(done_tx),
            })),
        )
        .await?;
        Ok((events_rx, done_rx))
    }

    /// Sends `msg` to the conversation's actor, activating it; if that
    /// actor stopped meanwhile (it passivated), to the next one.
    pub(crate) async fn resend(
        &self,
        conversation: ConversationId,
        msg: ConversationMsg,
    ) -> Result<(), NodeError> {
        let mut msg = msg;
        for _ in 0..3 {
            let actor = self.activate(conversation).await?;
            match actor.send_message(msg) {
                Ok(()) => return Ok(()),
                Err(ractor::MessagingErr::SendErr(back)) => {
                    self.ctx.conversation_stopped(conversation, actor.get_id());
                    msg = back;
                }
                Err(e) => {
                    return Err(NodeError::Actor(format!(
                        "conversation {conversation} is gone: {e}"
                    )))
                }
            }
        }
        Err(NodeError::Actor(format!(
            "conversation {conversation} kept stopping while a message was sent to it"
        )))
    }

    /// Stops the conversation's running turn.
    pub async fn stop(&self, conversation: ConversationId) -> Result<(), NodeError> {
        if let Some(actor) = self.ctx.conversations.get(&conversation) {
            let _ = actor.send_message(ConversationMsg::Stop);
        }
        Ok(())
    }

    /// Adds a message to the running turn.
    pub async fn steer(
        &self,
        conversation: ConversationId,
        text: impl Into<String>,
    ) -> Result<(), NodeError> {
        let text = text.into();
        self.ctx.settings.check_user_message(&text)?;
        self.resend(conversation, ConversationMsg::Steer(text))
            .await
    }

    /// The conversation's status.
    pub async fn status(
        &self,
        conversation: ConversationId,
    ) -> Result<crate::conversation::Status, NodeError> {
        let actor = self.activate(conversation).await?;
        ractor::call!(actor, ConversationMsg::Status).map_err(|e| NodeError::Actor(e.to_string()))
    }

    /// Sends a durable message: committed before this returns its id, then
    /// delivered to its conversation (activating it).
    pub async fn deliver(&self, envelope: Envelope) -> Result<MsgId, NodeError> {
        let id = self.ctx.store.send(envelope.clone()).await?;
        self.route(envelope).await?;
        Ok(id)
    }

    pub(crate) async fn route(&self, envelope: Envelope) -> Result<(), NodeError> {
        if self.ctx.stopping.load(std::sync::atomic::Ordering::SeqCst) {
            // Committed already: the next start delivers it.
            return Ok(());
        }
        let conversation = match &envelope.to {
            Address::Conversation(id) => *id,
            Address::Bot(bot) => {
                let name = self
                    .ctx
                    .bots
                    .iter()
                    .find(|b| b.id == *bot)
                    .map(|b| b.spec.name.clone())
                    .ok_or_else(|| NodeError::NoSuchBot(bot.to_string()))?;
                self.latest_conversation(&name).await?
            }
            Address::Service(name) => {
                return Err(NodeError::Actor(format!(
                    "no service `{name}` takes messages on this node"
                )));
            }
        };
        self.resend(
            conversation,
            ConversationMsg::Turn(Box::new(TurnRequest {
                input: Input::Delivered(envelope),
                events: None,
                done: None,
            })),
        )
        .await
    }
}
