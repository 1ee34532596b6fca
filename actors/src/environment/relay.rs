//! An environment's model relay: how a program in a sandbox calls a model
//! with neither troupe's key nor a network.
//!
//! An outside executor (a coding agent working in the environment) needs a
//! model. Handing it troupe's key would put the key where every command
//! can read it, and send it wherever the egress allow-list reaches; handing
//! it the network would undo the sandbox. So inside, process 1 listens on
//! `127.0.0.1:`[`PORT`] and hands each connection to the Sandbox actor,
//! which serves HTTP here, outside:
//!
//! - `POST /v1/chat/completions` (OpenAI-compatible) and `POST /v1/messages`
//!   (Anthropic) go to the provider of the model the request names, which
//!   must be one of troupe's own ([`offered`]: a name `models.toml` defines,
//!   or the default model's spec; a provider's model id that exactly one of
//!   them uses is taken too). The request's `model` becomes the provider's
//!   id, its headers are dropped but for those that mean something to the
//!   API (content type, accept, Anthropic's version and betas) — whatever
//!   `Authorization` or `x-api-key` it sent is gone — and the real key is
//!   added here. The answer flows back as it arrives: a stream, event by
//!   event.
//! - `GET /v1/models` is answered from troupe's configuration.
//! - Anything else is refused; every refusal is a JSON error in the shape
//!   both APIs' clients read (`error.message`), saying what to do instead.
//!
//! Commands find it through [`environment`]: `OPENAI_BASE_URL`,
//! `ANTHROPIC_BASE_URL`, `TROUPE_MODEL_RELAY`, and placeholder keys (clients
//! refuse to start without one; the placeholder is no secret and is
//! dropped here). It is offered where the sandbox has a network namespace
//! of its own: with `[environments] network`, its loopback would be the
//! machine's, where any local process could spend troupe's key.
//!
//! Bounds: a request body of at most [`MAX_BODY`] bytes; the endpoint's
//! concurrency cap, shared with troupe's own calls to it; the first byte and
//! each silence within a stream timed like troupe's own calls. A client
//! that goes away drops its call and the provider's connection with it.
//! Each relayed call ends with a log line: the sandbox, the model, the
//! status, the tokens the answer's `usage` reported and their cost at the
//! model's prices.

use std::convert::Infallible;
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::{Stream, StreamExt};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::OwnedSemaphorePermit;
use tokio_util::sync::CancellationToken;
use troupe_runtime::id::SandboxId;
use troupe_runtime::model::limit::{ConcurrencyLimits, DEFAULT_CONCURRENCY};
use troupe_runtime::model::sse::SseParser;
use troupe_runtime::model::{Api, ModelEndpoint, Pricing, Timeouts};
use troupe_runtime::protocol::Usage;

use crate::node::NodeContext;

/// The relay's port on the sandbox's own loopback.
pub const PORT: u16 = 3129;

/// The largest request body taken.
pub const MAX_BODY: usize = 8 * 1024 * 1024;

/// The key commands are given: any client's "a key is set" check passes,
/// and it opens nothing (the relay drops it and adds the real one).
pub const PLACEHOLDER_KEY: &str = "troupe-model-relay-adds-the-real-key";

/// The largest whole (not streamed) answer read for its usage.
const MAX_TALLIED: usize = MAX_BODY;

/// A response body: whole, or streamed from the provider.
type Body = UnsyncBoxBody<Bytes, std::io::Error>;

/// The variables that point commands at the relay.
pub fn environment() -> Vec<(String, String)> {
    let url = format!("http://127.0.0.1:{PORT}");
    vec![
        ("OPENAI_BASE_URL".into(), format!("{url}/v1")),
        ("OPENAI_API_KEY".into(), PLACEHOLDER_KEY.into()),
        ("ANTHROPIC_BASE_URL".into(), url.clone()),
        ("ANTHROPIC_API_KEY".into(), PLACEHOLDER_KEY.into()),
        ("TROUPE_MODEL_RELAY".into(), url),
    ]
}

