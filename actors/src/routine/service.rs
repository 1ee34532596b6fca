//! The `cronjob_manage` backend, until the scheduler lands.

use troupe_runtime::agents::RoutineRequest;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::ToolContext;

use crate::node::Node;

/// Manages routines for `ctx`'s agent.
pub async fn manage(_node: &Node, _ctx: &ToolContext, request: RoutineRequest) -> ToolResult {
    ToolResult::error(format!(
        "routines cannot be managed on this node yet (`{}`)",
        request.action
    ))
}
