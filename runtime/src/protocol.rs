//! The wire types: everything that crosses an actor or a process boundary.
//!
//! Every type here derives `Serialize`/`Deserialize` and round-trips through
//! JSON (the store, the HTTP API) and MessagePack (`rmp-serde`, between
//! nodes). Actors keep their in-process message enums next to them; what
//! those carry is defined here.

use serde::{Deserialize, Serialize};

use crate::id::{BotId, ConversationId, MsgId, ThreadId};

pub mod depth;
pub mod house;
pub mod wire;

/// One tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id for the call; a tool result answers it by this id.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments, parsed once the call was complete.
    pub arguments: serde_json::Value,
}

/// Whether a tool call succeeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    /// The tool did what it was asked.
    Ok,
    /// The tool refused or failed; `text` says why and what to do.
    Error,
}

/// What a tool returns: a status, readable text for the model, and
/// structured data (or `null`) for programs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// Success or failure; an expected refusal is an error.
    pub status: ToolStatus,
    /// What the model reads.
    pub text: String,
    /// Structured data for the CLI, the server and the Rust API.
    #[serde(default)]
    pub data: serde_json::Value,
}

impl ToolResult {
    /// A successful result with text only.
    pub fn ok(text: impl Into<String>) -> Self {
        Self {
            status: ToolStatus::Ok,
            text: text.into(),
            data: serde_json::Value::Null,
        }
    }

    /// A successful result with text and data.
    pub fn ok_with(text: impl Into<String>, data: serde_json::Value) -> Self {
        Self {
            status: ToolStatus::Ok,
            text: text.into(),
            data,
        }
    }

    /// An error result: the text says what was wrong and what to do.
    pub fn error(text: impl Into<String>) -> Self {
        Self {
            status: ToolStatus::Error,
            text: text.into(),
            data: serde_json::Value::Null,
        }
    }

    /// An error result with data (effects that succeeded before the failure).
    pub fn error_with(text: impl Into<String>, data: serde_json::Value) -> Self {
        Self {
            status: ToolStatus::Error,
            text: text.into(),
            data,
        }
    }

    /// Whether this is an error result.
    pub fn is_error(&self) -> bool {
        self.status == ToolStatus::Error
    }
}

/// One message of a conversation's history, as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// A message from the user (or a peer, a routine, a notice).
    User {
        /// The text.
        content: String,
    },
    /// What the model said, with the tool calls it made.
    Assistant {
        /// The text (may be empty when the model only called tools).
        content: String,
        /// The tool calls, in the order the model made them.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// The result answering one tool call.
    Tool {
        /// The id of the call it answers.
        call_id: String,
        /// The tool's name.
        name: String,
        /// The result.
        result: ToolResult,
    },
}

impl Message {
    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::User {
            content: content.into(),
        }
    }

    /// An assistant message with text only.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::Assistant {
            content: content.into(),
            tool_calls: Vec::new(),
        }
    }

    /// The role as a short word (`user`, `assistant`, `tool`).
    pub fn role(&self) -> &'static str {
        match self {
            Self::User { .. } => "user",
            Self::Assistant { .. } => "assistant",
            Self::Tool { .. } => "tool",
        }
    }

    /// The text a search index or a transcript shows for this message.
    pub fn text(&self) -> &str {
        match self {
            Self::User { content } | Self::Assistant { content, .. } => content,
            Self::Tool { result, .. } => &result.text,
        }
    }

    /// The same text, to change in place (the store keeps it apart from
    /// the rest of the message).
    pub fn text_mut(&mut self) -> &mut String {
        match self {
            Self::User { content } | Self::Assistant { content, .. } => content,
            Self::Tool { result, .. } => &mut result.text,
        }
    }
}

/// Tokens a model call used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Input tokens not read from the cache.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input tokens read from the provider's prompt cache.
    pub cache_read_tokens: u64,
    /// Input tokens written to the provider's prompt cache.
    pub cache_write_tokens: u64,
}

impl Usage {
    /// Adds another call's usage to this one.
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
    }

    /// All tokens, input of every kind plus output.
    pub fn total(&self) -> u64 {
        self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_write_tokens
    }
}

/// The kind of actor a tool runs for; decides which tools it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActorKind {
    /// The main agent's conversation with the user.
    Conversation,
    /// A bot's conversation.
    Bot,
    /// One run of a routine.
    RoutineRun,
    /// A subagent of a delegation.
    Subagent,
}

impl ActorKind {
    /// Every kind, in table order.
    pub const ALL: [ActorKind; 4] = [
        Self::Conversation,
        Self::Bot,
        Self::RoutineRun,
        Self::Subagent,
    ];

