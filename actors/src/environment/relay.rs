//! An environment's model relay: how a program in a sandbox calls a model
//! with neither troupe's key nor a network.
//!
//! An outside executor (a coding agent working in the environment) needs a
//! model. Handing it troupe's key would put the key where every command
//! can read it, and send it wherever the egress allow-list reaches; handing
//! it the network would undo the sandbox. So inside, process 1 listens on
//! `127.0.0.1:`[`PORT`] and hands each connection to the environment actor,
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
//! - `POST /mcp`, on an executor's relay given a [`prompts::Prompter`]: the
//!   MCP tool its harness asks permission of (module `prompts`).
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
mod forward;
mod in_process;
pub mod prompts;
mod refusal;
mod responses;
mod served;
mod tally;

use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use hyper::body::Incoming;
use hyper::header::{HeaderMap, AUTHORIZATION};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::sync::CancellationToken;
use troupe_runtime::model::limit::ConcurrencyLimits;
use troupe_runtime::model::{Api, ModelEndpoint, Provider, Timeouts};

use crate::node::Node;
use refusal::{whole, Refusal};
use tally::Tally;

/// The relay's port on the sandbox's own loopback.
pub const PORT: u16 = 3129;

/// The largest request body taken.
pub const MAX_BODY: usize = 8 * 1024 * 1024;

/// The key commands are given: any client's "a key is set" check passes,
/// and it opens nothing (the relay drops it and adds the real one).
pub const PLACEHOLDER_KEY: &str = "troupe-model-relay-adds-the-real-key";

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
pub(crate) fn offered(ctx: &Node) -> Vec<Offered> {
    let mut names = ctx.model_names();
    let default = ctx.settings().default_model.trim();
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
    /// Who decides the harness's permission prompts, served at
    /// [`prompts::PATH`] when set.
    prompter: Option<Arc<dyn prompts::Prompter>>,
}

impl std::fmt::Debug for dyn prompts::Prompter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Prompter")
    }
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
            prompter: None,
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
            prompter: inner.prompter.clone(),
        }))
    }

    /// A relay like this one that also serves the harness's permission
    /// prompts ([`prompts`]), decided by `prompter`. Only for a relay that
    /// takes its key ([`Relay::with_secret`]): the answer lets a call run.
    pub fn with_prompter(self, prompter: Arc<dyn prompts::Prompter>) -> Self {
        let inner = &self.0;
        Self(Arc::new(Inner {
            origin: inner.origin.clone(),
            models: inner.models.clone(),
            timeouts: inner.timeouts,
            limits: Arc::clone(&inner.limits),
            secret: inner.secret.clone(),
            port: AtomicU16::new(inner.port.load(Ordering::Acquire)),
            prompter: Some(prompter),
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
            _ if request.uri().path() == prompts::PATH && self.0.secret.is_some() => {
                match &self.0.prompter {
                    Some(prompter) => prompts::serve(Arc::clone(prompter), request).await,
                    None => Err(Refusal::new(
                        StatusCode::NOT_FOUND,
                        "not_found",
                        "this relay serves no permission prompts: its harness is not asked \
                         through troupe"
                            .into(),
                    )),
                }
            }
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

#[cfg(test)]
#[path = "relay_tests.rs"]
mod tests;
