//! The node: one per process, the root of the actor tree.
//!
//! It opens the store, holds the tools, the gate, the models and the bots,
//! and addresses conversations by id through its actor tree (see [`tree`]): a conversation's actor is activated
//! from the store on its first message and the node keeps no other handle to
//! it. At start-up it redelivers durable messages that were never consumed
//! and resumes the turns a crash interrupted.

mod address;
pub mod bots;
pub mod conversation;
mod handles;
mod hooks;
mod models;
pub mod opening;
pub mod post_office;
pub mod reply;
pub mod routed;
pub mod router;
mod tree;

pub use handles::WeakNode;
pub(crate) use hooks::{settle as settle_closing, Closing};
pub use hooks::{ClosingTurn, Committed, FinishedTurn, TurnHook};
pub use opening::{Opening, ServiceHook, StoredBudget};
pub use router::Conversations;
pub use tree::{ActorInfo, Branch};

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use ractor::ActorRef;
use tokio::sync::broadcast;
use troupe_runtime::bus::Bus;
use troupe_runtime::home::{Home, MAIN_AGENT};
use troupe_runtime::id::{BotId, ConversationId};
use troupe_runtime::model::{ModelError, ModelsConfig, ResolvedModel};
use troupe_runtime::protocol::{ActorKind, Address, Envelope};
use troupe_runtime::store::{conversations, mailbox, Store, StoreError};
use troupe_runtime::supervise::SupervisorMsg;
use troupe_runtime::tool::dispatch::{CallGate, DispatchSettings, OpenGate};
use troupe_runtime::tool::registry::Registry;
use troupe_runtime::tool::Services;

use crate::bot::{BotError, BotSpec};
use crate::channel::Questions;
use crate::events::NodeEvent;
use crate::node::conversation::prompt::PromptParts;
use crate::node::conversation::ConversationMsg;
use crate::settings::Settings;
use crate::toolset::Narrowing;

/// Why the node could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A model spec could not be resolved.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// A bot definition was refused.
    #[error(transparent)]
    Bot(#[from] BotError),
    /// No such bot.
    #[error("there is no bot named `{0}`; `troupe bots` lists them")]
    NoSuchBot(String),
    /// A bot with that name exists.
    #[error("a bot named `{0}` exists already")]
    BotExists(String),
    /// No such conversation.
    #[error("there is no conversation {0}; `troupe conversations` lists them")]
    NoSuchConversation(ConversationId),
    /// An actor could not be started or reached.
    #[error("actor: {0}")]
    Actor(String),
    /// A user message was over the size limit; nothing was stored.
    #[error(transparent)]
    TooLarge(#[from] crate::settings::MessageTooLarge),
    /// A request was refused (a bad name, a missing member, a setting
    /// that forbids it); the text says why and what to do.
    #[error("{0}")]
    Refused(String),
    /// A request conflicts with what is there now (a name taken, a
    /// version that changed since it was read); the text says what to do.
    #[error("{0}")]
    Conflict(String),
    /// The conversation ran once and is never resumed nor reopened (a
    /// background review); `{1}` is what it was.
    #[error("conversation {0} was a {1}, which runs once: it is not resumed nor reopened; start a new one instead")]
    Transient(ConversationId, String),
}

/// How long [`Node::shutdown`] lets background work finish.
pub const BACKGROUND_GRACE: std::time::Duration = std::time::Duration::from_secs(120);

/// Looks environment variables up (injectable, so tests never touch the process's).
pub type EnvLookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Takes the envelopes addressed to something a feature owns (a house
/// thread): the node hands them over without knowing the feature.
#[async_trait::async_trait]
pub trait Route: Send + Sync + 'static {
    /// Hands `envelope` (committed already) to its addressee's actor.
    async fn deliver(&self, envelope: Envelope) -> Result<(), String>;
}

/// Where envelopes for actors on other nodes of a cluster go
/// (`crate::cluster`): the node asks it before it looks for a local actor.
#[async_trait::async_trait]
pub trait Remote: Send + Sync + 'static {
    /// The node that hosts `to`, when it is another node.
    fn node_of(&self, to: &Address) -> Option<String>;
    /// Whether `envelope` (committed) is held here for now — a post to a
    /// thread of a house being moved away — to be handed over when that
    /// ends.
    fn holds(&self, envelope: &Envelope) -> bool;
    /// The program registered another actor kind: the peers are told.
    fn kinds_changed(&self);
    /// Moves `envelope` (committed in the local mailbox) to the outbox
    /// for `peer` and wakes the gateway to it.
    async fn forward(&self, envelope: Envelope, peer: String) -> Result<(), String>;
    /// The id of the bot `name` hosted by another node.
    fn bot(&self, name: &str) -> Option<BotId>;
    /// The cluster's members as this node sees them, for `troupe ps`.
    fn members(&self) -> serde_json::Value;
}

