//! `list_sandboxes`: the house's environments.

use schemars::JsonSchema;
use serde::Deserialize;
use troupe_macros::tool;
use troupe_runtime::environment::Environments;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::ToolContext;

use crate::house::in_thread;

/// Arguments of `list_sandboxes`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    /// Stopped environments too.
    pub include_dead: Option<bool>,
    /// At most this many (default 20, at most 100).
    pub limit: Option<usize>,
}

/// List this house's sandbox environments, newest first: status (active, idle, stopped), age,
/// and the threads bound to each. `include_dead` adds stopped ones; `limit` at most 100
/// (default 20).
#[tool(read_only, offered = in_thread)]
pub async fn list_sandboxes(p: ListParams, ctx: &ToolContext) -> Result<ToolResult, ToolResult> {
    let envs = Environments::of(ctx)?;
    Ok(envs
        .0
        .list_sandboxes(ctx, p.include_dead.unwrap_or(false), p.limit.unwrap_or(20))
        .await)
}
