//! `bot_create`: makes a bot, a named agent with its own mission, memory,
//! skills, conversation and routines. Only the main agent has it, and it
//! must ask the user first.

use schemars::JsonSchema;
use serde::Deserialize;
use troupe_runtime::agents::{Agents, BotDraft};
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::{parse_args, schema_for, Tool, ToolContext, ToolSpec};

/// Arguments of `bot_create`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Lowercase letters, digits, `-` and `_`.
    pub name: String,
    /// A short title.
    pub title: String,
    /// One line: its role.
    pub description: String,
    /// Its standing rules; composed from the title and description when left out.
    pub mission: Option<String>,
    /// Skills of your library it may load with use_skill, besides its own (by name).
    #[serde(default)]
    pub skills: Vec<String>,
}

/// The `bot_create` tool.
#[derive(Debug)]
pub struct BotCreate {
    spec: ToolSpec,
}

impl Default for BotCreate {
    fn default() -> Self {
        Self::new()
    }
}

impl BotCreate {
    /// The tool.
    pub fn new() -> Self {
        Self {
            spec: ToolSpec::new(
                "bot_create",
                "Create a bot: a named agent with its own mission, memory, skills, conversation and routines. \
                 Ask the user before you create one. `name`: lowercase letters, digits, `-`, `_`.",
                schema_for::<Params>(),
            )
            .deferred(),
        }
    }
}

#[async_trait::async_trait]
impl Tool for BotCreate {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, args: serde_json::Value, ctx: &ToolContext) -> ToolResult {
        let p: Params = match parse_args("bot_create", args) {
            Ok(p) => p,
            Err(e) => return e,
        };
        let draft = BotDraft {
            name: p.name,
            title: p.title,
            description: p.description,
            mission: p.mission,
            skills: p.skills,
        };
        match Agents::of(ctx) {
            Ok(agents) => agents.create_bot(ctx, draft).await,
            Err(e) => e,
        }
    }
}
