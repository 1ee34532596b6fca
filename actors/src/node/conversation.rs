//! The conversation actor: one bot's conversation and its turn loop.
//!
//! The actor takes one message at a time from its mailbox. A turn is a loop
//! of steps — a model call, then the calls it asked for, through the gate —
//! and each step runs in a task the actor spawns, whose result comes back as
//! a message ([`ConversationMsg::ModelDone`], [`ConversationMsg::ToolsDone`]).
//! So while a step runs the actor still answers `Stop`, `Steer` and
//! `Status`. Every assistant message and tool result is committed before the
//! next step starts; a conversation reopened after a crash repairs calls left
//! without results and goes on where it stopped.
//!
//! The actor runs under the node's conversation router, its supervisor. A
//! panic in a handler or in a step task fails the actor; the router starts
//! a new incarnation, which takes over the [`carry::Carry`] (who waits, what
//! is queued), fences off the old incarnation's writes, reloads the history
//! and resumes the turn the store marks open.

pub mod carry;
mod close;
pub mod compaction;
pub mod history;
pub mod journal;
mod open;
pub mod prompt;
pub(crate) mod step;
mod turn;

use std::collections::BTreeSet;
use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use troupe_runtime::id::ConversationId;
use troupe_runtime::model::ResolvedModel;
use troupe_runtime::protocol::{
    ActorKind, AgentEvent, Envelope, Message, StopReason, TurnOutcome, Usage,
};
use troupe_runtime::tool::dispatch::{CallGate, CallOutcome};
use troupe_runtime::tool::{Services, ToolContext};

use crate::bot::BotRecord;
use crate::budget::Scope;
use crate::guard::Guard;
use crate::node::NodeContext;
use crate::toolset::{Narrowing, Toolset};
use journal::Journal;

/// What starts a turn.
// An envelope is as large as the turn request beside it; boxing it would
// allocate once more per delivered message for no saving.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// A message from the user.
    User(String),
    /// A durable message delivered from another agent, a delegation or a routine.
    Delivered(Envelope),
    /// Nothing new: go on with the history as it is (resuming after a crash).
    Continue,
}

/// A request to run a turn, with where its events and its end go.
#[derive(Debug)]
pub struct TurnRequest {
    /// What starts it.
    pub input: Input,
    /// The turn's own events.
    pub events: Option<mpsc::UnboundedSender<AgentEvent>>,
    /// Told how the turn ended.
    pub done: Option<oneshot::Sender<TurnReport>>,
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnReport {
    /// The conversation.
    pub conversation: ConversationId,
    /// How it ended.
    pub outcome: TurnOutcome,
    /// The final text.
    pub text: String,
    /// Tokens used.
    pub usage: Usage,
    /// Their cost, in US dollars.
    pub cost_usd: f64,
    /// Model calls made.
    pub steps: u32,
}

/// What a conversation says about itself mid-turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// The conversation.
    pub conversation: ConversationId,
    /// Whether a turn is running.
    pub busy: bool,
    /// Turns started since the actor started.
    pub turns: u64,
    /// Model calls made in the current (or last) turn.
    pub steps: u32,
    /// Turns waiting for this one to end.
    pub queued: usize,
    /// Messages in the model-visible history.
    pub history_len: usize,
}