/// A model the relay offers: troupe's name for it, and where its calls go
/// (or why they cannot).
#[derive(Debug, Clone)]
pub struct Offered {
    /// The name a request gives as its `model`.
    pub name: String,
    /// Its endpoint and key, or what is missing.
    pub endpoint: Result<ModelEndpoint, String>,
}

/// The models a node's relays offer, read now: the names `models.toml`
/// defines, and the default model's spec.
pub fn offered(ctx: &NodeContext) -> Vec<Offered> {
    let mut names = ctx.model_names();
    let default = ctx.settings.default_model.trim();
    if !default.is_empty() && !names.iter().any(|n| n == default) {
        names.push(default.to_string());
    }
    names
        .into_iter()
        .map(|name| Offered {
            endpoint: ctx.model_endpoint(&name).map_err(|e| e.to_string()),
            name,
        })
        .collect()
}

/// The connection pool of every relay: it follows no redirect (a key is
/// never sent on to where a provider points).
static CLIENT: LazyLock<reqwest::Client> = LazyLock::new(|| {
    troupe_runtime::net::client_builder()
        .connect_timeout(Timeouts::default().connect)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap_or_default()
});

/// One environment's relay; clones share it.
#[derive(Debug, Clone)]
pub struct Relay(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    sandbox: SandboxId,
    models: Vec<Offered>,
    timeouts: Timeouts,
    limits: Arc<ConcurrencyLimits>,
}

impl Relay {
    /// The relay of environment `sandbox`, offering `models`.
    pub fn new(sandbox: SandboxId, models: Vec<Offered>) -> Self {
        Self(Arc::new(Inner {
            sandbox,
            models,
            timeouts: Timeouts::default(),
            limits: ConcurrencyLimits::global(),
        }))
    }

    /// Serves one connection from inside the sandbox until it closes or
    /// `stopped` is cancelled.
    pub fn serve(&self, client: std::net::TcpStream, stopped: CancellationToken) {
        let relay = self.clone();
        tokio::spawn(async move {
            let Ok(client) = client
                .set_nonblocking(true)
                .and_then(|()| tokio::net::TcpStream::from_std(client))
            else {
                return;
            };
            tokio::select! {
                () = stopped.cancelled() => {}
                () = relay.serve_io(client, true) => {}
            }
        });
    }

