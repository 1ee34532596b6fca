//! What a conversation's `steer` or `stop` reaches: its own subagents and
//! instances, and the user's own executor instances (`troupe workbench
//! start`) once the user approved — asked every time, past the guardian
//! and auto mode, never in an unattended run.

use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::ToolContext;

use super::{executors, find, record, Delegations};
use crate::node::Node;

impl Delegations {
    /// The subagent or instance `id` that a `steer` or `stop` reaches: the
    /// conversation's own, or the user's own executor instance (`troupe
    /// workbench start`) once the user approved — asked every time, past
    /// the guardian and auto mode, and never in an unattended run.
    pub(super) async fn find_or_users(
        &self,
        node: &Node,
        ctx: &ToolContext,
        id: &str,
        action: &str,
        message: Option<&str>,
    ) -> Result<record::SubagentRow, ToolResult> {
        let not_ours = match find(node, ctx, id).await {
            Ok(sub) => return Ok(sub),
            Err(e) => e,
        };
        let key = id.to_string();
        let instance = node
            .store()
            .read(move |c| {
                Ok(record::instances(c, false, usize::MAX)?
                    .into_iter()
                    .find(|i| i.row.id.to_string() == key))
            })
            .await
            .map_err(|e| {
                ToolResult::error(format!("the delegation record could not be read: {e}"))
            })?;
        let Some(instance) = instance else {
            return Err(not_ours);
        };
        if instance.bot != executors::USER {
            return Err(ToolResult::error(format!(
                "{id} is an instance another conversation started (`{}`'s); only that \
                 conversation, or the user, steers or stops it.",
                instance.bot
            )));
        }
        if instance.row.status != "running" {
            return Ok(instance.row);
        }
        let executor = instance.row.executor.clone().unwrap_or_default();
        let reason = format!(
            "`{}` asks to {action} your own {executor} instance {id} (\"{}\" in {}){}; an \
             instance of yours is asked about every time",
            ctx.agent,
            instance.row.goal.lines().next().unwrap_or_default(),
            instance.row.folder,
            message.map(|m| format!(" with: {m}")).unwrap_or_default(),
        );
        let mut arguments = serde_json::json!({"action": action, "subagent_id": id});
        if let Some(m) = message {
            arguments["message"] = m.into();
        }
        let call = troupe_runtime::protocol::ToolCall {
            id: ctx.call_id.clone(),
            name: "delegate".into(),
            arguments,
        };
        let timeout = node.settings().ask_timeout;
        let reply = node
            .questions()
            .ask(ctx, timeout, |request_id| {
                troupe_runtime::protocol::AgentEvent::ApprovalRequested {
                    request_id,
                    call,
                    reason: reason.clone(),
                }
            })
            .await;
        let refused = |how: &str| {
            Err(ToolResult::error(format!(
                "{id} is the user's own instance: to {action} it needs their approval, and {how}; \
                 nothing was sent to it."
            )))
        };
        match reply {
            crate::channel::Reply::Submitted { answer } => {
                match crate::gate::parse_approval(&answer) {
                    Some(troupe_runtime::trust::ApprovalAnswer::Deny) | None => {
                        refused("the user refused")
                    }
                    Some(_) => Ok(instance.row),
                }
            }
            crate::channel::Reply::Cancelled => refused("the request was cancelled"),
            crate::channel::Reply::TimedOut => refused("nobody answered in time"),
            crate::channel::Reply::Undelivered { reason } => {
                refused(&format!("it could not be asked: {reason}"))
            }
        }
    }
}