/// The conversation actor's messages.
#[derive(Debug)]
pub enum ConversationMsg {
    /// Run a turn (queued while another runs). Boxed, like every large
    /// variant: a mailbox allocates room for 32 messages at a time, so the
    /// message's size is paid per live actor.
    Turn(Box<TurnRequest>),
    /// Add a user message to the running turn before its next model call.
    Steer(String),
    /// Stop the running turn.
    Stop,
    /// Report the status.
    Status(RpcReplyPort<Status>),
    /// A model step ended (sent by the step task).
    ModelDone {
        /// The turn it belongs to.
        turn: u64,
        /// What it produced.
        output: Box<step::ModelOutput>,
    },
    /// Its idle timer fired: it passivates if it has been idle for the
    /// node's passivation time, or sets the timer again for what is left.
    Idle,
    /// Its work is done (a review, a routine run): passivate now if idle.
    Release,
    /// Nothing to do: activates the conversation, which resumes a turn
    /// the store marks open (recovery after a crash).
    Wake,
    /// A step task panicked: the actor fails, and its supervisor restarts it.
    StepFailed {
        /// The turn it belongs to.
        turn: u64,
        /// The panic's message.
        error: String,
    },
    /// A tool step ended (sent by the step task).
    ToolsDone {
        /// The turn it belongs to.
        turn: u64,
        /// The calls' outcomes, committed.
        outcomes: Vec<CallOutcome>,
        /// Their results as history messages, in the same order (what was committed).
        messages: Vec<Message>,
        /// Whether the store refused the results.
        error: Option<String>,
    },
}

// Never crosses a node: ractor's `cluster` feature asks each message type.
impl ractor::Message for ConversationMsg {}

/// What a conversation actor is started with.
pub struct ConversationArgs {
    /// Its id.
    pub id: ConversationId,
    /// Its bot.
    pub bot: BotRecord,
    /// The kind of actor it is.
    pub kind: ActorKind,
    /// The model it talks to.
    pub model: ResolvedModel,
    /// The node.
    pub node: Arc<NodeContext>,
    /// Further narrowing of its tools.
    pub narrowing: Narrowing,
    /// The budget scope its turns charge (a bot's, a delegation's).
    pub budget: Arc<Scope>,
    /// The conversation that spawned it (a subagent's parent).
    pub parent: Option<ConversationId>,
    /// The delegation it works for (a subagent's): it hangs under it in the tree.
    pub delegation: Option<troupe_runtime::id::DelegationId>,
    /// Extra services for its tools (a delegation's handles).
    pub services: Services,
    /// The first words of the conversation, for its title.
    pub title: String,
    /// The gate its calls pass instead of the node's (a review's narrower one).
    pub gate: Option<Arc<dyn CallGate>>,
    /// Appended to its system prompt (what a review looks back on).
    pub briefing: String,
    /// What its row is stored as when not its kind (`review`).
    pub label: Option<&'static str>,
    /// Its id was just made: there is no history to load.
    pub fresh: bool,
    /// What outlives each incarnation of its actor.
    pub carry: Arc<carry::Carry>,
    /// This incarnation replaces one that failed.
    pub restarted: bool,
}

/// The conversation actor.
#[derive(Debug, Clone, Copy, Default)]
pub struct Conversation;

/// The actor's state.
pub struct State {
    pub(crate) args: ConversationArgs,
    pub(crate) journal: Journal,
    pub(crate) system: Arc<str>,
    /// Shared with the model request in flight (copied only if a message
    /// is appended while one still holds it).
    pub(crate) history: Arc<Vec<Message>>,
    /// The history's size for the compaction check, kept up as it grows.
    pub(crate) history_size: compaction::HistorySize,
    pub(crate) services: Services,
    pub(crate) tools: Arc<Toolset>,
    /// The registry's generation the tools were computed at.
    pub(crate) tools_generation: u64,
    pub(crate) guard: Guard,
    pub(crate) turns: u64,
    /// Boxed: 770 bytes that an idle conversation, most of them, need not hold.
    pub(crate) active: Option<Box<ActiveTurn>>,
    /// Passivating: what still arrives goes back to the router, which
    /// holds it for the conversation's next actor.
    pub(crate) passivated: bool,
    /// What the open turn being resumed answers (from the store).
    pub(crate) resuming: Option<Box<Envelope>>,
    /// Calls a crash left waiting on a kept approval or question: the
    /// resumed turn runs them (asks them again) first.
    pub(crate) waiting: Vec<troupe_runtime::protocol::ToolCall>,
    /// Since when it has been idle (its last turn's end, or its start).
    pub(crate) idle_since: std::time::Instant,
    /// Whether an idle timer is set: one at a time, however many turns
    /// end meanwhile (each is a task until it fires).
    pub(crate) idle_timer: bool,
}

