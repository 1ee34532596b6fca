//! The node's [`EnvironmentServices`]: what `create_environment`,
//! `list_sandboxes` and a house turn's `run_command` do, scoped to the
//! house and thread of the calling conversation's [`Seat`].

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use troupe_runtime::environment::{EnvironmentInfo, EnvironmentServices};
use troupe_runtime::house::Seat;
use troupe_runtime::id::{EnvironmentId, ThreadId};
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::store::house as house_table;
use troupe_runtime::tool::ToolContext;

use super::api::EnvironmentsRef;
use crate::node::{Node, WeakNode};

/// The desk where the environment tools are served, within the caller's
/// house and thread: the node's [`EnvironmentServices`].
pub struct EnvironmentDesk {
    node: WeakNode,
}

impl EnvironmentDesk {
    /// The services of `node`.
    pub fn new(node: &Node) -> Arc<Self> {
        Arc::new(Self {
            node: node.downgrade(),
        })
    }

    async fn scope(&self, ctx: &ToolContext) -> Result<(EnvironmentsRef, Seat), ToolResult> {
        let node = self
            .node
            .upgrade()
            .ok_or_else(|| ToolResult::error("the node is shutting down."))?;
        let seat = Seat::of(ctx).ok_or_else(|| {
            ToolResult::error(
                "this conversation is not in a house thread; environments belong to house threads.",
            )
        })?;
        let name = node
            .store()
            .read(move |c| house_table::house(c, seat.house))
            .await
            .map_err(|e| ToolResult::error(e.to_string()))?
            .ok_or_else(|| ToolResult::error("this conversation's house is gone."))?
            .name;
        let house = node
            .house(&name)
            .await
            .map_err(|e| ToolResult::error(e.to_string()))?;
        Ok((house.environments(), seat))
    }
}

/// What a result says of an environment.
fn describe(info: &EnvironmentInfo) -> serde_json::Value {
    json!({
        "id": info.id.to_string(),
        "status": info.status.as_str(),
        "sandboxed": info.sandboxed,
        "created_at": info.created_at.to_rfc3339(),
        "last_used": info.last_used.to_rfc3339(),
        "threads": info.threads.iter().map(ThreadId::to_string).collect::<Vec<_>>(),
        "lost_commands": info.lost_commands,
    })
}

fn age(info: &EnvironmentInfo) -> String {
    let secs = (chrono::Utc::now() - info.created_at).num_seconds().max(0);
    match secs {
        s if s < 120 => format!("{s} s"),
        s if s < 7200 => format!("{} min", s / 60),
        s if s < 172_800 => format!("{} h", s / 3600),
        s => format!("{} days", s / 86_400),
    }
}

#[async_trait::async_trait]
impl EnvironmentServices for EnvironmentDesk {
    fn bound(&self, thread: ThreadId) -> Option<EnvironmentId> {
        self.node.upgrade()?.environments().bound(thread)
    }

    async fn create_environment(&self, ctx: &ToolContext) -> ToolResult {
        let (envs, seat) = match self.scope(ctx).await {
            Ok(s) => s,
            Err(e) => return e,
        };
        match envs.create(Some(seat.thread)).await {
            Ok(made) => {
                let info = &made.info;
                let verb = if made.reused { "Reused" } else { "Created" };
                let how = if info.sandboxed {
                    "sandboxed: no network, only its workdir /workspace is writable"
                } else {
                    "UNSANDBOXED (the house allows it and no sandbox works here)"
                };
                ToolResult::ok_with(
                    format!(
                        "{verb} environment {} and bound it to this thread ({how}). run_command now \
                         runs there, in /workspace, which persists between commands.",
                        info.id
                    ),
                    json!({"environment": describe(info), "reused": made.reused}),
                )
            }
            Err(e) => ToolResult::error(format!("create_environment failed: {e}")),
        }
    }

    async fn list_sandboxes(
        &self,
        ctx: &ToolContext,
        include_dead: bool,
        limit: usize,
    ) -> ToolResult {
        let (envs, seat) = match self.scope(ctx).await {
            Ok(s) => s,
            Err(e) => return e,
        };
        let list = match envs.list(include_dead, limit.clamp(1, 100)).await {
            Ok(l) => l,
            Err(e) => return ToolResult::error(e.to_string()),
        };
        if list.is_empty() {
            return ToolResult::ok_with(
                "This house has no environments. create_environment makes one for this thread.",
                json!({"sandboxes": []}),
            );
        }
        let mut text = String::new();
        for info in &list {
            let threads = if info.threads.is_empty() {
                "no thread".to_string()
            } else {
                info.threads
                    .iter()
                    .map(|t| {
                        if *t == seat.thread {
                            format!("{t} (this thread)")
                        } else {
                            t.to_string()
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            text.push_str(&format!(
                "- {} · {}{} · age {} · bound to {}{}\n",
                info.id,
                info.status.as_str(),
                if info.sandboxed {
                    ""
                } else {
                    " · UNSANDBOXED"
                },
                age(info),
                threads,
                if info.lost_commands > 0 {
                    format!(" · {} command(s) lost in a crash", info.lost_commands)
                } else {
                    String::new()
                }
            ));
        }
        ToolResult::ok_with(
            text.trim_end().to_string(),
            json!({"sandboxes": list.iter().map(describe).collect::<Vec<_>>()}),
        )
    }

    async fn run_command(
        &self,
        ctx: &ToolContext,
        command: &str,
        timeout: Option<Duration>,
    ) -> ToolResult {
        let Some(node) = self.node.upgrade() else {
            return ToolResult::error("the node is shutting down.");
        };
        let Some(seat) = Seat::of(ctx) else {
            return ToolResult::error("this conversation is not in a house thread.");
        };
        let Some(env) = node.environments().bound(seat.thread) else {
            return ToolResult::ok_with(
                "This thread has no environment yet, so the command did not run. In a house, \
                 run_command runs in the thread's environment (a sandbox), never on the host: \
                 call create_environment first, then run the command again.",
                json!({"ran": false, "where": "nowhere", "guidance": "create_environment"}),
            );
        };
        match super::api::run(&node, env, command, timeout).await {
            Ok(outcome) => {
                let place = if outcome.sandboxed {
                    format!("environment {env} (sandboxed)")
                } else {
                    format!("environment {env} (UNSANDBOXED)")
                };
                let mut text = if outcome.output.is_empty() {
                    "(no output)\n".to_string()
                } else {
                    outcome.output.clone()
                };
                if !text.ends_with('\n') {
                    text.push('\n');
                }
                text.push_str(&format!("{} · ran in {place}", outcome.ending));
                let data = json!({
                    "where": "environment",
                    "environment": env.to_string(),
                    "sandbox": if outcome.sandboxed { "environment" } else { "unsandboxed" },
                    "exit_code": outcome.exit_code,
                    "ending": outcome.ending,
                    "output_bytes": outcome.output_bytes,
                    "millis": outcome.millis,
                });
                if outcome.success() {
                    ToolResult::ok_with(text, data)
                } else {
                    ToolResult::error_with(text, data)
                }
            }
            Err(e) => ToolResult::error_with(
                format!("{e} (environment {env})"),
                json!({"where": "environment", "environment": env.to_string()}),
            ),
        }
    }
}
