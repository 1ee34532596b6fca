//! The background review: every few turns of a conversation, a short pass
//! looks back at it and keeps what is worth keeping — a fact about the
//! user, a note, a procedure worth a skill — without the user waiting.
//!
//! A review is a conversation actor of its own, on the reviewed
//! conversation's bot, kind and tools, stored as a `review` child of it. Its
//! system prompt is the bot's, followed by the reviewed history as text; its
//! one turn asks what to keep. Its gate ([`ReviewGate`]) lets through only
//! `use_skill`, `read_file`, `find_files`, `skill_manage` and — when the
//! memory is due, that is when the conversation saved nothing to memory
//! since the last review — `memory`. There a replace or a remove becomes a
//! proposal the user approves ([`troupe_tools::proposals`]). Its model
//! calls are charged and recorded like any other turn's.
//!
//! Reviews run after `[review] every_n_turns` turns of a user-facing
//! conversation (the main agent's or a bot's, not subagents or routine
//! runs), counted in the store so the cadence holds across processes, one
//! at a time per conversation. Nobody answers their questions, so a call
//! that needs approval does not run. An interrupted review is not resumed:
//! the next one comes `every_n_turns` turns later. A runtime that keeps nothing
//! (`durable = false`) does not review.
//!
//! Each review is an actor under the node's `reviewer` supervisor
//! ([`Reviews`]), which owns the set of conversations being reviewed and
//! frees a conversation whatever ends its review, a panic included.

use std::sync::Arc;

use troupe_runtime::id::ConversationId;
use troupe_runtime::protocol::{ActorKind, Message, ToolCall};
use troupe_runtime::rusqlite::{params, Connection};
use troupe_runtime::store::StoreError;
use troupe_runtime::tool::dispatch::{Admission, CallGate};
use troupe_runtime::tool::{ToolContext, ToolSpec};

use crate::node::conversation::history::as_text;
use crate::node::conversation::journal::Journal;
use crate::node::conversation::{Input, TurnReport};
use crate::node::{FinishedTurn, Node, NodeError, Opening, TurnHook};

mod reviewer;

pub use reviewer::{ReviewWork, Reviewer, ReviewerMsg, Reviews, FAULT};

/// What a review's conversation is stored as (its kind in listings).
pub const LABEL: &str = "review";

/// The tools a review may always call.
pub const ALLOWED: [&str; 4] = ["use_skill", "read_file", "find_files", "skill_manage"];

/// The most characters of history a review reads (its tail).
const TRANSCRIPT_CHARS: usize = 24_000;

/// The most characters of one message a review reads.
const MESSAGE_CHARS: usize = 2_000;

/// The turn that asks a review to look back.
pub const REQUEST: &str = "Look back at the conversation above and keep what is worth keeping, then answer in one short line what you kept (or `Nothing to keep.`).";

/// A review's gate: only the review tools, then the node's own gate.
pub struct ReviewGate {
    inner: Arc<dyn CallGate>,
    memory_due: bool,
}

impl ReviewGate {
    /// A gate in front of `inner`; `memory` passes only when `memory_due`.
    pub fn new(inner: Arc<dyn CallGate>, memory_due: bool) -> Self {
        Self { inner, memory_due }
    }

    fn allows(&self, tool: &str) -> bool {
        ALLOWED.contains(&tool) || (self.memory_due && tool == "memory")
    }
}

#[async_trait::async_trait]
impl CallGate for ReviewGate {
    async fn admit(&self, spec: &ToolSpec, call: &ToolCall, ctx: &ToolContext) -> Admission {
        if !self.allows(&spec.name) {
            let mut allowed = ALLOWED.to_vec();
            if self.memory_due {
                allowed.push("memory");
            }
            let why = if spec.name == "memory" {
                " (the memory is not due: the conversation saved to it since the last review)"
            } else {
                ""
            };
            return Admission::Deny(format!(
                "a background review may call only {}; `{}` did not run{why}",
                allowed.join(", "),
                spec.name
            ));
        }
        self.inner.admit(spec, call, ctx).await
    }
}

/// Hands the turns of user-facing conversations to the reviewer.
pub struct ReviewHook {
    node: Node,
    every: u32,
    reviews: Arc<Reviews>,
}

impl ReviewHook {
    /// A hook reviewing every `every` turns (never when 0) through `reviews`.
    pub fn new(node: &Node, every: u32, reviews: Arc<Reviews>) -> Arc<Self> {
        Arc::new(Self {
            node: node.clone(),
            every,
            reviews,
        })
    }
}

impl TurnHook for ReviewHook {
    fn turn_finished(&self, turn: &FinishedTurn) {
        let reviewed = matches!(turn.kind, ActorKind::Conversation | ActorKind::Bot)
            && turn.parent.is_none()
            && self.every > 0
            && self.node.settings().durable;
        if reviewed {
            self.reviews.offer(turn);
        }
    }
}

/// What a conversation did since its last review began (or since it began).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SinceReview {
    /// User messages: turns the user (or a peer) started.
    pub turns: u32,
    /// Whether a `memory` call succeeded.
    pub memory_saved: bool,
}

