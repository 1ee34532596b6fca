//! The environment tools: `create_environment` and `list_sandboxes`. (A
//! house turn's `run_command` runs on the thread's environment too: see
//! [`crate::run_command`].)
//!
//! Offered to a conversation in a house thread (its services hold a
//! [`Seat`]); `create_environment` only while the thread has no
//! environment. Each hands the request to the node's
//! [`Environments`], which scopes it to the caller's house and thread.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use troupe_runtime::environment::Environments;
use troupe_runtime::house::Seat;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::{parse_args, schema_for, Tool, ToolContext, ToolSpec};

/// Arguments of `create_environment`: none.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateParams {}

/// `create_environment`: provisions (or reuses) a sandbox and binds it to
/// this thread.
#[derive(Debug)]
pub struct CreateEnvironment {
    spec: ToolSpec,
}

impl Default for CreateEnvironment {
    fn default() -> Self {
        Self::new()
    }
}

impl CreateEnvironment {
    /// The tool.
    pub fn new() -> Self {
        Self {
            spec: ToolSpec::new(
                "create_environment",
                "Provision a sandbox environment for this thread (or reuse an unused one of this \
                 house) and bind it to the thread. Afterwards run_command runs there: a Linux \
                 sandbox with its own persistent workdir /workspace (the only writable place), \
                 no network, and limits on memory, processes, CPU time, disk and wall time. \
                 Fails with the reason when this machine cannot sandbox commands.",
                schema_for::<CreateParams>(),
            ),
        }
    }
}

#[async_trait::async_trait]
impl Tool for CreateEnvironment {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn available(&self, ctx: &ToolContext) -> Option<ToolSpec> {
        let seat = Seat::of(ctx)?;
        let envs = ctx.services.get::<Environments>()?;
        envs.0
            .bound(seat.thread)
            .is_none()
            .then(|| self.spec.clone())
    }

    async fn call(&self, args: serde_json::Value, ctx: &ToolContext) -> ToolResult {
        if let Err(e) = parse_args::<CreateParams>("create_environment", args) {
            return e;
        }
        match Environments::of(ctx) {
            Ok(envs) => envs.0.create_environment(ctx).await,
            Err(e) => e,
        }
    }
}

/// Arguments of `list_sandboxes`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    /// Stopped environments too.
    pub include_dead: Option<bool>,
    /// At most this many (default 20, at most 100).
    pub limit: Option<usize>,
}

/// `list_sandboxes`: the house's environments.
#[derive(Debug)]
pub struct ListSandboxes {
    spec: ToolSpec,
}

impl Default for ListSandboxes {
    fn default() -> Self {
        Self::new()
    }
}

impl ListSandboxes {
    /// The tool.
    pub fn new() -> Self {
        Self {
            spec: ToolSpec::new(
                "list_sandboxes",
                "List this house's sandbox environments, newest first: status (active, idle, \
                 stopped), age, and the threads bound to each. `include_dead` adds stopped ones; \
                 `limit` at most 100 (default 20).",
                schema_for::<ListParams>(),
            )
            .read_only(),
        }
    }
}

#[async_trait::async_trait]
impl Tool for ListSandboxes {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn available(&self, ctx: &ToolContext) -> Option<ToolSpec> {
        Seat::of(ctx).map(|_| self.spec.clone())
    }

    async fn call(&self, args: serde_json::Value, ctx: &ToolContext) -> ToolResult {
        let p: ListParams = match parse_args("list_sandboxes", args) {
            Ok(p) => p,
            Err(e) => return e,
        };
        match Environments::of(ctx) {
            Ok(envs) => {
                envs.0
                    .list_sandboxes(ctx, p.include_dead.unwrap_or(false), p.limit.unwrap_or(20))
                    .await
            }
            Err(e) => e,
        }
    }
}

/// Both tools, in the table's order.
pub fn all() -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(CreateEnvironment::new()),
        Arc::new(ListSandboxes::new()),
        Arc::new(crate::delegate_task::DelegateTask::new()),
    ]
}
