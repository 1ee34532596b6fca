//! `update_self`: rewrites the calling bot's own record.

use schemars::JsonSchema;
use serde::Deserialize;
use troupe_macros::tool;
use troupe_runtime::house::{Houses, SelfUpdate};
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::ToolContext;

use super::may_update_self;

/// Arguments of `update_self`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateSelfParams {
    /// Your new display name.
    pub name: Option<String>,
    /// Your new one-line description.
    pub description: Option<String>,
    /// Your new standing instructions (replace the old ones).
    pub system_prompt: Option<String>,
}

/// Rewrite your own record: display `name`, one-line `description`, and `system_prompt` (your
/// standing instructions, applied from your next turn). Your handle stays.
#[tool(offered = may_update_self)]
pub async fn update_self(p: UpdateSelfParams, ctx: &ToolContext) -> Result<ToolResult, ToolResult> {
    let houses = Houses::of(ctx)?;
    if p.name.is_none() && p.description.is_none() && p.system_prompt.is_none() {
        return Err(ToolResult::error(
            "nothing to change: give `name`, `description` or `system_prompt`.",
        ));
    }
    let update = SelfUpdate {
        name: p.name,
        description: p.description,
        system_prompt: p.system_prompt,
    };
    Ok(houses.0.update_self(ctx, update).await)
}
