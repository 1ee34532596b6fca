//! `delegate`: hands tasks to subagents, or to an outside executor.
//!
//! Each task runs as a subagent with a clean context, the parent's model and
//! the parent's tools minus those subagents never get — or, with
//! `executor`, as an instance of an outside coding harness (`pi`) working
//! in the task's `folder`. In a conversation the call returns at once and
//! the summaries come back in one message when the last one ends; in a
//! routine run it waits for them.

use schemars::JsonSchema;
use serde::Deserialize;
use troupe_macros::tool;
use troupe_runtime::agents::{Agents, DelegateRequest, Task};
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::ToolContext;

/// The most tasks one call may hand out.
pub const MAX_TASKS: usize = 10;

/// What to do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Start subagents for `tasks` (the default).
    #[default]
    Spawn,
    /// List this conversation's subagents and their states.
    List,
    /// Send `message` to the running subagent `subagent_id`.
    Steer,
    /// Stop the subagent `subagent_id`.
    Stop,
    /// Continue the ended executor instance `subagent_id` with `message`.
    Resume,
    /// Log the executor account `executor` (`NAME@ACCOUNT`) in with its harness's own login;
    /// only when the user asks for it (they are asked to approve every time).
    Account,
}

/// Arguments of `delegate`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Up to 10 tasks, each a `goal` and the `context` it needs (the subagent knows nothing of this conversation).
    #[serde(default)]
    pub tasks: Vec<Task>,
    /// `spawn` (default), `list`, `steer`, `stop`, `resume` or `account`.
    #[serde(default)]
    pub action: Action,
    /// An outside executor (a coding harness: `pi`, `claude-code`, `codex`) to hand the tasks to
    /// instead of subagents; each task then needs its `folder`. `NAME@ACCOUNT` runs on that
    /// account; `NAME` alone on the folder's account, else the main one. With `resume`: another
    /// account or executor to go on on.
    pub executor: Option<String>,
    /// Target names, in order, where each task goes on when its account reaches its plan's limit
    /// (instead of the executor's own order): another account of the same executor goes on in a
    /// copy of the session, another executor from a handoff packet.
    pub route: Option<Vec<String>>,
    /// The subagent or executor instance to steer, stop or resume.
    pub subagent_id: Option<String>,
    /// The message for `steer` or `resume`.
    pub message: Option<String>,
}

/// Checks the arguments and turns them into a request.
pub fn request(params: Params) -> Result<DelegateRequest, ToolResult> {
    let need_id = |p: &Params| {
        p.subagent_id
            .clone()
            .filter(|s| !s.trim().is_empty())
            .ok_or_else(|| {
                ToolResult::error("this action needs `subagent_id`; `action: list` shows them.")
            })
    };
    match params.action {
        Action::Spawn => {
            if params.tasks.is_empty() {
                return Err(ToolResult::error(
                    "`tasks` is empty: give at least one task with a `goal`.",
                ));
            }
            if params.tasks.len() > MAX_TASKS {
                return Err(ToolResult::error(format!(
                    "{} tasks is more than the {MAX_TASKS} one call may hand out: group them, or delegate in several calls.",
                    params.tasks.len()
                )));
            }
            if let Some(i) = params.tasks.iter().position(|t| t.goal.trim().is_empty()) {
                return Err(ToolResult::error(format!("task {} has no `goal`.", i + 1)));
            }
            let executor = params
                .executor
                .map(|e| e.trim().to_string())
                .filter(|e| !e.is_empty());
            match &executor {
                Some(executor) => {
                    if let Some(i) = params
                        .tasks
                        .iter()
                        .position(|t| t.folder.as_deref().is_none_or(|f| f.trim().is_empty()))
                    {
                        return Err(ToolResult::error(format!(
                            "task {} has no `folder`: with `executor: \"{executor}\"` every task needs the \
                             folder the executor works in (absolute, or relative to the working folder).",
                            i + 1
                        )));
                    }
                }
                None => {
                    if let Some(i) = params.tasks.iter().position(|t| t.folder.is_some()) {
                        return Err(ToolResult::error(format!(
                            "task {} has a `folder`, which only an `executor` uses; subagents work where \
                             you do. Name the `executor`, or drop the folder.",
                            i + 1
                        )));
                    }
                }
            }
            let route = clean_route(params.route);
            if !route.is_empty() && executor.is_none() {
                return Err(ToolResult::error(
                    "`route` says where an executor's task goes on at its account's limit; name \
                     the `executor` too, or drop the route.",
                ));
            }
            Ok(DelegateRequest::Spawn {
                tasks: params.tasks,
                executor,
                route,
            })
        }
        Action::List => Ok(DelegateRequest::List),
        Action::Steer => {
            let subagent_id = need_id(&params)?;
            let message = params
                .message
                .filter(|m| !m.trim().is_empty())
                .ok_or_else(|| ToolResult::error("`action: steer` needs a `message`."))?;
            Ok(DelegateRequest::Steer {
                subagent_id,
                message,
            })
        }
        Action::Account => {
            let target = params
                .executor
                .map(|e| e.trim().to_string())
                .filter(|e| !e.is_empty())
                .ok_or_else(|| {
                    ToolResult::error(
                        "`action: account` needs `executor`: the account to log in, as \
                         NAME@ACCOUNT (`executor_accounts` lists them).",
                    )
                })?;
            Ok(DelegateRequest::Account { target })
        }
        Action::Stop => Ok(DelegateRequest::Stop {
            subagent_id: need_id(&params)?,
        }),
        Action::Resume => {
            let subagent_id = need_id(&params)?;
            let message = params
                .message
                .filter(|m| !m.trim().is_empty())
                .ok_or_else(|| {
                    ToolResult::error(
                        "`action: resume` needs a `message`: what the instance should do next.",
                    )
                })?;
            Ok(DelegateRequest::Resume {
                subagent_id,
                message,
                executor: params
                    .executor
                    .map(|e| e.trim().to_string())
                    .filter(|e| !e.is_empty()),
                route: clean_route(params.route),
            })
        }
    }
}

