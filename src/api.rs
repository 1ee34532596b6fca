//! The Rust API: a runtime, its bots, and their turns.
//!
//! ```no_run
//! # async fn example() -> anyhow::Result<()> {
//! use troupe::{BotSpec, Runtime};
//!
//! let runtime = Runtime::builder().home("/tmp/troupe-home").model("script:demo.json").build().await?;
//! let bot = runtime.spawn_bot(BotSpec::new("scout", "Scout", "Finds things.")).await?;
//! let report = bot.send("Find the README").await?.result().await?;
//! println!("{}", report.text);
//! runtime.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! A runtime owns its home's writes: [`RuntimeBuilder::build`] takes the
//! home's lock ([`HomeLock`]) before it starts the node, so a second
//! process (or a second runtime in this one) on the same home is refused
//! with the owner named, instead of resuming the turns the first is
//! running. [`Runtime::shutdown`] releases it, recording a clean end.

mod builder;
mod kinds;
mod streams;
mod tools;

pub use builder::{settings_from, RuntimeBuilder};
pub use streams::RuntimeEvents;

use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot};
use troupe_actors::added_tools::AddedTools;
use troupe_actors::bot::{BotRecord, BotSpec};
use troupe_actors::conversation::TurnReport;
use troupe_actors::house::HouseRef;
use troupe_actors::node::{ActorInfo, Node, NodeError};
use troupe_actors::routine::scheduler::{RoutineService, SchedulerError, SchedulerHandle};
use troupe_actors::toolset::Narrowing;
use troupe_runtime::config::Config;
use troupe_runtime::home::{HomeLock, LockError};
use troupe_runtime::id::ConversationId;
use troupe_runtime::protocol::AgentEvent;
use troupe_runtime::store::proposals::{self, Proposal};
use troupe_runtime::store::StoreError;

