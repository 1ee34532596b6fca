//! The conversations of a node, addressed by id and supervised.
//!
//! They are one [`RoutedKind`] (see [`super::routed`]): a send to a conversation
//! id reaches its live actor, or activates it from the store; an idle
//! conversation passivates; a conversation whose actor panics or fails is
//! restarted by the router within its restart intensity, rebuilds itself
//! from the store and its [`Carry`], and resumes its open turn. Past the
//! intensity the router gives up on it: everyone waiting for one of its
//! turns gets [`TurnOutcome::Crashed`], its open turn is closed, and its
//! next message starts it afresh. The router is itself a child of the
//! node's root supervisor.

use std::sync::{Arc, Weak};

use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef};
use troupe_runtime::hash::FastDashMap;
use troupe_runtime::id::ConversationId;
use troupe_runtime::protocol::{AgentEvent, TurnOutcome, Usage};
use troupe_runtime::router::{RouterConfig, RouterError, RouterEvent};
use troupe_runtime::supervise::{Backoff, ExitReason, Intensity, Restart};

use super::routed::{Routed, RoutedKind};
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

/// The node's conversations: their router, and what outlives an incarnation.
pub struct Conversations {
    node: Weak<NodeContext>,
    routed: Routed<ConversationId, ConversationMsg>,
    carries: FastDashMap<ConversationId, Arc<Carry>>,
    openings: FastDashMap<ConversationId, Arc<Opening>>,
}

impl std::fmt::Debug for Conversations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conversations")
            .field("carries", &self.carries.len())
            .field("openings", &self.openings.len())
            .finish()
    }
}

fn unreachable(e: RouterError) -> NodeError {
    match e {
        RouterError::Stopped => NodeError::Actor("the node's conversations are not running".into()),
        other => NodeError::Actor(other.to_string()),
    }
}

impl Conversations {
    /// The conversations of the node `node` (not running until the root
    /// starts their router).
    pub(crate) fn new(node: Weak<NodeContext>) -> Self {
        Self {
            node,
            routed: Routed::new("conversations", "conversation"),
            carries: FastDashMap::default(),
            openings: FastDashMap::default(),
        }
    }

    /// Sends `msg` to conversation `id`, activating it if needed.
    pub(crate) fn send(&self, id: ConversationId, msg: ConversationMsg) -> Result<(), NodeError> {
        self.routed.send(id, msg).map_err(unreachable)
    }

    /// Sends `msg` to conversation `id`; if it has no actor yet, the
    /// caller's task starts it (see [`Router::send_activating`]).
    ///
    /// [`Router::send_activating`]: troupe_runtime::router::Router::send_activating
    pub(crate) async fn deliver(
        &self,
        id: ConversationId,
        msg: ConversationMsg,
    ) -> Result<(), NodeError> {
        self.routed
            .send_activating(id, msg)
            .await
            .map_err(unreachable)
    }

    /// Whether `id` has a live actor.
    pub fn is_live(&self, id: &ConversationId) -> bool {
        self.routed.is_live(id)
    }

    /// How many conversations have a live actor.
    pub fn live_count(&self) -> usize {
        self.routed.live_count()
    }

    /// The conversations with a live actor.
    pub fn live(&self) -> Vec<ConversationId> {
        self.routed.live()
    }

    /// Asks the router to passivate `id` now, if `actor` is its live
    /// incarnation; `false` when it did not.
    pub(crate) async fn passivate(&self, id: ConversationId, actor: ractor::ActorId) -> bool {
        self.routed.passivate(id, actor).await
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
        self.routed.stop().await;
    }
}

/// Conversations are started from this process's opening or from the
/// store, and restarted within [`RESTART_INTENSITY`].
#[async_trait::async_trait]
impl RoutedKind for Conversations {
    type Key = ConversationId;
    type Msg = ConversationMsg;

    fn routed(&self) -> &Routed<ConversationId, ConversationMsg> {
        &self.routed
    }

    fn config(&self) -> RouterConfig {
        RouterConfig {
            // Conversations passivate themselves: only they know a turn is running.
            idle_after: None,
            restart: Restart::Transient,
            intensity: RESTART_INTENSITY,
            backoff: Backoff::None,
            shutdown: std::time::Duration::from_secs(5),
            events: 4096,
            // A conversation announces its own start (see its `pre_start`).
            report_activations: false,
        }
    }

    async fn activate(
        self: Arc<Self>,
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

    /// Turns the router's events into actor events on the node's bus,
    /// counts restarts, and fails the waiters of a conversation the router
    /// gave up on (a give-up is never missed: the watch is lossless).
    async fn on_event(&self, event: RouterEvent<ConversationId>) {
        let Some(ctx) = self.node.upgrade() else {
            return;
        };
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
