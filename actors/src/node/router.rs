//! The conversations of a node, addressed by id and supervised.
//!
//! One [`Router`] (`runtime::router`) holds them: a send to a conversation
//! id reaches its live actor, or activates it from the store; an idle
//! conversation passivates; a conversation whose actor panics or fails is
//! restarted by the router within its restart intensity, rebuilds itself
//! from the store and its [`Carry`], and resumes its open turn. Past the
//! intensity the router gives up on it: everyone waiting for one of its
//! turns gets [`TurnOutcome::Crashed`], its open turn is closed, and its
//! next message starts it afresh. The router is itself a child of the
//! node's root supervisor.

use std::sync::{Arc, Weak};

use dashmap::DashMap;
use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef};
use troupe_runtime::id::ConversationId;
use troupe_runtime::protocol::{AgentEvent, TurnOutcome, Usage};
use troupe_runtime::router::{Activator, Router, RouterConfig, RouterError, RouterEvent};
use troupe_runtime::supervise::{Backoff, ExitReason, Intensity, Restart};

use super::{Node, NodeContext, NodeError, Opening};
use crate::events::NodeEvent;
use crate::node::conversation::carry::Carry;
use crate::node::conversation::{Conversation, ConversationMsg, TurnReport};

/// The restart limit of one conversation: past this many restarts within
/// the window, its supervisor gives up on it.
pub const RESTART_INTENSITY: Intensity = Intensity {
    max_restarts: 3,
    within: std::time::Duration::from_secs(60),
};

/// The node's conversations: the router, and what outlives an incarnation.
#[derive(Default)]
pub struct Conversations {
    router: parking_lot::RwLock<Option<Router<ConversationId, ConversationMsg>>>,
    carries: DashMap<ConversationId, Arc<Carry>>,
    openings: DashMap<ConversationId, Arc<Opening>>,
}

impl std::fmt::Debug for Conversations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conversations")
            .field("carries", &self.carries.len())
            .field("openings", &self.openings.len())
            .finish()
    }
}

impl Conversations {
    fn router(&self) -> Result<Router<ConversationId, ConversationMsg>, NodeError> {
        self.router
            .read()
            .clone()
            .ok_or_else(|| NodeError::Actor("the node's conversations are not running".into()))
    }

    /// Sends `msg` to conversation `id`, activating it if needed.
    pub(crate) fn send(&self, id: ConversationId, msg: ConversationMsg) -> Result<(), NodeError> {
        self.router()?.send(id, msg).map_err(|e| match e {
            RouterError::Stopped => NodeError::Actor("the node is stopping".into()),
            other => NodeError::Actor(other.to_string()),
        })
    }

    /// Sends `msg` to conversation `id`; if it has no actor yet, the
    /// caller's task starts it (see [`Router::send_activating`]).
    pub(crate) async fn deliver(
        &self,
        id: ConversationId,
        msg: ConversationMsg,
    ) -> Result<(), NodeError> {
        self.router()?
            .send_activating(id, msg)
            .await
            .map_err(|e| match e {
                RouterError::Stopped => NodeError::Actor("the node is stopping".into()),
                other => NodeError::Actor(other.to_string()),
            })
    }

    /// Whether `id` has a live actor.
    pub fn is_live(&self, id: &ConversationId) -> bool {
        self.router
            .read()
            .as_ref()
            .is_some_and(|router| router.is_live(id))
    }

    /// How many conversations have a live actor.
    pub fn live_count(&self) -> usize {
        self.router
            .read()
            .as_ref()
            .map_or(0, |router| router.live_count())
    }

    /// The conversations with a live actor.
    pub fn live(&self) -> Vec<ConversationId> {
        self.router
            .read()
            .as_ref()
            .map(|router| router.live_keys())
            .unwrap_or_default()
    }

    /// Asks the router to passivate `id` now, if `actor` is its live
    /// incarnation; `false` when it did not.
    pub(crate) async fn passivate(&self, id: ConversationId, actor: ractor::ActorId) -> bool {
        match self.router() {
            Ok(router) => router.passivate(id, actor).await.unwrap_or(false),
            Err(_) => false,
        }
    }

    /// The carry of `id` (made on first use).
    pub(crate) fn carry(&self, id: ConversationId) -> Arc<Carry> {
        Arc::clone(self.carries.entry(id).or_default().value())
    }

    /// How often `id`'s actor was restarted in this process.
    pub fn restarts(&self, id: &ConversationId) -> u32 {
        self.carries.get(id).map_or(0, |c| c.restarts())
    }

    /// Remembers how `id` was opened, for its activations in this process.
    pub(crate) fn remember(&self, opening: Opening) {
        self.openings.insert(opening.id, Arc::new(opening));
    }