    /// Serves HTTP/1.1 on `io` until it closes (after one request unless
    /// `keep_alive`).
    pub(crate) async fn serve_io<I>(&self, io: I, keep_alive: bool)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let relay = self.clone();
        let service = hyper::service::service_fn(move |request| {
            let relay = relay.clone();
            async move { Ok::<_, Infallible>(relay.answer(request).await) }
        });
        let served = hyper::server::conn::http1::Builder::new()
            .keep_alive(keep_alive)
            .serve_connection(hyper_util::rt::TokioIo::new(io), service)
            .await;
        if let Err(e) = served {
            tracing::debug!(sandbox = %self.0.sandbox, error = %e, "a model relay connection ended");
        }
    }

    async fn answer(&self, request: Request<Incoming>) -> Response<Body> {
        let line = format!("{} {}", request.method(), request.uri().path());
        let answered = match request.uri().authority() {
            Some(authority) if !is_relay(authority.host(), authority.port_u16()) => {
                Err(Refusal::new(
                    StatusCode::MISDIRECTED_REQUEST,
                    "misdirected_request",
                    format!(
                        "this is the model relay, not a proxy: it serves only \
                         http://127.0.0.1:{PORT}, not {authority}"
                    ),
                ))
            }
            _ => match route(request.method(), request.uri().path()) {
                Ok(Route::Models) => Ok(self.list()),
                Ok(Route::Forward(api)) => self.forward(api, request).await,
                Err(refusal) => Err(refusal),
            },
        };
        answered.unwrap_or_else(|refusal| {
            tracing::info!(
                sandbox = %self.0.sandbox,
                request = %line,
                status = refusal.status.as_u16(),
                reason = %refusal.message,
                "model relay refused a request"
            );
            refusal.response()
        })
    }

    /// `GET /v1/models`: the models that can be called, in the shape of
    /// both APIs' lists.
    fn list(&self) -> Response<Body> {
        let data: Vec<Value> = self
            .0
            .models
            .iter()
            .filter_map(|offered| {
                let endpoint = offered.endpoint.as_ref().ok()?;
                Some(json!({
                    "id": offered.name,
                    "object": "model",
                    "type": "model",
                    "display_name": offered.name,
                    "owned_by": "troupe",
                    "api": api_name(endpoint.api),
                }))
            })
            .collect();
        whole(
            StatusCode::OK,
            &json!({"object": "list", "data": data, "has_more": false}),
        )
    }

    /// The model a request named: by troupe's name, else by the provider's
    /// id when exactly one model has it.
    fn find(&self, named: &str) -> Result<&Offered, Refusal> {
        let models = &self.0.models;
        if let Some(offered) = models.iter().find(|o| o.name == named) {
            return Ok(offered);
        }
        let by_id: Vec<&Offered> = models
            .iter()
            .filter(|o| o.endpoint.as_ref().is_ok_and(|e| e.model == named))
            .collect();
        match by_id[..] {
            [one] => Ok(one),
            _ => Err(Refusal::new(
                StatusCode::NOT_FOUND,
                "model_not_found",
                format!(
                    "model {named:?} is not one of troupe's models; {}",
                    self.choices()
                ),
            )),
        }
    }

    /// What a request may name, said for an error.
    fn choices(&self) -> String {
        let usable: Vec<String> = self
            .0
            .models
            .iter()
            .filter_map(|o| {
                let endpoint = o.endpoint.as_ref().ok()?;
                Some(format!("{} ({})", o.name, api_name(endpoint.api)))
            })
            .collect();
        if usable.is_empty() {
            "troupe has no model it can relay (a name in models.toml, or the default model, \
             with its key set where troupe runs)"
                .into()
        } else {
            format!("use one of: {}", usable.join(", "))
        }
    }

    /// Forwards a call to its model's provider and streams the answer back.
    async fn forward(
        &self,
        api: Api,
        request: Request<Incoming>,
    ) -> Result<Response<Body>, Refusal> {
        let started = Instant::now();
        let (parts, body) = request.into_parts();
        let mut body = read_json(&parts.headers, body).await?;
        let named = match body.get("model") {
            Some(Value::String(model)) => model.clone(),
            _ => {
                return Err(Refusal::new(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    format!("the request names no \"model\"; {}", self.choices()),
                ))
            }
        };
        let offered = self.find(&named)?;
        let endpoint = offered.endpoint.as_ref().map_err(|why| {
            Refusal::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "model_unavailable",
                format!("model {} cannot be relayed: {why}", offered.name),
            )
        })?;
        if endpoint.api != api {
            let (speaks, path, variable) = match endpoint.api {
                Api::Openai => (
                    "OpenAI chat completions",
                    "/v1/chat/completions",
                    "OPENAI_BASE_URL",
                ),
                Api::Anthropic => ("Anthropic messages", "/v1/messages", "ANTHROPIC_BASE_URL"),
            };
            return Err(Refusal::new(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                format!(
                    "model {} speaks {speaks}: send it to POST {path} (${variable})",
                    offered.name
                ),
            ));
        }
        body["model"] = Value::String(endpoint.model.clone());
        let base = endpoint.base_url.trim_end_matches('/');
        let url = match api {
            Api::Openai => format!("{base}/chat/completions"),
            Api::Anthropic => format!("{base}/v1/messages"),
        };
        let headers = upstream_headers(api, &parts.headers, endpoint)?;
        let unavailable = || {
            Refusal::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "model_unavailable",
                "the relay is stopping".into(),
            )
        };
        let permit = self
            .0
            .limits
            .get(
                &endpoint.base_url,
                endpoint.max_concurrency.unwrap_or(DEFAULT_CONCURRENCY),
            )
            .acquire()
            .await
            .map_err(|_| unavailable())?;
        let send = CLIENT
            .post(&url)
            .headers(headers)
            .body(body.to_string())
            .send();
        let response = match tokio::time::timeout(self.0.timeouts.first_byte, send).await {
            Ok(Ok(response)) => response,
            Ok(Err(e)) => {
                return Err(Refusal::new(
                    StatusCode::BAD_GATEWAY,
                    "upstream_error",
                    format!(
                        "model {}'s provider could not be reached: {}",
                        offered.name,
                        e.without_url()
                    ),
                ))
            }
            Err(_) => {
                return Err(Refusal::new(
                    StatusCode::GATEWAY_TIMEOUT,
                    "upstream_timeout",
                    format!(
                        "model {}'s provider did not answer within {} s",
                        offered.name,
                        self.0.timeouts.first_byte.as_secs()
                    ),
                ))
            }
        };
        let status = response.status();
        let mut out = Response::builder().status(status);
        for (name, value) in response.headers() {
            if passes_back(name) {
                out = out.header(name, value);
            }
        }
        let streamed = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let tally = Tally {
            sandbox: self.0.sandbox,
            model: offered.name.clone(),
            pricing: endpoint.pricing,
            status: status.as_u16(),
            started,
            sse: streamed.then(SseParser::new),
            whole: Vec::new(),
            usage: Usage::default(),
            bytes: 0,
            ended: "cut short",
        };
        let stream = relayed(
            response.bytes_stream(),
            self.0.timeouts.between_chunks,
            tally,
            permit,
        );
        out.body(StreamBody::new(stream).boxed_unsync())
            .map_err(|e| {
                Refusal::new(
                    StatusCode::BAD_GATEWAY,
                    "upstream_error",
                    format!("the provider's answer could not be passed on: {e}"),
                )
            })
    }
}

