//! How a conversation's actor is opened: its bot, kind, tools, budget and
//! what it is given besides.

use std::sync::Arc;

use troupe_runtime::id::ConversationId;
use troupe_runtime::protocol::ActorKind;
use troupe_runtime::tool::dispatch::CallGate;
use troupe_runtime::tool::Services;

use crate::bot::BotRecord;
use crate::budget::Scope;
use crate::toolset::Narrowing;

/// Adds a service to a conversation's tools when it opens.
pub type ServiceHook = Box<dyn FnOnce(&Services) + Send>;

/// How to open a conversation.
pub struct Opening {
    /// Its id (new or stored).
    pub id: ConversationId,
    /// Its bot.
    pub bot: BotRecord,
    /// The kind of actor it is.
    pub kind: ActorKind,
    /// Further narrowing of its tools.
    pub narrowing: Narrowing,
    /// The conversation that spawned it.
    pub parent: Option<ConversationId>,
    /// The budget scope it charges (the bot's day when `None`).
    pub budget: Option<Arc<Scope>>,
    /// Services added for its tools.
    pub services: Vec<ServiceHook>,
    /// Its title.
    pub title: String,
    /// The gate its calls pass instead of the node's.
    pub gate: Option<Arc<dyn CallGate>>,
    /// Appended to its system prompt.
    pub briefing: String,
    /// What its row is stored as when not its kind (`review`).
    pub label: Option<&'static str>,
    /// Its id was just made: there is no history to load.
    pub fresh: bool,
}

impl Opening {
    /// A new conversation of `bot`, of the bot's own kind.
    pub fn new(bot: BotRecord) -> Self {
        Self {
            id: ConversationId::new(),
            kind: bot.spec.kind(),
            bot,
            narrowing: Narrowing::default(),
            parent: None,
            budget: None,
            services: Vec::new(),
            title: String::new(),
            gate: None,
            briefing: String::new(),
            label: None,
            fresh: false,
        }
    }
}