/// More agents bots may message besides bots (a feature's actors): their
/// lines in every bot's roster.
pub trait Roster: Send + Sync + 'static {
    /// The roster's lines, `- NAME: what it is for`.
    fn entries(&self) -> Vec<String>;

    /// Whether it has no line (asked at every new conversation: a roster
    /// that can tell without making its lines should).
    fn is_empty(&self) -> bool {
        self.entries().is_empty()
    }
}

/// The crate's one wiring of features onto the node: `crate::boot`
/// implements [`Wired`] for it, binding [`Wired::Features`] to the type
/// that holds the features' handles.
///
/// A generic parameter fixed once for the crate: the node stores and hands
/// back the features' handles, typed, without naming any feature (it calls
/// nothing on them; the modules above read them through
/// `Node::features`), so the modules still depend one way.
pub(crate) struct Wiring;

/// What wires features onto the node (implemented by `crate::boot` for
/// [`Wiring`]).
pub(crate) trait Wired {
    /// The features' handles the node holds.
    type Features: Send + Sync + 'static;
}

/// The features' handles, as boot binds them.
pub(crate) type Features = <Wiring as Wired>::Features;

/// What the node's actors share: inside this crate only (its fields are
/// the crate's; a program reaches the node through [`Node`]'s accessors).
/// Features are given the typed handles they use when boot builds them
/// (`crate::boot::Features`, `WeakNode`); what is left here is the
/// node's own state.
pub struct NodeContext {
    /// The home.
    pub(crate) home: Home,
    /// The settings.
    pub(crate) settings: Settings,
    /// The store.
    pub(crate) store: Store,
    /// Every tool, in the stable order.
    pub(crate) tools: Arc<Registry>,
    /// The gate every call passes.
    pub(crate) gate: Arc<dyn CallGate>,
    /// Where every conversation's events are published.
    pub(crate) bus: Bus<NodeEvent>,
    /// Each idle conversation's passivation check, on one task.
    pub(crate) idle_checks: troupe_runtime::timers::Timers,
    /// Services every conversation's tools get.
    pub(crate) services: Services,
    /// Questions and approvals waiting for the user.
    pub(crate) questions: Arc<Questions>,
    /// One copy of each distinct toolset, shared by conversations.
    pub(crate) toolsets: crate::toolset::SharedToolsets,
    /// One copy of each distinct system prompt, shared by conversations.
    pub(crate) prompts: crate::intern::Interner<str>,
    /// Set when shutdown begins: durable messages stay in the mailbox for
    /// the next start instead of waking conversations.
    stopping: std::sync::atomic::AtomicBool,
    /// Cancelled when shutdown has stopped the tree: the event streams end
    /// on it once they have handed out what was published before.
    stopped: tokio_util::sync::CancellationToken,
    /// Each bot's latest own conversation seen by this process (a message
    /// to a bot goes there without asking the store).
    latest: troupe_runtime::hash::FastDashMap<BotId, ConversationId>,
    models: ModelsConfig,
    model_override: Option<ResolvedModel>,
    env: EnvLookup,
    resolved: Mutex<HashMap<String, ResolvedModel>>,
    /// The conversations, by id, under their router.
    pub(crate) conversations: Arc<Conversations>,
    /// The features' handles, as `crate::boot` made them when it built the
    /// node: typed, of the type boot binds to [`Wired::Features`] (the node
    /// names no feature; boot's `Node::features` reads them).
    features: Arc<Features>,
    /// The features' parts of the actor tree, in the order they joined.
    branches: parking_lot::RwLock<Vec<Arc<dyn Branch>>>,
    /// Where envelopes addressed to a house thread go.
    thread_route: std::sync::OnceLock<Arc<dyn Route>>,
    /// Where envelopes addressed to a registered actor kind go.
    actor_route: std::sync::OnceLock<Arc<dyn Route>>,
    /// Where envelopes for actors on other nodes go (a cluster's node).
    remote: std::sync::OnceLock<Arc<dyn Remote>>,
    /// Who else bots may message besides bots (registered kinds offered
    /// to them), for their roster.
    rosters: parking_lot::RwLock<Vec<Arc<dyn Roster>>>,
    /// Moves when a roster gains an entry, so conversations recompute
    /// their tools (`message_agent` is offered once there is someone to
    /// message).
    roster_generation: std::sync::atomic::AtomicU64,
    /// The root of the actor tree.
    root: parking_lot::RwLock<Option<ActorRef<SupervisorMsg>>>,
    bots: bots::Bots,
    hooks: parking_lot::RwLock<Arc<[Arc<dyn TurnHook>]>>,
}

