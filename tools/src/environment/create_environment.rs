//! `create_environment`: provisions (or reuses) a sandbox and binds it to
//! this thread.

use schemars::JsonSchema;
use serde::Deserialize;
use troupe_macros::tool;
use troupe_runtime::environment::Environments;
use troupe_runtime::house::Seat;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::ToolContext;

/// Arguments of `create_environment`: none.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateParams {}

/// Whether the conversation sits in a house thread that has no environment yet.
fn thread_without_environment(ctx: &ToolContext) -> bool {
    let (Some(seat), Some(envs)) = (Seat::of(ctx), ctx.services.environments()) else {
        return false;
    };
    envs.0.bound(seat.thread).is_none()
}

/// Provision a sandbox environment for this thread (or reuse an unused one of this house) and
/// bind it to the thread. Afterwards run_command runs there: a Linux sandbox with its own
/// persistent workdir /workspace (the only writable place), no network, and limits on memory,
/// processes, CPU time, disk and wall time. Fails with the reason when this machine cannot
/// sandbox commands.
#[tool(offered = thread_without_environment)]
pub async fn create_environment(
    _p: CreateParams,
    ctx: &ToolContext,
) -> Result<ToolResult, ToolResult> {
    Ok(Environments::of(ctx)?.0.create_environment(ctx).await)
}
