//! `list_threads`: the house's threads, most recently active first.

use schemars::JsonSchema;
use serde::Deserialize;
use troupe_macros::tool;
use troupe_runtime::house::Houses;
use troupe_runtime::protocol::house::ThreadFilter;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::ToolContext;

use super::in_thread;

/// Arguments of `list_threads`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    /// Only named threads.
    pub named_only: Option<bool>,
    /// Only pinned threads.
    pub pinned_only: Option<bool>,
    /// Only threads you take part in.
    pub mine: Option<bool>,
    /// At most this many (default 20, at most 100).
    pub limit: Option<usize>,
}

/// List this house's threads, most recently active first (pinned on top), with up to 12 participant
/// handles each (+N beyond) and whether you are in each. `named_only`, `pinned_only`, `mine` (only
/// yours) filter; `limit` at most 100 (default 20).
#[tool(read_only, offered = in_thread)]
pub async fn list_threads(p: ListParams, ctx: &ToolContext) -> Result<ToolResult, ToolResult> {
    let filter = ThreadFilter {
        named_only: p.named_only.unwrap_or(false),
        pinned_only: p.pinned_only.unwrap_or(false),
        participant: p.mine.unwrap_or(false).then(String::new),
        include_archived: false,
        limit: p.limit.unwrap_or(20),
    };
    Ok(Houses::of(ctx)?.0.list_threads(ctx, filter).await)
}
