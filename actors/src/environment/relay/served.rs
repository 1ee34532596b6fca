//! A model with no address, answered by the relay itself in the OpenAI
//! chat completions shape.
//!
//! Some of troupe's models are called in-process, not over HTTP: a script
//! above all, so that an outside executor can be tested offline. The relay
//! has nowhere to forward their calls, so it translates: the request's
//! `messages` and `tools` become a [`ModelRequest`], and the provider's
//! [`ModelEvent`]s become `chat.completion.chunk`s (or one
//! `chat.completion` when the client did not ask for a stream) — the
//! standard shape any OpenAI client parses. Anthropic's messages and
//! OpenAI's Responses API, which Claude Code and Codex speak, are read and
//! written by `anthropic` and `responses` beside this module, on the same
//! gathering of the provider's events.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use hyper::body::Frame;
use hyper::StatusCode;
use serde_json::{json, Map, Value};
use troupe_runtime::model::{ErrorClass, ModelError, ModelEvent, ModelRequest, ModelStream};
use troupe_runtime::protocol::{Message, StopReason, ToolCall, ToolResult, Usage};
use troupe_runtime::tool::ToolDefinition;

use super::{Refusal, Tally};

/// The header naming the outside harness a call comes from (its model
/// calls may be scripted apart from troupe's own).
pub(super) const EXECUTOR_HEADER: &str = "x-troupe-executor";

/// A chat completions request, read.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ChatRequest {
    /// The call for the provider.
    pub request: ModelRequest,
    /// Whether the client asked for a stream.
    pub stream: bool,
}

/// A request the relay cannot read, in the error type every wire format
/// it speaks uses.
pub(super) fn invalid(message: String) -> Refusal {
    Refusal::new(StatusCode::BAD_REQUEST, "invalid_request_error", message)
}

/// One tool a request offers: its `name`, `description` and the schema
/// under the wire format's `schema` key (an object with no properties when
/// left out); `None` without a name.
pub(super) fn tool_definition(tool: &Value, schema: &str) -> Option<ToolDefinition> {
    Some(ToolDefinition {
        name: tool["name"].as_str()?.to_string(),
        description: tool["description"].as_str().unwrap_or_default().to_string(),
        parameters: tool
            .get(schema)
            .cloned()
            .unwrap_or_else(|| json!({"type": "object"}))
            .into(),
    })
}

/// Reads an OpenAI chat completions body into troupe's request for `model`:
/// system and developer messages make the system prompt, a tool message
/// answers the assistant's call of the same id (and takes its tool's name).
pub(super) fn chat_request(body: &Value, model: &str) -> Result<ChatRequest, Refusal> {
    let Some(given) = body.get("messages").and_then(Value::as_array) else {
        return Err(invalid(
            "the request has no \"messages\" list; send the chat as OpenAI chat completions do"
                .into(),
        ));
    };
    let mut system: Vec<String> = Vec::new();
    let mut messages = Vec::with_capacity(given.len());
    let mut called: BTreeMap<String, String> = BTreeMap::new();
    for (n, message) in given.iter().enumerate() {
        let content = text_of(&message["content"]);
        match message["role"].as_str().unwrap_or_default() {
            "system" | "developer" => system.push(content),
            "user" => messages.push(Message::User { content }),
            "assistant" => {
                let mut tool_calls = Vec::new();
                for call in message["tool_calls"].as_array().into_iter().flatten() {
                    let id = call["id"].as_str().unwrap_or_default().to_string();
                    let name = call["function"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string();
                    let arguments = match &call["function"]["arguments"] {
                        Value::String(text) if text.trim().is_empty() => json!({}),
                        Value::String(text) => serde_json::from_str(text)
                            .unwrap_or_else(|_| Value::String(text.clone())),
                        Value::Null => json!({}),
                        other => other.clone(),
                    };
                    called.insert(id.clone(), name.clone());
                    tool_calls.push(ToolCall {
                        id,
                        name,
                        arguments,
                    });
                }
                messages.push(Message::Assistant {
                    content,
                    tool_calls,
                });
            }
            "tool" => {
                let call_id = message["tool_call_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                messages.push(Message::Tool {
                    name: called.get(&call_id).cloned().unwrap_or_default(),
                    call_id,
                    result: ToolResult::ok(content),
                });
            }
            other => {
                return Err(invalid(format!(
                    "message {n} has role {other:?}; use system, developer, user, assistant or tool"
                )))
            }
        }
    }
    let tools = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|tool| tool_definition(tool.get("function")?, "parameters"))
        .collect();
    let max_tokens = body
        .get("max_completion_tokens")
        .or_else(|| body.get("max_tokens"))
        .and_then(Value::as_u64)
        .map(|n| u32::try_from(n).unwrap_or(u32::MAX));
    Ok(ChatRequest {
        request: ModelRequest {
            model: model.to_string(),
            system: system.join("\n\n").into(),
            messages: Arc::new(messages),
            tools: Arc::new(tools),
            max_tokens,
            temperature: body["temperature"].as_f64().map(|t| t as f32),
        },
        stream: body["stream"].as_bool().unwrap_or(false),
    })
}

