//! Tools: the `Tool` trait, tool specs and flags, and what a call is given.
//!
//! A tool is one file in `troupe-tools`: its params type (from which its JSON
//! schema is derived with [`schema_for`]), its description, its flags, whether
//! it is always on or deferred, and its handler: an async function made a
//! tool by `#[troupe::tool]` or [`FnTool::from_fn`] ([`func`]), the way a
//! Rust program writes its own. The registry
//! ([`registry`]) keeps tools in one stable order, because a provider's
//! prompt cache holds only while the tool list's bytes do not change; the
//! dispatch point ([`dispatch`]) is the one place calls are validated, timed,
//! isolated from panics and run concurrently when read-only.

pub mod catalog;
pub mod dispatch;
pub mod func;
pub mod ledger;
pub mod registry;
mod schema;
pub mod scoped;
pub mod services;
pub mod spill;
pub mod untrusted;
pub mod validate;

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::home::Home;
use crate::id::{BotId, ConversationId};
use crate::protocol::{ActorKind, ToolResult};

pub use func::{Carry, FnTool, IntoToolResult, Json};
pub use schema::Schema;
pub use services::Services;

/// What a tool is, as the registry and the model see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The name the model calls it by.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// The JSON schema of its arguments, keys sorted (shared: every
    /// conversation's tool list points at the same schema; a params type's
    /// is derived when first read, see [`Schema`]).
    pub parameters: Schema,
    /// How the loop treats it.
    pub flags: ToolFlags,
    /// Whether every model call carries it or it waits behind `tool_search`.
    pub exposure: Exposure,
    /// Where it comes from: `builtin`, or `mcp:<server>`.
    pub source: String,
    /// How long one call may run before it is cut off (default: the
    /// dispatcher's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
    /// What the trust gate judges in a call of this tool.
    #[serde(default)]
    pub gate: GateSubject,
    /// Other names its top-level arguments are accepted under. The
    /// dispatcher renames them before the schema check, so an alias the
    /// description promises works whatever the schema lists.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<ArgumentAlias>,
}

/// An argument's other name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArgumentAlias {
    /// The other name.
    pub alias: String,
    /// The argument (as the schema names it) it stands for.
    pub argument: String,
}

/// What the trust gate looks at in a call, named by the argument holding it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "argument", rename_all = "snake_case")]
pub enum GateSubject {
    /// Only the deny list and the tool's own checks apply.
    #[default]
    Call,
    /// A shell command in the named string argument (with `cwd` if given).
    Command(String),
    /// A path the call writes, in the named string argument.
    WritePath(String),
    /// A tool of a source the user does not trust (an MCP server marked
    /// `"trust": "untrusted"`): every call is asked, in every mode.
    Untrusted(String),
}

impl ToolSpec {
    /// A built-in, always-on tool with no flags.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: impl Into<Schema>,
    ) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            parameters: parameters.into(),
            flags: ToolFlags::default(),
            exposure: Exposure::AlwaysOn,
            source: "builtin".into(),
            timeout_secs: None,
            gate: GateSubject::Call,
            aliases: Vec::new(),
        }
    }

    /// Accepts `alias` for the top-level argument `argument`.
    pub fn alias(mut self, alias: impl Into<String>, argument: impl Into<String>) -> Self {
        self.aliases.push(ArgumentAlias {
            alias: alias.into(),
            argument: argument.into(),
        });
        self
    }

    /// Marks it read-only: it runs alongside the step's other read-only calls.
    pub fn read_only(mut self) -> Self {
        self.flags.read_only = true;
        self
    }

    /// Marks it failure-tolerant: repeated failures warn, never halt.
    pub fn failure_tolerant(mut self) -> Self {
        self.flags.failure_tolerant = true;
        self
    }

    /// Marks it carried: what it holds comes back after compaction.
    pub fn carried(mut self) -> Self {
        self.flags.carried = true;
        self
    }

    /// Marks it as paging its own output: never spilled.
    pub fn pages_own_output(mut self) -> Self {
        self.flags.pages_own_output = true;
        self
    }

    /// Makes it deferred: listed by name, loaded by `tool_search`.
    pub fn deferred(mut self) -> Self {
        self.exposure = Exposure::Deferred;
        self
    }

    /// Sets its own timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout_secs = Some(timeout.as_secs().max(1));
        self
    }

    /// Names what the gate judges in a call.
    pub fn gated_by(mut self, subject: GateSubject) -> Self {
        self.gate = subject;
        self
    }

    /// What the model receives for this tool.
    pub fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: self.name.clone(),
            description: self.description.clone(),
            parameters: self.parameters.clone(),
        }
    }
}

/// The part of a spec that is sent to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// The tool's name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// Its JSON schema (the spec's, shared).
    pub parameters: Schema,
}

