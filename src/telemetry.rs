//! Metrics and traces for an operator, from the spans the runtime opens
//! around a turn, a model call and a tool call
//! (`troupe_runtime::telemetry::gen_ai`).
//!
//! - [`metrics`] — a `tracing` layer that counts those spans as they close
//!   into the `metrics` facade, recorded by the Prometheus exporter and
//!   served by `troupe serve` at `GET /api/metrics` (owner only), with the
//!   live actor tree and the durable mailbox measured at each scrape;
//! - [`traces`] — the same spans as OpenTelemetry traces, exported over
//!   OTLP/HTTP (protobuf) by `tracing-opentelemetry` and `opentelemetry-otlp`.
//!
//! Both are off unless asked for (`[telemetry]`, `OTEL_EXPORTER_OTLP_*`):
//! then no layer enables the `gen_ai` spans, and each stays a disabled
//! callsite that costs a cached check.

pub mod metrics;
pub mod traces;

use troupe_runtime::config::Telemetry;
use troupe_runtime::telemetry::ExtraLayer;

/// The layers `[telemetry]` asks for: metrics when `serving` and
/// `metrics = true`; traces when an OTLP endpoint is set in the
/// environment or the config. Call inside the async runtime.
///
/// # Errors
///
/// A malformed endpoint, or a metrics recorder already installed.
pub fn layers(
    config: &Telemetry,
    serving: bool,
    env: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<(Vec<ExtraLayer>, Guard)> {
    let mut extra = Vec::new();
    if serving && config.metrics {
        extra.push(metrics::layer()?);
    }
    let mut guard = Guard::default();
    if let Some(endpoint) = traces::endpoint(config, env) {
        let (layer, traces) = traces::layer(&endpoint, &config.service_name)?;
        extra.push(layer);
        guard.traces = Some(traces);
    }
    Ok((extra, guard))
}

/// What [`layers`] started: the trace exporter, to flush at the end with
/// [`Guard::shutdown`].
#[derive(Default)]
pub struct Guard {
    traces: Option<traces::Traces>,
}

impl Guard {
    /// Sends the spans still buffered and stops the exporter.
    pub async fn shutdown(self) {
        if let Some(traces) = self.traces {
            traces.shutdown().await;
        }
    }
}
