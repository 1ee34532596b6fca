//! Prometheus metrics from the runtime's `gen_ai` spans.
//!
//! [`layer`] installs the Prometheus recorder as the process's `metrics`
//! recorder and returns a `tracing` layer that, when a turn, a model call
//! or a tool call's span closes, counts it with its labels and times it.
//! [`render`] is the scrape: those series, then gauges measured now from
//! the node (live actors by kind, their restarts, sandboxes, executors,
//! durable messages waiting). Every name is in docs/operating.md.

use std::sync::OnceLock;
use std::time::Instant;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::Subscriber;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;
use troupe_actors::node::Node;
use troupe_runtime::telemetry::{gen_ai, ExtraLayer};

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Bucket bounds of the duration histograms, in seconds.
const SECONDS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

/// Installs the Prometheus recorder (once per process) and returns the layer
/// that feeds it.
///
/// # Errors
///
/// Another `metrics` recorder is installed already.
pub fn layer() -> anyhow::Result<ExtraLayer> {
    if HANDLE.get().is_none() {
        let handle = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS)?
            .install_recorder()
            .map_err(|e| anyhow::anyhow!("cannot keep metrics: {e}"))?;
        let _ = HANDLE.set(handle);
        describe();
    }
    let filter = tracing_subscriber::filter::filter_fn(|m| m.target() == gen_ai::TARGET);
    Ok(Box::new(SpanMetrics.with_filter(filter)))
}

fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_counter!("troupe_turns_total", "Turns ended, by agent and outcome.");
    describe_histogram!(
        "troupe_turn_duration_seconds",
        Unit::Seconds,
        "How long turns took, by agent."
    );
    describe_counter!(
        "troupe_model_calls_total",
        "Model calls, by model, provider and outcome (ok, error, cancelled)."
    );
    describe_histogram!(
        "troupe_model_call_duration_seconds",
        Unit::Seconds,
        "How long model calls took (the whole stream), by model."
    );
    describe_counter!(
        "troupe_model_input_tokens_total",
        "Input tokens (cached included), by model."
    );
    describe_counter!(
        "troupe_model_output_tokens_total",
        "Output tokens, by model."
    );
    describe_gauge!(
        "troupe_model_cost_usd",
        "US dollars spent on model calls since the server started (only goes up), by model."
    );
    describe_counter!(
        "troupe_tool_calls_total",
        "Tool calls, by tool and outcome (ok, error)."
    );
    describe_histogram!(
        "troupe_tool_call_duration_seconds",
        Unit::Seconds,
        "How long tool calls took, by tool."
    );
}

/// The scrape: the counted series, then what the node has now.
pub async fn render(node: &Node) -> String {
    let mut text = match HANDLE.get() {
        Some(handle) => {
            handle.run_upkeep();
            handle.render()
        }
        None => String::new(),
    };
    let tree = node.tree().await;
    let mut live: std::collections::BTreeMap<&str, (u64, u64)> = Default::default();
    for actor in tree.iter().filter(|a| a.state != "stopped") {
        let entry = live.entry(actor.kind.as_str()).or_default();
        entry.0 += 1;
        entry.1 += u64::from(actor.restarts);
    }
    let count = |kind: &str| live.get(kind).map_or(0, |(n, _)| *n);
    gauge(
        &mut text,
        "troupe_live_actors",
        "Actors alive now, by kind.",
        live.iter().map(|(k, (n, _))| (Some(*k), *n as f64)),
    );
    gauge(
        &mut text,
        "troupe_actor_restarts",
        "Restarts in this process of the actors alive now, by kind.",
        live.iter().map(|(k, (_, r))| (Some(*k), *r as f64)),
    );
    gauge(
        &mut text,
        "troupe_environments",
        "House environments' actors alive now.",
        [(None, count("environment") as f64)],
    );
    gauge(
        &mut text,
        "troupe_executors",
        "Outside coding agents (executors) running now.",
        [(None, count("executor") as f64)],
    );
    let pending = node
        .store()
        .read(troupe_runtime::store::mailbox::pending_count)
        .await;
    match pending {
        Ok(n) => gauge(
            &mut text,
            "troupe_mailbox_pending",
            "Durable messages sent and not yet consumed by their receiver.",
            [(None, n as f64)],
        ),
        Err(e) => tracing::warn!(error = %e, "the mailbox could not be measured for /api/metrics"),
    }
    text
}

