//! The turn loop's decisions, made in the actor between steps: what to
//! commit, whether a guard or a budget ends the turn, whether to compact,
//! what to run next.

use std::sync::Arc;

use ractor::ActorRef;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use troupe_runtime::model::ModelRequest;
use troupe_runtime::protocol::{AgentEvent, Message, Payload, StopReason, TurnOutcome, Usage};
use troupe_runtime::telemetry::gen_ai;
use troupe_runtime::tool::dispatch::{CallOutcome, Dispatcher};

use super::carry::Waiter;
use super::close::finish;
use super::history;
use super::step::{self, Compaction, ModelOutput, ModelStep, ToolStep};
use super::{ActiveTurn, ConversationMsg, Input, State, TurnRequest};
use crate::budget::Scope;
use crate::events::Emitter;
use crate::guard::Verdict;

/// The dispatcher of the conversation's tool calls, under its gate.
pub(super) fn dispatcher(state: &State) -> Dispatcher {
    let node = &state.args.node;
    Dispatcher::new(
        Arc::clone(&node.tools),
        Arc::clone(state.args.gate.as_ref().unwrap_or(&node.gate)),
        node.dispatch_settings(),
    )
}

/// Starts a turn.
pub(super) async fn begin(
    myself: &ActorRef<ConversationMsg>,
    state: &mut State,
    request: TurnRequest,
) {
    state.turns += 1;
    state.guard.start_turn();
    let args = &state.args;
    // A bot's own conversation, not one it has in a house thread.
    if args.parent.is_none()
        && args.label.is_none()
        && args.kind == args.bot.spec.kind()
        && args.services.seat().is_none()
        && args.services.house_scope().is_none()
    {
        args.node.note_latest(args.bot.id, args.id);
    }
    let node = Arc::clone(&state.args.node);
    let resumed = request.input == Input::Continue
        && request.done.is_none()
        && request.events.is_none()
        && state.args.carry.has_waiter();
    let waiter = if resumed {
        // The interrupted turn's caller waits for this one.
        state.args.carry.end().unwrap_or_default()
    } else {
        Waiter {
            events: request.events,
            done: request.done,
        }
    };
    let emitter = Emitter::new(state.args.id, waiter.events.clone(), node.bus.clone());
    let cancel = CancellationToken::new();
    state.args.carry.begin(waiter, cancel.clone());
    let scope = Scope::child(&state.args.budget, "turn", node.settings.turn_budget);
    state.services.set_user_channel(Arc::new(emitter.clone()));
    state.services.set_turn_scope(Arc::clone(&scope));
    state.active = Some(Box::new(ActiveTurn {
        number: state.turns,
        cancel,
        emitter,
        steers: Vec::new(),
        notes: Vec::new(),
        usage: Usage::default(),
        cost_usd: 0.0,
        scope,
        start_len: state.history.len(),
        last_stop: None,
        closed_in_store: false,
        reply: None,
        redelivered: false,
        opening: None,
        span: gen_ai::turn_span(&state.args.bot.spec.name, &state.args.id, state.turns),
        delivered: match &request.input {
            Input::Delivered(envelope) => Some(envelope.clone()),
            // A resumed turn answers what the store says it answered.
            Input::Continue => state.resuming.take().map(|e| *e),
            Input::User(_) => None,
        },
    }));
    let first = match request.input {
        Input::User(text) => Some(Message::user(text)),
        Input::Continue => None,
        Input::Delivered(envelope) => {
            let message = delivered_message(&envelope.body);
            match state
                .journal
                .apply_delivery(envelope, message.clone())
                .await
            {
                Ok(true) => {
                    if let Payload::Notice { topic, text, .. } = &message_payload(&message) {
                        emit(
                            state,
                            AgentEvent::Notice {
                                topic: topic.clone(),
                                text: text.clone(),
                            },
                        );
                    }
                    state.history_mut().push(message);
                    None
                }
                Ok(false) => {
                    // Applied before: handed over again (after a crash, or
                    // by the post office). Nothing to do, nobody to tell.
                    if let Some(active) = state.active.as_mut() {
                        active.delivered = None;
                        active.redelivered = true;
                        active.closed_in_store = true;
                    }
                    finish(myself, state, TurnOutcome::Finished).await;
                    return;
                }
                Err(e) => {
                    fail(
                        myself,
                        state,
                        format!("the message could not be saved: {e}"),
                    )
                    .await;
                    return;
                }
            }
        }
    };
    // A user's message is queued with the turn's mark and not waited for
    // (the model call needs nothing from it); a delivered one was applied
    // with the mark; a resumed turn has it already.
    if let Some(message) = first.clone() {
        match state.journal.open_turn(message).await {
            Ok(opening) => {
                if let Some(active) = state.active.as_mut() {
                    active.opening = opening;
                }
            }
            Err(e) => {
                fail(
                    myself,
                    state,
                    format!("the message could not be saved: {e}"),
                )
                .await;
                return;
            }
        }
    }
    state.history_mut().extend(first);
    let number = state.turns;
    emit(
        state,
        AgentEvent::TurnStarted {
            conversation: state.args.id,
            turn: number,
        },
    );
    if !state.waiting.is_empty() {
        // Resumed with calls that waited on a person: asked again first.
        let calls = std::mem::take(&mut state.waiting);
        run_tools(myself, state, calls);
        return;
    }
    next_step(myself, state).await;
}

