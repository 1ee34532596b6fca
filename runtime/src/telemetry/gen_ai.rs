//! The spans of an agent's work, named and attributed after OpenTelemetry's
//! GenAI semantic conventions (`gen_ai.*`): a turn (`invoke_agent`), each
//! model call in it (`chat`) and each tool call (`execute_tool`).
//!
//! They are ordinary `tracing` spans with the target [`TARGET`], so the
//! runtime depends on no telemetry crate: the `troupe` binary turns them
//! into OTLP traces (`tracing-opentelemetry`) and Prometheus metrics when
//! `[telemetry]` asks for them. With neither, no subscriber layer enables
//! the target and each span is a disabled callsite: nothing is allocated
//! or recorded. `otel.name` renames a span for OpenTelemetry
//! (`chat gpt-4o`); `otel.kind` and `otel.status_code` are its kind and
//! status.
//!
//! A turn's span is a root: a turn outlives the actor message that started
//! it, and its steps run in tasks that carry the span
//! (`Instrument::instrument`), so model and tool calls nest under it.

use crate::protocol::{StopReason, ToolResult, ToolStatus, TurnOutcome, Usage};

/// The target of every span here: a subscriber layer that wants them
/// enables this target (at `info`).
pub const TARGET: &str = "troupe::gen_ai";

/// The span of one turn of `agent` in `conversation`, with no parent.
pub fn turn_span(agent: &str, conversation: &dyn std::fmt::Display, turn: u64) -> tracing::Span {
    tracing::info_span!(
        target: TARGET,
        parent: None,
        "invoke_agent",
        otel.name = format_args!("invoke_agent {agent}"),
        otel.status_code = tracing::field::Empty,
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.name = agent,
        gen_ai.conversation.id = %conversation,
        gen_ai.usage.input_tokens = tracing::field::Empty,
        gen_ai.usage.output_tokens = tracing::field::Empty,
        troupe.turn = turn,
        troupe.turn.outcome = tracing::field::Empty,
        troupe.cost_usd = tracing::field::Empty,
        error.type = tracing::field::Empty,
    )
}

/// Records how a turn ended on its span.
pub fn turn_finished(span: &tracing::Span, outcome: &TurnOutcome, usage: &Usage, cost_usd: f64) {
    if span.is_disabled() {
        return;
    }
    let name = outcome_name(outcome);
    span.record("troupe.turn.outcome", name);
    span.record("gen_ai.usage.input_tokens", input_tokens(usage));
    span.record("gen_ai.usage.output_tokens", usage.output_tokens);
    span.record("troupe.cost_usd", cost_usd);
    if matches!(
        outcome,
        TurnOutcome::Failed { .. } | TurnOutcome::Crashed { .. }
    ) {
        span.record("otel.status_code", "error");
        span.record("error.type", name);
    }
}

/// Every input token, cached or not: the conventions' input count.
pub fn input_tokens(usage: &Usage) -> u64 {
    usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
}

/// A turn's outcome as one word: `finished`, `stopped`, `guard`, `budget`,
/// `refused`, `failed`, …
pub fn outcome_name(outcome: &TurnOutcome) -> &'static str {
    match outcome {
        TurnOutcome::Finished => "finished",
        TurnOutcome::Stopped => "stopped",
        TurnOutcome::Guard { .. } => "guard",
        TurnOutcome::Budget { .. } => "budget",
        TurnOutcome::Refused { .. } => "refused",
        TurnOutcome::Failed { .. } => "failed",
        TurnOutcome::Crashed { .. } => "crashed",
    }
}

/// The provider's name in a model spec: `openai` in `openai:gpt-4o`.
pub fn provider_of(spec: &str) -> &str {
    spec.split_once(':').map_or(spec, |(provider, _)| provider)
}

/// The span of one model call to `model` through `provider` (the spec's
/// prefix: `openai`, `anthropic`, `script`, …).
pub fn model_span(provider: &str, model: &str) -> tracing::Span {
    tracing::info_span!(
        target: TARGET,
        "chat",
        otel.name = format_args!("chat {model}"),
        otel.kind = "client",
        otel.status_code = tracing::field::Empty,
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = provider,
        gen_ai.request.model = model,
        gen_ai.usage.input_tokens = tracing::field::Empty,
        gen_ai.usage.output_tokens = tracing::field::Empty,
        gen_ai.response.finish_reasons = tracing::field::Empty,
        troupe.cost_usd = tracing::field::Empty,
        error.type = tracing::field::Empty,
    )
}

/// Records an answered model call on its span.
pub fn model_answered(span: &tracing::Span, usage: &Usage, stop: &StopReason, cost_usd: f64) {
    if span.is_disabled() {
        return;
    }
    span.record("gen_ai.usage.input_tokens", input_tokens(usage));
    span.record("gen_ai.usage.output_tokens", usage.output_tokens);
    span.record("gen_ai.response.finish_reasons", stop_name(stop));
    span.record("troupe.cost_usd", cost_usd);
}

/// Records a failed model call on its span: `kind` is `error` or `cancelled`.
pub fn model_failed(span: &tracing::Span, kind: &str) {
    span.record("otel.status_code", "error");
    span.record("error.type", kind);
}

/// A stop reason as the conventions' finish reason (`stop`, `tool_calls`,
/// `length`, …).
pub fn stop_name(stop: &StopReason) -> &'static str {
    match stop {
        StopReason::EndTurn => "stop",
        StopReason::ToolUse => "tool_calls",
        StopReason::MaxTokens => "length",
        StopReason::StopSequence => "stop_sequence",
        StopReason::PauseTurn => "pause_turn",
        StopReason::Refusal => "refusal",
        StopReason::ContentFilter => "content_filter",
        StopReason::Other(_) => "other",
    }
}

/// The span of one tool call.
pub fn tool_span(name: &str, call_id: &str) -> tracing::Span {
    tracing::info_span!(
        target: TARGET,
        "execute_tool",
        otel.name = format_args!("execute_tool {name}"),
        otel.kind = "internal",
        otel.status_code = tracing::field::Empty,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = name,
        gen_ai.tool.call.id = call_id,
        gen_ai.tool.type = "function",
        troupe.tool.outcome = tracing::field::Empty,
        error.type = tracing::field::Empty,
    )
}

/// Records a tool call's result on its span: `ok` or `error`.
pub fn tool_finished(span: &tracing::Span, result: &ToolResult) {
    if span.is_disabled() {
        return;
    }
    match result.status {
        ToolStatus::Ok => span.record("troupe.tool.outcome", "ok"),
        ToolStatus::Error => {
            span.record("otel.status_code", "error");
            span.record("error.type", "tool_error");
            span.record("troupe.tool.outcome", "error")
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_are_disabled_without_a_subscriber_that_wants_them() {
        use tracing_subscriber::layer::SubscriberExt;
        let subscriber =
            tracing_subscriber::registry().with(tracing_subscriber::EnvFilter::new("warn"));
        tracing::subscriber::with_default(subscriber, || {
            assert!(turn_span("scout", &"c-1", 1).is_disabled());
        });
    }

    #[test]
    fn stop_reasons_map_to_the_conventions_finish_reasons() {
        assert_eq!(stop_name(&StopReason::EndTurn), "stop");
        assert_eq!(stop_name(&StopReason::ToolUse), "tool_calls");
        assert_eq!(stop_name(&StopReason::MaxTokens), "length");
    }
}
