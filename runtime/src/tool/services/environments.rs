//! The handle through which the environment tools reach the node's
//! sandbox actors.
//!
//! Set once by the node in its [`super::NodeServices`]; defined here,
//! beside the tool context that holds it, so the context names it without
//! a loop between modules; [`crate::environment`] names it too.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::id::{EnvironmentId, ThreadId};
use crate::protocol::ToolResult;
use crate::tool::ToolContext;

/// What the environment tools ask of the node (it puts one into every
/// conversation's services).
#[async_trait::async_trait]
pub trait EnvironmentServices: Send + Sync {
    /// The environment bound to `thread`, from memory (what tools are
    /// offered depends on it).
    fn bound(&self, thread: ThreadId) -> Option<EnvironmentId>;
    /// `create_environment`.
    async fn create_environment(&self, ctx: &ToolContext) -> ToolResult;
    /// `list_sandboxes`.
    async fn list_sandboxes(
        &self,
        ctx: &ToolContext,
        include_dead: bool,
        limit: usize,
    ) -> ToolResult;
    /// `run_command` in a house turn: on the thread's environment.
    async fn run_command(
        &self,
        ctx: &ToolContext,
        command: &str,
        timeout: Option<Duration>,
    ) -> ToolResult;
}

/// What `delegate_task` asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskRequest {
    /// The task, as the coding agent is to read it.
    pub task: String,
    /// A git repository to clone into the workspace first.
    pub repo: Option<String>,
    /// Continue the thread's latest session of the coding agent.
    pub continue_recent: bool,
    /// Continue this session (its id, or a unique part of it).
    pub continue_session: Option<String>,
}

/// The node's [`EnvironmentServices`], as tools find it in their services.
#[derive(Clone)]
pub struct Environments(pub Arc<dyn EnvironmentServices>);

impl Environments {
    /// The environment services of `ctx`, or the error result a tool
    /// returns where there are none.
    pub fn of(ctx: &ToolContext) -> Result<Arc<Environments>, ToolResult> {
        ctx.services.environments().ok_or_else(|| {
            ToolResult::error("environments are not available here; they belong to house threads.")
        })
    }
}
