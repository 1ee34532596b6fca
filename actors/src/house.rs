//! Houses: people and bots talking in threads.
//!
//! - [`thread`] — a thread's actor and the transaction that takes a post;
//! - [`director`] — who is offered a turn (the rules of `docs/house.md`);
//! - [`api`] — the Rust API the CLI uses: [`HouseRef`], [`ThreadRef`];
//! - [`tools`] — the node's [`HouseServices`], behind the house tools;
//! - [`files`] — the house's shared files from Rust ([`HouseRef::files`] …);
//! - [`tokens`] — members' tokens for the server ([`HouseRef::issue_token`]).
//!
//! Threads are actors under the node's supervisor, addressed by id through
//! a router (`threads` in `troupe ps`) that activates them on their first
//! post and passivates them when idle. A bot takes part in a thread through
//! its own conversation there, whose stored opening carries its [`Seat`]:
//! the seat puts the house tools in its hands and scopes them to its house.

pub mod api;
pub mod director;
pub mod files;
pub mod thread;
pub mod tokens;
pub mod tools;
pub mod watch;

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use ractor::{ActorCell, ActorProcessingErr, ActorRef};
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;
use troupe_runtime::bus::Bus;
use troupe_runtime::id::{HouseId, MsgId, ThreadId};
use troupe_runtime::protocol::house::ThreadMessage;
use troupe_runtime::protocol::{Address, Envelope};
use troupe_runtime::router::RouterConfig;
use troupe_runtime::rusqlite::{params, Connection, OptionalExtension};
use troupe_runtime::store::StoreError;
use troupe_runtime::supervise::{Backoff, Intensity, Restart};

pub use api::{HouseRef, ThreadRef};
pub use director::Rules;
pub use thread::ThreadMsg;
pub use watch::{ThreadEvents, ThreadMessages};

use crate::node::routed::{Routed, RoutedKind};
use crate::node::{ActorInfo, Branch, Route, WeakNode};

/// A message that landed in a thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadMessageEvent {
    /// Its house.
    pub house: HouseId,
    /// Its thread.
    pub thread: ThreadId,
    /// The round it belongs to.
    pub round: MsgId,
    /// The message.
    pub message: ThreadMessage,
}

/// What happens in threads, for watchers (the CLI's `thread post`, the
/// Rust API's streams, later the server).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ThreadEvent {
    /// A message was posted.
    Posted(ThreadMessageEvent),
    /// A bot was offered a turn.
    Offered {
        /// The thread.
        thread: ThreadId,
        /// The round.
        round: MsgId,
        /// The bot.
        bot: String,
    },
    /// A bot's turn offered in a round did not finish: it said nothing,
    /// and `reason` says why (its model cannot be used, a model call
    /// failed, a budget or a guard stopped it).
    TurnFailed {
        /// The thread.
        thread: ThreadId,
        /// The round.
        round: MsgId,
        /// The bot.
        bot: String,
        /// Why, in one line.
        reason: String,
    },
    /// A bot named in a post was not offered a turn, and `reason` says
    /// why: a guard held it (the chain of bot turns, the pair's exchanges,
    /// the round's cap), its listen mode is off, or it is not in the thread.
    Held {
        /// The thread.
        thread: ThreadId,
        /// The round.
        round: MsgId,
        /// The bot.
        bot: String,
        /// Why, in one line.
        reason: String,
    },
    /// Every turn offered in a round has answered.
    RoundSettled {
        /// The thread.
        thread: ThreadId,
        /// The round (the id of the message that started it).
        round: MsgId,
    },
}

impl ThreadEvent {
    /// The thread it happened in.
    pub fn thread(&self) -> ThreadId {
        match self {
            Self::Posted(p) => p.thread,
            Self::Offered { thread, .. }
            | Self::TurnFailed { thread, .. }
            | Self::Held { thread, .. }
            | Self::RoundSettled { thread, .. } => *thread,
        }
    }
}

