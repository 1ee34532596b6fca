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
//! - `POST /v1/chat/completions` and `POST /v1/responses` (OpenAI-compatible:
//!   chat completions, and the Responses API Codex speaks), `POST
//!   /v1/messages` and `POST /v1/messages/count_tokens` (Anthropic) go to
//!   the provider of the model the request names, which
//!   must be one of troupe's own ([`offered`]: a name `models.toml` defines,
//!   or the default model's spec; a provider's model id that exactly one of
//!   them uses is taken too). The request's `model` becomes the provider's
//!   id, its headers are dropped but for those that mean something to the
//!   API (content type, accept, Anthropic's version and betas) — whatever
//!   `Authorization` or `x-api-key` it sent is gone — and the real key is
//!   added here. The answer flows back as it arrives: a stream, event by
//!   event.
//! - A model troupe calls in-process, with no address (a script above
//!   all, so that an executor can be tested offline), is answered here in
//!   each of those wire formats (modules `served`, `anthropic`,
//!   `responses`; token counts are estimated). A request with
//!   `x-troupe-executor: NAME` is answered by the provider for that
//!   harness ([`Provider::for_executor`]: a script's `executors.NAME`
//!   turns); a script with none for it is refused, saying so.
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
//! The same relay serves an executor running outside any environment, on
//! the host's loopback ([`Relay::listen`]). There any local process could
//! reach it, so it takes only calls carrying the key it was given
//! ([`Relay::with_secret`]).
//!
//! Bounds: a request body of at most [`MAX_BODY`] bytes; the endpoint's
//! concurrency cap, shared with troupe's own calls to it; the first byte and
//! each silence within a stream timed like troupe's own calls. A client
//! that goes away drops its call and the provider's connection with it.
//! Each relayed call ends with a log line: whom the relay serves (the
//! environment's sandbox, or the executor), the model, the
//! status, the tokens the answer's `usage` reported and their cost at the
//! model's prices.

mod anthropic;
mod responses;
mod served;

use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU16, Ordering};
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
use troupe_runtime::model::limit::{ConcurrencyLimits, DEFAULT_CONCURRENCY};
use troupe_runtime::model::sse::SseParser;
use troupe_runtime::model::{Api, ModelEndpoint, Pricing, Provider, Timeouts};
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
#[derive(Clone)]
pub struct Offered {
    /// The name a request gives as its `model`.
    pub name: String,
    /// Its endpoint and key, or what is missing.
    pub endpoint: Result<ModelEndpoint, String>,
    /// A model troupe calls itself, with no endpoint (a script): the relay
    /// answers its calls in-process.
    pub served: Option<Arc<dyn Provider>>,
}

impl std::fmt::Debug for Offered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Offered")
            .field("name", &self.name)
            .field("endpoint", &self.endpoint)
            .field("served", &self.served.as_ref().map(|p| p.name()))
            .finish()
    }
}

/// The models a node's relays offer, read now: the names `models.toml`
/// defines, and the default model's spec. One with no endpoint is served
/// in-process when troupe can call it itself.
pub fn offered(ctx: &NodeContext) -> Vec<Offered> {
    let mut names = ctx.model_names();
    let default = ctx.settings.default_model.trim();
    if !default.is_empty() && !names.iter().any(|n| n == default) {
        names.push(default.to_string());
    }
    names
        .into_iter()
        .map(|name| {
            let endpoint = ctx.model_endpoint(&name).map_err(|e| e.to_string());
            let served = match endpoint {
                Ok(_) => None,
                Err(_) => ctx.served_model(&name),
            };
            Offered {
                name,
                endpoint,
                served,
            }
        })
        .collect()
}

