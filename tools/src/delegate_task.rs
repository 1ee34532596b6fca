//! `delegate_task`: hands a coding task to the pi coding agent, inside the
//! thread's environment.
//!
//! Offered every turn in a house thread. pi works in the environment's
//! sandbox (`/workspace`, its network only the model relay and the house's
//! egress list); a child thread is opened, linked from this one, where its
//! progress is posted as it works, and its result is posted back here when
//! it ends. The bot's turn ends at once. Without an environment the call
//! does nothing and says how to make one, like `run_command`.

use schemars::JsonSchema;
use serde::Deserialize;
use troupe_macros::tool;
use troupe_runtime::agents::Agents;
use troupe_runtime::environment::TaskRequest;
use troupe_runtime::house::Seat;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::ToolContext;

/// Arguments of `delegate_task`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// The task, complete: pi knows nothing of this thread.
    pub task: String,
    /// A git repository to clone into the workspace first (through the house's egress list).
    pub repo: Option<String>,
    /// Continue the thread's most recent pi session instead of starting a new one.
    #[serde(default)]
    pub continue_recent: bool,
    /// Continue this pi session (its id, or a unique part of it).
    #[serde(rename = "continue")]
    pub continue_session: Option<String>,
}

/// Checks the arguments and turns them into a request.
pub fn request(params: Params) -> Result<TaskRequest, ToolResult> {
    if params.task.trim().is_empty() {
        return Err(ToolResult::error(
            "`task` is empty: say what pi should do, with all it needs to know.",
        ));
    }
    let continue_session = params
        .continue_session
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty());
    if params.continue_recent && continue_session.is_some() {
        return Err(ToolResult::error(
            "give `continue_recent` or `continue`, not both.",
        ));
    }
    Ok(TaskRequest {
        task: params.task,
        repo: params
            .repo
            .map(|r| r.trim().to_string())
            .filter(|r| !r.is_empty()),
        continue_recent: params.continue_recent,
        continue_session,
    })
}

/// Whether the conversation sits in a house thread whose node runs environments.
fn in_thread_with_environments(ctx: &ToolContext) -> bool {
    Seat::of(ctx).is_some() && ctx.services.environments().is_some()
}

/// Launch the pi coding agent on this thread's environment (/workspace) for a coding task it
/// works on by itself: reading, editing and writing files, running commands. A child thread
/// is opened where its progress is posted as it works, and its result comes back to this
/// thread when it ends; your turn ends at once. `repo` clones a git repository first;
/// `continue_recent` continues the thread's latest pi session, `continue` a named one. Needs
/// the thread's environment (create_environment).
#[tool(offered = in_thread_with_environments)]
pub async fn delegate_task(params: Params, ctx: &ToolContext) -> Result<ToolResult, ToolResult> {
    let task = request(params)?;
    Ok(Agents::of(ctx)?.delegate_task(ctx, task).await)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: serde_json::Value) -> Result<TaskRequest, ToolResult> {
        request(serde_json::from_value(v).unwrap())
    }

    #[test]
    fn a_task_is_required_and_one_way_to_continue() {
        assert!(parse(json!({"task": " "}))
            .unwrap_err()
            .text
            .contains("`task` is empty"));
        assert!(
            parse(json!({"task": "t", "continue_recent": true, "continue": "abc"}))
                .unwrap_err()
                .text
                .contains("not both")
        );
        assert_eq!(
            parse(json!({"task": "t", "repo": " file:///r ", "continue": "abc"})).unwrap(),
            TaskRequest {
                task: "t".into(),
                repo: Some("file:///r".into()),
                continue_recent: false,
                continue_session: Some("abc".into()),
            }
        );
        assert!(serde_json::from_value::<Params>(json!({"task": "t", "executor": "pi"})).is_err());
    }
}