impl std::fmt::Debug for NodeContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeContext")
            .field("home", &self.home)
            .finish_non_exhaustive()
    }
}

impl NodeContext {
    /// Whether the home has a bot besides the main agent, or another
    /// agent bots may message (a registered kind offered to them).
    pub fn has_bots(&self) -> bool {
        self.bots.any_other() || self.rosters.read().iter().any(|r| !r.is_empty())
    }

    /// The generation of what decides a conversation's tools: the tool
    /// registry's, moved also when a roster gains an entry.
    pub fn tools_generation(&self) -> u64 {
        self.tools.generation().wrapping_add(
            self.roster_generation
                .load(std::sync::atomic::Ordering::Relaxed),
        )
    }

    /// Says a roster gained or lost an entry.
    pub(crate) fn roster_changed(&self) {
        self.roster_generation
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// How the dispatcher runs calls.
    pub fn dispatch_settings(&self) -> DispatchSettings {
        DispatchSettings {
            default_timeout: self.settings.tool_timeout,
            spill_limit_chars: self.settings.spill_limit_chars,
        }
    }

    /// What a bot's system prompt is made of, read now.
    pub fn prompt_parts(&self, bot: &BotSpec) -> PromptParts {
        let memory = troupe_tools::memory::snapshot(&self.home, &bot.name);
        let mut roster: Vec<String> = Vec::new();
        if self.bots.any_other() {
            roster.extend(
                self.bots
                    .iter()
                    .filter(|b| b.key() != &bot.name && b.key() != MAIN_AGENT)
                    .map(|b| format!("- {}: {}", b.spec.name, b.spec.description)),
            );
        }
        roster.extend(self.roster_entries());
        PromptParts {
            mission: bot.effective_mission(),
            user_profile: memory.user,
            notes: memory.notes,
            cwd: self.settings.cwd.display().to_string(),
            date: crate::node::conversation::prompt::today(),
            roster,
        }
    }

    /// Adds a hook told of every turn's end.
    pub fn add_hook(&self, hook: Arc<dyn TurnHook>) {
        let mut hooks = self.hooks.write();
        let mut all: Vec<Arc<dyn TurnHook>> = hooks.iter().cloned().collect();
        all.push(hook);
        *hooks = all.into();
    }

    pub(crate) fn turn_finished(&self, turn: &FinishedTurn) {
        let hooks = Arc::clone(&self.hooks.read());
        for hook in hooks.iter() {
            hook.turn_finished(turn);
        }
    }

    /// The features' handles boot made with the node (see `crate::boot`).
    pub(crate) fn features(&self) -> &Features {
        &self.features
    }

    /// Adds a feature's part of the actor tree (listed and stopped with it).
    pub(crate) fn add_branch(&self, branch: Arc<dyn Branch>) {
        self.branches.write().push(branch);
    }

    pub(crate) fn branches(&self) -> Vec<Arc<dyn Branch>> {
        self.branches.read().clone()
    }

    /// Sets where envelopes addressed to a house thread go (once).
    pub(crate) fn route_threads(&self, route: Arc<dyn Route>) {
        let _ = self.thread_route.set(route);
    }

    /// Sets where envelopes addressed to a registered actor go (once).
    pub(crate) fn route_actors(&self, route: Arc<dyn Route>) {
        let _ = self.actor_route.set(route);
    }

    /// Sets where envelopes for actors on other nodes go (once).
    pub(crate) fn route_remote(&self, remote: Arc<dyn Remote>) {
        let _ = self.remote.set(remote);
    }

    /// Where envelopes for actors on other nodes go, in a cluster.
    pub(crate) fn remote(&self) -> Option<&Arc<dyn Remote>> {
        self.remote.get()
    }

    /// The entries the rosters add to every bot's (the agents besides
    /// bots, read now).
    pub(crate) fn roster_entries(&self) -> Vec<String> {
        self.rosters
            .read()
            .iter()
            .filter(|r| !r.is_empty())
            .flat_map(|r| r.entries())
            .collect()
    }

    /// Adds entries to every bot's roster (read at each prompt).
    pub(crate) fn add_roster(&self, roster: Arc<dyn Roster>) {
        self.rosters.write().push(roster);
    }

    /// The hooks' share of closing a turn of `conversation`.
    pub(crate) fn closing(&self, conversation: ConversationId, kind: ActorKind) -> Closing {
        Closing::new(
            Arc::clone(&self.hooks.read()),
            self.store.clone(),
            conversation,
            kind,
        )
    }

    /// Tells every hook that `conversation` was stopped.
    pub(crate) fn conversation_stopped(&self, conversation: ConversationId) {
        let hooks = Arc::clone(&self.hooks.read());
        for hook in hooks.iter() {
            hook.stopped(conversation);
        }
    }

    /// Notes that `bot`'s own conversation `id` just became its latest.
    pub(crate) fn note_latest(&self, bot: BotId, id: ConversationId) {
        self.latest.insert(bot, id);
    }
}

/// How to start a node.
pub struct NodeOptions {
    /// The home.
    pub home: Home,
    /// The settings.
    pub settings: Settings,
    /// `models.toml`'s definitions.
    pub models: ModelsConfig,
    /// A model every bot uses, whatever its spec (tests, `--model`).
    pub model_override: Option<ResolvedModel>,
    /// The tools.
    pub tools: Registry,
    /// The gate; everything passes when `None`.
    pub gate: Option<Arc<dyn CallGate>>,
    /// Looks environment variables up (keys, base URLs).
    pub env: EnvLookup,
    /// Where events are published; a new bus when `None`.
    pub bus: Option<broadcast::Sender<NodeEvent>>,
    /// Where questions and approvals wait (shared with the gate).
    pub questions: Arc<Questions>,
    /// Whether to resume what a crash interrupted (turns left open,
    /// undelivered messages, unfinished subagents). The long-running node
    /// (`serve`, `chat`, the Rust API) does; a one-turn `troupe run` does
    /// not spend its model on other conversations.
    pub recover: bool,
}

/// A running node.
#[derive(Clone, Debug)]
pub struct Node {
    ctx: Arc<NodeContext>,
}

impl Node {
    /// Opens the store and builds the node's context, with `sources` added
    /// to its tools; [`Node::start`] (in `crate::boot`) wires the features
    /// and starts the tree.
    pub(crate) fn build(
        options: NodeOptions,
        sources: Vec<Arc<dyn troupe_runtime::tool::registry::ToolSource>>,
        features: impl FnOnce(&WeakNode) -> Features,
    ) -> Result<Node, NodeError> {
        let store = Store::open(&options.home.database())?;
        if options.settings.durable {
            // Approvals and questions are kept with the turns that wait.
            options.questions.keep_in(store.clone());
        }
        let bus = options.bus.map_or_else(|| Bus::new(4096), Bus::of);
        let mut tools = options.tools;
        for source in sources {
            tools.add_source(source);
        }
        let ctx = Arc::new_cyclic(|me| NodeContext {
            home: options.home,
            settings: options.settings,
            store,
            tools: Arc::new(tools),
            gate: options.gate.unwrap_or_else(|| Arc::new(OpenGate)),
            bus,
            idle_checks: Default::default(),
            services: Services::default(),
            questions: options.questions,
            stopping: std::sync::atomic::AtomicBool::new(false),
            stopped: tokio_util::sync::CancellationToken::new(),
            latest: Default::default(),
            toolsets: Default::default(),
            prompts: Default::default(),
            models: options.models,
            model_override: options.model_override,
            env: options.env,
            resolved: Mutex::new(HashMap::new()),
            conversations: Arc::new(Conversations::new(me.clone())),
            features: Arc::new(features(&WeakNode(me.clone()))),
            branches: parking_lot::RwLock::new(Vec::new()),
            thread_route: std::sync::OnceLock::new(),
            actor_route: std::sync::OnceLock::new(),
            remote: std::sync::OnceLock::new(),
            rosters: parking_lot::RwLock::new(Vec::new()),
            roster_generation: std::sync::atomic::AtomicU64::new(0),
            root: parking_lot::RwLock::new(None),
            bots: bots::Bots::default(),
            hooks: parking_lot::RwLock::new(Arc::from(Vec::new())),
        });
        ctx.services.node().set_store(ctx.store.clone());
        Ok(Node { ctx })
    }