/// Why the runtime could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The node failed.
    #[error(transparent)]
    Node(#[from] NodeError),
    /// The configuration is wrong.
    #[error(transparent)]
    Config(#[from] troupe_runtime::config::ConfigError),
    /// A model spec is wrong.
    #[error(transparent)]
    Model(#[from] troupe_runtime::model::ModelError),
    /// The trust gate's rules or approvals file are wrong.
    #[error(transparent)]
    Trust(#[from] troupe_runtime::trust::TrustError),
    /// The routine scheduler could not start.
    #[error(transparent)]
    Scheduler(#[from] SchedulerError),
    /// A tool could not be registered.
    #[error(transparent)]
    Registry(#[from] troupe_runtime::tool::registry::RegistryError),
    /// A proposal could not be decided.
    #[error(transparent)]
    Proposal(#[from] troupe_tools::proposals::ProposalError),
    /// Another process owns the home, or its lock file failed.
    #[error(transparent)]
    Home(#[from] LockError),
    /// The home's database is damaged, missing, or could not be checked.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The check of the home's database stopped before it finished.
    #[error("the check of the home's database stopped before it finished ({0}); try again")]
    Check(String),
    /// A tool could not be added to the running runtime.
    #[error(transparent)]
    Tool(troupe_actors::added_tools::AddToolError),
    /// A registered actor kind refused, or one of its actors failed.
    #[error(transparent)]
    Actor(#[from] troupe_actors::kinds::KindError),
    /// The conversation ended before the turn reported.
    #[error("the conversation stopped before the turn ended")]
    Gone,
}

/// A running troupe: its node, bots and conversations.
#[derive(Clone, Debug)]
pub struct Runtime {
    node: Node,
    scheduler: Option<SchedulerHandle>,
    /// The tools added while it runs ([`Runtime::add_tool`]).
    added: Arc<AddedTools>,
    /// The configuration it was started with.
    config: Arc<Config>,
    /// The home's lock, until [`Runtime::shutdown`] releases it (or the
    /// last clone is dropped, which the next owner takes for a crash).
    lock: Arc<Mutex<Option<HomeLock>>>,
}

impl Runtime {
    /// A builder.
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder::default()
    }

    /// The configuration it was started with (`config.toml`, the
    /// environment, overrides).
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The node underneath, for what this API does not cover.
    pub fn node(&self) -> &Node {
        &self.node
    }

    /// The routine scheduler, when this runtime fires routines
    /// ([`RuntimeBuilder::scheduler`]).
    pub fn scheduler(&self) -> Option<&SchedulerHandle> {
        self.scheduler.as_ref()
    }

    /// Creates a bot (persisted) and opens its conversation.
    pub async fn spawn_bot(&self, spec: BotSpec) -> Result<Bot, RuntimeError> {
        let record = match self.node.bot(&spec.name) {
            Ok(existing) => existing,
            Err(_) => self.node.create_bot(spec).await?,
        };
        self.open(record).await
    }

    /// The bot called `name` (the main agent is `main`), in its latest conversation.
    pub async fn bot(&self, name: &str) -> Result<Bot, RuntimeError> {
        let record = self.node.bot(name)?;
        self.open(record).await
    }

    async fn open(&self, record: BotRecord) -> Result<Bot, RuntimeError> {
        let conversation = self.node.latest_conversation(&record.spec.name).await?;
        Ok(Bot {
            node: self.node.clone(),
            added: Arc::clone(&self.added),
            record,
            conversation,
        })
    }

    /// The changes agents proposed (the background review's memory
    /// replacements and removals), oldest first: the pending ones, or all.
    pub async fn proposals(&self, pending_only: bool) -> Result<Vec<Proposal>, RuntimeError> {
        Ok(self
            .node
            .store()
            .read(move |c| proposals::list(c, pending_only))
            .await
            .map_err(NodeError::from)?)
    }

    /// Applies proposal `id`; one that no longer applies is marked failed
    /// and answered as an error.
    pub async fn approve_proposal(&self, id: i64) -> Result<Proposal, RuntimeError> {
        Ok(troupe_tools::proposals::approve(self.node.home(), self.node.store(), id).await?)
    }

    /// Rejects proposal `id`; nothing changes.
    pub async fn reject_proposal(&self, id: i64) -> Result<Proposal, RuntimeError> {
        Ok(troupe_tools::proposals::reject(self.node.store(), id).await?)
    }

    /// Makes a house named `name` (people and bots talking in threads).
    pub async fn create_house(&self, name: &str) -> Result<HouseRef, RuntimeError> {
        Ok(self.node.create_house(name).await?)
    }

    /// The house named `name` (`home` is the one every home has).
    pub async fn house(&self, name: &str) -> Result<HouseRef, RuntimeError> {
        Ok(self.node.house(name).await?)
    }

    /// Every house, by name.
    pub async fn houses(
        &self,
    ) -> Result<Vec<troupe_runtime::protocol::house::House>, RuntimeError> {
        Ok(self.node.houses().await?)
    }

    /// The live actor tree: the node's supervisor, its children, and every
    /// live conversation with its parent and restart count.
    pub async fn tree(&self) -> Vec<ActorInfo> {
        self.node.tree().await
    }

    /// Stops every actor; what they did is committed. Then the home's
    /// lock is released, recording a clean end, and another process may
    /// own the home.
    pub async fn shutdown(&self) {
        match &self.scheduler {
            Some(scheduler) => scheduler.stop().await,
            None => RoutineService::of(&self.node).mark_stopping(),
        }
        self.node.shutdown().await;
        let lock = self
            .lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(lock) = lock {
            if let Err(e) = lock.release() {
                tracing::warn!(error = %e, "the home's lock file could not be updated");
            }
        }
    }
}

/// A bot in one of its conversations.
#[derive(Clone, Debug)]
pub struct Bot {
    node: Node,
    added: Arc<AddedTools>,
    record: BotRecord,
    conversation: ConversationId,
}

impl Bot {
    /// Its definition.
    pub fn spec(&self) -> &BotSpec {
        &self.record.spec
    }

    /// The conversation its messages go to.
    pub fn conversation(&self) -> ConversationId {
        self.conversation
    }

    /// The same bot in a new conversation.
    pub async fn new_conversation(&self) -> Result<Bot, RuntimeError> {
        let conversation = self
            .node
            .new_conversation(&self.record.spec.name, Narrowing::default())
            .await?;
        Ok(Bot {
            conversation,
            ..self.clone()
        })
    }

    /// Sends a user message; the handle streams the turn's events and
    /// resolves to its report.
    pub async fn send(&self, text: impl Into<String>) -> Result<Turn, RuntimeError> {
        let (events, done) = self.node.send(self.conversation, text).await?;
        Ok(Turn { events, done })
    }

    /// Stops the running turn.
    pub async fn stop(&self) -> Result<(), RuntimeError> {
        Ok(self.node.stop(self.conversation).await?)
    }

    /// Adds a message to the running turn, read before its next model call.
    pub async fn steer(&self, text: impl Into<String>) -> Result<(), RuntimeError> {
        Ok(self.node.steer(self.conversation, text).await?)
    }
}

/// One turn in progress: a `futures::Stream` of its events (the last is
/// `turn_finished`), then its report ([`Turn::result`]).
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
///
/// use futures::StreamExt;
/// use troupe::runtime::model::{ScriptedProvider, Turn};
/// use troupe::{AgentEvent, BotSpec, Runtime};
///
/// #[tokio::main]
/// async fn main() -> anyhow::Result<()> {
///     let home = tempfile::tempdir()?;
///     let model = Arc::new(ScriptedProvider::new(vec![Turn::text("Hello there.")]));
///     let runtime = Runtime::builder().home(home.path()).provider(model).build().await?;
///     let bot = runtime.spawn_bot(BotSpec::new("greeter", "Greeter", "Greets.")).await?;
///
///     let mut turn = bot.send("Hi").await?;
///     let mut text = String::new();
///     while let Some(event) = turn.next().await {
///         if let AgentEvent::TextDelta { text: delta, .. } = event {
///             text.push_str(&delta);
///         }
///     }
///     assert_eq!(text, "Hello there.");
///     assert_eq!(turn.result().await?.text, "Hello there.");
///
///     runtime.shutdown().await;
///     Ok(())
/// }
/// ```
#[derive(Debug)]
pub struct Turn {
    events: mpsc::UnboundedReceiver<AgentEvent>,
    done: oneshot::Receiver<TurnReport>,
}

impl Turn {
    /// The next event, or `None` once the turn has ended.
    pub async fn next_event(&mut self) -> Option<AgentEvent> {
        self.events.recv().await
    }

    /// Waits for the turn to end.
    pub async fn result(self) -> Result<TurnReport, RuntimeError> {
        self.done.await.map_err(|_| RuntimeError::Gone)
    }

    /// Splits into the event stream and the report.
    pub fn into_parts(
        self,
    ) -> (
        mpsc::UnboundedReceiver<AgentEvent>,
        oneshot::Receiver<TurnReport>,
    ) {
        (self.events, self.done)
    }
}
