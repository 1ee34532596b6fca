//! A harness's permission prompts, asked of troupe's user.
//!
//! Claude Code asks before a call its permission mode does not settle (a
//! write outside its folder, a web fetch); its relay serves the tool it
//! asks (`relay::prompts`) and hands the question here. It goes to the user
//! the way the gate's approvals do: an [`AgentEvent::ApprovalRequested`] on
//! the delegating conversation's channel (the terminal's chat, the
//! server's pending questions, the web page), answered through
//! [`Questions`](crate::channel::Questions). `once` (or yes) lets this call
//! run; `session` or `always` lets every call of that tool run for the rest
//! of the instance (a harness's tool is not one of troupe's, so nothing is
//! remembered past it); no, a timeout, nobody watching, or the instance's
//! end deny it, and the harness is told why. Each question and its answer
//! is a note in the delegation record.

use std::collections::HashSet;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use troupe_runtime::id::{DelegationId, SubagentId};
use troupe_runtime::protocol::{AgentEvent, ToolCall};
use troupe_runtime::tool::ToolContext;
use troupe_runtime::trust::ApprovalAnswer;

use super::actor::Launch;
use crate::channel::Reply;
use crate::delegation::record;
use crate::environment::relay::prompts::{Decision, Prompter};
use crate::node::Node;

/// The prompts of one instance, asked of the user of the conversation that
/// started it.
pub struct UserPrompts {
    node: Node,
    delegation: DelegationId,
    sub: SubagentId,
    executor: String,
    folder: PathBuf,
    goal: String,
    /// Cancelled when the instance ends: a question still open is denied.
    ended: CancellationToken,
    /// The tools the user let run for the rest of the instance.
    allowed: Mutex<HashSet<String>>,
}

impl UserPrompts {
    /// The prompter of `launch`'s instance, until `ended` is cancelled.
    pub fn for_instance(node: &Node, launch: &Launch, ended: CancellationToken) -> Arc<Self> {
        Arc::new(Self {
            node: node.clone(),
            delegation: launch.delegation,
            sub: launch.sub,
            executor: launch.executor.clone(),
            folder: launch.folder.clone(),
            goal: launch
                .prompt
                .lines()
                .next()
                .unwrap_or_default()
                .chars()
                .take(120)
                .collect(),
            ended,
            allowed: Mutex::new(HashSet::new()),
        })
    }

    async fn ask(self: Arc<Self>, tool: String, input: Value, call: Option<String>) -> Decision {
        let allowed_before = self
            .allowed
            .lock()
            .map(|a| a.contains(&tool))
            .unwrap_or(false);
        if allowed_before {
            return Decision::Allow;
        }
        let what = format!("{tool} {}", describe(&input));
        let decision = self.ask_user(&tool, input, call).await;
        let said = match &decision {
            Decision::Allow => format!("permission: {what} — allowed by the user"),
            Decision::Deny(why) => format!("permission: {what} — denied: {why}"),
        };
        let (d, s) = (self.delegation, self.sub);
        if let Err(e) = self
            .node
            .store()
            .write(move |tx| record::event(tx, d, Some(s), "note", &said))
            .await
        {
            tracing::warn!(instance = %s, error = %e, "a permission prompt could not be recorded");
        }
        decision
    }

    async fn ask_user(&self, tool: &str, input: Value, call: Option<String>) -> Decision {
        let d = self.delegation;
        let parent = match self
            .node
            .store()
            .read(move |c| record::parent_of(c, d))
            .await
        {
            Ok(Some(parent)) => parent,
            Ok(None) => return Decision::Deny(format!("troupe has no record of delegation {d}, so nobody can be asked; the call did not run")),
            Err(e) => return Decision::Deny(format!("troupe could not read its delegation record ({e}), so nobody could be asked; the call did not run")),
        };
        let (conversation, bot) = parent;
        let mut ctx = ToolContext::standalone(self.node.home().clone(), self.folder.clone());
        ctx.conversation = conversation;
        ctx.agent = bot;
        ctx.call_id = format!(
            "{}:{}",
            self.sub,
            call.unwrap_or_else(|| uuid::Uuid::now_v7().simple().to_string())
        );
        ctx.cancel = self.ended.child_token();
        ctx.services
            .set_user_channel(Arc::new(self.node.emitter(conversation)));
        let reason = format!(
            "the {} instance {} (\"{}\" in {}) asks to run its tool {tool}, which its \
             permission mode does not allow by itself; yes runs this call, session every \
             {tool} call of this instance, no refuses it",
            self.executor,
            self.sub,
            self.goal,
            self.folder.display()
        );
        let call = ToolCall {
            id: ctx.call_id.clone(),
            name: format!("{}:{tool}", self.executor),
            arguments: input,
        };
        let reply = self
            .node
            .questions()
            .ask(&ctx, self.node.settings().ask_timeout, |request_id| {
                AgentEvent::ApprovalRequested {
                    request_id,
                    call,
                    reason,
                }
            })
            .await;
        let refused = |how: &str| {
            Decision::Deny(format!(
                "troupe's user was asked whether {tool} may run here, and {how}; it did not \
                 run. Do without it, or say in your report what needs it."
            ))
        };
        match reply {
            Reply::Submitted { answer } => match crate::gate::parse_approval(&answer) {
                Some(ApprovalAnswer::Once) => Decision::Allow,
                Some(ApprovalAnswer::Session | ApprovalAnswer::Always) => {
                    if let Ok(mut allowed) = self.allowed.lock() {
                        allowed.insert(tool.to_string());
                    }
                    Decision::Allow
                }
                Some(ApprovalAnswer::Deny) => refused("they refused"),
                None => refused(&format!("their answer ({answer}) was no yes")),
            },
            Reply::Cancelled => refused("the question was cancelled (or the task ended)"),
            Reply::TimedOut => refused("nobody answered in time"),
            Reply::Undelivered { reason } => refused(&format!("they could not be asked: {reason}")),
        }
    }
}

impl Prompter for UserPrompts {
    fn decide(
        self: Arc<Self>,
        tool: String,
        input: Value,
        call: Option<String>,
    ) -> Pin<Box<dyn Future<Output = Decision> + Send>> {
        Box::pin(self.ask(tool, input, call))
    }
}

/// A call's input in a line: its file, command or address, else the whole.
fn describe(input: &Value) -> String {
    ["file_path", "command", "url", "path", "query"]
        .iter()
        .find_map(|k| input[*k].as_str())
        .map_or_else(|| super::harness::compact(input), str::to_string)
}
