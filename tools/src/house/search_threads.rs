//! `search_threads`: ranked keyword hits across the house's threads.

use schemars::JsonSchema;
use serde::Deserialize;
use troupe_macros::tool;
use troupe_runtime::house::Houses;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::ToolContext;

use super::in_thread;

/// Arguments of `search_threads`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchParams {
    /// Words to find (all must appear; case and accents ignored).
    pub query: String,
    /// At most this many hits (default 10, at most 50).
    pub limit: Option<usize>,
}

/// Search the messages of this house's threads (archived ones too) for words; returns ranked hits
/// with the thread, author and a snippet. `limit` at most 50 (default 10).
#[tool(read_only, offered = in_thread)]
pub async fn search_threads(p: SearchParams, ctx: &ToolContext) -> Result<ToolResult, ToolResult> {
    let houses = Houses::of(ctx)?;
    if p.query.trim().is_empty() {
        return Err(ToolResult::error(
            "the query is empty: give the words to find.",
        ));
    }
    Ok(houses
        .0
        .search_threads(ctx, &p.query, p.limit.unwrap_or(10))
        .await)
}