/// The text a delivered message adds to the history.
fn delivered_message(payload: &Payload) -> Message {
    match payload {
        Payload::Text {
            sender,
            text,
            expects_reply,
        } => {
            let reply = if *expects_reply {
                " (they expect a reply: answer with message_agent)"
            } else {
                ""
            };
            Message::user(format!("[message from {sender}{reply}]\n{text}"))
        }
        Payload::Notice { topic, text, .. } => Message::user(format!("[notice: {topic}]\n{text}")),
        Payload::Offer(offer) => Message::user(offer.render()),
        Payload::Post(post) => Message::user(format!("[{}] {}", post.author, post.text)),
        Payload::Custom { name, data } => Message::user(format!("[{name}]\n{data}")),
    }
}

fn message_payload(message: &Message) -> Payload {
    let text = message.text();
    match text
        .strip_prefix("[notice: ")
        .and_then(|r| r.split_once("]\n"))
    {
        Some((topic, body)) => Payload::Notice {
            topic: topic.into(),
            text: body.into(),
            data: serde_json::Value::Null,
        },
        None => Payload::Custom {
            name: String::new(),
            data: serde_json::Value::Null,
        },
    }
}

fn emit(state: &State, event: AgentEvent) {
    if let Some(active) = &state.active {
        active.emitter.emit(event);
    }
}

/// Decides and starts the next model step.
async fn next_step(myself: &ActorRef<ConversationMsg>, state: &mut State) {
    let Some(active) = state.active.as_mut() else {
        return;
    };
    if active.cancel.is_cancelled() {
        finish(myself, state, TurnOutcome::Stopped).await;
        return;
    }
    if let Some(exceeded) = active.scope.check() {
        finish(
            myself,
            state,
            TurnOutcome::Budget {
                budget: exceeded.budget,
                detail: exceeded.detail,
            },
        )
        .await;
        return;
    }
    let mut injected: Vec<Message> = active.notes.drain(..).map(Message::user).collect();
    injected.extend(active.steers.drain(..).map(Message::user));
    if !injected.is_empty() {
        if let Err(e) = state.journal.append(&injected).await {
            fail(myself, state, format!("a message could not be saved: {e}")).await;
            return;
        }
        state.history_mut().extend(injected);
    }
    if let Verdict::Halt(reason) = state.guard.before_model_call() {
        finish(myself, state, TurnOutcome::Guard { reason }).await;
        return;
    }
    if state.args.node.tools_generation() != state.tools_generation {
        // A source's tools changed (an MCP server listed them again).
        state.refresh_tools();
    }
    let node = Arc::clone(&state.args.node);
    let model = state.args.model.clone();
    let compaction = needs_compaction(state);
    let Some(active) = state.active.as_ref() else {
        return;
    };
    let request = ModelRequest {
        model: model.model.clone(),
        system: Arc::clone(&state.system),
        messages: Arc::clone(&state.history),
        tools: Arc::clone(&state.tools.definitions),
        max_tokens: model.max_output_tokens,
        temperature: None,
    };
    let replying = active.delivered.as_ref().map(|answered| step::Replying {
        answered: answered.clone(),
        conversation: state.args.id,
        bot: state.args.bot.spec.name.clone(),
    });
    let earlier =
        history::last_assistant_text(&state.history[active.start_len.min(state.history.len())..]);
    let step = ModelStep {
        turn: active.number,
        model,
        request,
        journal: state.journal.clone(),
        emitter: active.emitter.clone(),
        cancel: active.cancel.clone(),
        compaction,
        replying,
        earlier,
        closing: node.closing(state.args.id, state.args.kind),
        node: crate::node::Node::from_context(Arc::clone(&node)),
    };
    let actor = myself.clone();
    drop(node);
    // Boxed: the step's future is large, and tokio moves a spawned future
    // several times (into its task, out at its end); a box moves as a pointer.
    tokio::spawn(Box::pin(step.run(actor)).instrument(active.span.clone()));
}