    /// Whether this process opened `id` and still holds its opening.
    pub(crate) fn is_open(&self, id: &ConversationId) -> bool {
        self.openings.contains_key(id)
    }

    /// How `id` was opened, when this process opened it and still holds it.
    pub(crate) fn opening(&self, id: &ConversationId) -> Option<Opening> {
        let mut opening = self.openings.get_mut(id)?;
        let found = Opening::clone(&opening);
        if opening.fresh {
            // Fresh only once: every later activation loads what was committed.
            Arc::make_mut(&mut opening).fresh = false;
        }
        Some(found)
    }

    /// Forgets the in-memory opening of `id` once its actor started, unless
    /// it holds what the store cannot (a review's gate). Without
    /// durability there is nothing to rebuild a restart from anyway: such a
    /// conversation is not restarted (measurements only).
    pub(crate) fn settle_opening(&self, id: &ConversationId) {
        self.openings.remove_if(id, |_, o| !o.in_memory_only());
    }

    /// Forgets `id`'s carry when no incarnation holds it and nobody waits.
    fn forget(&self, id: &ConversationId) {
        self.carries.remove_if(id, |_, carry| {
            Arc::strong_count(carry) == 1 && carry.is_idle()
        });
    }

    /// Stops every conversation (each within its shutdown deadline).
    pub async fn stop_all(&self) {
        let router = self.router.write().take();
        if let Some(router) = router {
            router.stop().await;
        }
    }
}

/// Starts conversations for the router, from this process's opening or
/// from the store.
struct Activate {
    node: Weak<NodeContext>,
}

#[async_trait::async_trait]
impl Activator<ConversationId, ConversationMsg> for Activate {
    async fn activate(
        &self,
        id: ConversationId,
        supervisor: ActorCell,
    ) -> Result<ActorRef<ConversationMsg>, ActorProcessingErr> {
        self.activate_as(id, supervisor, false).await
    }

    async fn activate_as(
        &self,
        id: ConversationId,
        supervisor: ActorCell,
        restarted: bool,
    ) -> Result<ActorRef<ConversationMsg>, ActorProcessingErr> {
        let ctx = self.node.upgrade().ok_or("the node is stopping")?;
        let node = Node::from_context(ctx);
        let mut args = node.conversation_args(id).await?;
        args.restarted = restarted;
        let (actor, _) = Actor::spawn_linked(None, Conversation, args, supervisor).await?;
        Ok(actor)
    }
}

/// Starts the router of `node`'s conversations linked to `supervisor`, and
/// the task that turns its events into the node's actor events.
pub(crate) async fn start(
    node: &Arc<NodeContext>,
    supervisor: ActorCell,
) -> Result<ActorCell, ActorProcessingErr> {
    let config = RouterConfig {
        // Conversations passivate themselves: only they know a turn is running.
        idle_after: None,
        restart: Restart::Transient,
        intensity: RESTART_INTENSITY,
        backoff: Backoff::None,
        shutdown: std::time::Duration::from_secs(5),
        events: 4096,
        // A conversation announces its own start (see its `pre_start`).
        report_activations: false,
    };
    let activator = Activate {
        node: Arc::downgrade(node),
    };
    let router = Router::start_linked(activator, config, supervisor).await?;
    let cell = router.cell();
    let events = router.watch();
    *node.conversations.router.write() = Some(router);
    tokio::spawn(watch(Arc::downgrade(node), events));
    Ok(cell)
}

/// Turns the router's events into actor events on the node's bus, counts
/// restarts, and fails the waiters of a conversation the router gave up on.
async fn watch(
    node: Weak<NodeContext>,
    mut events: tokio::sync::mpsc::UnboundedReceiver<RouterEvent<ConversationId>>,
) {
    // A lossless watch: a give-up is never missed, so its waiters always
    // get their answer.
    while let Some(event) = events.recv().await {
        let Some(ctx) = node.upgrade() else { return };
        on_event(&ctx, event).await;
    }
}

async fn on_event(ctx: &Arc<NodeContext>, event: RouterEvent<ConversationId>) {
    let conversations = &ctx.conversations;
    let describe = |id: &ConversationId| {
        conversations
            .openings
            .get(id)
            .map(|o| (o.kind.as_str().to_string(), o.parent))
    };
    let publish = |id: ConversationId, event: AgentEvent| {
        if ctx.bus.receiver_count() > 0 {
            let _ = ctx.bus.send(NodeEvent::of_conversation(id, event));
        }
    };
    match event {
        // The conversation announces its own start (and restart) as it
        // starts, before anything it does: see `Conversation::pre_start`.
        RouterEvent::Activated { .. } => {}
        RouterEvent::Exited { key, reason } => {
            if ctx.bus.receiver_count() == 0 {
                return;
            }
            let (kind, _) = match describe(&key) {
                Some(found) => found,
                None => stored_kind(ctx, key).await,
            };
            publish(
                key,
                AgentEvent::ActorStopped {
                    kind,
                    id: key.to_string(),
                    reason: reason.to_string(),
                },
            );
        }
        RouterEvent::Passivated { key } => conversations.forget(&key),
        RouterEvent::GaveUp { key, reason, .. } => gave_up(ctx, key, reason).await,
    }
}

