//! The work of one step, run in a task off the actor: a model call (with a
//! compaction first when the history is too long), or a step's tool calls.
//! Each commits what it produced before it reports back.

use std::collections::HashSet;
use std::sync::Arc;

use futures::{FutureExt, StreamExt};
use ractor::ActorRef;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use troupe_runtime::model::{ModelEvent, ModelRequest, ResolvedModel};
use troupe_runtime::protocol::{AgentEvent, Message, StopReason, ToolCall, Usage};
use troupe_runtime::telemetry::gen_ai;
use troupe_runtime::tool::dispatch::{CallOutcome, Dispatcher};
use troupe_runtime::tool::ToolContext;

use super::compaction;
use super::journal::Journal;
use super::ConversationMsg;
use crate::events::Emitter;

/// What a model step produced.
#[derive(Debug)]
pub enum ModelOutput {
    /// The model answered; its message is committed.
    Answered {
        /// The assistant message.
        message: Message,
        /// Why it stopped.
        stop: StopReason,
        /// Tokens used.
        usage: Usage,
        /// Their cost.
        cost_usd: f64,
        /// The history after a compaction, when one ran first.
        compacted: Option<Vec<Message>>,
        /// Whether the answer ends the turn; its commit closed the turn too.
        ends_turn: bool,
        /// The reply committed with the answer that ended the turn.
        reply: Option<Box<troupe_runtime::protocol::Envelope>>,
    },
    /// The turn was stopped mid-call; partial text, if any, is committed.
    Stopped {
        /// The partial message.
        partial: Option<Message>,
    },
    /// The call failed.
    Failed {
        /// The error, with what to do.
        error: String,
    },
}

/// Everything a model step needs.
pub struct ModelStep {
    pub(crate) turn: u64,
    pub(crate) model: ResolvedModel,
    pub(crate) request: ModelRequest,
    pub(crate) journal: Journal,
    pub(crate) emitter: Emitter,
    pub(crate) cancel: CancellationToken,
    pub(crate) compaction: Option<Compaction>,
    /// What an answer that ends the turn replies to, if anything.
    pub(crate) replying: Option<Replying>,
    /// The turn's last text before this step (when the answer has none).
    pub(crate) earlier: String,
    /// What the node's hooks write when an answer ends the turn.
    pub(crate) closing: crate::node::Closing,
    /// The node, to act on what they committed.
    pub(crate) node: crate::node::Node,
}

/// The message a turn answers, and what it said so far: an answer that
/// ends the turn commits the reply with it.
pub struct Replying {
    pub(crate) answered: troupe_runtime::protocol::Envelope,
    pub(crate) conversation: troupe_runtime::id::ConversationId,
    pub(crate) bot: String,
}

/// A compaction to run before the model call.
pub struct Compaction {
    pub(crate) split: usize,
    pub(crate) carried: Vec<String>,
    /// Calls that re-read what carried tools hold, with their results,
    /// appended after the kept tail (see [`troupe_runtime::tool::Tool::carried_call`]).
    pub(crate) carried_calls: Vec<Message>,
}

impl ModelStep {
    /// Runs the step and reports to `actor`.
    pub async fn run(self, actor: ActorRef<ConversationMsg>) {
        let turn = self.turn;
        // The step (and its request's hold on the history) is gone before
        // the actor hears of it, so the actor appends without copying.
        // A panic (in a provider, in a compaction) fails the actor, whose
        // supervisor restarts it to resume the turn.
        let message = match std::panic::AssertUnwindSafe(self.produce())
            .catch_unwind()
            .await
        {
            Ok(output) => ConversationMsg::ModelDone {
                turn,
                output: Box::new(output),
            },
            Err(panic) => ConversationMsg::StepFailed {
                turn,
                error: panic_text(panic.as_ref()),
            },
        };
        let _ = actor.send_message(message);
    }

    async fn produce(mut self) -> ModelOutput {
        let compacted = match self.compaction.take() {
            Some(c) => self.compact(c).await,
            None => None,
        };
        if let Some(history) = &compacted {
            self.request.messages = Arc::new(history.clone());
        }
        let span = gen_ai::model_span(gen_ai::provider_of(&self.model.spec), &self.model.model);
        let mut output = self.call().instrument(span.clone()).await;
        match &output {
            ModelOutput::Answered {
                usage,
                stop,
                cost_usd,
                ..
            } => gen_ai::model_answered(&span, usage, stop, *cost_usd),
            ModelOutput::Failed { .. } => gen_ai::model_failed(&span, "error"),
            ModelOutput::Stopped { .. } => gen_ai::model_failed(&span, "cancelled"),
        }
        if let ModelOutput::Answered {
            compacted: slot, ..
        } = &mut output
        {
            *slot = compacted;
        }
        output
    }

