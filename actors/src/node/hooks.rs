//! What the node tells others when a turn ends or a conversation is stopped,
//! and what they write in the transaction that closes a turn.

use std::collections::BTreeSet;
use std::sync::Arc;

use troupe_runtime::id::{ConversationId, DelegationId};
use troupe_runtime::protocol::{ActorKind, Envelope, TurnOutcome};
use troupe_runtime::rusqlite::Transaction;
use troupe_runtime::store::{Store, StoreError};

use crate::bot::BotRecord;
use crate::node::conversation::TurnReport;

/// Told when any turn ends (routines collect their runs' ends this way),
/// including turns resumed after a crash that nobody is waiting on; and
/// asked, inside the transaction that closes a turn, what it writes with it
/// (a delegation records its subagent's end and the parent's report there).
pub trait TurnHook: Send + Sync + 'static {
    /// A turn of `conversation` ended. Runs on the conversation's actor:
    /// spawn anything slow.
    fn turn_finished(&self, turn: &FinishedTurn);

    /// Whether [`TurnHook::closing`] may write for a turn of a conversation
    /// of `kind` (when none may, a close that commits nothing else — the
    /// node keeps nothing — commits nothing).
    fn closes(&self, kind: ActorKind) -> bool {
        let _ = kind;
        false
    }

    /// Writes, in `tx` — the transaction that closes `turn` — what must be
    /// committed with the close, so it happens exactly once whatever
    /// crashes when. Runs on the store's writer thread, maybe more than once
    /// (a batch is run again when one of its jobs fails): it depends only on
    /// the database and what it is given. `None`: nothing to write.
    fn closing(
        &self,
        tx: &Transaction<'_>,
        turn: &ClosingTurn<'_>,
    ) -> Result<Option<Committed>, StoreError> {
        let _ = (tx, turn);
        Ok(None)
    }

    /// `conversation` was told to stop (its running turn is cancelled):
    /// what it started on its own behalf stops too (a delegation's
    /// subagents). Runs on the conversation's actor.
    fn stopped(&self, conversation: ConversationId) {
        let _ = conversation;
    }
}

/// A turn being closed, as [`TurnHook::closing`] sees it.
#[derive(Debug, Clone, Copy)]
pub struct ClosingTurn<'a> {
    /// The conversation.
    pub conversation: ConversationId,
    /// Its kind.
    pub kind: ActorKind,
    /// How the turn ended.
    pub outcome: &'a TurnOutcome,
    /// Its last answer (empty when it gave none).
    pub text: &'a str,
}

/// What a hook committed with a turn's close, to act on once it is durable.
#[derive(Default)]
pub struct Committed {
    /// The envelopes it enqueued: routed once the close committed (only a
    /// wake-up: what stays pending is delivered by the post office).
    pub enqueued: Vec<Envelope>,
    /// What to do in this process once the close committed (hand a report
    /// to whoever waits for it here).
    pub then: Option<Box<dyn FnOnce() + Send>>,
}

impl std::fmt::Debug for Committed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Committed")
            .field("enqueued", &self.enqueued.len())
            .field("then", &self.then.is_some())
            .finish()
    }
}

/// The hooks' share of one conversation's turn closes: carried into the
/// store job that closes a turn, it asks every hook what to write there.
#[derive(Clone)]
pub struct Closing {
    hooks: Arc<[Arc<dyn TurnHook>]>,
    store: Store,
    conversation: ConversationId,
    kind: ActorKind,
}

impl std::fmt::Debug for Closing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Closing")
            .field("conversation", &self.conversation)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

impl Closing {
    pub(crate) fn new(
        hooks: Arc<[Arc<dyn TurnHook>]>,
        store: Store,
        conversation: ConversationId,
        kind: ActorKind,
    ) -> Self {
        Self {
            hooks,
            store,
            conversation,
            kind,
        }
    }

    /// Runs every hook's [`TurnHook::closing`] in `tx`.
    pub(crate) fn write(
        &self,
        tx: &Transaction<'_>,
        outcome: &TurnOutcome,
        text: &str,
    ) -> Result<Vec<Committed>, StoreError> {
        let turn = ClosingTurn {
            conversation: self.conversation,
            kind: self.kind,
            outcome,
            text,
        };
        let mut committed = Vec::new();
        for hook in self.hooks.iter().filter(|h| h.closes(self.kind)) {
            committed.extend(hook.closing(tx, &turn)?);
        }
        Ok(committed)
    }

    /// Commits the hooks' writes alone: when the conversation keeps
    /// nothing (durability off), there is no close to commit them with.
    pub(crate) async fn commit_alone(
        &self,
        outcome: TurnOutcome,
        text: String,
    ) -> Result<Vec<Committed>, StoreError> {
        if !self.hooks.iter().any(|h| h.closes(self.kind)) {
            return Ok(Vec::new());
        }
        let this = self.clone();
        self.store
            .write(move |tx| this.write(tx, &outcome, &text))
            .await
    }
}

/// Acts on what the hooks committed with a close: routes what they
/// enqueued and runs what they do once it is durable.
pub(crate) fn settle(committed: Vec<Committed>, node: &crate::node::Node) {
    for committed in committed {
        for envelope in committed.enqueued {
            let node = node.clone();
            tokio::spawn(async move {
                if let Err(e) = node.route(envelope).await {
                    tracing::warn!(error = %e, "a committed message could not be routed; it waits in the mailbox");
                }
            });
        }
        if let Some(then) = committed.then {
            then();
        }
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
    /// not known here: a turn closed after its supervisor gave up).
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