/// A message's text: a string, or the text of its parts.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|part| part["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// A provider's error as the client's: its fault or the script's (not
/// retried) is a 400, a rate limit a 429, anything else a 500.
pub(super) fn refusal(error: &ModelError) -> Refusal {
    let (status, kind) = match (error, error.class()) {
        (_, ErrorClass::Setup) => (StatusCode::BAD_REQUEST, "invalid_request_error"),
        (ModelError::RateLimited { .. } | ModelError::QuotaExhausted { .. }, _) => {
            (StatusCode::TOO_MANY_REQUESTS, "rate_limit_error")
        }
        _ => (StatusCode::INTERNAL_SERVER_ERROR, "api_error"),
    };
    Refusal::new(status, kind, error.to_string())
}

/// Turns a provider's events into chat completions: chunks as they come,
/// or, gathered, one whole answer.
#[derive(Debug)]
pub(super) struct Answer {
    id: String,
    created: u64,
    model: String,
    /// Whether the first chunk (which names the role) was sent.
    began: bool,
    text: String,
    /// By the provider's index: the call, and whether its arguments were sent.
    calls: BTreeMap<usize, (ToolCall, bool)>,
    stop: Option<StopReason>,
    usage: Option<Usage>,
}

impl Answer {
    pub(super) fn new(model: &str) -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let created = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Self {
            id: format!("chatcmpl-troupe-{}", NEXT.fetch_add(1, Ordering::Relaxed)),
            created,
            model: model.to_string(),
            began: false,
            text: String::new(),
            calls: BTreeMap::new(),
            stop: None,
            usage: None,
        }
    }

    /// The usage reported so far.
    pub(super) fn usage(&self) -> Option<Usage> {
        self.usage
    }

    /// Takes one event; the chunk it makes, if any.
    pub(super) fn event(&mut self, event: ModelEvent) -> Option<Value> {
        let delta = match event {
            ModelEvent::TextDelta { text } => {
                self.text.push_str(&text);
                json!({"content": text})
            }
            ModelEvent::ToolCallStarted { index, id, name } => {
                let call = ToolCall {
                    id: id.clone(),
                    name: name.clone(),
                    arguments: Value::Null,
                };
                self.calls.insert(index, (call, false));
                json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                                       "function": {"name": name, "arguments": ""}}]})
            }
            ModelEvent::ToolCallDelta { index, fragment } => {
                if let Some((_, sent)) = self.calls.get_mut(&index) {
                    *sent = true;
                }
                json!({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]})
            }
            ModelEvent::ToolCallCompleted { index, call } => {
                // Sent whole unless it was started and its arguments sent.
                let delta = match self.calls.get(&index) {
                    Some((_, true)) => None,
                    Some((_, false)) => Some(json!({"tool_calls": [{"index": index,
                        "function": {"arguments": call.arguments.to_string()}}]})),
                    None => Some(json!({"tool_calls": [{"index": index, "id": call.id,
                        "type": "function", "function": {"name": call.name,
                        "arguments": call.arguments.to_string()}}]})),
                };
                self.calls.insert(index, (call, true));
                delta?
            }
            ModelEvent::Usage { usage } => {
                self.usage = Some(usage);
                return None;
            }
            ModelEvent::Stop { reason } => {
                self.stop = Some(reason);
                return None;
            }
        };
        Some(self.chunk(delta, Value::Null))
    }

    /// The last chunks: the finish reason, the usage if reported.
    pub(super) fn end(&mut self) -> Vec<Value> {
        let mut out = vec![self.chunk(json!({}), json!(self.finish_reason()))];
        if let Some(usage) = &self.usage {
            out.push(json!({
                "id": self.id,
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": self.model,
                "choices": [],
                "usage": openai_usage(usage),
            }));
        }
        out
    }

    /// The whole answer, once every event is in.
    pub(super) fn whole(&self) -> Value {
        let mut message = Map::new();
        message.insert("role".into(), json!("assistant"));
        let content = if self.text.is_empty() && !self.calls.is_empty() {
            Value::Null
        } else {
            json!(self.text)
        };
        message.insert("content".into(), content);
        if !self.calls.is_empty() {
            let calls: Vec<Value> = self
                .calls
                .values()
                .map(|(call, _)| {
                    json!({"id": call.id, "type": "function",
                           "function": {"name": call.name, "arguments": call.arguments.to_string()}})
                })
                .collect();
            message.insert("tool_calls".into(), Value::Array(calls));
        }
        let mut answer = json!({
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason()}],
        });
        if let Some(usage) = &self.usage {
            answer["usage"] = openai_usage(usage);
        }
        answer
    }

    fn finish_reason(&self) -> &'static str {
        match &self.stop {
            Some(StopReason::ToolUse) => "tool_calls",
            Some(StopReason::MaxTokens) => "length",
            Some(StopReason::ContentFilter | StopReason::Refusal) => "content_filter",
            Some(_) => "stop",
            None if self.calls.is_empty() => "stop",
            None => "tool_calls",
        }
    }

    fn chunk(&mut self, mut delta: Value, finish_reason: Value) -> Value {
        if !self.began {
            self.began = true;
            delta["role"] = json!("assistant");
        }
        json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        })
    }
}