    /// The kind's name as stored and printed (`conversation`, `routine_run`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Conversation => "conversation",
            Self::Bot => "bot",
            Self::RoutineRun => "routine_run",
            Self::Subagent => "subagent",
        }
    }

    /// The kind named `name` (as [`ActorKind::as_str`] prints it).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// Whether runs of this kind have no user watching (hard stops on by default).
    pub fn is_unattended(self) -> bool {
        matches!(self, Self::RoutineRun | Self::Subagent)
    }
}

/// The address of anything that can receive a durable message.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", content = "id", rename_all = "snake_case")]
pub enum Address {
    /// A conversation's mailbox.
    Conversation(ConversationId),
    /// A bot's mailbox (delivered into its own main conversation).
    Bot(BotId),
    /// A named singleton (`scheduler`, `node`).
    Service(String),
    /// A house thread's mailbox: its director takes every post.
    Thread(ThreadId),
    /// An actor of a kind a program registered, by its kind and key.
    Actor {
        /// The kind's name, as registered.
        kind: String,
        /// The actor's key within its kind.
        key: String,
    },
}

impl std::fmt::Display for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Conversation(id) => write!(f, "{id}"),
            Self::Bot(id) => write!(f, "{id}"),
            Self::Service(name) => write!(f, "service:{name}"),
            Self::Thread(id) => write!(f, "{id}"),
            Self::Actor { kind, key } => write!(f, "actor:{kind}/{key}"),
        }
    }
}

/// A durable message between agents: committed before it is acknowledged,
/// consumed in the same transaction that applies it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    /// Delivery id and idempotency key.
    pub id: MsgId,
    /// Who sent it.
    pub from: Address,
    /// Who receives it.
    pub to: Address,
    /// What it carries.
    pub body: Payload,
    /// When it was sent (RFC 3339).
    pub sent_at: chrono::DateTime<chrono::Utc>,
}

/// What a durable message carries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Payload {
    /// Text for the receiver's conversation, as a user-role message.
    Text {
        /// Who it is from, as the receiver should read it (`bot:scout`, `user`).
        sender: String,
        /// The text.
        text: String,
        /// Whether the receiver should reply to the sender.
        #[serde(default)]
        expects_reply: bool,
    },
    /// A notice for the receiver (a delegation's results, a routine's report,
    /// a background command's end, a reply from another agent).
    Notice {
        /// What the notice is about (`delegation`, `routine`, `command`, `reply`).
        topic: String,
        /// The text appended to the conversation.
        text: String,
        /// Structured details.
        #[serde(default)]
        data: serde_json::Value,
    },
    /// A message for a house thread: from a person, a bot's turn there, or
    /// a bot's post from another thread.
    Post(house::Post),
    /// A turn a thread's director offers a bot: what it has not seen yet.
    Offer(house::Offer),
    /// Any other structured message, decoded by the receiver.
    Custom {
        /// The message's type name.
        name: String,
        /// Its content.
        data: serde_json::Value,
    },
}

/// Why a model stopped producing output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model finished its answer.
    EndTurn,
    /// The model wants tool results before it goes on.
    ToolUse,
    /// The output hit the token limit.
    MaxTokens,
    /// A stop sequence was produced.
    StopSequence,
    /// The provider paused a long turn; send the conversation back to go on.
    PauseTurn,
    /// The model refused to answer.
    Refusal,
    /// The provider's content filter cut the answer.
    ContentFilter,
    /// A reason this version of troupe does not know, as the provider said it.
    Other(String),
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum TurnOutcome {
    /// The model gave its final answer.
    Finished,
    /// Stopped on request.
    Stopped,
    /// A guard ended the turn (too many model calls, a repeated failing call).
    Guard {
        /// Which guard and why.
        reason: String,
    },
    /// A budget was reached.
    Budget {
        /// The budget's name (`tokens`, `cost`, `tool_calls`, `wall_time`).
        budget: String,
        /// What was spent against the limit.
        detail: String,
    },
    /// The model refused.
    Refused {
        /// What the model said, if anything.
        detail: String,
    },
    /// The provider or the runtime failed.
    Failed {
        /// The error, with what to do.
        error: String,
    },
    /// The conversation's actor kept crashing and its supervisor gave up
    /// past the restart limit; its next message starts it afresh.
    Crashed {
        /// The last failure, and the limit that was passed.
        error: String,
        /// The restarts counted in the limit's window.
        restarts: u32,
    },
}

impl TurnOutcome {
    /// Whether the turn ended normally.
    pub fn is_finished(&self) -> bool {
        matches!(self, Self::Finished)
    }
}

