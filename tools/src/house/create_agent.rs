//! `create_agent`: a new bot, made a member of this house.

use schemars::JsonSchema;
use serde::Deserialize;
use troupe_macros::tool;
use troupe_runtime::house::{AgentDraft, Houses};
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::ToolContext;

use super::in_thread;

/// Arguments of `create_agent`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateAgentParams {
    /// Its name and handle: lowercase letters, digits, `-`, `_`.
    pub name: String,
    /// One line: its role.
    pub description: Option<String>,
    /// Its standing instructions.
    pub system_prompt: Option<String>,
    /// Its model (`provider:model`); the home's default when left out.
    pub model: Option<String>,
    /// When it is offered turns: `all`, `mentions` (default) or `off`.
    pub trigger: Option<String>,
}

/// Create a new bot and add it to this house as a member. `name`: lowercase letters, digits, `-`,
/// `_`; `trigger`: when it is offered turns — `all`, `mentions` (default) or `off`.
#[tool(offered = in_thread)]
pub async fn create_agent(
    p: CreateAgentParams,
    ctx: &ToolContext,
) -> Result<ToolResult, ToolResult> {
    let draft = AgentDraft {
        name: p.name,
        description: p.description,
        system_prompt: p.system_prompt,
        model: p.model,
        trigger: p.trigger,
    };
    Ok(Houses::of(ctx)?.0.create_agent(ctx, draft).await)
}
