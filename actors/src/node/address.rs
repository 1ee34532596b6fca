//! Conversations by id: opening one (its row and stored opening), building
//! its actor's arguments on each activation, and every send, steer, stop
//! and delivery — all by id through the node's conversation router, so no
//! caller holds an actor across a restart or a passivation.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use troupe_runtime::id::{ConversationId, MsgId};
use troupe_runtime::protocol::{ActorKind, Address, AgentEvent, Envelope};
use troupe_runtime::store::conversations;

use super::{bots, Node, NodeError, Opening};
use crate::bot::BotRecord;
use crate::budget::Scope;
use crate::node::conversation::{
    ConversationArgs, ConversationMsg, Input, TurnReport, TurnRequest,
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
    ) -> Result<(), NodeError> {
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

    /// Opens a conversation as `opening` describes it — a subagent, a
    /// routine run, a review, or a bot's own conversation: its row and its
    /// stored opening are committed, and a new conversation's actor starts
    /// (a stored one starts on its first message). Opening a conversation
    /// this process already holds changes nothing.
    pub async fn open(&self, opening: Opening) -> Result<(), NodeError> {
        let id = opening.id;
        let conversations = &self.ctx.conversations;
        if conversations.is_open(&id) || conversations.is_live(&id) {
            return Ok(());
        }
        let fresh = opening.fresh;
        if self.ctx.settings.durable {
            let mut row = conversations::NewConversation::new(
                id,
                opening.bot.id,
                opening.label.unwrap_or(opening.kind.as_str()),
            );
            row.parent = opening.parent;
            row.title = opening.title.chars().take(80).collect();
            let stored = opening.to_store();
            self.ctx
                .store
                .write(move |tx| {
                    conversations::create_conversation_if_missing(tx, &row)?;
                    match &stored {
                        Some(stored) => super::opening::save(tx, id, stored),
                        None => Ok(()),
                    }
                })
                .await?;
        }
        conversations.remember(opening);
        if fresh {
            // A conversation just made starts now, as `open` promises; its
            // first message finds it live.
            conversations.deliver(id, ConversationMsg::Wake).await?;
        }
        Ok(())
    }

    /// What conversation `id`'s next actor starts with: from the opening
    /// this process holds, or rebuilt from the store.
    pub(crate) async fn conversation_args(
        &self,
        id: ConversationId,
    ) -> Result<ConversationArgs, NodeError> {
        let opening = match self.ctx.conversations.opening(&id) {
            Some(opening) => opening,
            None => self.stored_opening(id).await?,
        };
        self.ctx.conversations.settle_opening(&id);
        // A model that does not resolve fails each turn with the reason,
        // once; failing the start instead would have the router restart the
        // conversation until it gave up, and a thread redeliver its offer.
        let model = self
            .ctx
            .resolve_model_for(&opening.bot.spec.name, &opening.bot.spec.model)
            .unwrap_or_else(|error| {
                tracing::debug!(conversation = %id, bot = %opening.bot.spec.name, %error, "its model is unavailable");
                troupe_runtime::model::ResolvedModel::unavailable(&opening.bot.spec.model, error)
            });
        let delegation = opening.delegation();
        let budget = opening.budget.unwrap_or_else(|| {
            Scope::root(
                format!("bot:{}", opening.bot.spec.name),
                self.ctx.settings.bot_budget,
            )
        });
        let services = self.ctx.services.fork();
        for extra in &opening.services {
            extra(&services);
        }
        if let Some(seat) = opening.seat {
            services.set_seat(seat);
        }
        if let Some(house) = opening.seat.map(|s| s.house).or(opening.house) {
            services.set_house_scope(self.house_scope(house).await?);
        }
        if opening.bot.spec.self_update {
            services.allow_self_update();
        }
        Ok(ConversationArgs {
            id,
            kind: opening.kind,
            model,
            node: Arc::clone(&self.ctx),
            narrowing: opening.narrowing,
            budget,
            parent: opening.parent,
            delegation,
            services,
            title: opening.title,
            bot: opening.bot,
            gate: opening.gate,
            briefing: opening.briefing,
            label: opening.label,
            fresh: opening.fresh,
            carry: self.ctx.conversations.carry(id),
            restarted: false,
        })
    }

    /// Rebuilds conversation `id`'s opening from the store.
    async fn stored_opening(&self, id: ConversationId) -> Result<Opening, NodeError> {
        // One trip to a reader: the row, its bot and its stored opening.
        let (row, bot, stored) = self
            .ctx
            .store
            .read(move |c| {
                let Some(row) = conversations::get_conversation(c, id)? else {
                    return Ok(None);
                };
                let bot = bots::by_id(c, row.bot)?;
                let stored = super::opening::load(c, id)?;
                Ok(Some((row, bot, stored)))
            })
            .await?
            .ok_or(NodeError::NoSuchConversation(id))?;
        let bot = bot.ok_or_else(|| NodeError::NoSuchBot(row.bot.to_string()))?;
        let Some(stored) = stored else {
            // Opened before openings were kept: as its bot's own.
            let kind = ActorKind::parse(&row.kind).unwrap_or_else(|| bot.spec.kind());
            return Ok(Opening {
                id,
                kind,
                parent: row.parent,
                title: row.title,
                ..Opening::new(bot)
            });
        };
        if stored.transient {
            return Err(NodeError::Transient(id, row.kind));
        }
        if stored.in_memory_only {
            return Err(NodeError::Actor(format!(
                "conversation {id} was opened with a gate or services only the process that opened it had; \
                 it cannot be reopened"
            )));
        }
        let budget = match &stored.budget {
            Some(budget) => {
                let spent = match budget.delegation {
                    Some(delegation) => {
                        self.ctx
                            .store
                            .read(move |c| super::opening::delegation_spent(c, delegation))
                            .await?
                    }
                    None => crate::budget::Spent::default(),
                };
                Some(super::opening::rebuild_budget(budget, spent))
            }
            None => None,
        };
        Ok(Opening {
            id,
            kind: stored.kind,
            narrowing: stored.narrowing(),
            parent: stored.parent,
            budget,
            stored_budget: stored.budget.clone(),
            title: row.title,
            briefing: stored.briefing.clone(),
            seat: stored.seat,
            house: stored.house,
            ..Opening::new(bot)
        })
    }

    /// The scope of a conversation working for `house`.
    async fn house_scope(
        &self,
        house: troupe_runtime::id::HouseId,
    ) -> Result<troupe_runtime::house::HouseScope, NodeError> {
        let found = self
            .ctx
            .store
            .read(move |c| troupe_runtime::store::house::house(c, house))
            .await?;
        Ok(troupe_runtime::house::HouseScope {
            house,
            home: found.is_some_and(|h| h.name == troupe_runtime::house::DEFAULT_HOUSE),
        })
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
        self.ensure_exists(conversation).await?;
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

    /// Errs with [`NodeError::NoSuchConversation`] unless `id` is live,
    /// opened by this process, or stored (a read only for the first two
    /// failing), so a caller hears of a wrong id instead of a lost message;
    /// with [`NodeError::Transient`] when it is stored but ran once.
    async fn ensure_exists(&self, id: ConversationId) -> Result<(), NodeError> {
        let conversations = &self.ctx.conversations;
        if conversations.is_live(&id) || conversations.is_open(&id) {
            return Ok(());
        }
        let found = self
            .ctx
            .store
            .read(move |c| {
                let Some(row) = conversations::get_conversation(c, id)? else {
                    return Ok(None);
                };
                let transient = super::opening::load(c, id)?.is_some_and(|s| s.transient);
                Ok(Some((row.kind, transient)))
            })
            .await?;
        match found {
            Some((kind, true)) => Err(NodeError::Transient(id, kind)),
            Some((_, false)) => Ok(()),
            None => Err(NodeError::NoSuchConversation(id)),
        }
    }

    /// Sends `msg` to the conversation's actor, activating it (or to its
    /// next incarnation, if it is passivating or restarting).
    pub(crate) async fn resend(
        &self,
        conversation: ConversationId,
        msg: ConversationMsg,
    ) -> Result<(), NodeError> {
        self.ctx.conversations.deliver(conversation, msg).await
    }

    /// Stops the conversation's running turn.
    pub async fn stop(&self, conversation: ConversationId) -> Result<(), NodeError> {
        if self.ctx.conversations.is_live(&conversation) {
            let _ = self
                .ctx
                .conversations
                .send(conversation, ConversationMsg::Stop);
        }
        Ok(())
    }

    /// Lets a conversation whose work is done (a review, a routine run)
    /// stop now rather than at its idle time; the next message to it brings
    /// it back.
    pub fn release(&self, conversation: ConversationId) {
        if self.ctx.conversations.is_live(&conversation) {
            let _ = self
                .ctx
                .conversations
                .send(conversation, ConversationMsg::Release);
        }
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
    ) -> Result<crate::node::conversation::Status, NodeError> {
        self.ensure_exists(conversation).await?;
        let (tx, rx) = ractor::concurrency::oneshot();
        self.ctx
            .conversations
            .send(conversation, ConversationMsg::Status(tx.into()))?;
        rx.await.map_err(|_| {
            NodeError::Actor(format!(
                "conversation {conversation} stopped before it answered; ask again"
            ))
        })
    }

    /// Sends a durable message: committed before this returns its id, then
    /// delivered to its conversation (activating it).
    pub async fn deliver(&self, envelope: Envelope) -> Result<MsgId, NodeError> {
        let id = self.ctx.store.send(envelope.clone()).await?;
        self.route(envelope).await?;
        Ok(id)
    }

    /// [`Node::deliver`] for a post to a house thread: on a node outside a
    /// cluster, the post is handed to its thread while its commit is under
    /// way, and this returns once it has committed. The thread's
    /// transaction queues behind the post's on the store's one writer, and
    /// applies a post only if it is in the mailbox then, so a thread never
    /// acts on a post that did not commit (or took it twice). In a cluster,
    /// where the thread may be another node's or a moving house's, the post
    /// commits first, as [`Node::deliver`] does.
    pub(crate) async fn post_to_thread(&self, envelope: Envelope) -> Result<MsgId, NodeError> {
        if self.ctx.remote().is_some() {
            return self.deliver(envelope).await;
        }
        let (id, copy) = (envelope.id, envelope.clone());
        let pending = self
            .ctx
            .store
            .submit(move |tx| troupe_runtime::store::mailbox::enqueue(tx, &copy))
            .await?;
        let routed = self.route(envelope).await;
        pending.wait().await?;
        routed.map(|()| id)
    }

    /// Hands a durable message committed already (see [`Node::deliver`])
    /// to its receiver: a conversation, a bot's latest conversation or a
    /// house thread. Handing one over twice is harmless.
    pub async fn route(&self, envelope: Envelope) -> Result<(), NodeError> {
        if self.ctx.stopping.load(std::sync::atomic::Ordering::SeqCst) {
            // Committed already: the next start delivers it.
            return Ok(());
        }
        if let Some(remote) = self.ctx.remote() {
            if remote.holds(&envelope) {
                return Ok(());
            }
            if let Some(peer) = remote.node_of(&envelope.to) {
                return remote
                    .forward(envelope, peer)
                    .await
                    .map_err(NodeError::Actor);
            }
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
            Address::Actor { kind, .. } => {
                let Some(route) = self.ctx.actor_route.get().cloned() else {
                    return Err(NodeError::Actor(format!(
                        "actor kind `{kind}`: this node has no registered kinds"
                    )));
                };
                return route.deliver(envelope).await.map_err(NodeError::Actor);
            }
            Address::Thread(thread) => {
                let Some(route) = self.ctx.thread_route.get().cloned() else {
                    return Err(NodeError::Actor(format!(
                        "thread {thread}: this node has no house threads"
                    )));
                };
                return route.deliver(envelope).await.map_err(NodeError::Actor);
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