/// The node's threads: their router and their events.
pub struct Threads {
    node: WeakNode,
    routed: Routed<ThreadId, ThreadMsg>,
    events: Bus<ThreadEvent>,
}

impl std::fmt::Debug for Threads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Threads").finish_non_exhaustive()
    }
}

impl Threads {
    /// The threads of the node `node` (not running until the root starts
    /// their router).
    pub(crate) fn new(node: WeakNode) -> Self {
        Self {
            node,
            routed: Routed::new("threads", "thread"),
            events: Bus::new(4096),
        }
    }

    /// Events of every thread of the node.
    pub fn subscribe(&self) -> broadcast::Receiver<ThreadEvent> {
        self.events.subscribe()
    }

    pub(crate) fn publish(&self, event: ThreadEvent) {
        let _ = self.events.send(event);
    }

    /// Hands `msg` to thread `id`'s actor, activating it.
    pub(crate) async fn send(&self, id: ThreadId, msg: ThreadMsg) -> Result<(), String> {
        self.routed
            .send_activating(id, msg)
            .await
            .map_err(|e| format!("thread {id} did not take the message: {e}"))
    }

    /// Threads live now.
    pub fn live(&self) -> Vec<ThreadId> {
        self.routed.live()
    }
}

/// Threads are activated on their first post and passivated when idle.
#[async_trait::async_trait]
impl RoutedKind for Threads {
    type Key = ThreadId;
    type Msg = ThreadMsg;

    fn routed(&self) -> &Routed<ThreadId, ThreadMsg> {
        &self.routed
    }

    fn config(&self) -> RouterConfig {
        RouterConfig {
            idle_after: Some(Duration::from_secs(120)),
            restart: Restart::Transient,
            intensity: Intensity::new(3, Duration::from_secs(60)),
            backoff: Backoff::None,
            shutdown: Duration::from_secs(5),
            events: 256,
            report_activations: false,
        }
    }

    async fn activate(
        self: Arc<Self>,
        id: ThreadId,
        supervisor: ActorCell,
        _restarted: bool,
    ) -> Result<ActorRef<ThreadMsg>, ActorProcessingErr> {
        thread::spawn(self.node.clone(), Arc::downgrade(&self), id, supervisor).await
    }
}

impl Branch for Threads {
    fn live(&self) -> Vec<ActorInfo> {
        self.routed.actors()
    }

    fn stop(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.routed.stop())
    }
}

#[async_trait::async_trait]
impl Route for Threads {
    async fn deliver(&self, envelope: Envelope) -> Result<(), String> {
        let Address::Thread(thread) = envelope.to else {
            return Err(format!("{} is not a thread", envelope.to));
        };
        self.send(thread, ThreadMsg::Deliver(Box::new(envelope)))
            .await
    }
}

/// The turn-taking rules of `house` (the defaults where it sets none).
pub fn rules_of(conn: &Connection, house: HouseId) -> Result<Rules, StoreError> {
    let settings: Option<String> = conn
        .prepare_cached("SELECT settings FROM houses WHERE id = ?1")?
        .query_row(params![house.to_string()], |r| r.get(0))
        .optional()?;
    Ok(settings
        .and_then(|s| {
            serde_json::from_str::<serde_json::Value>(&s)
                .ok()
                .and_then(|v| v.get("rules").cloned())
        })
        .and_then(|r| serde_json::from_value(r).ok())
        .unwrap_or_default())
}

/// What a bot's conversation in a thread is told about where it is.
pub fn briefing(house: &str, thread: &str, handle: &str) -> String {
    format!(
        "You take part in thread `{thread}` of the house `{house}` as `{handle}`, with people and other bots. \
         New messages of the thread arrive as lines `[handle] text`; your final answer in a turn is posted \
         to the thread as your message (answer with nothing to stay silent). @mention a member to ask them; \
         the house tools (read_thread, post_to_thread, create_thread, …) act in this house only."
    )
}