/// What a request asks of the relay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    /// `GET /v1/models`.
    Models,
    /// A call to forward, in this API.
    Forward(Api),
}

/// The route of `method path`, or why there is none.
fn route(method: &Method, path: &str) -> Result<Route, Refusal> {
    let (route, allowed) = match path {
        "/v1/models" => (Route::Models, Method::GET),
        "/v1/chat/completions" => (Route::Forward(Api::Openai), Method::POST),
        "/v1/messages" => (Route::Forward(Api::Anthropic), Method::POST),
        _ => {
            return Err(Refusal::new(
                StatusCode::NOT_FOUND,
                "not_found",
                format!(
                    "nothing at {method} {path}: the relay forwards only POST \
                     /v1/chat/completions (OpenAI-compatible) and POST /v1/messages (Anthropic), \
                     and answers GET /v1/models"
                ),
            ))
        }
    };
    if *method != allowed {
        return Err(Refusal::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            format!("{path} takes {allowed}, not {method}"),
        ));
    }
    Ok(route)
}

/// Whether `host:port` is the relay as seen from inside.
pub(crate) fn is_relay(host: &str, port: Option<u16>) -> bool {
    port.unwrap_or(80) == PORT && matches!(host, "127.0.0.1" | "localhost")
}

fn api_name(api: Api) -> &'static str {
    match api {
        Api::Openai => "openai",
        Api::Anthropic => "anthropic",
    }
}

/// The request's body, bounded, as a JSON object.
async fn read_json(headers: &HeaderMap, body: Incoming) -> Result<Value, Refusal> {
    let too_large = || {
        Refusal::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "request_too_large",
            format!(
                "the request body is over the relay's limit of {} MiB",
                MAX_BODY / (1024 * 1024)
            ),
        )
    };
    let declared = headers
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY as u64) {
        return Err(too_large());
    }
    let bytes = match Limited::new(body, MAX_BODY).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => return Err(too_large()),
        Err(e) => {
            return Err(Refusal::new(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                format!("the request body could not be read: {e}"),
            ))
        }
    };
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(value) if value.is_object() => Ok(value),
        Ok(_) => Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "the request body is JSON but not an object; send an object naming a \"model\"".into(),
        )),
        Err(e) => Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            format!("the request body is not JSON ({e}); send an object naming a \"model\""),
        )),
    }
}