/// What a conversation reports to its subscribers (CLI, server, Rust API).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum AgentEvent {
    /// A turn began.
    TurnStarted {
        /// The conversation.
        conversation: ConversationId,
        /// The turn's number in the conversation, from 1.
        turn: u64,
    },
    /// A piece of the model's text.
    TextDelta {
        /// The text.
        text: String,
    },
    /// The model's whole message of one step, once committed.
    AssistantMessage {
        /// The text.
        text: String,
    },
    /// A tool call began.
    ToolCallStarted {
        /// The call.
        call: ToolCall,
    },
    /// A tool call ended.
    ToolCallFinished {
        /// The call's id.
        call_id: String,
        /// The tool's name.
        name: String,
        /// The result.
        result: ToolResult,
        /// How long it took, in milliseconds.
        elapsed_ms: u64,
    },
    /// The gate asks the user to approve a call.
    ApprovalRequested {
        /// The id to answer with.
        request_id: String,
        /// The call awaiting approval.
        call: ToolCall,
        /// Why the gate asks.
        reason: String,
    },
    /// A tool asks the user questions (`ask_user`).
    QuestionAsked {
        /// The id to answer with.
        request_id: String,
        /// The questions, as the tool's arguments gave them.
        questions: serde_json::Value,
    },
    /// The history was compacted.
    Compacted {
        /// Messages before.
        before: usize,
        /// Messages after.
        after: usize,
    },
    /// The conversation sat idle and its actor stopped (passivated); its
    /// next message brings it back from the store.
    Passivated,
    /// A notice was appended (a delegation's results, a reply from a bot).
    Notice {
        /// What it is about.
        topic: String,
        /// Its text.
        text: String,
    },
    /// The turn ended.
    TurnFinished {
        /// How it ended.
        outcome: TurnOutcome,
        /// The final text, if any.
        text: String,
        /// Tokens this turn used.
        usage: Usage,
        /// What they cost, in US dollars.
        cost_usd: f64,
    },
    /// Something went wrong that did not end the turn.
    Warning {
        /// What happened.
        message: String,
    },
    /// An actor of the supervision tree started.
    ActorStarted {
        /// Its kind (`conversation`, `subagent`, `scheduler`, …).
        kind: String,
        /// Its id.
        id: String,
        /// The actor it hangs under, when there is one.
        parent: Option<String>,
    },
    /// An actor of the supervision tree stopped.
    ActorStopped {
        /// Its kind.
        kind: String,
        /// Its id.
        id: String,
        /// Why (`normal`, `shutdown`, `passivated`, `failed: …`).
        reason: String,
    },
    /// An actor failed and its supervisor started it again.
    ActorRestarted {
        /// Its kind.
        kind: String,
        /// Its id.
        id: String,
        /// The actor it hangs under, when there is one.
        parent: Option<String>,
        /// How often it was restarted in this process.
        restarts: u32,
        /// Why its last incarnation stopped.
        reason: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip<T>(value: &T)
    where
        T: Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
    {
        let json = serde_json::to_string(value).unwrap();
        assert_eq!(
            &serde_json::from_str::<T>(&json).unwrap(),
            value,
            "json: {json}"
        );
        let bytes = rmp_serde::to_vec_named(value).unwrap();
        assert_eq!(
            &rmp_serde::from_slice::<T>(&bytes).unwrap(),
            value,
            "msgpack"
        );
    }

    #[test]
    fn wire_types_round_trip() {
        let call = ToolCall {
            id: "call_1".into(),
            name: "read_file".into(),
            arguments: serde_json::json!({"path": "/tmp/x", "limit": 5}),
        };
        round_trip(&Message::user("hello"));
        round_trip(&Message::Assistant {
            content: String::new(),
            tool_calls: vec![call.clone()],
        });
        round_trip(&Message::Tool {
            call_id: "call_1".into(),
            name: "read_file".into(),
            result: ToolResult::error_with("no such file", serde_json::json!({"path": "/tmp/x"})),
        });
        round_trip(&Envelope {
            id: MsgId::new(),
            from: Address::Bot(BotId::new()),
            to: Address::Conversation(ConversationId::new()),
            body: Payload::Text {
                sender: "bot:scout".into(),
                text: "hi".into(),
                expects_reply: true,
            },
            sent_at: chrono::Utc::now(),
        });
        round_trip(&AgentEvent::ToolCallStarted { call });
        round_trip(&AgentEvent::TurnFinished {
            outcome: TurnOutcome::Budget {
                budget: "tokens".into(),
                detail: "1200/1000".into(),
            },
            text: String::new(),
            usage: Usage {
                input_tokens: 1,
                output_tokens: 2,
                cache_read_tokens: 3,
                cache_write_tokens: 4,
            },
            cost_usd: 0.5,
        });
        round_trip(&StopReason::Other("weird".into()));
        round_trip(&Address::Service("scheduler".into()));
        round_trip(&Address::Actor {
            kind: "desk".into(),
            key: "main".into(),
        });
    }
}