/// A model's name as a harness's command line can carry it: pi's
/// `--model` reads `provider/id` and a `:thinking` suffix, so only letters,
/// digits, `.`, `_` and `-` (`script:/tmp/s.json` is `script--tmp-s.json`).
pub fn model_id(name: &str) -> String {
    let id: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .take(64)
        .collect();
    let id = id.trim_matches('-').to_string();
    if id.is_empty() {
        "model".into()
    } else {
        id
    }
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

/// One environment's (or one executor's) relay; clones share it.
#[derive(Debug, Clone)]
pub struct Relay(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    /// Whom it serves, for its log lines: a sandbox, an executor.
    origin: String,
    models: Vec<Offered>,
    timeouts: Timeouts,
    limits: Arc<ConcurrencyLimits>,
    /// The key every call must carry, if set.
    secret: Option<String>,
    /// The host port it listens on ([`Relay::listen`]); 0 inside a sandbox.
    port: AtomicU16,
}

impl Relay {
    /// The relay serving `origin` (an environment's sandbox, an executor:
    /// it names the relay in logs), offering `models`.
    pub fn new(origin: impl Into<String>, models: Vec<Offered>) -> Self {
        Self(Arc::new(Inner {
            origin: origin.into(),
            models,
            timeouts: Timeouts::default(),
            limits: ConcurrencyLimits::global(),
            secret: None,
            port: AtomicU16::new(0),
        }))
    }

    /// A relay like this one that takes only calls carrying `secret`, as
    /// `Authorization: Bearer SECRET` or `x-api-key: SECRET`; any other is
    /// refused with 401. For a relay on the host's loopback, which any
    /// local process can reach.
    pub fn with_secret(self, secret: String) -> Self {
        let inner = &self.0;
        Self(Arc::new(Inner {
            origin: inner.origin.clone(),
            models: inner.models.clone(),
            timeouts: inner.timeouts,
            limits: Arc::clone(&inner.limits),
            secret: Some(secret),
            port: AtomicU16::new(inner.port.load(Ordering::Acquire)),
        }))
    }

    /// Listens on `127.0.0.1` at a port of the system's choosing, serving
    /// every connection until `stopped` is cancelled, and returns the
    /// address: for one executor run outside any environment (point its
    /// client at `http://ADDRESS/v1`). A relay listens once.
    pub async fn listen(&self, stopped: CancellationToken) -> std::io::Result<SocketAddr> {
        let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let address = listener.local_addr()?;
        if self
            .0
            .port
            .compare_exchange(0, address.port(), Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "this model relay already listens; make another relay for another executor",
            ));
        }
        let relay = self.clone();
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    () = stopped.cancelled() => break,
                    accepted = listener.accept() => accepted,
                };
                match accepted {
                    Ok((client, _)) => relay.spawn_serving(client, stopped.clone()),
                    Err(e) => {
                        tracing::warn!(origin = %relay.0.origin, error = %e, "the model relay could not take a connection");
                    }
                }
            }
        });
        Ok(address)
    }

    /// Serves one connection from inside the sandbox until it closes or
    /// `stopped` is cancelled.
    pub fn serve(&self, client: std::net::TcpStream, stopped: CancellationToken) {
        let Ok(client) = client
            .set_nonblocking(true)
            .and_then(|()| tokio::net::TcpStream::from_std(client))
        else {
            return;
        };
        self.spawn_serving(client, stopped);
    }

    fn spawn_serving(&self, client: tokio::net::TcpStream, stopped: CancellationToken) {
        let relay = self.clone();
        tokio::spawn(async move {
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
            tracing::debug!(origin = %self.0.origin, error = %e, "a model relay connection ended");
        }
    }

    async fn answer(&self, request: Request<Incoming>) -> Response<Body> {
        let line = format!("{} {}", request.method(), request.uri().path());
        let answered = match request.uri().authority() {
            Some(authority) if !self.is_named(authority.host(), authority.port_u16()) => {
                Err(Refusal::new(
                    StatusCode::MISDIRECTED_REQUEST,
                    "misdirected_request",
                    format!(
                        "this is the model relay, not a proxy: it serves only \
                         http://127.0.0.1:{}, not {authority}",
                        self.port()
                    ),
                ))
            }
            _ if !self.admits(request.headers()) => Err(Refusal::new(
                StatusCode::UNAUTHORIZED,
                "authentication_error",
                "this relay takes only calls carrying the key it was given, as \
                 `Authorization: Bearer KEY` or `x-api-key: KEY`"
                    .into(),
            )),
            _ => match route(request.method(), request.uri().path()) {
                Ok(Route::Models) => Ok(self.list()),
                Ok(Route::Call(wire)) => self.forward(wire, request).await,
                Err(refusal) => Err(refusal),
            },
        };
        answered.unwrap_or_else(|refusal| {
            tracing::info!(
                origin = %self.0.origin,
                request = %line,
                status = refusal.status.as_u16(),
                reason = %refusal.message,
                "model relay refused a request"
            );
            refusal.response()
        })
    }

    /// The port the relay is reached at: where it listens on the host, or
    /// [`PORT`] inside a sandbox.
    fn port(&self) -> u16 {
        match self.0.port.load(Ordering::Acquire) {
            0 => PORT,
            bound => bound,
        }
    }

    /// Whether `host:port` names this relay.
    fn is_named(&self, host: &str, port: Option<u16>) -> bool {
        match self.0.port.load(Ordering::Acquire) {
            0 => is_relay(host, port),
            bound => port == Some(bound) && matches!(host, "127.0.0.1" | "localhost"),
        }
    }

    /// Whether a request carries the relay's key, when it has one.
    fn admits(&self, headers: &HeaderMap) -> bool {
        let Some(secret) = &self.0.secret else {
            return true;
        };
        let bearer = headers
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        let key = headers.get("x-api-key").and_then(|v| v.to_str().ok());
        [bearer, key]
            .into_iter()
            .flatten()
            .any(|given| same_secret(given.as_bytes(), secret.as_bytes()))
    }

    /// `GET /v1/models`: the models that can be called, in the shape of
    /// both APIs' lists.
    fn list(&self) -> Response<Body> {
        let data: Vec<Value> = self
            .0
            .models
            .iter()
            .filter_map(|offered| {
                Some(json!({
                    "id": offered.name,
                    "object": "model",
                    "type": "model",
                    "display_name": offered.name,
                    "owned_by": "troupe",
                    "api": api_name(offered.api()?),
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
        // A harness's command line takes fewer characters than troupe's
        // names (`script:/path` is not a model id pi can be given): the
        // name as an executor's `models.json` writes it is taken too.
        if let Some(offered) = models.iter().find(|o| model_id(&o.name) == named) {
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
            .filter_map(|o| Some(format!("{} ({})", o.name, api_name(o.api()?))))
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
        wire: Wire,
        request: Request<Incoming>,
    ) -> Result<Response<Body>, Refusal> {
        let api = wire.api();
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
        let endpoint = match (&offered.endpoint, &offered.served) {
            (Ok(endpoint), _) => endpoint,
            (Err(_), Some(provider)) => {
                return self
                    .answer_here(wire, offered, provider, &parts.headers, &body, started)
                    .await
            }
            (Err(why), None) => {
                return Err(Refusal::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "model_unavailable",
                    format!("model {} cannot be relayed: {why}", offered.name),
                ))
            }
        };
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
        let url = match wire {
            Wire::Chat => format!("{base}/chat/completions"),
            Wire::Responses => format!("{base}/responses"),
            Wire::Messages => format!("{base}/v1/messages"),
            Wire::CountTokens => format!("{base}/v1/messages/count_tokens"),
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
            origin: self.0.origin.clone(),
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

    /// Answers a call to a model with no address from its provider here,
    /// in the wire format it came in.
    async fn answer_here(
        &self,
        wire: Wire,
        offered: &Offered,
        provider: &Arc<dyn Provider>,
        headers: &HeaderMap,
        body: &Value,
        started: Instant,
    ) -> Result<Response<Body>, Refusal> {
        let provider = match headers.get(served::EXECUTOR_HEADER) {
            None => Arc::clone(provider),
            Some(value) => {
                let executor = value.to_str().unwrap_or_default().trim();
                match provider.for_executor(executor) {
                    Some(own) => own,
                    None if provider.name() == "script" => {
                        return Err(Refusal::new(
                            StatusCode::BAD_REQUEST,
                            "invalid_request_error",
                            format!(
                                "script {} has no turns for executor {executor}; add an \
                                 `executors.{executor}.turns` section to it",
                                offered.name
                            ),
                        ))
                    }
                    None => Arc::clone(provider),
                }
            }
        };
        let mut tally = Tally {
            origin: self.0.origin.clone(),
            model: offered.name.clone(),
            pricing: Pricing::default(),
            status: StatusCode::OK.as_u16(),
            started,
            sse: None,
            whole: Vec::new(),
            usage: Usage::default(),
            bytes: 0,
            ended: "cut short",
        };
        let (request, stream) = match wire {
            Wire::Chat => {
                let chat = served::chat_request(body, &offered.name)?;
                (chat.request, chat.stream)
            }
            Wire::Messages => anthropic::request(body, &offered.name)?,
            Wire::Responses => responses::request(body, &offered.name)?,
            Wire::CountTokens => {
                tally.ended = "complete";
                return Ok(whole(StatusCode::OK, &anthropic::count_tokens(body)));
            }
        };
        let events = provider
            .stream(request)
            .await
            .map_err(|e| served::refusal(&e))?;
        if wire != Wire::Chat {
            let gathered = match served::gather(events).await {
                Ok(gathered) => gathered,
                Err(e) => {
                    let refusal = served::refusal(&e);
                    tally.status = refusal.status.as_u16();
                    tally.ended = "the model failed";
                    return Err(refusal);
                }
            };
            tally.usage = gathered.usage.unwrap_or_default();
            tally.ended = "complete";
            let answer = match wire {
                Wire::Messages => anthropic::answer(&gathered, &offered.name),
                _ => responses::answer(&gathered, &offered.name),
            };
            return Ok(if stream {
                served::event_stream(&answer.events)
            } else {
                whole(StatusCode::OK, &answer.whole)
            });
        }
        let mut answer = served::Answer::new(&offered.name);
        if stream {
            let mut response = Response::new(
                StreamBody::new(served::chunks(events, answer, tally)).boxed_unsync(),
            );
            let headers = response.headers_mut();
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
            headers.insert(
                hyper::header::CACHE_CONTROL,
                HeaderValue::from_static("no-cache"),
            );
            return Ok(response);
        }
        let mut events = events;
        while let Some(event) = events.next().await {
            match event {
                Ok(event) => {
                    answer.event(event);
                }
                Err(e) => {
                    let refusal = served::refusal(&e);
                    tally.status = refusal.status.as_u16();
                    tally.ended = "the model failed";
                    return Err(refusal);
                }
            }
        }
        let whole_answer = answer.whole();
        tally.usage = answer.usage().unwrap_or_default();
        tally.ended = "complete";
        Ok(whole(StatusCode::OK, &whole_answer))
    }
}

/// A wire format the relay takes calls in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wire {
    /// OpenAI chat completions.
    Chat,
    /// OpenAI's Responses API.
    Responses,
    /// Anthropic messages.
    Messages,
    /// Anthropic's token count of a messages request.
    CountTokens,
}

impl Wire {
    /// The provider API it is forwarded to.
    fn api(self) -> Api {
        match self {
            Wire::Chat | Wire::Responses => Api::Openai,
            Wire::Messages | Wire::CountTokens => Api::Anthropic,
        }
    }
}

impl Offered {
    /// The API its calls are made in: its endpoint's, OpenAI's when the
    /// relay answers it itself; `None` when it cannot be called.
    fn api(&self) -> Option<Api> {
        match (&self.endpoint, &self.served) {
            (Ok(endpoint), _) => Some(endpoint.api),
            (Err(_), Some(_)) => Some(Api::Openai),
            (Err(_), None) => None,
        }
    }
}

/// Whether `given` is `secret`, compared in time that does not depend on
/// where they first differ.
fn same_secret(given: &[u8], secret: &[u8]) -> bool {
    given.len() == secret.len()
        && given
            .iter()
            .zip(secret)
            .fold(0u8, |differ, (a, b)| differ | (a ^ b))
            == 0
}

/// What a request asks of the relay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    /// `GET /v1/models`.
    Models,
    /// A call to forward (or answer here), in this wire format.
    Call(Wire),
}

/// The route of `method path`, or why there is none.
fn route(method: &Method, path: &str) -> Result<Route, Refusal> {
    let (route, allowed) = match path {
        "/v1/models" => (Route::Models, Method::GET),
        "/v1/chat/completions" => (Route::Call(Wire::Chat), Method::POST),
        "/v1/responses" => (Route::Call(Wire::Responses), Method::POST),
        "/v1/messages" => (Route::Call(Wire::Messages), Method::POST),
        "/v1/messages/count_tokens" => (Route::Call(Wire::CountTokens), Method::POST),
        _ => {
            return Err(Refusal::new(
                StatusCode::NOT_FOUND,
                "not_found",
                format!(
                    "nothing at {method} {path}: the relay forwards only POST \
                     /v1/chat/completions and /v1/responses (OpenAI-compatible), POST \
                     /v1/messages and /v1/messages/count_tokens (Anthropic), and answers GET \
                     /v1/models"
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
    origin: String,
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
            origin = %self.origin,
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
            &json!({"type": "error", "error": self.error()}),
        )
    }

    /// The `error` object itself.
    fn error(&self) -> Value {
        json!({
            "type": self.kind,
            "code": self.kind,
            "message": format!("troupe model relay: {}", self.message),
        })
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