/// The headers sent to the provider: the few the API reads from the
/// client, and the real key. Nothing else of the request passes.
fn upstream_headers(
    api: Api,
    incoming: &HeaderMap,
    endpoint: &ModelEndpoint,
) -> Result<HeaderMap, Refusal> {
    let bad_key = || {
        Refusal::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "model_unavailable",
            "the model's key is not a valid header value; the house's owner must fix it".into(),
        )
    };
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Some(accept) = incoming.get(ACCEPT) {
        headers.insert(ACCEPT, accept.clone());
    }
    match api {
        Api::Openai => {
            if let Some(key) = &endpoint.api_key {
                let mut value =
                    HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| bad_key())?;
                value.set_sensitive(true);
                headers.insert(AUTHORIZATION, value);
            }
        }
        Api::Anthropic => {
            let version = HeaderName::from_static("anthropic-version");
            let beta = HeaderName::from_static("anthropic-beta");
            let given = incoming.get(&version).cloned().unwrap_or_else(|| {
                HeaderValue::from_static(troupe_runtime::model::anthropic::API_VERSION)
            });
            headers.insert(version, given);
            if let Some(value) = incoming.get(&beta) {
                headers.insert(beta, value.clone());
            }
            if let Some(key) = &endpoint.api_key {
                let mut value = HeaderValue::from_str(key).map_err(|_| bad_key())?;
                value.set_sensitive(true);
                headers.insert(HeaderName::from_static("x-api-key"), value);
            }
        }
    }
    Ok(headers)
}

/// Whether a provider's response header is passed back to the client.
fn passes_back(name: &HeaderName) -> bool {
    let name = name.as_str();
    matches!(
        name,
        "content-type" | "cache-control" | "retry-after" | "request-id" | "x-request-id"
    ) || name.starts_with("x-ratelimit-")
        || name.starts_with("anthropic-ratelimit-")
}

/// The provider's body as the client's: each piece passed on as it comes,
/// tallied, the endpoint's permit held until it ends or is dropped. A
/// provider that breaks off or falls silent too long breaks the client's
/// response off too (it is not ended as if complete).
fn relayed(
    upstream: impl Stream<Item = reqwest::Result<Bytes>> + Send + Unpin + 'static,
    silence: Duration,
    tally: Tally,
    permit: OwnedSemaphorePermit,
) -> impl Stream<Item = Result<Frame<Bytes>, std::io::Error>> + Send + 'static {
    futures::stream::unfold(Some((upstream, tally, permit)), move |state| async move {
        let (mut upstream, mut tally, permit) = state?;
        match tokio::time::timeout(silence, upstream.next()).await {
            Ok(Some(Ok(bytes))) => {
                tally.push(&bytes);
                Some((Ok(Frame::data(bytes)), Some((upstream, tally, permit))))
            }
            Ok(None) => {
                tally.finish();
                None
            }
            Ok(Some(Err(e))) => {
                tally.ended = "broken off by the provider";
                Some((Err(std::io::Error::other(e.without_url())), None))
            }
            Err(_) => {
                tally.ended = "the provider fell silent";
                let why = format!("the provider sent nothing for {} s", silence.as_secs());
                Some((
                    Err(std::io::Error::new(std::io::ErrorKind::TimedOut, why)),
                    None,
                ))
            }
        }
    })
}

