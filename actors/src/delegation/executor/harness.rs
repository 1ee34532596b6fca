//! The adapter between the Executor actor and one outside harness.
//!
//! The actor (`actor.rs`) owns a harness process from launch to its
//! recorded end and knows nothing of any harness's words; a [`Harness`]
//! knows nothing of actors. It says how its process is started (command
//! line, environment, config files written before it starts, how it
//! reaches troupe's model relay), how a task, a steer and a stop are
//! written to it, and what each line of its output means for the
//! delegation record ([`Event`]). A harness is either long-lived (it takes
//! the task, steers and stops on its input: pi's RPC mode, Claude Code's
//! stream-json) or one-shot (the task on its command line, stopped by a
//! signal, continued by a new process on its session: Codex).
//!
//! Adding a harness is one file implementing [`Harness`], named in [`of`]
//! (and its npm package in `troupe_runtime::executors::HARNESSES`).

use std::path::{Path, PathBuf};

use troupe_runtime::model::Api;

/// What one line of a harness's output means for troupe.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A tool call started: the tool and what it works on.
    ToolStarted(String),
    /// A tool call ended: the tool and what it returned, bounded.
    ToolEnded(String),
    /// Something worth a note in the record: `kind` is the record's.
    Record {
        /// The record's kind.
        kind: &'static str,
        /// Its text, bounded.
        text: String,
    },
    /// An assistant message ended: its text (maybe empty) and the tokens
    /// its call used.
    Assistant {
        /// Its text.
        text: String,
        /// Input plus output tokens.
        tokens: u64,
        /// The harness's stop reason (`stop`, `toolUse`, `aborted`, …).
        stop: String,
        /// The error the harness gives for a failed call or task.
        error: Option<String>,
    },
    /// The agent finished the task (or was aborted).
    AgentEnd,
    /// Where (or under which id) the harness keeps its session.
    Session(String),
    /// What the harness says its model calls cost, in US dollars.
    Cost {
        /// The amount.
        usd: f64,
        /// Whether it is the running total of this process's calls so far
        /// (Claude Code's `total_cost_usd`), rather than one call's own
        /// (pi's `usage.cost.total`).
        running: bool,
    },
    /// The state of the account's plan limits, as the harness reported it.
    RateLimit(super::limit::RateLimit),
    /// A command was refused.
    Refused {
        /// The command.
        command: String,
        /// Why.
        error: String,
    },
    /// Nothing troupe keeps (streaming deltas, turn markers).
    Ignored,
    /// Not one of the harness's records.
    Garbage,
}

/// Everything a harness is started from.
#[derive(Debug, Clone)]
pub struct Setup<'a> {
    /// The instance's own folder (private, writable): config files go here.
    pub dir: &'a Path,
    /// The harness's state shared by its instances (writable): sessions.
    pub sessions: &'a Path,
    /// The folder it works in.
    pub folder: &'a Path,
    /// The relay's address on the loopback (`127.0.0.1:PORT`).
    pub relay: String,
    /// The relay's per-instance secret, sent as the harness's key.
    pub key: &'a str,
    /// The model's id on the relay.
    pub model: &'a str,
    /// The API of the model's provider; `None` when troupe answers it
    /// itself (a script), which the relay does in every wire format.
    pub api: Option<Api>,
    /// Its task.
    pub prompt: &'a str,
    /// The session it continues (`resume`), as its [`Event::Session`] said.
    pub session: Option<&'a str>,
    /// Whether the relay serves its permission prompts (on the machine:
    /// `relay::prompts`), so that a harness that asks before some calls
    /// asks troupe's user there.
    pub prompts: bool,
}

/// How a harness is started.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Start {
    /// The arguments after its program.
    pub args: Vec<String>,
    /// Its variables (besides `PATH`, `HOME` and the locale).
    pub env: Vec<(String, String)>,
    /// Files written before it starts, readable by their owner alone.
    pub files: Vec<(PathBuf, String)>,
    /// Lines written on its input once it runs (a long-lived harness: the
    /// task); a one-shot harness's input is closed.
    pub input: Vec<String>,
}

/// How a running harness is stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stopping {
    /// This line on its input; it ends its task and says so.
    Line(String),
    /// An interrupt to its process group; it exits.
    Interrupt,
}

/// One outside harness, as the Executor actor drives it.
pub trait Harness: Send + Sync + 'static {
    /// Its name (`troupe executors install NAME`).
    fn name(&self) -> &'static str;

    /// Whether it takes steers and stops on its input while it works.
    fn long_lived(&self) -> bool;

    /// Its command line, variables, config files and first input for one
    /// instance; an error says why it cannot run on that model.
    fn start(&self, setup: &Setup<'_>) -> Result<Start, String>;

    /// The line that tells it `message` before its next step, if it takes
    /// one while it works.
    fn steer(&self, message: &str) -> Option<String>;

    /// How it is stopped.
    fn stop(&self) -> Stopping;

    /// What one line of its output means (a line may say several things).
    fn parse(&self, line: &str) -> Vec<Event>;
}

/// The harness called `name`, if troupe drives one.
pub fn of(name: &str) -> Option<&'static dyn Harness> {
    match name {
        "pi" => Some(&super::pi::Pi),
        "claude-code" => Some(&super::claude::ClaudeCode),
        "codex" => Some(&super::codex::Codex),
        _ => None,
    }
}

/// The longest text kept of one event in the record (the whole of it is
/// in the instance's spilled output).
pub const MAX_EVENT_TEXT: usize = 4000;

/// `text` cut to [`MAX_EVENT_TEXT`] characters, saying so.
pub fn bounded(text: &str) -> String {
    match text.char_indices().nth(MAX_EVENT_TEXT) {
        None => text.to_string(),
        Some((cut, _)) => format!(
            "{}… [cut; the whole is in the instance's output file]",
            &text[..cut]
        ),
    }
}

/// The text parts of a content list (or a plain string).
pub fn text_of(content: &serde_json::Value) -> String {
    use serde_json::Value;
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter(|p| matches!(p["type"].as_str(), Some("text" | "output_text")))
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// `value` on one line, bounded.
pub fn compact(value: &serde_json::Value) -> String {
    bounded(&value.to_string())
}

/// A model the harness cannot call through the relay: which API it
/// speaks, which the model's provider speaks, what to do.
pub fn wrong_api(harness: &str, speaks: &str, api: Api) -> String {
    let theirs = match api {
        Api::Openai => "OpenAI chat completions",
        Api::Anthropic => "Anthropic messages",
    };
    format!(
        "{harness} calls its model in {speaks}, and this model's provider speaks {theirs}; \
         give the delegating bot a model whose provider speaks {speaks} (in models.toml), \
         or use another executor"
    )
}