    /// The node of a shared context.
    pub(crate) fn from_context(ctx: Arc<NodeContext>) -> Node {
        Node { ctx }
    }

    /// Answers a question or an approval request (`None` cancels it);
    /// `false` when nothing waits under that id.
    pub fn answer(&self, request_id: &str, answer: Option<serde_json::Value>) -> bool {
        self.ctx.questions.answer(request_id, answer)
    }

    /// Answers a request waiting here, or one kept from before a restart
    /// whose turn has not asked again yet (the answer waits for it);
    /// `false` when no request has that id.
    ///
    /// # Errors
    ///
    /// The store's, when a kept request could not be answered.
    pub async fn answer_request(
        &self,
        request_id: &str,
        answer: Option<serde_json::Value>,
    ) -> Result<bool, NodeError> {
        Ok(self.ctx.questions.answer_kept(request_id, answer).await?)
    }

    /// The approvals and questions kept with the turns that wait on them,
    /// oldest first: after a restart, what was asked before it.
    ///
    /// # Errors
    ///
    /// The store's.
    pub async fn kept_requests(&self) -> Result<Vec<crate::channel::StoredRequest>, NodeError> {
        Ok(self.ctx.questions.kept().await?)
    }

    /// What the node's actors share (inside this crate only: others use
    /// the narrow accessors below, or messages).
    pub(crate) fn context(&self) -> &Arc<NodeContext> {
        &self.ctx
    }