/// A relayed call's account: its answer's usage, logged when it ends.
struct Tally {
    sandbox: SandboxId,
    model: String,
    pricing: Pricing,
    status: u16,
    started: Instant,
    /// An event stream's parser; `None` for a whole answer.
    sse: Option<SseParser>,
    /// A whole answer, read for its usage at the end.
    whole: Vec<u8>,
    usage: Usage,
    bytes: u64,
    ended: &'static str,
}

impl Tally {
    fn push(&mut self, bytes: &[u8]) {
        self.bytes += bytes.len() as u64;
        match &mut self.sse {
            Some(parser) => {
                for event in parser.push(bytes) {
                    if let Ok(value) = serde_json::from_str::<Value>(&event.data) {
                        read_usage(&value, &mut self.usage);
                    }
                }
            }
            None if self.whole.len() + bytes.len() <= MAX_TALLIED => {
                self.whole.extend_from_slice(bytes);
            }
            None => {}
        }
    }

    fn finish(&mut self) {
        if self.sse.is_none() {
            if let Ok(value) = serde_json::from_slice::<Value>(&self.whole) {
                read_usage(&value, &mut self.usage);
            }
        }
        self.ended = "complete";
    }
}

impl Drop for Tally {
    /// Every call is accounted for, a client that went away included.
    fn drop(&mut self) {
        let usage = &self.usage;
        tracing::info!(
            sandbox = %self.sandbox,
            model = %self.model,
            status = self.status,
            ended = self.ended,
            input_tokens = usage.input_tokens,
            output_tokens = usage.output_tokens,
            cache_read_tokens = usage.cache_read_tokens,
            cache_write_tokens = usage.cache_write_tokens,
            cost_usd = self.pricing.cost(usage),
            bytes = self.bytes,
            millis = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            "model call relayed"
        );
    }
}

/// Reads the usage in one answer or stream event into `usage`: OpenAI's
/// (`usage.prompt_tokens`, …) or Anthropic's (`usage` or
/// `message.usage`, running totals: the latest wins).
fn read_usage(value: &Value, usage: &mut Usage) {
    let found = value
        .get("usage")
        .or_else(|| value.get("message").and_then(|m| m.get("usage")))
        .filter(|u| u.is_object());
    let Some(reported) = found else {
        return;
    };
    let count = |key: &str| reported.get(key).and_then(Value::as_u64);
    if let Some(prompt) = count("prompt_tokens") {
        let cached = reported["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap_or(0);
        usage.input_tokens = prompt.saturating_sub(cached);
        usage.cache_read_tokens = cached;
    }
    if let Some(n) = count("completion_tokens") {
        usage.output_tokens = n;
    }
    if let Some(n) = count("input_tokens") {
        usage.input_tokens = n;
    }
    if let Some(n) = count("output_tokens") {
        usage.output_tokens = n;
    }
    if let Some(n) = count("cache_read_input_tokens") {
        usage.cache_read_tokens = n;
    }
    if let Some(n) = count("cache_creation_input_tokens") {
        usage.cache_write_tokens = n;
    }
}

/// A request the relay does not forward, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Refusal {
    status: StatusCode,
    kind: &'static str,
    message: String,
}

impl Refusal {
    fn new(status: StatusCode, kind: &'static str, message: String) -> Self {
        Self {
            status,
            kind,
            message,
        }
    }

    /// The error in a shape both APIs' clients read: Anthropic's
    /// (`type`, `error.type`) and OpenAI's (`error.message`, `error.code`).
    fn response(&self) -> Response<Body> {
        whole(
            self.status,
            &json!({
                "type": "error",
                "error": {
                    "type": self.kind,
                    "code": self.kind,
                    "message": format!("troupe model relay: {}", self.message),
                },
            }),
        )
    }
}

/// A whole JSON response.
fn whole(status: StatusCode, body: &Value) -> Response<Body> {
    let mut response = Response::new(
        Full::new(Bytes::from(format!("{body}\n")))
            .map_err(|never: Infallible| match never {})
            .boxed_unsync(),
    );
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

#[cfg(test)]
#[path = "relay_tests.rs"]
mod tests;
