//! The typed part of a tool call's services that belongs to one
//! conversation: where it sits in a house and what it may do there, the
//! deferred tools it may load, its memory of the gate, what its model
//! takes in and the library skills its bot may load, the turn in
//! progress's channel to the user and budget scope.
//!
//! Set by the node when it opens the conversation, before its first call;
//! a [fork](super::Services::fork) starts from a copy of its parent's, so
//! what a conversation sets is its own (a handle copied on a fork is
//! shared with the parent, as the type map shared what a parent held).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::turn::UserChannel;
use super::GateSession;
use crate::budget::Scope;
use crate::id::{HouseId, ThreadId};
use crate::tool::catalog::DeferredCatalog;
use crate::tool::ToolContext;

/// What a conversation is, for its tools: its [`Seat`], its
/// [`HouseScope`], whether its bot may rewrite its own record, its
/// deferred tools, its [`GateSession`], its [`ModelTraits`], its
/// [`LibrarySkills`], its [`VisibleTools`], whether its memory changes
/// are proposals, and its turn's [`UserChannel`] and budget [`Scope`].
#[derive(Debug, Clone, Default)]
pub struct ConversationServices {
    /// The house thread the conversation sits in (offers the house tools).
    pub seat: Option<Seat>,
    /// The house the conversation works for.
    pub house_scope: Option<HouseScope>,
    /// Whether its bot may rewrite its own record (`update_self`).
    pub self_update: bool,
    /// The deferred tools it may load (`tool_search`).
    pub deferred: Option<Arc<DeferredCatalog>>,
    /// What the user approved for its session, made at its first gated call.
    pub gate_session: Option<Arc<GateSession>>,
    /// What its model takes in (`read_file`, `browser_exec` attach images
    /// only for a model that sees them).
    pub model: ModelTraits,
    /// The library skills its bot may load besides its own (`use_skill`).
    pub library_skills: Option<Arc<LibrarySkills>>,
    /// The tools it offers now (what its subagents may have at most).
    pub visible_tools: Option<VisibleTools>,
    /// Whether a replace or a remove in memory becomes a proposal the user
    /// approves instead of landing (a background review's conversation).
    pub propose_removals: bool,
    /// The turn in progress's channel to the user (`ask_user`, approvals);
    /// none between turns.
    pub user_channel: Option<Arc<dyn UserChannel>>,
    /// The budget scope of the turn in progress (or the last one): what a
    /// delegation it starts charges.
    pub turn_scope: Option<Arc<Scope>>,
}

/// The tools a conversation offers now (what its subagents may have at most),
/// in its tools' services.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VisibleTools(pub Arc<std::collections::HashSet<String>>);

/// What the model is able to take in, provided by the conversation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ModelTraits {
    /// Whether the model is shown images.
    pub sees_images: bool,
}

/// The library skills the conversation's bot may load besides its own (its
/// definition's `skills`), put in the conversation's services.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LibrarySkills(pub Vec<String>);

/// The house and thread a bot's conversation sits in: put into the
/// conversation's services, it is what offers the house tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Seat {
    /// The house.
    pub house: HouseId,
    /// The thread.
    pub thread: ThreadId,
}

impl Seat {
    /// The seat of the conversation of `ctx`, if it is in a house.
    pub fn of(ctx: &ToolContext) -> Option<Seat> {
        ctx.services.seat()
    }
}

/// The house a conversation works for: put into the services of every
/// conversation a house bot runs — its seat in a thread, and what that
/// conversation starts (subagents, a message to another bot) — so that the
/// tools reading or writing stored data see that house's only, and the
/// tools touching the machine are not offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HouseScope {
    /// The house.
    pub house: HouseId,
    /// Whether it is the home's own house ([`DEFAULT_HOUSE`](crate::house::DEFAULT_HOUSE)), whose people
    /// own the machine: its scope also sees what was made outside any house
    /// (the owner's conversations, `memory/USER.md`).
    pub home: bool,
}

impl HouseScope {
    /// The house the conversation of `ctx` works for, if any.
    pub fn of(ctx: &ToolContext) -> Option<HouseScope> {
        ctx.services.house_scope()
    }

    /// Whether the conversation of `ctx` works for a house other than the
    /// home's own (where the home's shared data is not its to see).
    pub fn foreign(ctx: &ToolContext) -> bool {
        Self::of(ctx).is_some_and(|s| !s.home)
    }
}
