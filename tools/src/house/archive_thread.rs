//! `archive_thread`: archives this thread.

use troupe_macros::tool;
use troupe_runtime::house::Houses;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::ToolContext;

use super::{in_thread, NoParams};

/// Archive this thread: it leaves the house's thread list and keeps its history; it can be
/// unarchived.
#[tool(offered = in_thread)]
pub async fn archive_thread(_p: NoParams, ctx: &ToolContext) -> Result<ToolResult, ToolResult> {
    Ok(Houses::of(ctx)?.0.archive_thread(ctx).await)
}