/// How the id of a call a compaction appended for a carried tool begins.
const CARRIED_PREFIX: &str = "carried_";

fn needs_compaction(state: &mut State) -> Option<Compaction> {
    let settings = &state.args.node.settings;
    let window = state.args.model.context_window as f64;
    let tokens = state.history_size.tokens(&state.system, &state.history) as f64;
    if tokens < window * settings.compaction_threshold {
        return None;
    }
    let split = super::compaction::split_point(&state.history, settings.keep_recent)?;
    let ctx = state.tool_context(CancellationToken::new());
    let mut carried = Vec::new();
    let mut carried_calls = Vec::new();
    for tool in state.args.node.tools.iter() {
        if !tool.spec().flags.carried {
            continue;
        }
        // A carried call the last compaction appended, still in the kept
        // tail, rebuilds the state with the calls after it: carrying it
        // again would only repeat it (and crowd the tail the next time).
        let still_carried = state.history[split..].iter().any(|m| {
            matches!(m, Message::Tool { call_id, name, .. }
                if call_id.starts_with(CARRIED_PREFIX) && *name == tool.spec().name)
        });
        if still_carried {
            continue;
        }
        if let Some((arguments, result)) = tool.carried_call(&ctx) {
            let call = troupe_runtime::protocol::ToolCall {
                id: format!("{CARRIED_PREFIX}{}", troupe_runtime::id::MsgId::new()),
                name: tool.spec().name.clone(),
                arguments,
            };
            carried_calls.push(Message::Assistant {
                content: String::new(),
                tool_calls: vec![call.clone()],
            });
            carried_calls.push(Message::Tool {
                call_id: call.id,
                name: call.name,
                result,
            });
        } else if let Some(text) = tool.carried(&ctx) {
            carried.push(text);
        }
    }
    Some(Compaction {
        split,
        carried,
        carried_calls,
    })
}

