//! `list_thread_participants`: who is in a thread.

use schemars::JsonSchema;
use serde::Deserialize;
use troupe_macros::tool;
use troupe_runtime::house::Houses;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::ToolContext;

use super::in_thread;

/// Arguments of `list_thread_participants`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ParticipantsParams {
    /// The thread: its id, name or link; this thread when left out.
    pub thread: Option<String>,
}

/// List who is in a thread — people and bots, with the bots' listen modes. `thread`: an id, name or
/// link (this thread when left out).
#[tool(read_only, offered = in_thread)]
pub async fn list_thread_participants(
    p: ParticipantsParams,
    ctx: &ToolContext,
) -> Result<ToolResult, ToolResult> {
    Ok(Houses::of(ctx)?
        .0
        .list_participants(ctx, p.thread.as_deref())
        .await)
}