/// Characters per token in troupe's token estimates: the usual rule of
/// thumb for English text and JSON with the GPT and Claude tokenizers (it
/// over-counts code and under-counts other scripts).
pub const CHARS_PER_TOKEN: u64 = 4;

/// An estimate of the tokens of `text`: its characters over
/// [`CHARS_PER_TOKEN`], rounded up.
pub fn estimate_tokens(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(CHARS_PER_TOKEN)
}

impl ToolDefinition {
    /// An estimate of what this definition costs in every model call it is
    /// sent with: the tokens of its JSON as the OpenAI-compatible client
    /// sends it (`{"type": "function", "function": {name, description,
    /// parameters}}`; Anthropic's form is a few characters shorter).
    pub fn estimated_tokens(&self) -> u64 {
        let sent = serde_json::json!({
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": sort_keys((*self.parameters).clone()),
            }
        });
        estimate_tokens(&sent.to_string())
    }
}

/// How the turn loop treats a tool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolFlags {
    /// Runs alongside the step's other read-only calls; run again after a crash.
    pub read_only: bool,
    /// Failing again with other arguments is diagnosis: guards warn, never halt.
    pub failure_tolerant: bool,
    /// What it holds comes back after a compaction.
    pub carried: bool,
    /// Pages its own output, so an oversized result is never spilled.
    pub pages_own_output: bool,
    /// May destroy or overwrite what it touches (an MCP tool's
    /// `destructiveHint`); shown to the user, never to the model.
    #[serde(default)]
    pub destructive: bool,
}

/// Whether a tool is in every model call or waits behind `tool_search`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Exposure {
    /// In every model call.
    AlwaysOn,
    /// Listed by name; loaded into the conversation by `tool_search`.
    Deferred,
}

/// Everything a tool call is given besides its arguments.
#[derive(Clone)]
pub struct ToolContext {
    /// The troupe home.
    pub home: Home,
    /// The working folder relative paths resolve against.
    pub cwd: PathBuf,
    /// The user's own home folder: what `~` and `$HOME` mean in a path, for
    /// the gate and the file tools alike ([`crate::trust::path`]).
    pub user_home: PathBuf,
    /// The agent's name: [`crate::home::MAIN_AGENT`] or a bot's name.
    pub agent: String,
    /// The agent's bot id.
    pub bot: BotId,
    /// The conversation the call belongs to.
    pub conversation: ConversationId,
    /// The kind of actor making the call.
    pub kind: ActorKind,
    /// The call's id.
    pub call_id: String,
    /// The model's context window in tokens (tools size their lists by it).
    pub context_window: u64,
    /// Cancelled when the turn is stopped; long tools watch it.
    pub cancel: CancellationToken,
    /// Services the actors provide (store, channels, per-conversation state).
    pub services: Services,
}

impl std::fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolContext")
            .field("agent", &self.agent)
            .field("conversation", &self.conversation)
            .field("kind", &self.kind)
            .field("call_id", &self.call_id)
            .finish_non_exhaustive()
    }
}

impl ToolContext {
    /// A context for tests and one-off calls: a fresh conversation of the
    /// main agent in `home`, working in `cwd`. The user's home is the
    /// folder holding `home` (as for the default `~/.troupe`), never the
    /// process's `$HOME`, so a test's `~` stays in its temp folder.
    pub fn standalone(home: Home, cwd: PathBuf) -> Self {
        let user_home = home
            .root()
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(home.root())
            .to_path_buf();
        Self {
            home,
            cwd,
            user_home,
            agent: crate::home::MAIN_AGENT.to_string(),
            bot: BotId::new(),
            conversation: ConversationId::new(),
            kind: ActorKind::Conversation,
            call_id: "call_standalone".into(),
            context_window: 128_000,
            cancel: CancellationToken::new(),
            services: Services::default(),
        }
    }

    /// Resolves a path argument against the working folder.
    pub fn resolve(&self, path: &str) -> PathBuf {
        let p = PathBuf::from(path);
        if p.is_absolute() {
            p
        } else {
            self.cwd.join(p)
        }
    }
}

