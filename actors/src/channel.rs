//! The user's channel: questions from `ask_user` and approvals the gate asks
//! for, answered through whatever shows the conversation (the CLI's chat, the
//! server, the Rust API).
//!
//! A question is an event ([`AgentEvent::QuestionAsked`] or
//! [`AgentEvent::ApprovalRequested`]) with a request id; the answer comes
//! back through [`Questions::answer`]. Nobody listening means undelivered,
//! and an unattended run (routine, subagent) is never asked.

use std::sync::Arc;
use std::time::Duration;

use dashmap::DashMap;
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;
use troupe_runtime::protocol::AgentEvent;
use troupe_runtime::tool::ToolContext;

use crate::events::Emitter;

/// The turn's emitter, put into the conversation's services at each turn.
#[derive(Debug, Clone)]
pub struct TurnChannel(pub Emitter);

/// How a wait for the user ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Reply {
    /// The user answered.
    Submitted {
        /// The answer.
        answer: serde_json::Value,
    },
    /// The user cancelled.
    Cancelled,
    /// Nobody answered in time.
    TimedOut,
    /// Nobody could be asked.
    Undelivered {
        /// Why.
        reason: String,
    },
}

/// Questions waiting for an answer, by request id.
#[derive(Debug, Default)]
pub struct Questions {
    waiting: DashMap<String, oneshot::Sender<Option<serde_json::Value>>>,
}

impl Questions {
    /// Answers a question: `None` cancels it. `false` when no question has
    /// that id (answered already, timed out, or never asked).
    pub fn answer(&self, request_id: &str, answer: Option<serde_json::Value>) -> bool {
        match self.waiting.remove(request_id) {
            Some((_, tx)) => tx.send(answer).is_ok(),
            None => false,
        }
    }

    /// The ids waiting now.
    pub fn pending(&self) -> Vec<String> {
        self.waiting.iter().map(|e| e.key().clone()).collect()
    }

    /// Emits the event `make(request_id)` on the turn's channel and waits for
    /// the answer, the turn's stop, or `timeout`.
    pub async fn ask(
        self: &Arc<Self>,
        ctx: &ToolContext,
        timeout: Duration,
        make: impl FnOnce(String) -> AgentEvent,
    ) -> Reply {
        if ctx.kind.is_unattended() {
            return Reply::Undelivered {
                reason: "this run is unattended: nobody is there to answer".into(),
            };
        }
        let Some(channel) = ctx.services.get::<TurnChannel>() else {
            return Reply::Undelivered {
                reason: "this conversation has no channel to the user".into(),
            };
        };
        if !channel.0.has_listeners() {
            return Reply::Undelivered {
                reason: "nobody is watching this conversation".into(),
            };
        }
        let request_id = format!("ask_{}", uuid::Uuid::now_v7().simple());
        let (tx, rx) = oneshot::channel();
        self.waiting.insert(request_id.clone(), tx);
        channel.0.emit(make(request_id.clone()));
        let reply = tokio::select! {
            answer = rx => match answer {
                Ok(Some(answer)) => Reply::Submitted { answer },
                Ok(None) | Err(_) => Reply::Cancelled,
            },
            () = tokio::time::sleep(timeout) => Reply::TimedOut,
            () = ctx.cancel.cancelled() => Reply::Cancelled,
        };
        self.waiting.remove(&request_id);
        reply
    }
}
