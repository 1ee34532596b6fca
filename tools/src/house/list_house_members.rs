//! `list_house_members`: people and bots of the house.

use troupe_macros::tool;
use troupe_runtime::house::Houses;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::ToolContext;

use super::{in_thread, NoParams};

/// List everyone in this house — people and bots — with their handles and the bots' listen modes.
#[tool(read_only, offered = in_thread)]
pub async fn list_house_members(_p: NoParams, ctx: &ToolContext) -> Result<ToolResult, ToolResult> {
    Ok(Houses::of(ctx)?.0.list_members(ctx).await)
}
