//! How a conversation's actor is opened — its bot, kind, tools, budget and
//! what it is given besides — and how that is kept.
//!
//! An [`Opening`] is what a caller asks for. Its durable part, a
//! [`StoredOpening`], is written with the conversation's row before the
//! actor first starts, so that every activation — after passivation, after
//! a restart by its supervisor, after the process crashed — rebuilds the
//! same actor: a subagent keeps its tool ceiling and its delegation's
//! remaining budget. What cannot be stored (a review's own gate, services
//! handed to its tools) stays in memory for the life of the process; a
//! conversation that needs them is not rebuilt from the store.

use std::collections::HashSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use troupe_runtime::house::Seat;
use troupe_runtime::id::{ConversationId, DelegationId, HouseId};
use troupe_runtime::protocol::ActorKind;
use troupe_runtime::rusqlite::{params, Connection, OptionalExtension, Transaction};
use troupe_runtime::store::StoreError;
use troupe_runtime::tool::dispatch::CallGate;
use troupe_runtime::tool::Services;

use crate::bot::BotRecord;
use crate::budget::{Limits, Scope, Spent};
use crate::toolset::Narrowing;

/// Adds a service to a conversation's tools each time it opens.
pub type ServiceHook = Arc<dyn Fn(&Services) + Send + Sync>;

/// How to open a conversation.
#[derive(Clone)]
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
    /// The budget as stored, to rebuild [`Opening::budget`] on a later activation.
    pub stored_budget: Option<StoredBudget>,
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
    /// It runs once and is never resumed nor reopened: a restart closes
    /// its open turn, and opening it again is refused (a background
    /// review, whose next one looks back again instead).
    pub transient: bool,
    /// Its id was just made: there is no history to load.
    pub fresh: bool,
    /// The house thread it takes part in, for a bot's conversation there.
    pub seat: Option<Seat>,
    /// The house it works for when it has no seat: one a house bot's
    /// conversation started (a subagent, a message to another bot).
    pub house: Option<HouseId>,
}

impl std::fmt::Debug for Opening {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opening")
            .field("id", &self.id)
            .field("bot", &self.bot.spec.name)
            .field("kind", &self.kind)
            .field("parent", &self.parent)
            .finish_non_exhaustive()
    }
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
            stored_budget: None,
            services: Vec::new(),
            title: String::new(),
            gate: None,
            briefing: String::new(),
            label: None,
            transient: false,
            fresh: false,
            seat: None,
            house: None,
        }
    }

    /// The house it works for: its seat's, or the one it was opened for.
    pub fn house(&self) -> Option<HouseId> {
        self.seat.map(|s| s.house).or(self.house)
    }

    /// The delegation it works for (a subagent's, whose budget it shares).
    pub fn delegation(&self) -> Option<DelegationId> {
        self.stored_budget.as_ref().and_then(|b| b.delegation)
    }

    /// Whether it holds what the store cannot keep (a gate, services), so
    /// only this process's copy can open it again.
    pub fn in_memory_only(&self) -> bool {
        self.gate.is_some() || !self.services.is_empty()
    }

    /// Its durable part, or `None` when it is just its bot's own
    /// conversation (nothing to store: a conversation with no stored
    /// opening opens as its bot's own).
    pub fn to_store(&self) -> Option<StoredOpening> {
        let plain = self.kind == self.bot.spec.kind()
            && self.parent.is_none()
            && self.narrowing.only.is_none()
            && self.narrowing.parent.is_none()
            && self.stored_budget.is_none()
            && self.briefing.is_empty()
            && self.label.is_none()
            && !self.transient
            && self.seat.is_none()
            && self.house.is_none()
            && !self.in_memory_only();
        (!plain).then(|| self.stored())
    }

    /// Its durable part.
    pub fn stored(&self) -> StoredOpening {
        let sorted = |set: &HashSet<String>| {
            let mut names: Vec<String> = set.iter().cloned().collect();
            names.sort();
            names
        };
        StoredOpening {
            kind: self.kind,
            parent: self.parent,
            only: self.narrowing.only.clone(),
            ceiling: self.narrowing.parent.as_deref().map(sorted),
            budget: self.stored_budget.clone(),
            briefing: self.briefing.clone(),
            label: self.label.map(str::to_string),
            transient: self.transient,
            in_memory_only: self.in_memory_only(),
            seat: self.seat,
            house: self.house,
        }
    }
}

/// A budget as stored: its limits, and whose spending counts against it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredBudget {
    /// The scope's name (`delegation`).
    pub scope: String,
    /// Its limits.
    pub limits: Limits,
    /// The delegation whose subagents share it.
    pub delegation: Option<DelegationId>,
}

