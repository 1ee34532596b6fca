//! `bot_create`: makes a bot, a named agent with its own mission, memory,
//! skills, conversation and routines. Only the main agent has it, and it
//! must ask the user first.

use schemars::JsonSchema;
use serde::Deserialize;
use troupe_macros::tool;
use troupe_runtime::agents::{Agents, BotDraft};
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::ToolContext;

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

/// Create a bot: a named agent with its own mission, memory, skills, conversation and
/// routines. Ask the user before you create one. `name`: lowercase letters, digits, `-`, `_`.
#[tool(deferred)]
pub async fn bot_create(p: Params, ctx: &ToolContext) -> Result<ToolResult, ToolResult> {
    let draft = BotDraft {
        name: p.name,
        title: p.title,
        description: p.description,
        mission: p.mission,
        skills: p.skills,
    };
    Ok(Agents::of(ctx)?.create_bot(ctx, draft).await)
}