/// The turn in progress.
pub(crate) struct ActiveTurn {
    pub(crate) number: u64,
    pub(crate) cancel: CancellationToken,
    pub(crate) emitter: crate::events::Emitter,
    pub(crate) steers: Vec<String>,
    pub(crate) notes: Vec<String>,
    pub(crate) usage: Usage,
    pub(crate) cost_usd: f64,
    pub(crate) scope: Arc<Scope>,
    pub(crate) start_len: usize,
    pub(crate) last_stop: Option<StopReason>,
    /// The final answer's commit closed the turn in the store already.
    pub(crate) closed_in_store: bool,
    /// The reply that commit enqueued, to route once the turn ends.
    pub(crate) reply: Option<Envelope>,
    /// A message handed over again that was applied before: the turn does
    /// nothing, and nobody is told it ran.
    pub(crate) redelivered: bool,
    /// The turn's first commit, queued and not yet waited for.
    pub(crate) opening: Option<troupe_runtime::store::Pending<()>>,
    pub(crate) delivered: Option<Envelope>,
    /// The turn's `invoke_agent` span (`troupe_runtime::telemetry::gen_ai`):
    /// its steps' tasks carry it, so their model and tool calls nest in it.
    pub(crate) span: tracing::Span,
}

impl State {
    /// The history, to append to. Replace it with [`State::replace_history`].
    pub(crate) fn history_mut(&mut self) -> &mut Vec<Message> {
        Arc::make_mut(&mut self.history)
    }

    /// Puts `history` in place of the current one (loaded, repaired, compacted).
    pub(crate) fn replace_history(&mut self, history: Vec<Message>) {
        self.history = Arc::new(history);
        self.history_size.reset();
    }

    /// A tool context for this conversation's calls.
    pub(crate) fn tool_context(&self, cancel: CancellationToken) -> ToolContext {
        ToolContext {
            home: self.args.node.home.clone(),
            cwd: self.args.node.settings.cwd.clone(),
            user_home: self.args.node.settings.user_home.clone(),
            agent: self.args.bot.spec.name.clone(),
            bot: self.args.bot.id,
            conversation: self.args.id,
            kind: self.args.kind,
            call_id: String::new(),
            context_window: self.args.model.context_window,
            cancel,
            services: self.services.clone(),
        }
    }

    /// Recomputes the tools (after a load by `tool_search`, a compaction).
    pub(crate) fn refresh_tools(&mut self) {
        self.tools_generation = self.args.node.tools_generation();
        let ctx = self.tool_context(CancellationToken::new());
        let loaded: BTreeSet<String> = troupe_runtime::tool::catalog::loaded_tools(&self.history);
        self.tools = crate::toolset::compute_shared(
            &self.args.node.toolsets,
            &self.args.node.tools,
            &self.args.bot.spec,
            self.args.node.has_bots(),
            &self.args.narrowing,
            &ctx,
            &loaded,
        );
        self.services
            .set_deferred_catalog(Arc::clone(&self.tools.deferred));
        self.services
            .set_visible_tools(crate::toolset::VisibleTools(Arc::clone(&self.tools.names)));
    }
}

