//! Model providers: one trait with one required streaming method.
//!
//! A provider turns a [`ModelRequest`] into a stream of [`ModelEvent`]s. The
//! clients here speak OpenAI-compatible chat completions and Anthropic
//! messages over SSE, and a scripted provider serves canned turns from a JSON
//! file for tests, demos and users' own bot tests. Tool-call arguments are
//! assembled from their fragments and parsed only once complete.
//!
//! A spec (`openai:MODEL`, `anthropic:MODEL`, `ollama:MODEL`, `script:PATH`
//! or a name from `models.toml`) becomes a ready provider with [`resolve`].
//! Retries, timeouts and the per-endpoint concurrency cap are shared by both
//! HTTP clients ([`retry`], [`limit`], [`http`]).

mod answer;
pub mod anthropic;
pub mod http;
pub mod limit;
pub mod openai;
pub mod retry;
pub mod scripted;
pub mod spec;
pub mod sse;
mod unavailable;
pub mod vision;

#[cfg(test)]
mod testkit;

use std::pin::Pin;
use std::sync::Arc;

use futures::Stream;
use serde::{Deserialize, Serialize};

use crate::protocol::{Message, StopReason, ToolCall, Usage};
use crate::tool::ToolDefinition;

pub use anthropic::AnthropicClient;
pub use http::HttpOptions;
pub use limit::{ConcurrencyLimit, ConcurrencyLimits};
pub use openai::OpenAiClient;
pub use retry::{RetryPolicy, Timeouts};
pub use scripted::{Fault, ScriptedCall, ScriptedProvider, Turn, KEPT_REQUESTS};
pub use spec::{
    endpoint, resolve, resolve_with, Api, ModelDef, ModelEndpoint, ModelsConfig, Pricing,
    ResolveOptions, ResolvedModel, Spend,
};

/// One call to a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    /// The provider's model id.
    pub model: String,
    /// The system prompt: mission, frozen memory snapshot, skills index
    /// (shared by the conversation's requests, and by conversations whose
    /// prompts are the same).
    pub system: Arc<str>,
    /// The history, oldest first.
    /// Shared with the conversation that made the request: building a
    /// request never copies the history.
    pub messages: Arc<Vec<Message>>,
    /// The tools, in the registry's stable order (shared by the
    /// conversations that have the same tools).
    pub tools: Arc<Vec<ToolDefinition>>,
    /// The most output tokens to produce.
    pub max_tokens: Option<u32>,
    /// Sampling temperature, if set.
    pub temperature: Option<f32>,
}

impl ModelRequest {
    /// The text of the first user message (a subagent's task, a routine's prompt).
    pub fn first_user_text(&self) -> &str {
        self.messages.iter().find_map(user_text).unwrap_or_default()
    }

    /// The text of the latest user message.
    pub fn last_user_text(&self) -> &str {
        self.messages
            .iter()
            .rev()
            .find_map(user_text)
            .unwrap_or_default()
    }

    /// The tool and result the history ends with, when it ends with one.
    pub fn last_tool_result(&self) -> Option<(&str, &crate::protocol::ToolResult)> {
        match self.messages.last() {
            Some(Message::Tool { name, result, .. }) => Some((name.as_str(), result)),
            _ => None,
        }
    }
}

fn user_text(message: &Message) -> Option<&str> {
    match message {
        Message::User { content } => Some(content.as_str()),
        _ => None,
    }
}

/// What a provider streams back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ModelEvent {
    /// A piece of text.
    TextDelta {
        /// The text.
        text: String,
    },
    /// A tool call began.
    ToolCallStarted {
        /// Its position among this response's calls.
        index: usize,
        /// The provider's call id.
        id: String,
        /// The tool's name.
        name: String,
    },
    /// A fragment of a call's JSON arguments.
    ToolCallDelta {
        /// The call's position.
        index: usize,
        /// The fragment.
        fragment: String,
    },
    /// A tool call is complete, its arguments parsed.
    ToolCallCompleted {
        /// The position.
        index: usize,
        /// The call.
        call: ToolCall,
    },
    /// Tokens used so far by this response (the latest figure replaces the earlier).
    Usage {
        /// The usage.
        usage: Usage,
    },
    /// The response ended.
    Stop {
        /// Why.
        reason: StopReason,
    },
}

/// A stream of model events; an error ends it.
pub type ModelStream = Pin<Box<dyn Stream<Item = Result<ModelEvent, ModelError>> + Send>>;

/// A model provider.
#[async_trait::async_trait]
pub trait Provider: Send + Sync + 'static {
    /// A short name for logs and errors (`openai`, `anthropic`, `script`).
    fn name(&self) -> &str;

    /// Starts one call and streams its events.
    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError>;

    /// Whether the model accepts images.
    fn sees_images(&self) -> bool {
        false
    }

    /// The model's context window in tokens.
    fn context_window(&self) -> u64 {
        128_000
    }

    /// The provider that answers the agent (bot) `agent`, when this one
    /// answers each agent on its own (a script with per-bot turns);
    /// `None` when every agent shares this one.
    fn for_agent(&self, agent: &str) -> Option<std::sync::Arc<dyn Provider>> {
        let _ = agent;
        None
    }

    /// The provider answering the model calls of outside harness
    /// `executor` (a script's `executors` section), which reach troupe
    /// through its model relay; `None` when this one answers them itself.
    fn for_executor(&self, executor: &str) -> Option<std::sync::Arc<dyn Provider>> {
        let _ = executor;
        None
    }
}

