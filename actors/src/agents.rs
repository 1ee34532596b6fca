//! What the actors do for tools: the node's implementation of
//! [`AgentServices`], behind `delegate`, `message_agent`, `bot_create`,
//! `ask_user` and `cronjob_manage`.

use std::sync::{Arc, Weak};
use std::time::Duration;

use troupe_runtime::agents::{AgentServices, BotDraft, DelegateRequest, RoutineRequest};
use troupe_runtime::protocol::{AgentEvent, ToolResult};
use troupe_runtime::tool::ToolContext;

use crate::bot::BotSpec;
use crate::channel::Reply;
use crate::delegation::Delegations;
use crate::messaging::LoopGuard;
use crate::node::{Node, WeakNode};

/// The desk where the agent tools (`delegate`, `message_agent`, `bot_create`,
/// `ask_user`, `cronjob_manage`) are served: the node's [`AgentServices`].
pub struct AgentDesk {
    node: WeakNode,
    delegations: Weak<Delegations>,
    loops: LoopGuard,
    /// How long `ask_user` waits for an answer.
    ask_timeout: Duration,
}

impl AgentDesk {
    /// The services of `node`, delegating through `delegations`.
    pub(crate) fn new(node: &Node, delegations: Weak<Delegations>) -> Arc<Self> {
        let s = node.settings();
        Arc::new(Self {
            node: node.downgrade(),
            delegations,
            loops: LoopGuard::new(s.loop_max_exchanges, s.loop_window, s.loop_cooldown),
            ask_timeout: s.ask_timeout,
        })
    }

    fn node(&self) -> Result<Node, ToolResult> {
        self.node
            .upgrade()
            .ok_or_else(|| ToolResult::error("the node is shutting down."))
    }
}

#[async_trait::async_trait]
impl AgentServices for AgentDesk {
    async fn delegate_task(
        &self,
        ctx: &ToolContext,
        task: troupe_runtime::environment::TaskRequest,
    ) -> ToolResult {
        match self.node() {
            Ok(node) => crate::delegation::executor::house::delegate_task(&node, ctx, task).await,
            Err(e) => e,
        }
    }

    async fn delegate(&self, ctx: &ToolContext, request: DelegateRequest) -> ToolResult {
        match self.delegations.upgrade() {
            Some(delegations) => delegations.handle(ctx, request).await,
            None => ToolResult::error("the node is shutting down."),
        }
    }

    async fn message_agent(&self, ctx: &ToolContext, target: &str, message: &str) -> ToolResult {
        match self.node() {
            Ok(node) => crate::messaging::send(&node, &self.loops, ctx, target, message).await,
            Err(e) => e,
        }
    }

    async fn create_bot(&self, _ctx: &ToolContext, draft: BotDraft) -> ToolResult {
        let node = match self.node() {
            Ok(n) => n,
            Err(e) => return e,
        };
        let spec = BotSpec {
            name: draft.name.trim().to_string(),
            title: draft.title.trim().to_string(),
            description: draft.description.trim().to_string(),
            mission: draft.mission.unwrap_or_default(),
            skills: draft.skills,
            ..BotSpec::default()
        };
        match node.create_bot(spec).await {
            Ok(bot) => ToolResult::ok_with(
                format!(
                    "Created the bot `{}` ({}). It has its own memory, skills and conversation; message it with message_agent.",
                    bot.spec.name, bot.spec.title
                ),
                serde_json::json!({"bot_id": bot.id.to_string(), "name": bot.spec.name}),
            ),
            Err(e) => ToolResult::error(e.to_string()),
        }
    }

    async fn ask_user(&self, ctx: &ToolContext, questions: serde_json::Value) -> ToolResult {
        let node = match self.node() {
            Ok(n) => n,
            Err(e) => return e,
        };
        let asked = questions.clone();
        let reply = node
            .questions()
            .ask(ctx, self.ask_timeout, |request_id| {
                AgentEvent::QuestionAsked {
                    request_id,
                    questions: asked,
                }
            })
            .await;
        let data = serde_json::to_value(&reply).unwrap_or_default();
        match reply {
            Reply::Submitted { answer } => {
                ToolResult::ok_with(format!("The user answered:\n{answer}"), data)
            }
            Reply::Cancelled => {
                ToolResult::error_with("The user cancelled the questions without answering.", data)
            }
            Reply::TimedOut => ToolResult::error_with(
                "The user did not answer in time; go on with your best judgement or ask later.",
                data,
            ),
            Reply::Undelivered { reason } => ToolResult::error_with(
                format!("The questions could not be delivered: {reason}."),
                data,
            ),
        }
    }

    async fn routines(&self, ctx: &ToolContext, request: RoutineRequest) -> ToolResult {
        match self.node() {
            Ok(node) => crate::routine::manage::manage(&node, ctx, request).await,
            Err(e) => e,
        }
    }
}