    async fn compact(&self, c: Compaction) -> Option<Vec<Message>> {
        let history = &self.request.messages;
        let head = &history[..c.split];
        let before = history.len();
        let request = compaction::summary_request(&self.model.model, head);
        let mut summary = None;
        for attempt in 1..=3 {
            match collect_text(&self.model, request.clone()).await {
                Ok(text) if !text.trim().is_empty() => {
                    summary = Some(text);
                    break;
                }
                Ok(_) => tracing::warn!(attempt, "compaction summary came back empty"),
                Err(e) => tracing::warn!(attempt, error = %e, "compaction summary failed"),
            }
        }
        let Some(summary) = summary else {
            self.emitter.emit(AgentEvent::Warning {
                message: "the history could not be summarized; it is kept whole for now".into(),
            });
            return None;
        };
        let message = compaction::summary_message(&summary, &c.carried);
        let tail = history[c.split..].to_vec();
        if let Err(e) = self
            .journal
            .record_compaction(message.clone(), tail.len(), c.carried_calls.clone())
            .await
        {
            self.emitter.emit(AgentEvent::Warning {
                message: format!("the compaction could not be saved: {e}"),
            });
            return None;
        }
        let mut compacted = vec![message];
        compacted.extend(tail);
        compacted.extend(c.carried_calls);
        self.emitter.emit(AgentEvent::Compacted {
            before,
            after: compacted.len(),
        });
        Some(compacted)
    }

    async fn call(&self) -> ModelOutput {
        let stream = tokio::select! {
            s = self.model.provider.stream(self.request.clone()) => s,
            () = self.cancel.cancelled() => return ModelOutput::Stopped { partial: None },
        };
        let mut stream = match stream {
            Ok(s) => s,
            Err(e) => {
                return ModelOutput::Failed {
                    error: e.to_string(),
                }
            }
        };
        let mut text = String::new();
        let mut calls: Vec<(usize, ToolCall)> = Vec::new();
        let mut usage = Usage::default();
        let mut stop = None;
        loop {
            let next = tokio::select! {
                n = stream.next() => n,
                () = self.cancel.cancelled() => {
                    let partial = (!text.is_empty()).then(|| Message::assistant(text.clone()));
                    if let Some(p) = &partial {
                        let cost = self.model.pricing.cost(&usage);
                        if let Err(e) = self.journal.append_assistant(p, &self.model.model, usage, cost, None).await {
                            tracing::error!(error = %e, "partial answer not saved");
                        }
                    }
                    return ModelOutput::Stopped { partial };
                }
            };
            match next {
                None => break,
                Some(Err(e)) => {
                    return ModelOutput::Failed {
                        error: e.to_string(),
                    }
                }
                Some(Ok(event)) => match event {
                    ModelEvent::TextDelta { text: delta } => {
                        self.emitter.emit(AgentEvent::TextDelta {
                            text: delta.clone(),
                        });
                        text.push_str(&delta);
                    }
                    ModelEvent::ToolCallCompleted { index, call } => calls.push((index, call)),
                    ModelEvent::ToolCallStarted { .. } | ModelEvent::ToolCallDelta { .. } => {}
                    ModelEvent::Usage { usage: u } => usage = u,
                    ModelEvent::Stop { reason } => stop = Some(reason),
                },
            }
        }
        calls.sort_by_key(|(i, _)| *i);
        let tool_calls: Vec<ToolCall> = calls.into_iter().map(|(_, c)| c).collect();
        let stop = stop.unwrap_or(if tool_calls.is_empty() {
            StopReason::EndTurn
        } else {
            StopReason::ToolUse
        });
        // An answer without calls ends the turn (unless the provider paused
        // it): its commit closes the turn as well, one commit fewer.
        let ends_turn = tool_calls.is_empty() && stop != StopReason::PauseTurn;
        let message = Message::Assistant {
            content: text,
            tool_calls,
        };
        let cost_usd = self.model.pricing.cost(&usage);
        let close = match &message {
            Message::Assistant { content, .. } if ends_turn => {
                let text = if content.is_empty() {
                    self.earlier.clone()
                } else {
                    content.clone()
                };
                let outcome = troupe_runtime::protocol::TurnOutcome::Finished;
                let reply = self.replying.as_ref().and_then(|r| {
                    crate::node::reply::reply(&r.answered, r.conversation, &r.bot, &outcome, &text)
                });
                Some(super::journal::Close {
                    outcome,
                    text,
                    reply,
                    hooks: Some(self.closing.clone()),
                })
            }
            _ => None,
        };
        let reply = close.as_ref().and_then(|c| c.reply.clone());
        match self
            .journal
            .append_assistant(&message, &self.model.model, usage, cost_usd, close)
            .await
        {
            // Acted on here, not in the actor: what the close committed
            // is handed on even if the actor is replaced before it hears.
            Ok(committed) => crate::node::settle_closing(committed, &self.node),
            Err(e) => {
                return ModelOutput::Failed {
                    error: format!("the answer could not be saved: {e}"),
                }
            }
        }
        ModelOutput::Answered {
            message,
            stop,
            usage,
            cost_usd,
            compacted: None,
            ends_turn,
            reply: reply.map(Box::new),
        }
    }
}

