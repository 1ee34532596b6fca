//! Closing a turn: its reply committed with its close, its report sent to
//! whoever waits, and the next queued turn started.

use std::sync::Arc;

use ractor::ActorRef;
use troupe_runtime::protocol::{AgentEvent, Message, TurnOutcome, Usage};
use troupe_runtime::telemetry::gen_ai;

use super::carry::Waiter;
use super::history;
use super::turn::begin;
use super::{ConversationMsg, Input, State, TurnReport, TurnRequest};

/// Ends the turn, reports it, and starts the next queued one.
pub(super) async fn finish(
    myself: &ActorRef<ConversationMsg>,
    state: &mut State,
    outcome: TurnOutcome,
) {
    let Some(mut active) = state.active.take() else {
        return;
    };
    if let Some(opening) = active.opening.take() {
        if let Err(e) = opening.wait().await {
            tracing::error!(error = %e, "the turn's first message was not saved");
        }
    }
    // The turn's channel goes with the turn, so its caller's stream ends.
    state.services.clear_user_channel();
    let start = active.start_len.min(state.history.len());
    let text = history::last_assistant_text(&state.history[start..]);
    if !active.closed_in_store {
        // The reply to what the turn answered is committed with its close.
        let reply = active.delivered.as_ref().and_then(|answered| {
            crate::node::reply::reply(
                answered,
                state.args.id,
                &state.args.bot.spec.name,
                &outcome,
                &text,
            )
        });
        let close = super::journal::Close {
            outcome: outcome.clone(),
            text: text.clone(),
            reply: reply.clone(),
            hooks: Some(state.args.node.closing(state.args.id, state.args.kind)),
        };
        match state.journal.close_turn(close).await {
            Ok(committed) => {
                active.reply = reply;
                let node = crate::node::Node::from_context(Arc::clone(&state.args.node));
                crate::node::settle_closing(committed, &node);
            }
            Err(e) => tracing::error!(error = %e, "could not close the turn in the store"),
        }
    }
    let reply = active.reply.take();
    let report = TurnReport {
        conversation: state.args.id,
        outcome: outcome.clone(),
        text: text.clone(),
        usage: active.usage,
        cost_usd: active.cost_usd,
        steps: state.guard.steps(),
    };
    gen_ai::turn_finished(&active.span, &outcome, &active.usage, active.cost_usd);
    if !active.redelivered {
        active.emitter.emit(AgentEvent::TurnFinished {
            outcome,
            text,
            usage: active.usage,
            cost_usd: active.cost_usd,
        });
        state.args.node.turn_finished(&crate::node::FinishedTurn {
            conversation: state.args.id,
            kind: state.args.kind,
            bot: state.args.bot.clone(),
            parent: state.args.parent,
            delegation: state.args.delegation,
            report: report.clone(),
            delivered: active.delivered.clone(),
            tools_used: history::tools_called(&state.history[start..]),
            house: state.args.services.house_scope().map(|s| s.house),
        });
    }
    if let Some(reply) = reply {
        // Committed: routing it now is only a wake-up (the next start
        // delivers whatever is still pending). It goes after the turn's
        // last event, so whoever watches both sees the turn end before
        // its answer lands.
        let node = crate::node::Node::from_context(Arc::clone(&state.args.node));
        tokio::spawn(async move {
            if let Err(e) = node.route(reply).await {
                tracing::warn!(error = %e, "a committed reply could not be routed; it waits in the mailbox");
            }
        });
    }
    if let Some(done) = state.args.carry.end().and_then(|w| w.done) {
        let _ = done.send(report);
    }
    // A steer that arrived during the last model call found no next step:
    // it starts the next turn rather than being lost.
    if !active.steers.is_empty() {
        let text = active.steers.join("\n\n");
        state.args.carry.enqueue_first(TurnRequest {
            input: Input::User(text),
            events: None,
            done: None,
        });
    }
    if let Some(next) = state.args.carry.next() {
        Box::pin(begin(myself, state, next)).await;
    } else {
        super::schedule_idle_check(myself, state);
    }
}

/// Tells the caller of a turn that closed in the store, but whose
/// incarnation died before reporting it, how it ended: its last answer.
pub(super) fn report_closed(state: &State, waiter: Waiter) {
    let answered = matches!(
        state.history.last(),
        Some(Message::Assistant { tool_calls, .. }) if tool_calls.is_empty()
    );
    let text = history::last_assistant_text(&state.history);
    let outcome = if answered {
        TurnOutcome::Finished
    } else {
        TurnOutcome::Failed {
            error: "the turn ended while its actor crashed; its history holds what was done".into(),
        }
    };
    if let Some(events) = &waiter.events {
        let _ = events.send(AgentEvent::TurnFinished {
            outcome: outcome.clone(),
            text: text.clone(),
            usage: Usage::default(),
            cost_usd: 0.0,
        });
    }
    if let Some(done) = waiter.done {
        let _ = done.send(TurnReport {
            conversation: state.args.id,
            outcome,
            text,
            usage: Usage::default(),
            cost_usd: 0.0,
            steps: 0,
        });
    }
}