impl Actor for Conversation {
    type Msg = ConversationMsg;
    type State = State;
    type Arguments = ConversationArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: ConversationArgs,
    ) -> Result<State, ActorProcessingErr> {
        let mut state = Box::pin(open::open(args)).await?;
        announce(&state);
        // A conversation just made has no turn to resume: no read.
        let open = if state.args.fresh {
            None
        } else {
            state.journal.open_turn_state().await?
        };
        let resumes = history::awaits_model(&state.history) || !state.waiting.is_empty();
        if let Some(open) = open.filter(|_| resumes) {
            state.resuming = open.answers.map(Box::new);
            // The last incarnation (or process) stopped mid-turn: go on
            // with it; whoever waited for it still does.
            myself.send_message(ConversationMsg::Turn(Box::new(TurnRequest {
                input: Input::Continue,
                events: None,
                done: None,
            })))?;
        } else {
            if let Some(waiter) = state.args.carry.end() {
                // The turn closed in the store, but its incarnation died
                // before it told its caller.
                close::report_closed(&state, waiter);
            }
            if let Some(next) = state.args.carry.next() {
                myself.send_message(ConversationMsg::Turn(Box::new(next)))?;
            }
        }
        state.refresh_tools();
        schedule_idle_check(&myself, &mut state);
        Ok(state)
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut State,
    ) -> Result<(), ActorProcessingErr> {
        let span = tracing::debug_span!("conversation", id = %state.args.id, bot = %state.args.bot.spec.name);
        // Boxed: the turn loop's future is large, and unboxed it would sit
        // in every idle actor's task for the actor's whole life.
        Box::pin(handle(myself, msg, state).instrument(span)).await
    }

    async fn post_stop(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut State,
    ) -> Result<(), ActorProcessingErr> {
        let _ = myself;
        if let Some(active) = state.active.take() {
            active.cancel.cancel();
        }
        Ok(())
    }
}

/// Tells the node's bus (and whoever waits for an interrupted turn) that
/// this conversation's actor started, or started again after a failure.
fn announce(state: &State) {
    let args = &state.args;
    let kind = args.label.unwrap_or(args.kind.as_str()).to_string();
    // A subagent hangs under its delegation, others under who opened them.
    let parent = match args.delegation {
        Some(delegation) => Some(delegation.to_string()),
        None => args.parent.map(|p| p.to_string()),
    };
    let event = if args.restarted {
        AgentEvent::ActorRestarted {
            kind,
            id: args.id.to_string(),
            parent,
            restarts: args.carry.restarted(),
            reason: "its last incarnation failed".into(),
        }
    } else {
        AgentEvent::ActorStarted {
            kind,
            id: args.id.to_string(),
            parent,
        }
    };
    if args.restarted {
        if let Some(events) = args.carry.events() {
            let _ = events.send(event.clone());
        }
    }
    crate::events::Emitter::new(args.id, None, args.node.bus.clone()).emit(event);
}

/// Notes that the conversation is idle from now, and asks for an idle
/// check once it has sat idle for the node's passivation time (when it has
/// one and keeps what it does) unless one is asked for already.
pub(crate) fn schedule_idle_check(myself: &ActorRef<ConversationMsg>, state: &mut State) {
    let node = &state.args.node;
    let Some(after) = node.settings.passivate_after else {
        return;
    };
    if !node.settings.durable || state.active.is_some() || state.args.carry.queued() > 0 {
        return;
    }
    state.idle_since = std::time::Instant::now();
    if !state.idle_timer {
        state.idle_timer = true;
        check_idle_after(myself, node, after);
    }
}

/// Has the node's timers tell the conversation to check whether it is idle,
/// `after` from now.
fn check_idle_after(
    myself: &ActorRef<ConversationMsg>,
    node: &NodeContext,
    after: std::time::Duration,
) {
    let me = myself.clone();
    node.idle_checks.after(after, move || {
        // Gone meanwhile: nothing to passivate.
        let _ = me.send_message(ConversationMsg::Idle);
    });
}

/// The idle timer fired: passivate when idle for long enough, or wait for
/// what is left (a turn ended since the timer was set). A busy conversation
/// sets the timer again when its turn ends.
async fn on_idle_timer(myself: &ActorRef<ConversationMsg>, state: &mut State) {
    state.idle_timer = false;
    let Some(after) = state.args.node.settings.passivate_after else {
        return;
    };
    if state.active.is_some() || state.args.carry.queued() > 0 {
        return;
    }
    let idle_for = state.idle_since.elapsed();
    if idle_for < after {
        state.idle_timer = true;
        check_idle_after(myself, &state.args.node, after - idle_for);
        return;
    }
    passivate_if_idle(myself, state, state.turns).await;
}