/// The kind and parent of a conversation this process did not open.
async fn stored_kind(
    ctx: &Arc<NodeContext>,
    id: ConversationId,
) -> (String, Option<ConversationId>) {
    let row = ctx
        .store
        .read(move |c| troupe_runtime::store::conversations::get_conversation(c, id))
        .await
        .ok()
        .flatten();
    match row {
        Some(row) => (row.kind, row.parent),
        None => ("conversation".into(), None),
    }
}

/// Closes the open turn of a conversation its supervisor gave up on —
/// with the reply to what it answered and the hooks' writes (a delegation
/// records its subagent as failed) in the same commit — and tells the
/// node's turn hooks.
async fn close_crashed(ctx: &Arc<NodeContext>, id: ConversationId, report: &TurnReport) {
    use crate::node::conversation::journal::Journal;
    let store = ctx.store.clone();
    let found = store
        .read(move |c| {
            let Some(row) = troupe_runtime::store::conversations::get_conversation(c, id)? else {
                return Ok(None);
            };
            Ok(super::bots::by_id(c, row.bot)?.map(|bot| (row, bot)))
        })
        .await;
    let (row, bot) = match found {
        Ok(Some(found)) => found,
        Ok(None) => return,
        Err(e) => {
            tracing::error!(conversation = %id, error = %e, "could not read the crashed conversation");
            return;
        }
    };
    let journal = Journal::new(Some(store), id, bot.id);
    let answers = match journal.open_turn_state().await {
        Ok(open) => open.and_then(|o| o.answers),
        Err(_) => None,
    };
    let reply = answers
        .as_ref()
        .and_then(|a| crate::node::reply::reply(a, id, &bot.spec.name, &report.outcome, ""));
    let kind =
        troupe_runtime::protocol::ActorKind::parse(&row.kind).unwrap_or_else(|| bot.spec.kind());
    let close = crate::node::conversation::journal::Close {
        outcome: report.outcome.clone(),
        text: String::new(),
        reply: reply.clone(),
        hooks: Some(ctx.closing(id, kind)),
    };
    let committed = match journal.close_turn(close).await {
        Ok(committed) => committed,
        Err(e) => {
            tracing::error!(conversation = %id, error = %e, "could not close the crashed turn");
            return;
        }
    };
    let node = Node::from_context(Arc::clone(ctx));
    super::settle_closing(committed, &node);
    if let Some(reply) = reply {
        if let Err(e) = node.route(reply).await {
            tracing::warn!(error = %e, "a committed reply waits in the mailbox");
        }
    }
    ctx.turn_finished(&super::FinishedTurn {
        conversation: id,
        kind,
        bot,
        parent: row.parent,
        delegation: None,
        report: report.clone(),
        delivered: answers,
        tools_used: Default::default(),
        house: None,
    });
}

async fn gave_up(ctx: &Arc<NodeContext>, id: ConversationId, reason: ExitReason) {
    let carry = ctx.conversations.carry(id);
    // Fence off whatever the last incarnation still runs.
    let _fenced = carry.take_over().await;
    let restarts = carry.restarts();
    let error = format!(
        "conversation {id} failed {} times within {} s, past its restart limit of {} ({reason}); \
         its turn was ended — send it a new message to start it again",
        restarts + 1,
        RESTART_INTENSITY.within.as_secs(),
        RESTART_INTENSITY.max_restarts,
    );
    tracing::error!(conversation = %id, %reason, "a conversation kept crashing; its supervisor gave up");
    let report = TurnReport {
        conversation: id,
        outcome: TurnOutcome::Crashed {
            error: error.clone(),
            restarts,
        },
        text: String::new(),
        usage: Usage::default(),
        cost_usd: 0.0,
        steps: 0,
    };
    if ctx.settings.durable {
        close_crashed(ctx, id, &report).await;
    }
    if let Some(events) = carry.events() {
        let _ = events.send(AgentEvent::TurnFinished {
            outcome: report.outcome.clone(),
            text: String::new(),
            usage: Usage::default(),
            cost_usd: 0.0,
        });
    }
    carry.fail_all(&report);
    drop(carry);
    ctx.conversations.forget(&id);
}
