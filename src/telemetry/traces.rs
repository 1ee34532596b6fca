//! OpenTelemetry traces over OTLP/HTTP (protobuf).
//!
//! The runtime's `gen_ai` spans go through `tracing-opentelemetry` to a
//! batch exporter of `opentelemetry-otlp`. Its batch runs on a thread of
//! its own; each export is sent by [`Client`], troupe's own `reqwest`,
//! on the async runtime that set the traces up.

use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;
use tracing_subscriber::Layer;
use troupe_runtime::config::Telemetry;
use troupe_runtime::telemetry::{gen_ai, ExtraLayer};

/// Where traces go: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or
/// `OTEL_EXPORTER_OTLP_ENDPOINT` (read by the exporter itself, as the
/// standard says), else `[telemetry] otlp_endpoint`; `None`: no traces.
pub fn endpoint(config: &Telemetry, env: &dyn Fn(&str) -> Option<String>) -> Option<Endpoint> {
    if env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some()
        || env("OTEL_EXPORTER_OTLP_ENDPOINT").is_some()
    {
        return Some(Endpoint::FromEnvironment);
    }
    let base = config.otlp_endpoint.trim();
    (!base.is_empty()).then(|| Endpoint::Url(format!("{}/v1/traces", base.trim_end_matches('/'))))
}

/// Where [`endpoint`] found the collector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// The standard `OTEL_EXPORTER_OTLP_*` variables say.
    FromEnvironment,
    /// The traces URL made from `[telemetry] otlp_endpoint`.
    Url(String),
}

/// The running exporter.
pub struct Traces {
    provider: SdkTracerProvider,
}

impl Traces {
    /// Exports what is buffered and stops.
    pub async fn shutdown(self) {
        let provider = self.provider;
        let done = tokio::task::spawn_blocking(move || provider.shutdown());
        match tokio::time::timeout(Duration::from_secs(10), done).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => tracing::warn!(error = %e, "traces could not all be exported"),
            Ok(Err(e)) => tracing::warn!(error = %e, "the trace exporter failed"),
            Err(_) => {
                tracing::warn!("the trace exporter did not finish within 10 s; spans may be lost")
            }
        }
    }
}

/// The layer that turns the `gen_ai` spans into OpenTelemetry spans sent
/// to `endpoint`, with `service.name` = `service`. Call inside the async
/// runtime.
///
/// # Errors
///
/// The endpoint is not a URL.
pub fn layer(endpoint: &Endpoint, service: &str) -> anyhow::Result<(ExtraLayer, Traces)> {
    troupe_runtime::net::install_crypto_provider();
    let client = Client {
        http: reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()?,
        runtime: tokio::runtime::Handle::try_current()
            .map_err(|_| anyhow::anyhow!("traces are set up inside the async runtime"))?,
    };
    let mut exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .with_http_client(client);
    if let Endpoint::Url(url) = endpoint {
        exporter = exporter.with_endpoint(url.clone());
    }
    let exporter = exporter.build().map_err(|e| {
        anyhow::anyhow!(
            "cannot export traces to {}: {e}; give a base URL such as http://127.0.0.1:4318",
            match endpoint {
                Endpoint::Url(url) => url.as_str(),
                Endpoint::FromEnvironment => "the OTEL_EXPORTER_OTLP_ENDPOINT",
            }
        )
    })?;
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(
            Resource::builder()
                .with_service_name(service.to_owned())
                .build(),
        )
        .build();
    let tracer = provider.tracer("troupe");
    let filter = tracing_subscriber::filter::filter_fn(|m| m.target() == gen_ai::TARGET);
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_tracked_inactivity(false)
        .with_threads(false)
        .with_location(false)
        .with_filter(filter);
    Ok((Box::new(layer), Traces { provider }))
}

/// Sends the exporter's requests with troupe's `reqwest` on the async
/// runtime (the batch thread has none of its own).
#[derive(Debug, Clone)]
struct Client {
    http: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for Client {
    async fn send_bytes(
        &self,
        request: http::Request<bytes::Bytes>,
    ) -> Result<http::Response<bytes::Bytes>, opentelemetry_http::HttpError> {
        let http = self.http.clone();
        let (parts, body) = request.into_parts();
        let sent = self.runtime.spawn(async move {
            let mut builder = http.request(parts.method, parts.uri.to_string()).body(body);
            for (name, value) in &parts.headers {
                builder = builder.header(name, value);
            }
            let response = builder.send().await?;
            let status = response.status();
            let body = response.bytes().await?;
            Ok::<_, reqwest::Error>((status, body))
        });
        let (status, body) = sent.await??;
        let mut response = http::Response::new(body);
        *response.status_mut() = status;
        Ok(response)
    }
}
