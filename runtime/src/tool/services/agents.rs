//! The handle through which tools reach other agents.
//!
//! `delegate`, `message_agent`, `bot_create`, `ask_user` and
//! `cronjob_manage` act on actors, which live above the tools in the
//! dependency order. The tools check their arguments and hand the request to
//! the [`AgentServices`] the node sets, once, in its
//! [`super::NodeServices`]; the actors implement it. Defined here, beside
//! the tool context that holds it, so the context names it without a loop
//! between modules; [`crate::agents`] names it too.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::protocol::ToolResult;
use crate::tool::ToolContext;

/// One task for a subagent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Task {
    /// What the subagent must achieve, as a standalone instruction.
    pub goal: String,
    /// Everything it needs to know: it sees nothing of this conversation.
    #[serde(default)]
    pub context: String,
    /// Where an outside executor works on it (required with `executor`):
    /// absolute, or relative to the working folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folder: Option<String>,
}

/// What `delegate` asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum DelegateRequest {
    /// Start subagents.
    Spawn {
        /// Their tasks.
        tasks: Vec<Task>,
        /// The outside executor (a coding harness such as `pi`) that takes
        /// the tasks instead of subagents.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        executor: Option<String>,
        /// Target names, in order, where each task goes on when its
        /// account reaches its limit (empty: the executor's own order).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        route: Vec<String>,
    },
    /// Continue a stopped or ended executor instance in the same harness
    /// session — or, with `executor`, on another account (a copy of the
    /// session) or harness (a handoff packet).
    Resume {
        /// The instance.
        subagent_id: String,
        /// What to tell it.
        message: String,
        /// Another account or harness to go on on.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        executor: Option<String>,
        /// Its route from then on.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        route: Vec<String>,
    },
    /// List this conversation's subagents.
    List,
    /// Add a message to a running subagent.
    Steer {
        /// The subagent.
        subagent_id: String,
        /// The message.
        message: String,
    },
    /// Stop a subagent.
    Stop {
        /// The subagent.
        subagent_id: String,
    },
    /// Log an executor's account in (`NAME@ACCOUNT`) with its harness's
    /// own login, once the user approved.
    Account {
        /// The account's target name.
        target: String,
    },
}

/// A bot to create.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BotDraft {
    /// Its name.
    pub name: String,
    /// Its title.
    pub title: String,
    /// One line: its role.
    pub description: String,
    /// Its standing rules, if given.
    pub mission: Option<String>,
    /// Library skills it may load with `use_skill`, by name.
    #[serde(default)]
    pub skills: Vec<String>,
}

/// What `cronjob_manage` asks for, as the tool parsed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoutineRequest {
    /// `create`, `list`, `update`, `pause`, `resume`, `remove` or `run`.
    pub action: String,
    /// The routine's id or name.
    pub job_id: Option<String>,
    /// Its name.
    pub name: Option<String>,
    /// Its prompt.
    pub prompt: Option<String>,
    /// Its schedule.
    pub schedule: Option<String>,
}

/// What the actors do for tools.
#[async_trait::async_trait]
pub trait AgentServices: Send + Sync + 'static {
    /// Runs a `delegate` request.
    async fn delegate(&self, ctx: &ToolContext, request: DelegateRequest) -> ToolResult;
    /// Runs `delegate_task`: an outside coding agent on the house thread's
    /// environment.
    async fn delegate_task(
        &self,
        ctx: &ToolContext,
        task: super::environments::TaskRequest,
    ) -> ToolResult;
    /// Sends a message to another agent of the home.
    async fn message_agent(&self, ctx: &ToolContext, target: &str, message: &str) -> ToolResult;
    /// Creates a bot.
    async fn create_bot(&self, ctx: &ToolContext, draft: BotDraft) -> ToolResult;
    /// Asks the user questions and waits for the answer.
    async fn ask_user(&self, ctx: &ToolContext, questions: serde_json::Value) -> ToolResult;
    /// Manages routines.
    async fn routines(&self, ctx: &ToolContext, request: RoutineRequest) -> ToolResult;
}

/// The node's [`AgentServices`], as tools find them in their services.
#[derive(Clone)]
pub struct Agents(pub Arc<dyn AgentServices>);

impl std::fmt::Debug for Agents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Agents")
    }
}

impl Agents {
    /// The agents of `ctx`, or the error result a tool returns when it runs
    /// outside a node.
    pub fn of(ctx: &ToolContext) -> Result<Arc<dyn AgentServices>, ToolResult> {
        ctx.services.agents().ok_or_else(|| {
            ToolResult::error("this tool needs a running troupe node; it is not available here.")
        })
    }
}