/// A model step ended.
pub(super) async fn model_done(
    myself: &ActorRef<ConversationMsg>,
    state: &mut State,
    output: ModelOutput,
) {
    // The turn's opening was queued before the model call: it must have
    // landed before anything the answer asks for runs.
    if let Some(opening) = state.active.as_mut().and_then(|a| a.opening.take()) {
        if let Err(e) = opening.wait().await {
            fail(
                myself,
                state,
                format!("the message could not be saved: {e}"),
            )
            .await;
            return;
        }
    }
    match output {
        ModelOutput::Failed { error } => finish(myself, state, TurnOutcome::Failed { error }).await,
        ModelOutput::Stopped { partial } => {
            state.history_mut().extend(partial);
            finish(myself, state, TurnOutcome::Stopped).await;
        }
        ModelOutput::Answered {
            message,
            stop,
            usage,
            cost_usd,
            compacted,
            ends_turn,
            reply,
        } => {
            if let Some(history) = compacted {
                state.replace_history(history);
                if let Some(active) = state.active.as_mut() {
                    active.start_len = 0;
                }
                state.refresh_tools();
            }
            let Some(active) = state.active.as_mut() else {
                return;
            };
            active.usage.add(&usage);
            active.cost_usd += cost_usd;
            active.scope.charge_model(usage.total(), cost_usd);
            active.last_stop = Some(stop.clone());
            active.closed_in_store = ends_turn;
            active.reply = reply.map(|r| *r);
            let Message::Assistant {
                content,
                tool_calls,
            } = &message
            else {
                return;
            };
            let (content, calls) = (content.clone(), tool_calls.clone());
            state.history_mut().push(message);
            if !content.is_empty() {
                emit(
                    state,
                    AgentEvent::AssistantMessage {
                        text: content.clone(),
                    },
                );
            }
            if stop == StopReason::Refusal {
                finish(myself, state, TurnOutcome::Refused { detail: content }).await;
                return;
            }
            if calls.is_empty() {
                if stop == StopReason::PauseTurn {
                    next_step(myself, state).await;
                } else {
                    if stop == StopReason::MaxTokens {
                        emit(
                            state,
                            AgentEvent::Warning {
                                message: "the answer was cut at the output token limit".into(),
                            },
                        );
                    }
                    finish(myself, state, TurnOutcome::Finished).await;
                }
                return;
            }
            let Some(active) = state.active.as_ref() else {
                return;
            };
            if active.cancel.is_cancelled() {
                // Stopped before the calls ran: answer them so the history stays whole.
                let stopped: Vec<CallOutcome> = calls
                    .into_iter()
                    .map(|call| CallOutcome {
                        call,
                        result: troupe_runtime::protocol::ToolResult::error(
                            "not run: the turn was stopped",
                        ),
                        elapsed: std::time::Duration::ZERO,
                    })
                    .collect();
                let messages = stopped.iter().map(step::result_message).collect::<Vec<_>>();
                let _ = state.journal.append(&messages).await;
                state.history_mut().extend(messages);
                finish(myself, state, TurnOutcome::Stopped).await;
                return;
            }
            run_tools(myself, state, calls);
        }
    }
}

/// Runs `calls` in a tool step of the active turn.
fn run_tools(
    myself: &ActorRef<ConversationMsg>,
    state: &State,
    calls: Vec<troupe_runtime::protocol::ToolCall>,
) {
    let Some(active) = state.active.as_ref() else {
        return;
    };
    let step = ToolStep {
        turn: active.number,
        calls,
        visible: Arc::clone(&state.tools.names),
        dispatcher: dispatcher(state),
        ctx: state.tool_context(active.cancel.clone()),
        journal: state.journal.clone(),
        emitter: active.emitter.clone(),
    };
    // Boxed, as the model step's (see `next_step`).
    tokio::spawn(Box::pin(step.run(myself.clone())).instrument(active.span.clone()));
}

/// A tool step ended.
pub(super) async fn tools_done(
    myself: &ActorRef<ConversationMsg>,
    state: &mut State,
    outcomes: Vec<CallOutcome>,
    messages: Vec<Message>,
    error: Option<String>,
) {
    if let Some(error) = error {
        fail(
            myself,
            state,
            format!("tool results could not be saved: {error}"),
        )
        .await;
        return;
    }
    let mut halt = None;
    let mut loads = false;
    state.history_mut().extend(messages);
    for outcome in &outcomes {
        loads |= outcome.call.name == troupe_runtime::tool::catalog::TOOL_SEARCH;
        let tolerant = state.tools.is_failure_tolerant(&outcome.call.name);
        let verdict = state
            .guard
            .after_call(&outcome.call, &outcome.result, tolerant);
        let Some(active) = state.active.as_mut() else {
            return;
        };
        active.scope.charge_tool_call();
        match verdict {
            Verdict::Continue => {}
            Verdict::Warn(w) => active.notes.push(format!("[troupe guard] {w}")),
            Verdict::Halt(reason) => halt = halt.or(Some(reason)),
        }
    }
    if loads {
        state.refresh_tools();
    }
    if let Some(reason) = halt {
        finish(myself, state, TurnOutcome::Guard { reason }).await;
        return;
    }
    next_step(myself, state).await;
}

/// Ends the turn as failed with `error`.
async fn fail(myself: &ActorRef<ConversationMsg>, state: &mut State, error: String) {
    finish(myself, state, TurnOutcome::Failed { error }).await;
}
