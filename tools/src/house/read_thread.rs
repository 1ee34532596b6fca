//! `read_thread`: a thread's messages verbatim, oldest first, with no model call.

use schemars::JsonSchema;
use serde::Deserialize;
use troupe_macros::tool;
use troupe_runtime::house::Houses;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::ToolContext;

use super::in_thread;

/// Arguments of `read_thread`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadParams {
    /// The thread: its id, name or link; this thread when left out.
    #[serde(rename = "ref")]
    pub reference: Option<String>,
    /// Skip this many of the newest messages (to page back).
    pub offset: Option<usize>,
    /// At most this many messages (default 30, at most 200).
    pub limit: Option<usize>,
}

/// Show a thread's recent messages verbatim, oldest first, with who wrote each. `ref`: a thread id,
/// name or link (this thread when left out); `offset` skips the newest N to page back; `limit` at
/// most 200 (default 30). Makes no model call. You already see your own thread's new messages; use
/// this for another thread or to page back.
#[tool(read_only, offered = in_thread)]
pub async fn read_thread(p: ReadParams, ctx: &ToolContext) -> Result<ToolResult, ToolResult> {
    Ok(Houses::of(ctx)?
        .0
        .read_thread(ctx, p.reference.as_deref(), p.offset, p.limit)
        .await)
}
