//! `create_thread`: a new named thread in the house.

use schemars::JsonSchema;
use serde::Deserialize;
use troupe_macros::tool;
use troupe_runtime::house::Houses;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::ToolContext;

use super::in_thread;

/// Arguments of `create_thread`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateParams {
    /// Its name, unique in the house: letters, digits, `-`, `_`, `.`.
    pub name: String,
    /// Tags (same characters as names).
    pub tags: Option<Vec<String>>,
}

/// Open a new named thread in this house, with you as its first participant; returns its id and a
/// link. `name`: unique in the house, letters, digits, `-`, `_`, `.`; `tags` optional.
#[tool(offered = in_thread)]
pub async fn create_thread(p: CreateParams, ctx: &ToolContext) -> Result<ToolResult, ToolResult> {
    Ok(Houses::of(ctx)?
        .0
        .create_thread(ctx, &p.name, p.tags.unwrap_or_default())
        .await)
}