/// The route's target names, trimmed, the empty ones dropped.
fn clean_route(route: Option<Vec<String>>) -> Vec<String> {
    route
        .unwrap_or_default()
        .into_iter()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .collect()
}

/// Hand tasks to subagents that work in parallel, each with a clean context, your model and
/// your tools (minus memory, ask_user, delegate and messaging). Give each task a standalone
/// `goal` and all the `context` it needs. Up to 10 tasks. In a conversation the call returns at
/// once and the summaries arrive together in one message when the last subagent ends; in a
/// routine run it waits for them. `action`: spawn (default), list, steer, stop, resume, account. With
/// `executor` (e.g. "pi", "claude-code@work", when installed) each task goes to an outside
/// coding agent working in the task's `folder` (required) instead; `route` lists where it goes
/// on when its account reaches its limit (`executor_accounts` shows the accounts); `list` shows
/// every instance on the workbench, and `resume` continues an ended instance's session with
/// `message` (with `executor`: on another account or executor). `account` logs the account
/// `executor` names in (only when the user asks; they approve it and open its login URL).
#[tool]
pub async fn delegate(params: Params, ctx: &ToolContext) -> Result<ToolResult, ToolResult> {
    let request = request(params)?;
    Ok(Agents::of(ctx)?.delegate(ctx, request).await)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: serde_json::Value) -> Result<DelegateRequest, ToolResult> {
        request(serde_json::from_value(v).unwrap())
    }

    #[test]
    fn tasks_are_checked() {
        let eleven: Vec<_> = (0..11).map(|i| json!({"goal": format!("g{i}")})).collect();
        assert!(parse(json!({"tasks": eleven}))
            .unwrap_err()
            .text
            .starts_with("11 tasks is more than the 10"));
        assert_eq!(
            parse(json!({"tasks": []})).unwrap_err().text,
            "`tasks` is empty: give at least one task with a `goal`."
        );
        assert_eq!(
            parse(json!({"tasks": [{"goal": " "}]})).unwrap_err().text,
            "task 1 has no `goal`."
        );
        assert_eq!(
            parse(json!({"tasks": [{"goal": "a", "context": "b"}]})).unwrap(),
            DelegateRequest::Spawn {
                tasks: vec![Task {
                    goal: "a".into(),
                    context: "b".into(),
                    folder: None,
                }],
                executor: None,
                route: Vec::new(),
            }
        );
    }

    #[test]
    fn an_executor_needs_a_folder_for_every_task_and_a_folder_needs_an_executor() {
        assert!(parse(
            json!({"executor": "pi", "tasks": [{"goal": "a", "folder": "/p"}, {"goal": "b"}]})
        )
        .unwrap_err()
        .text
        .starts_with("task 2 has no `folder`"));
        assert!(parse(json!({"tasks": [{"goal": "a", "folder": "/p"}]}))
            .unwrap_err()
            .text
            .contains("only an `executor` uses"));
        assert_eq!(
            parse(json!({"executor": " pi ", "tasks": [{"goal": "a", "folder": "/p"}]})).unwrap(),
            DelegateRequest::Spawn {
                tasks: vec![Task {
                    goal: "a".into(),
                    context: String::new(),
                    folder: Some("/p".into()),
                }],
                executor: Some("pi".into()),
                route: Vec::new(),
            }
        );
        assert!(parse(json!({"action": "resume", "subagent_id": "s"}))
            .unwrap_err()
            .text
            .contains("needs a `message`"));
    }

    #[test]
    fn steer_and_stop_need_their_arguments() {
        assert!(parse(json!({"action": "steer", "subagent_id": "s"}))
            .unwrap_err()
            .text
            .contains("needs a `message`"));
        assert!(parse(json!({"action": "stop"}))
            .unwrap_err()
            .text
            .contains("needs `subagent_id`"));
        assert_eq!(
            parse(json!({"action": "list"})).unwrap(),
            DelegateRequest::List
        );
    }

    #[test]
    fn account_names_the_account_to_log_in() {
        assert!(parse(json!({"action": "account"}))
            .unwrap_err()
            .text
            .contains("needs `executor`"));
        assert_eq!(
            parse(json!({"action": "account", "executor": " claude-code@work "})).unwrap(),
            DelegateRequest::Account {
                target: "claude-code@work".into()
            }
        );
    }
}