/// Runs a request to its end and returns the text.
pub(crate) async fn collect_text(
    model: &ResolvedModel,
    request: ModelRequest,
) -> Result<String, String> {
    let mut stream = model
        .provider
        .stream(request)
        .await
        .map_err(|e| e.to_string())?;
    let mut text = String::new();
    while let Some(event) = stream.next().await {
        if let ModelEvent::TextDelta { text: delta } = event.map_err(|e| e.to_string())? {
            text.push_str(&delta);
        }
    }
    Ok(text)
}

/// Everything a tool step needs.
pub struct ToolStep {
    pub(crate) turn: u64,
    pub(crate) calls: Vec<ToolCall>,
    pub(crate) visible: Arc<HashSet<String>>,
    pub(crate) dispatcher: Dispatcher,
    pub(crate) ctx: ToolContext,
    pub(crate) journal: Journal,
    pub(crate) emitter: Emitter,
}

impl ToolStep {
    /// Runs the calls, commits their results together and reports to `actor`.
    /// A panic here (tools' own panics are isolated by the dispatcher)
    /// fails the actor, whose supervisor restarts it.
    pub async fn run(self, actor: ActorRef<ConversationMsg>) {
        let turn = self.turn;
        let reporter = actor.clone();
        if let Err(panic) = std::panic::AssertUnwindSafe(self.run_calls(actor))
            .catch_unwind()
            .await
        {
            let _ = reporter.send_message(ConversationMsg::StepFailed {
                turn,
                error: panic_text(panic.as_ref()),
            });
        }
    }

    async fn run_calls(self, actor: ActorRef<ConversationMsg>) {
        let emitter = &self.emitter;
        // The events are copies of the calls and results: made only for
        // someone listening (a caller that dropped its stream is not).
        let on_start = |call: &ToolCall| {
            if emitter.has_listeners() {
                emitter.emit(AgentEvent::ToolCallStarted { call: call.clone() });
            }
        };
        let on_finish = |o: &CallOutcome| {
            if emitter.has_listeners() {
                emitter.emit(AgentEvent::ToolCallFinished {
                    call_id: o.call.id.clone(),
                    name: o.call.name.clone(),
                    result: o.result.clone(),
                    elapsed_ms: o.elapsed.as_millis() as u64,
                });
            }
        };
        let outcomes = self
            .dispatcher
            .run_step(self.calls, &self.visible, &self.ctx, &on_start, &on_finish)
            .await;
        let messages: Vec<Message> = outcomes.iter().map(result_message).collect();
        let error = self
            .journal
            .append(&messages)
            .await
            .err()
            .map(|e| e.to_string());
        let _ = actor.send_message(ConversationMsg::ToolsDone {
            turn: self.turn,
            outcomes,
            messages,
            error,
        });
    }
}

/// The history message of a call's outcome.
pub fn result_message(outcome: &CallOutcome) -> Message {
    Message::Tool {
        call_id: outcome.call.id.clone(),
        name: outcome.call.name.clone(),
        result: outcome.result.clone(),
    }
}

/// A panic's message, as far as it is text.
pub(crate) fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_string()
    }
}