/// Reads [`SinceReview`] from the store, so the cadence holds across
/// processes (`troupe run` after `troupe run`).
pub fn since_last_review(
    conn: &Connection,
    conversation: ConversationId,
) -> Result<SinceReview, StoreError> {
    let (turns, memory_saved) = conn
        .prepare_cached(
            "WITH last AS (
                SELECT coalesce(max(first), 0) AS seq FROM (
                    SELECT (SELECT min(m.seq) FROM messages m WHERE m.conversation_id = c.id) AS first
                    FROM conversations c WHERE c.parent_id = ?1 AND c.kind = ?2))
             SELECT
                (SELECT count(*) FROM messages
                  WHERE conversation_id = ?1 AND role = 'user' AND seq > (SELECT seq FROM last)),
                EXISTS (SELECT 1 FROM messages
                  WHERE conversation_id = ?1 AND role = 'tool' AND seq > (SELECT seq FROM last)
                    AND json_extract(body, '$.name') = 'memory'
                    AND json_extract(body, '$.result.status') = 'ok')",
        )?
        .query_row(params![conversation.to_string(), LABEL], |r| {
            Ok((r.get::<_, u32>(0)?, r.get::<_, bool>(1)?))
        })?;
    Ok(SinceReview {
        turns,
        memory_saved,
    })
}

/// Runs one review of `turn`'s conversation to its end, its gate in front
/// of the node's `gate`.
pub async fn review(
    node: &Node,
    gate: &Arc<dyn CallGate>,
    turn: &FinishedTurn,
    memory_due: bool,
) -> Result<Option<TurnReport>, NodeError> {
    let history = Journal::new(Some(node.store().clone()), turn.conversation, turn.bot.id)
        .load()
        .await?;
    let transcript = transcript(&history);
    if transcript.is_empty() {
        return Ok(None);
    }
    let id = ConversationId::new();
    node.open(Opening {
        id,
        kind: turn.kind,
        parent: Some(turn.conversation),
        title: format!("review of {}", turn.conversation),
        gate: Some(Arc::new(ReviewGate::new(Arc::clone(gate), memory_due))),
        briefing: briefing(&transcript, memory_due),
        label: Some(LABEL),
        // The next review looks back again: this one is never resumed.
        transient: true,
        fresh: true,
        house: turn.house,
        services: vec![Arc::new(|s: &troupe_runtime::tool::Services| {
            s.propose_removals()
        })],
        ..Opening::new(turn.bot.clone())
    })
    .await?;
    let (events, done) = node.request(id, Input::User(REQUEST.into())).await?;
    // Nobody watches a review: approvals it would need are refused.
    drop(events);
    let report = done.await.ok();
    node.release(id);
    Ok(report)
}

/// What a review is told on top of the bot's own system prompt.
fn briefing(transcript: &str, memory_due: bool) -> String {
    let memory = if memory_due {
        "- Facts about the user (preferences, how they work, their setting) go to `memory` with target `user`; things you will need to know next time go to target `memory`. Add only what is durable and not already in memory above; to change or remove an entry, say so with replace or remove and the user will decide.\n"
    } else {
        "- The memory was updated during this conversation; leave it alone this time.\n"
    };
    format!(
        "# Background review\n\
You are looking back at one of your conversations to keep what will help later. Nobody is waiting for an answer; do not talk to the user.\n\
{memory}\
- A procedure you worked out that will come up again becomes a skill (`skill_manage` create); a skill you used that proved wrong or incomplete gets patched. Load a skill with `use_skill` before patching it.\n\
- Keep nothing when nothing is worth it. Only `use_skill`, `read_file`, `find_files`, `skill_manage`{} work here.\n\n\
# The conversation\n{transcript}",
        if memory_due { " and `memory`" } else { "" }
    )
}

/// The history as text, newest last, within [`TRANSCRIPT_CHARS`].
pub fn transcript(history: &[Message]) -> String {
    let mut lines: Vec<String> = Vec::new();
    let mut size = 0;
    for message in history.iter().rev() {
        let line = as_text(message, Some(MESSAGE_CHARS), MESSAGE_CHARS);
        size += line.len() + 1;
        if size > TRANSCRIPT_CHARS && !lines.is_empty() {
            lines.push("[… earlier messages left out]".into());
            break;
        }
        lines.push(line);
    }
    lines.reverse();
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use troupe_runtime::protocol::ToolResult;

    #[test]
    fn a_transcript_keeps_the_newest_messages_within_its_size() {
        let mut history = vec![Message::user("first"), Message::assistant("hello")];
        for i in 0..40 {
            history.push(Message::user(format!("{i} {}", "x".repeat(3_000))));
        }
        history.push(Message::Tool {
            call_id: "c".into(),
            name: "read_file".into(),
            result: ToolResult::ok("the file"),
        });
        let text = transcript(&history);
        assert!(text.len() <= TRANSCRIPT_CHARS + 100, "{}", text.len());
        assert!(text.starts_with("[… earlier messages left out]"));
        assert!(text.ends_with("[read_file result] the file"));
        assert!(!text.contains("[user] first"));
        assert!(text.contains("x […]"), "long messages are clipped");
    }

    #[test]
    fn memory_is_offered_only_when_due() {
        let due = ReviewGate::new(Arc::new(troupe_runtime::tool::dispatch::OpenGate), true);
        let not_due = ReviewGate::new(Arc::new(troupe_runtime::tool::dispatch::OpenGate), false);
        assert!(due.allows("memory") && due.allows("skill_manage"));
        assert!(!not_due.allows("memory") && not_due.allows("read_file"));
        assert!(!due.allows("run_command") && !due.allows("write_file"));
    }
}