/// Why a model call failed. Every variant carries the provider's own message.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    /// The key is missing or was refused; says which variable to set.
    #[error("{provider}: authentication failed ({message}); check {key_var}")]
    Auth {
        /// The provider.
        provider: String,
        /// What it said.
        message: String,
        /// The environment variable holding the key.
        key_var: String,
    },
    /// Rate limited and retries were exhausted.
    #[error("{provider}: rate limited after {attempts} attempts: {message}")]
    RateLimited {
        /// The provider.
        provider: String,
        /// What it said.
        message: String,
        /// Attempts made.
        attempts: u32,
    },
    /// The account's quota is used up; retrying will not help.
    #[error("{provider}: quota exhausted: {message}")]
    QuotaExhausted {
        /// The provider.
        provider: String,
        /// What it said.
        message: String,
    },
    /// The provider answered with an HTTP error.
    #[error("{provider}: HTTP {status}: {message}")]
    Http {
        /// The provider.
        provider: String,
        /// The status code.
        status: u16,
        /// What it said.
        message: String,
    },
    /// The provider sent an error event in the stream.
    #[error("{provider}: {kind}: {message}")]
    Api {
        /// The provider.
        provider: String,
        /// The error's type as the provider names it.
        kind: String,
        /// What it said.
        message: String,
    },
    /// A connect, first-byte or between-chunk timeout.
    #[error("{provider}: timed out {phase} after {secs} s")]
    Timeout {
        /// The provider.
        provider: String,
        /// `connecting`, `waiting for the first byte`, `between chunks`.
        phase: String,
        /// The limit that passed.
        secs: u64,
    },
    /// The connection failed or broke.
    #[error("{provider}: connection failed: {message}")]
    Connection {
        /// The provider.
        provider: String,
        /// What failed.
        message: String,
    },
    /// The answer is not the protocol: a wrong content type, an HTML page,
    /// a line that is not JSON, a call whose arguments do not parse. Waiting
    /// does not change what a server sends, so it is not retried.
    #[error(
        "{provider}: protocol error (the server answered, but not in the API's format): {message}"
    )]
    Malformed {
        /// The provider.
        provider: String,
        /// What was wrong.
        message: String,
    },
    /// The model spec or its settings are wrong.
    #[error("model configuration: {0}")]
    Config(String),
    /// A scripted model ran out of turns or a turn's expectation failed.
    #[error("script: {0}")]
    Script(String),
}

/// What kind of failure a [`ModelError`] is; each kind has its own retry rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// The connection: refused, reset, timed out, or the answer cut short.
    /// Retried while nothing of the answer has been passed on.
    Transport,
    /// The server answered with an error status. Retried for 408, 409, 429,
    /// 5xx and 529 (or as `x-should-retry` says); never for a refused key or
    /// an exhausted quota.
    Status,
    /// The server answered 200 but not in the API's format (an HTML page, a
    /// line that is not JSON). Never retried.
    Protocol,
    /// The API reported an error inside a successful answer (an `error`
    /// event or object). Retried only for overload and server faults, and
    /// only while nothing has been passed on.
    Content,
    /// Our own settings or script. Never retried.
    Setup,
}

impl ModelError {
    /// The error's class.
    pub fn class(&self) -> ErrorClass {
        match self {
            Self::Connection { .. } | Self::Timeout { .. } => ErrorClass::Transport,
            Self::Auth { .. }
            | Self::RateLimited { .. }
            | Self::QuotaExhausted { .. }
            | Self::Http { .. } => ErrorClass::Status,
            Self::Malformed { .. } => ErrorClass::Protocol,
            Self::Api { .. } => ErrorClass::Content,
            Self::Config(_) | Self::Script(_) => ErrorClass::Setup,
        }
    }

    /// Whether a fresh attempt may succeed where this one failed, for errors
    /// met after the status line (status errors are decided by
    /// [`retry::decide`], which also sees the headers).
    pub fn retryable(&self) -> bool {
        match self {
            Self::Connection { .. } | Self::Timeout { .. } => true,
            Self::Api { kind, .. } => matches!(
                kind.as_str(),
                "overloaded_error" | "api_error" | "server_error" | "overloaded" | "503" | "502"
            ),
            Self::Http { status, .. } => matches!(status, 408 | 409 | 429 | 500..=599),
            Self::RateLimited { .. } => true,
            Self::Auth { .. }
            | Self::QuotaExhausted { .. }
            | Self::Malformed { .. }
            | Self::Config(_)
            | Self::Script(_) => false,
        }
    }
}
