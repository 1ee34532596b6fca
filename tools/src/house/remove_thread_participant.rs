//! `remove_thread_participant`: removes a member from a thread.

use troupe_macros::tool;
use troupe_runtime::house::Houses;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::ToolContext;

use super::{in_thread, ParticipantParams};

/// Remove a member from a thread's participants, so it is no longer offered turns there. `thread`:
/// an id, name or link (this thread when left out); `agent`: the member's handle.
#[tool(offered = in_thread)]
pub async fn remove_thread_participant(
    p: ParticipantParams,
    ctx: &ToolContext,
) -> Result<ToolResult, ToolResult> {
    Ok(Houses::of(ctx)?
        .0
        .set_participant(ctx, p.thread.as_deref(), &p.agent, false)
        .await)
}