/// Passivates when nothing happened since the check was asked for: the
/// router holds the conversation's messages from now on (the next one
/// starts a new actor from the store) and drains this one; what was already
/// in its mailbox goes back to the router.
async fn passivate_if_idle(myself: &ActorRef<ConversationMsg>, state: &mut State, turns: u64) {
    let idle = state.active.is_none() && state.args.carry.queued() == 0 && state.turns == turns;
    if !idle || state.passivated {
        return;
    }
    let node = &state.args.node;
    if !node
        .conversations
        .passivate(state.args.id, myself.get_id())
        .await
    {
        return;
    }
    state.passivated = true;
    crate::events::Emitter::new(state.args.id, None, node.bus.clone()).emit(AgentEvent::Passivated);
}

/// After passivation: a turn or a steer that reached this actor goes back
/// to the router, which holds it for the conversation's next actor.
fn forward(state: &State, msg: ConversationMsg) {
    let id = state.args.id;
    match msg {
        msg @ (ConversationMsg::Turn(_) | ConversationMsg::Steer(_)) => {
            if let Err(e) = state.args.node.conversations.send(id, msg) {
                tracing::error!(conversation = %id, error = %e, "a message sent during passivation was lost");
            }
        }
        ConversationMsg::Status(reply) => {
            let _ = reply.send(Status {
                conversation: id,
                busy: false,
                turns: state.turns,
                steps: 0,
                queued: 0,
                history_len: state.history.len(),
            });
        }
        ConversationMsg::Stop
        | ConversationMsg::Wake
        | ConversationMsg::Release
        | ConversationMsg::Idle
        | ConversationMsg::StepFailed { .. }
        | ConversationMsg::ModelDone { .. }
        | ConversationMsg::ToolsDone { .. } => {}
    }
}

/// Handles one message; every arm is short, slow work runs in step tasks.
async fn handle(
    myself: ActorRef<ConversationMsg>,
    msg: ConversationMsg,
    state: &mut State,
) -> Result<(), ActorProcessingErr> {
    if state.passivated {
        forward(state, msg);
        return Ok(());
    }
    match msg {
        ConversationMsg::Turn(request) => {
            if state.active.is_some() {
                state.args.carry.enqueue(*request);
            } else {
                turn::begin(&myself, state, *request).await;
            }
        }
        ConversationMsg::Steer(text) => match &mut state.active {
            Some(active) => active.steers.push(text),
            None => {
                turn::begin(
                    &myself,
                    state,
                    TurnRequest {
                        input: Input::User(text),
                        events: None,
                        done: None,
                    },
                )
                .await;
            }
        },
        ConversationMsg::Stop => {
            if let Some(active) = &state.active {
                active.cancel.cancel();
            }
            // Stopping a conversation stops the subagents it delegated to.
            state.args.node.conversation_stopped(state.args.id);
        }
        ConversationMsg::Status(reply) => {
            let _ = reply.send(Status {
                conversation: state.args.id,
                busy: state.active.is_some(),
                turns: state.turns,
                steps: state.guard.steps(),
                queued: state.args.carry.queued(),
                history_len: state.history.len(),
            });
        }
        ConversationMsg::Idle => on_idle_timer(&myself, state).await,
        ConversationMsg::Wake => {}
        ConversationMsg::Release => passivate_if_idle(&myself, state, state.turns).await,
        ConversationMsg::StepFailed { turn, error } => {
            if state.active.as_ref().is_some_and(|a| a.number == turn) {
                return Err(format!("a step of turn {turn} panicked: {error}").into());
            }
        }
        ConversationMsg::ModelDone { turn, output } => {
            if state.active.as_ref().is_some_and(|a| a.number == turn) {
                turn::model_done(&myself, state, *output).await;
            }
        }
        ConversationMsg::ToolsDone {
            turn,
            outcomes,
            messages,
            error,
        } => {
            if state.active.as_ref().is_some_and(|a| a.number == turn) {
                turn::tools_done(&myself, state, outcomes, messages, error).await;
            }
        }
    }
    Ok(())
}
