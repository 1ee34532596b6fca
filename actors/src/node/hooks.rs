//! What the node tells others when a turn ends or a conversation is stopped.

use std::collections::BTreeSet;

use troupe_runtime::id::{ConversationId, DelegationId};
use troupe_runtime::protocol::{ActorKind, Envelope};

use crate::bot::BotRecord;
use crate::node::conversation::TurnReport;

/// Told when any turn ends (delegations collect their subagents' ends this
/// way, routines their runs'), including turns resumed after a crash that
/// nobody is waiting on.
pub trait TurnHook: Send + Sync + 'static {
    /// A turn of `conversation` ended. Runs on the conversation's actor:
    /// spawn anything slow.
    fn turn_finished(&self, turn: &FinishedTurn);

    /// `conversation` was told to stop (its running turn is cancelled):
    /// what it started on its own behalf stops too (a delegation's
    /// subagents). Runs on the conversation's actor.
    fn stopped(&self, conversation: ConversationId) {
        let _ = conversation;
    }
}

/// What a [`TurnHook`] is told.
#[derive(Debug, Clone)]
pub struct FinishedTurn {
    /// The conversation.
    pub conversation: ConversationId,
    /// Its kind.
    pub kind: ActorKind,
    /// Its bot.
    pub bot: BotRecord,
    /// The conversation that spawned it.
    pub parent: Option<ConversationId>,
    /// The delegation it works for, when it is a subagent (`None` when
    /// not known here: the delegation reads it from the store).
    pub delegation: Option<DelegationId>,
    /// How the turn ended.
    pub report: TurnReport,
    /// What started the turn, when it was a delivered message.
    pub delivered: Option<Envelope>,
    /// The tools the turn called, by name.
    pub tools_used: BTreeSet<String>,
    /// The house it works for (`None` when not known here: a crashed turn).
    pub house: Option<troupe_runtime::id::HouseId>,
}