/// troupe's usage in OpenAI's words (`prompt_tokens` counts the cached).
fn openai_usage(usage: &Usage) -> Value {
    let prompt = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens;
    let mut out = json!({
        "prompt_tokens": prompt,
        "completion_tokens": usage.output_tokens,
        "total_tokens": prompt + usage.output_tokens,
    });
    if usage.cache_read_tokens > 0 {
        out["prompt_tokens_details"] = json!({"cached_tokens": usage.cache_read_tokens});
    }
    out
}

/// One server-sent event carrying `value`.
fn sse(value: &Value) -> Bytes {
    Bytes::from(format!("data: {value}\n\n"))
}

/// The provider's events as chat completions chunks, each sent as it comes,
/// then the finish, the usage and `[DONE]`. An error the provider meets
/// midway is sent as an `error` event (the stream's status is already
/// given), and ends the stream without `[DONE]`.
pub(super) fn chunks(
    events: ModelStream,
    answer: Answer,
    tally: Tally,
) -> impl Stream<Item = Result<Frame<Bytes>, std::io::Error>> + Send + 'static {
    futures::stream::unfold(Some((events, answer, tally)), |state| async move {
        let (mut events, mut answer, mut tally) = state?;
        loop {
            let bytes = match events.next().await {
                Some(Ok(event)) => match answer.event(event) {
                    Some(chunk) => sse(&chunk),
                    None => continue,
                },
                Some(Err(error)) => {
                    tally.ended = "the model failed";
                    let refusal = refusal(&error);
                    let bytes = sse(&json!({"error": refusal.error()}));
                    tally.bytes += bytes.len() as u64;
                    return Some((Ok(Frame::data(bytes)), None));
                }
                None => {
                    let mut out: Vec<u8> = Vec::new();
                    for chunk in answer.end() {
                        out.extend_from_slice(&sse(&chunk));
                    }
                    out.extend_from_slice(b"data: [DONE]\n\n");
                    tally.bytes += out.len() as u64;
                    if let Some(usage) = answer.usage() {
                        tally.usage = usage;
                    }
                    tally.ended = "complete";
                    return Some((Ok(Frame::data(Bytes::from(out))), None));
                }
            };
            tally.bytes += bytes.len() as u64;
            if let Some(usage) = answer.usage() {
                tally.usage = usage;
            }
            return Some((Ok(Frame::data(bytes)), Some((events, answer, tally))));
        }
    })
}

/// A provider's whole answer, gathered from its events: for the wire
/// formats answered in one go (Anthropic messages, the Responses API).
#[derive(Debug, Default, Clone, PartialEq)]
pub(super) struct Gathered {
    /// Its text.
    pub text: String,
    /// Its tool calls, in order.
    pub calls: Vec<ToolCall>,
    /// Why it stopped, if it said.
    pub stop: Option<StopReason>,
    /// Its usage, if it said.
    pub usage: Option<Usage>,
}

/// Reads a provider's events to their end.
pub(super) async fn gather(mut events: ModelStream) -> Result<Gathered, ModelError> {
    let mut gathered = Gathered::default();
    let mut calls: BTreeMap<usize, ToolCall> = BTreeMap::new();
    while let Some(event) = events.next().await {
        match event? {
            ModelEvent::TextDelta { text } => gathered.text.push_str(&text),
            ModelEvent::ToolCallStarted { .. } | ModelEvent::ToolCallDelta { .. } => {}
            ModelEvent::ToolCallCompleted { index, call } => {
                calls.insert(index, call);
            }
            ModelEvent::Usage { usage } => gathered.usage = Some(usage),
            ModelEvent::Stop { reason } => gathered.stop = Some(reason),
        }
    }
    gathered.calls = calls.into_values().collect();
    Ok(gathered)
}

/// An answer in a wire format: its stream's events (name, data), and the
/// same answer whole.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Rendered {
    /// The stream's events, in order.
    pub events: Vec<(&'static str, Value)>,
    /// The answer whole, for a client that asked for no stream.
    pub whole: Value,
}

/// Named server-sent events, sent at once.
pub(super) fn event_stream(events: &[(&'static str, Value)]) -> hyper::Response<super::Body> {
    use http_body_util::{BodyExt, Full};
    let mut out = String::new();
    for (name, data) in events {
        out.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    }
    let mut response = hyper::Response::new(
        Full::new(Bytes::from(out))
            .map_err(|never: std::convert::Infallible| match never {})
            .boxed_unsync(),
    );
    let headers = response.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(
        hyper::header::CACHE_CONTROL,
        hyper::header::HeaderValue::from_static("no-cache"),
    );
    response
}

/// A rough token count of a request (a quarter of its characters), for
/// the count endpoints of a model troupe answers itself.
pub(super) fn estimate_tokens(body: &Value) -> u64 {
    (body.to_string().chars().count() as u64).div_ceil(4)
}