/// Appends one gauge family in the text exposition format.
fn gauge<'a>(
    text: &mut String,
    name: &str,
    help: &str,
    values: impl IntoIterator<Item = (Option<&'a str>, f64)>,
) {
    use std::fmt::Write;
    let _ = writeln!(text, "# HELP {name} {help}\n# TYPE {name} gauge");
    for (kind, value) in values {
        match kind {
            Some(kind) => {
                let _ = writeln!(text, "{name}{{kind=\"{}\"}} {value}", escape(kind));
            }
            None => {
                let _ = writeln!(text, "{name} {value}");
            }
        }
    }
}

fn escape(label: &str) -> String {
    label
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Counts `gen_ai` spans as they close.
struct SpanMetrics;

/// What a span recorded, kept in its extensions until it closes.
#[derive(Debug)]
struct Recorded {
    started: Instant,
    agent: String,
    model: String,
    provider: String,
    tool: String,
    turn_outcome: String,
    tool_outcome: String,
    error: String,
    input: u64,
    output: u64,
    cost: f64,
}

impl Recorded {
    fn new() -> Self {
        Self {
            started: Instant::now(),
            agent: String::new(),
            model: String::new(),
            provider: String::new(),
            tool: String::new(),
            turn_outcome: String::new(),
            tool_outcome: String::new(),
            error: String::new(),
            input: 0,
            output: 0,
            cost: 0.0,
        }
    }
}

impl Visit for Recorded {
    fn record_str(&mut self, field: &Field, value: &str) {
        let slot = match field.name() {
            "gen_ai.agent.name" => &mut self.agent,
            "gen_ai.request.model" => &mut self.model,
            "gen_ai.provider.name" => &mut self.provider,
            "gen_ai.tool.name" => &mut self.tool,
            "troupe.turn.outcome" => &mut self.turn_outcome,
            "troupe.tool.outcome" => &mut self.tool_outcome,
            "error.type" => &mut self.error,
            _ => return,
        };
        value.clone_into(slot);
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        match field.name() {
            "gen_ai.usage.input_tokens" => self.input = value,
            "gen_ai.usage.output_tokens" => self.output = value,
            _ => {}
        }
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        if field.name() == "troupe.cost_usd" {
            self.cost = value;
        }
    }

    fn record_debug(&mut self, _field: &Field, _value: &dyn std::fmt::Debug) {}
}

impl<S> Layer<S> for SpanMetrics
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut recorded = Recorded::new();
        attrs.record(&mut recorded);
        span.extensions_mut().insert(recorded);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut extensions = span.extensions_mut();
        if let Some(recorded) = extensions.get_mut::<Recorded>() {
            values.record(recorded);
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(r) = span.extensions_mut().remove::<Recorded>() else {
            return;
        };
        let seconds = r.started.elapsed().as_secs_f64();
        match span.name() {
            "invoke_agent" => {
                let outcome = if r.turn_outcome.is_empty() {
                    "unfinished".to_owned()
                } else {
                    r.turn_outcome
                };
                metrics::counter!("troupe_turns_total", "agent" => r.agent.clone(), "outcome" => outcome).increment(1);
                metrics::histogram!("troupe_turn_duration_seconds", "agent" => r.agent)
                    .record(seconds);
            }
            "chat" => {
                let outcome = if r.error.is_empty() {
                    "ok".to_owned()
                } else {
                    r.error
                };
                metrics::counter!("troupe_model_calls_total", "model" => r.model.clone(), "provider" => r.provider, "outcome" => outcome).increment(1);
                metrics::histogram!("troupe_model_call_duration_seconds", "model" => r.model.clone()).record(seconds);
                metrics::counter!("troupe_model_input_tokens_total", "model" => r.model.clone())
                    .increment(r.input);
                metrics::counter!("troupe_model_output_tokens_total", "model" => r.model.clone())
                    .increment(r.output);
                metrics::gauge!("troupe_model_cost_usd", "model" => r.model).increment(r.cost);
            }
            "execute_tool" => {
                let outcome = if r.tool_outcome.is_empty() {
                    "unfinished".to_owned()
                } else {
                    r.tool_outcome
                };
                metrics::counter!("troupe_tool_calls_total", "tool" => r.tool.clone(), "outcome" => outcome).increment(1);
                metrics::histogram!("troupe_tool_call_duration_seconds", "tool" => r.tool)
                    .record(seconds);
            }
            _ => {}
        }
    }
}