/// A tool the agents can call.
#[async_trait::async_trait]
pub trait Tool: Send + Sync + 'static {
    /// Its spec; the same value on every call.
    fn spec(&self) -> &ToolSpec;

    /// Runs one call. Expected refusals are [`ToolResult::error`], never a
    /// panic; the dispatcher has already checked that `args` is an object.
    async fn call(&self, args: serde_json::Value, ctx: &ToolContext) -> ToolResult;

    /// The spec this conversation sees, or `None` when the tool is not on
    /// offer to it (`use_skill` with no skill to load). Tools whose
    /// description depends on the agent's files override this.
    fn available(&self, _ctx: &ToolContext) -> Option<ToolSpec> {
        Some(self.spec().clone())
    }

    /// Whether [`Tool::available`] may answer anything but `Some` of
    /// [`Tool::spec`]. When it cannot, the toolsets and the dispatcher use
    /// the spec itself, uncopied, and never call `available`. A tool that
    /// overrides `available` keeps the default (`true`); a tool that does
    /// not may say `false`.
    fn offer_varies(&self) -> bool {
        true
    }

    /// The spec this conversation sees (see [`Tool::available`]), borrowed
    /// from the tool when it cannot vary ([`Tool::offer_varies`]).
    fn offered(&self, ctx: &ToolContext) -> Option<std::borrow::Cow<'_, ToolSpec>> {
        if self.offer_varies() {
            self.available(ctx).map(std::borrow::Cow::Owned)
        } else {
            Some(std::borrow::Cow::Borrowed(self.spec()))
        }
    }

    /// For carried tools: the text that comes back after a compaction (the
    /// open plan items, the skills in use); `None` when nothing is held.
    fn carried(&self, _ctx: &ToolContext) -> Option<String> {
        None
    }

    /// For carried tools whose state must outlive a compaction exactly: the
    /// arguments and result of a call of this tool that re-reads what it
    /// holds. A compaction appends that call and its result to the history
    /// it keeps (stored in the same commit), so the state is in the history
    /// itself and a new process rebuilds it with [`Tool::restore`]; its
    /// [`Tool::carried`] text is then left out of the summary.
    fn carried_call(&self, _ctx: &ToolContext) -> Option<(serde_json::Value, ToolResult)> {
        None
    }

    /// For carried tools: rebuilds the held state from this tool's latest
    /// result when a conversation is resumed from the store.
    fn restore(&self, _ctx: &ToolContext, _args: &serde_json::Value, _result: &ToolResult) {}
}

/// The JSON schema of a params type, as troupe sends it: no `$schema` or
/// `title` noise, `additionalProperties: false` on every object, keys sorted
/// so the bytes never change between runs.
pub fn schema_for<T: schemars::JsonSchema>() -> serde_json::Value {
    let settings = schemars::generate::SchemaSettings::draft07().with(|s| {
        s.inline_subschemas = true;
    });
    let schema = settings.into_generator().into_root_schema_for::<T>();
    // The schema's own value: its keys are sorted below, so serializing it
    // in schemars' keyword order first (most of the cost) buys nothing.
    let mut value = schema.to_value();
    if let Some(obj) = value.as_object_mut() {
        obj.remove("$schema");
        obj.remove("title");
        obj.remove("definitions");
        obj.remove("$defs");
    }
    normalize_schema(&mut value);
    sort_keys(value)
}

fn normalize_schema(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            if map.get("format").is_some_and(serde_json::Value::is_string) {
                map.remove("format");
            }
            if map.contains_key("properties") {
                map.insert(
                    "additionalProperties".into(),
                    serde_json::Value::Bool(false),
                );
            }
            for v in map.values_mut() {
                normalize_schema(v);
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(normalize_schema),
        _ => {}
    }
}

/// Returns `value` with every object's keys in sorted order.
pub fn sort_keys(value: serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(map) => {
            let mut entries: Vec<_> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            serde_json::Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, sort_keys(v)))
                    .collect(),
            )
        }
        serde_json::Value::Array(items) => {
            serde_json::Value::Array(items.into_iter().map(sort_keys).collect())
        }
        other => other,
    }
}

/// Parses a call's arguments into its params type, or an error result that
/// says what was wrong, for the model to correct.
pub fn parse_args<T: serde::de::DeserializeOwned>(
    tool: &str,
    args: serde_json::Value,
) -> Result<T, ToolResult> {
    serde_json::from_value(args).map_err(|e| {
        ToolResult::error(format!(
            "invalid arguments for `{tool}`: {e}. Call it again with arguments that match its schema."
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize, schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Params {
        /// The file.
        path: String,
        /// The first line.
        offset: Option<u64>,
        nested: Option<Inner>,
    }

    #[derive(Deserialize, schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Inner {
        z: bool,
        a: bool,
    }

    #[test]
    fn schemas_are_closed_and_sorted() {
        let schema = schema_for::<Params>();
        let text = serde_json::to_string(&schema).unwrap();
        assert!(!text.contains("$schema"));
        assert_eq!(schema["additionalProperties"], false);
        assert_eq!(
            schema["properties"]["nested"]["additionalProperties"], false,
            "{text}"
        );
        let keys: Vec<_> = schema.as_object().unwrap().keys().cloned().collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted);
        assert_eq!(
            text,
            serde_json::to_string(&schema_for::<Params>()).unwrap(),
            "stable bytes"
        );
    }

    #[test]
    fn bad_arguments_say_what_was_wrong() {
        let err = parse_args::<Params>("read_file", serde_json::json!({"offset": 3}))
            .err()
            .unwrap();
        assert!(err.is_error());
        assert!(err.text.contains("missing field `path`"), "{}", err.text);
    }
}