/// The durable part of an [`Opening`], stored as JSON in `openings`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredOpening {
    /// The kind of actor.
    pub kind: ActorKind,
    /// The conversation that spawned it.
    pub parent: Option<ConversationId>,
    /// Only these tools (a run's `--tools`).
    #[serde(default)]
    pub only: Option<Vec<String>>,
    /// At most these tools (a subagent's parent's).
    #[serde(default)]
    pub ceiling: Option<Vec<String>>,
    /// Its budget, when not the bot's.
    #[serde(default)]
    pub budget: Option<StoredBudget>,
    /// Appended to its system prompt.
    #[serde(default)]
    pub briefing: String,
    /// What its row is stored as when not its kind.
    #[serde(default)]
    pub label: Option<String>,
    /// Whether it is never resumed nor reopened ([`Opening::transient`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub transient: bool,
    /// Whether only the process that opened it can open it again.
    #[serde(default)]
    pub in_memory_only: bool,
    /// The house thread it takes part in.
    #[serde(default)]
    pub seat: Option<Seat>,
    /// The house it works for when it has no seat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub house: Option<HouseId>,
}

impl StoredOpening {
    /// Whether a turn of it left open by a crash is closed rather than
    /// resumed: it is transient, or it held what the store cannot keep
    /// (no later process can rebuild it).
    pub fn not_resumed(&self) -> bool {
        self.transient || self.in_memory_only
    }

    /// The narrowing it stores.
    pub fn narrowing(&self) -> Narrowing {
        Narrowing {
            only: self.only.clone(),
            parent: self
                .ceiling
                .as_ref()
                .map(|names| Arc::new(names.iter().cloned().collect())),
        }
    }
}

/// Writes `opening` for `conversation` (replacing one stored before).
pub fn save(
    tx: &Transaction<'_>,
    conversation: ConversationId,
    opening: &StoredOpening,
) -> Result<(), StoreError> {
    let spec = serde_json::to_string(opening).map_err(|e| StoreError::Codec {
        what: "opening",
        detail: e.to_string(),
    })?;
    tx.prepare_cached("INSERT OR REPLACE INTO openings (conversation_id, spec) VALUES (?1, ?2)")?
        .execute(params![conversation.to_string(), spec])?;
    Ok(())
}

/// The opening stored for `conversation`, if any (conversations made
/// before openings were kept have none: they open as their bot's own).
pub fn load(
    conn: &Connection,
    conversation: ConversationId,
) -> Result<Option<StoredOpening>, StoreError> {
    let spec: Option<String> = conn
        .prepare_cached("SELECT spec FROM openings WHERE conversation_id = ?1")?
        .query_row(params![conversation.to_string()], |r| r.get(0))
        .optional()?;
    spec.map(|s| {
        serde_json::from_str(&s).map_err(|e| StoreError::Codec {
            what: "opening",
            detail: e.to_string(),
        })
    })
    .transpose()
}

/// What the subagents of `delegation` spent so far, from the store: the
/// tokens and money of their model calls and the tool calls they made.
pub fn delegation_spent(conn: &Connection, delegation: DelegationId) -> Result<Spent, StoreError> {
    let id = delegation.to_string();
    let (tokens, cost_usd): (i64, f64) = conn
        .prepare_cached(
            // The folded rows and the calls not folded yet, each arm by
            // its own join (SQLite would scan all of `usage_all` for one).
            "SELECT COALESCE(SUM(tokens), 0), COALESCE(SUM(cost_usd), 0) FROM (
                SELECT u.input_tokens + u.output_tokens + u.cache_read_tokens + u.cache_write_tokens
                       AS tokens, u.cost_usd
                FROM usage u JOIN subagents s ON s.conversation_id = u.conversation_id
                WHERE s.delegation_id = ?1
                UNION ALL
                SELECT u.input_tokens + u.output_tokens + u.cache_read_tokens + u.cache_write_tokens,
                       u.cost_usd
                FROM usage_pending u JOIN subagents s ON s.conversation_id = u.conversation_id
                WHERE s.delegation_id = ?1)",
        )?
        .query_row(params![id], |r| Ok((r.get(0)?, r.get(1)?)))?;
    let tool_calls: i64 = conn
        .prepare_cached(
            "SELECT COUNT(*) FROM messages m JOIN subagents s ON s.conversation_id = m.conversation_id
             WHERE s.delegation_id = ?1 AND m.role = 'tool'",
        )?
        .query_row(params![id], |r| r.get(0))?;
    Ok(Spent {
        tokens: u64::try_from(tokens).unwrap_or(0),
        cost_usd,
        tool_calls: u64::try_from(tool_calls).unwrap_or(0),
    })
}

/// The scope a stored budget stands for, with what was spent against it.
pub fn rebuild_budget(budget: &StoredBudget, spent: Spent) -> Arc<Scope> {
    let shared = Scope::resumed(budget.scope.clone(), budget.limits, spent);
    Scope::child(&shared, "subagent", Limits::default())
}