    /// The actors' settings.
    pub fn settings(&self) -> &Settings {
        &self.ctx.settings
    }

    /// The home.
    pub fn home(&self) -> &Home {
        &self.ctx.home
    }

    /// The services every conversation's tools get.
    pub fn services(&self) -> &Services {
        &self.ctx.services
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.ctx.store
    }

    /// Every conversation's events.
    pub fn subscribe(&self) -> broadcast::Receiver<NodeEvent> {
        self.ctx.bus.subscribe()
    }

    /// Cancelled once [`Node::shutdown`] has stopped the actor tree; the
    /// node's event streams end on it.
    pub fn stopped(&self) -> tokio_util::sync::CancellationToken {
        self.ctx.stopped.clone()
    }

    /// Resumes what a crash interrupted, by one policy (written in
    /// `docs/runtime-semantics.md`): a conversation whose turn is marked
    /// open is woken, and its actor resumes the turn on its own bot's
    /// model; a transient conversation (one opened to run once, as a
    /// background review is), one holding what the store cannot keep, or a
    /// routine run cut short is not resumed (the scheduler reports the run
    /// as interrupted), and its turn is closed. Then every durable message
    /// not yet consumed is delivered again.
    pub(crate) async fn recover(&self) -> Result<(), NodeError> {
        for id in crate::node::conversation::journal::open_turns(&self.ctx.store).await? {
            let found = self
                .ctx
                .store
                .read(move |c| {
                    let row = conversations::get_conversation(c, id)?;
                    Ok(row.map(|row| (row, opening::load(c, id))))
                })
                .await?;
            let Some((row, stored)) = found else { continue };
            // An opening the store cannot read is resumed as its bot's own
            // would be: activation reports what is wrong with it.
            let transient = stored.ok().flatten().is_some_and(|s| s.not_resumed());
            if transient || row.kind == ActorKind::RoutineRun.as_str() {
                crate::node::conversation::journal::Journal::new(
                    Some(self.ctx.store.clone()),
                    id,
                    row.bot,
                )
                .set_turn_open(false, None)
                .await?;
                continue;
            }
            if let Err(e) = self.ctx.conversations.send(id, ConversationMsg::Wake) {
                tracing::error!(conversation = %id, error = %e, "could not resume an interrupted turn");
            }
        }
        for envelope in self.ctx.store.read(mailbox::pending_all).await? {
            if let Err(e) = self.route(envelope).await {
                tracing::error!(error = %e, "could not redeliver a message");
            }
        }
        Ok(())
    }

