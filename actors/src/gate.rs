//! The trust gate as the dispatcher sees it: the rules of
//! `troupe_runtime::trust`, and the user's answer when they say ask.
//!
//! An ask becomes an [`AgentEvent::ApprovalRequested`] on the turn's channel;
//! the answer (once, session, always, deny) comes back through
//! [`Questions::answer`]. An unattended run, a channel nobody watches, a
//! timeout or a cancel all mean the call does not run.

use std::sync::Arc;
use std::time::Duration;

use troupe_runtime::protocol::{AgentEvent, ToolCall};
use troupe_runtime::tool::dispatch::{Admission, CallGate};
use troupe_runtime::tool::{ToolContext, ToolSpec};
use troupe_runtime::trust::{ApprovalAnswer, Gate, GateContext, Verdict};

use crate::channel::{Questions, Reply};

/// The trust gate with the user's channel behind it.
pub struct TrustGate {
    gate: Gate,
    questions: Arc<Questions>,
    timeout: Duration,
}

impl TrustGate {
    /// A gate asking through `questions`, waiting `timeout` for an answer.
    pub fn new(gate: Gate, questions: Arc<Questions>, timeout: Duration) -> Self {
        Self {
            gate,
            questions,
            timeout,
        }
    }
}

/// Reads an approval answer: a word, or `{"approval": word}`.
pub fn parse_approval(answer: &serde_json::Value) -> Option<ApprovalAnswer> {
    let word = answer
        .as_str()
        .or_else(|| answer.get("approval").and_then(|v| v.as_str()))?
        .trim()
        .to_ascii_lowercase();
    match word.as_str() {
        "once" | "yes" | "y" | "approve" => Some(ApprovalAnswer::Once),
        "session" | "s" => Some(ApprovalAnswer::Session),
        "always" | "a" => Some(ApprovalAnswer::Always),
        "deny" | "no" | "n" => Some(ApprovalAnswer::Deny),
        _ => None,
    }
}

#[async_trait::async_trait]
impl CallGate for TrustGate {
    async fn admit(&self, spec: &ToolSpec, call: &ToolCall, ctx: &ToolContext) -> Admission {
        let session = ctx.services.gate_session();
        let gctx = GateContext::new(ctx.home.clone(), ctx.user_home.clone(), ctx.cwd.clone())
            .unattended(ctx.kind.is_unattended())
            .with_session(session);
        let reason = match self.gate.check(spec, call, &gctx).await {
            Verdict::Allow => return Admission::Allow,
            Verdict::Deny { rule, reason } => {
                return Admission::Deny(format!(
                    "blocked by the trust gate (rule `{rule}`): {reason}"
                ));
            }
            Verdict::Ask { reason } => reason,
            // No sandbox runs commands yet, so what the gate cannot read is
            // asked in every mode; a sandbox will run it there instead.
            Verdict::Unanalysable { reason, .. } => reason,
        };
        let reason = match where_it_runs(spec, ctx) {
            Some(place) => format!("{place}; {reason}"),
            None => reason,
        };
        let reply = self
            .questions
            .ask(ctx, self.timeout, |request_id| {
                AgentEvent::ApprovalRequested {
                    request_id,
                    call: call.clone(),
                    reason: reason.clone(),
                }
            })
            .await;
        let not_run = |how: &str| {
            Admission::Deny(format!(
                "this call needs the user's approval ({reason}), and {how}; it did not run."
            ))
        };
        match reply {
            Reply::Submitted { answer } => match parse_approval(&answer) {
                Some(ApprovalAnswer::Deny) | None => not_run("the user refused it"),
                Some(answer) => {
                    if let Err(e) = self.gate.remember(spec, call, &gctx, answer) {
                        tracing::warn!(error = %e, "approval not remembered");
                    }
                    Admission::Allow
                }
            },
            Reply::Cancelled => not_run("the request was cancelled"),
            Reply::TimedOut => not_run("nobody answered in time"),
            Reply::Undelivered { reason: why } => not_run(&format!("it could not be asked: {why}")),
        }
    }
}

/// Where a house turn's `run_command` call would run, for the approval
/// question: in the thread's environment, not on this machine (a call
/// outside a house is the local one, as the question always meant).
fn where_it_runs(spec: &ToolSpec, ctx: &ToolContext) -> Option<String> {
    if spec.name != "run_command" {
        return None;
    }
    let seat = troupe_runtime::house::Seat::of(ctx)?;
    let bound = ctx
        .services
        .environments()
        .and_then(|e| e.0.bound(seat.thread));
    Some(match bound {
        Some(env) => {
            format!("runs in this thread's environment {env} (a sandbox), not on this machine")
        }
        None => "would not run: this house thread has no environment yet".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approvals_parse_from_words_and_objects() {
        assert_eq!(
            parse_approval(&serde_json::json!("Session")),
            Some(ApprovalAnswer::Session)
        );
        assert_eq!(
            parse_approval(&serde_json::json!({"approval": "always"})),
            Some(ApprovalAnswer::Always)
        );
        assert_eq!(
            parse_approval(&serde_json::json!("n")),
            Some(ApprovalAnswer::Deny)
        );
        assert_eq!(parse_approval(&serde_json::json!("maybe")), None);
    }
}