    /// Starts a new conversation of `bot` and returns its id.
    pub async fn new_conversation(
        &self,
        bot: &str,
        narrowing: Narrowing,
    ) -> Result<ConversationId, NodeError> {
        let record = self.bot(bot)?;
        // Refused before anything is stored: a conversation whose every
        // turn would fail is not worth starting.
        self.ctx
            .resolve_model_for(&record.spec.name, &record.spec.model)?;
        let id = ConversationId::new();
        let bot_id = record.id;
        self.spawn(id, record, narrowing, None).await?;
        self.ctx.note_latest(bot_id, id);
        Ok(id)
    }

    /// The bot's latest conversation of its own kind, or a new one.
    pub async fn latest_conversation(&self, bot: &str) -> Result<ConversationId, NodeError> {
        let record = self.bot(bot)?;
        let bot_id = record.id;
        let kind = record.spec.kind();
        if let Some(id) = self.ctx.latest.get(&bot_id) {
            return Ok(*id);
        }
        self.ctx.store.catch_up().await?;
        let latest = self
            .ctx
            .store
            .read(move |c| {
                Ok(conversations::list_conversations(c, Some(bot_id), 50)?
                    .into_iter()
                    .find(|row| row.kind == kind.as_str() && row.parent.is_none())
                    .map(|row| row.id))
            })
            .await?;
        match latest {
            Some(id) => {
                self.ctx.note_latest(bot_id, id);
                Ok(id)
            }
            None => self.new_conversation(bot, Narrowing::default()).await,
        }
    }
    /// Stops the actor tree, after letting background work (reviews)
    /// finish for up to [`BACKGROUND_GRACE`]. Turns in progress are cut
    /// short, not ended: what they did is committed, they stay open in the
    /// store, and the next recovering start resumes them. Last, the search
    /// index takes the messages and house files the writer had not indexed
    /// yet.
    pub async fn shutdown(&self) {
        self.ctx
            .stopping
            .store(true, std::sync::atomic::Ordering::SeqCst);
        // A turn waiting on a person keeps its request for the next start.
        self.ctx.questions.close();
        // The features stop taking background work (commands end, no
        // review starts), and what runs (reviews) may finish.
        let branches = self.ctx.branches();
        for branch in &branches {
            branch.stopping();
        }
        let drained = futures::future::join_all(branches.iter().map(|b| b.drain()));
        if tokio::time::timeout(BACKGROUND_GRACE, drained)
            .await
            .is_err()
        {
            tracing::warn!("background work still running at shutdown; it is stopped");
        }
        // The actors stop without ending their turns: a turn cut short
        // stays open in the store and the next start resumes it (a
        // subagent is not recorded as stopped because its process exited).
        self.stop_tree().await;
        // Nothing publishes any more: the event streams end.
        self.ctx.stopped.cancel();
        // Index what the writer deferred, so the next process (or another
        // reader of the file) finds every message searchable.
        if let Err(e) = self.ctx.store.catch_up().await {
            tracing::warn!(error = %e, "the search index could not catch up at shutdown");
        }
        // And the house files the writer had not indexed yet.
        let files = troupe_runtime::store::house_files::index::catch_up_all(&self.ctx.store);
        if let Err(e) = files.await {
            tracing::warn!(error = %e, "house files could not be indexed at shutdown");
        }
    }

    /// How many conversation actors are live.
    pub fn live_conversations(&self) -> usize {
        self.ctx.conversations.live_count()
    }

    /// The node's conversations (live actors, restarts).
    pub fn conversations(&self) -> &Conversations {
        &self.ctx.conversations
    }

    /// The kind of a bot's conversations, as stored.
    pub fn kind_of(bot: &BotSpec) -> ActorKind {
        bot.kind()
    }
}

#[async_trait::async_trait]
impl crate::post::Post for Node {
    async fn deliver(
        &self,
        envelope: troupe_runtime::protocol::Envelope,
    ) -> Result<troupe_runtime::id::MsgId, String> {
        Node::deliver(self, envelope)
            .await
            .map_err(|e| e.to_string())
    }
}
