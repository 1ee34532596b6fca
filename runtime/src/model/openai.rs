//! The OpenAI-compatible chat completions client.
//!
//! One dialect serves OpenAI, Ollama, vLLM, llama.cpp and OpenRouter: `POST
//! {base}/chat/completions` with `stream: true`, answered by SSE `data:`
//! lines ending with `[DONE]`. Tool-call arguments arrive as fragments keyed
//! by `index`, several calls possibly interleaved; they are assembled per
//! index and parsed only when the response finishes. The usage arrives in a
//! last chunk whose `choices` is empty or null (asked for with
//! `stream_options.include_usage`). The request body is built the same way
//! byte for byte every time, tools in the given order and schema keys sorted,
//! so the provider's prefix cache holds across turns.
//!
//! Some servers answer the streaming request with one whole
//! `chat.completion` object instead (`application/json`); it is decoded into
//! the same events, as one answer.

use std::collections::BTreeMap;

use reqwest::header::AUTHORIZATION;
use serde_json::{json, Map, Value};

use super::http::{self, Call, Decoder, HttpOptions};
use super::retry::Caller;
use super::sse::SseEvent;
use super::vision;
use super::{ModelError, ModelEvent, ModelRequest, ModelStream, Provider};
use crate::protocol::{Message, StopReason, ToolCall, Usage};
use crate::tool::sort_keys;

/// Where and how to reach an OpenAI-compatible endpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenAiConfig {
    /// The name in logs and errors (`openai`, `ollama`, a models.toml name).
    pub name: String,
    /// The base URL, up to and including `/v1`.
    pub base_url: String,
    /// The key, if the endpoint wants one.
    pub api_key: Option<String>,
    /// The variable the key came from, named when it is refused.
    pub key_var: String,
    /// The model used when a request names none.
    pub model: String,
    /// The context window in tokens.
    pub context_window: u64,
    /// Whether the model accepts images.
    pub sees_images: bool,
}

/// A client of an OpenAI-compatible chat completions endpoint.
#[derive(Debug, Clone)]
pub struct OpenAiClient {
    config: OpenAiConfig,
    http: HttpOptions,
}

impl OpenAiClient {
    /// A client of `config`'s endpoint.
    pub fn new(config: OpenAiConfig, http: HttpOptions) -> Self {
        Self { config, http }
    }

    /// The JSON body sent for `request` (the same request gives the same bytes).
    pub fn body(&self, request: &ModelRequest) -> Value {
        request_body(request, &self.config.model, self.config.sees_images)
    }

    /// Who calls, for the retry rules and their errors.
    fn caller(&self) -> Caller {
        Caller {
            provider: self.config.name.clone(),
            key_var: self.config.key_var.clone(),
        }
    }
}

#[async_trait::async_trait]
impl Provider for OpenAiClient {
    fn name(&self) -> &str {
        &self.config.name
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        let call = Call::streamed_json(
            self.caller(),
            format!(
                "{}/chat/completions",
                self.config.base_url.trim_end_matches('/')
            ),
            &self.body(&request),
            &[],
            self.config
                .api_key
                .as_ref()
                .map(|key| (AUTHORIZATION, format!("Bearer {key}"))),
        )?;
        let provider = self.config.name.clone();
        Ok(http::start(self.http.clone(), call, move || {
            OpenAiDecoder::new(&provider)
        }))
    }

    fn sees_images(&self) -> bool {
        self.config.sees_images
    }

    fn context_window(&self) -> u64 {
        self.config.context_window
    }
}

/// The chat completions body for `request` (`default_model` if it names
/// none); images in tool results are sent when `images` (the model sees them).
pub fn request_body(request: &ModelRequest, default_model: &str, images: bool) -> Value {
    let model = if request.model.is_empty() {
        default_model
    } else {
        &request.model
    };
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if !request.system.is_empty() {
        messages.push(json!({"role": "system", "content": &*request.system}));
    }
    history(&request.messages, images, &mut messages);
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": sort_keys((*tool.parameters).clone()),
                    }
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(max) = request.max_tokens {
        body.insert("max_tokens".into(), json!(max));
    }
    if let Some(temperature) = request.temperature {
        body.insert("temperature".into(), json!(temperature));
    }
    body.insert("stream".into(), json!(true));
    body.insert("stream_options".into(), json!({"include_usage": true}));
    Value::Object(body)
}

/// The history as chat messages. A `tool` message may hold text only, so the
/// images of a run of tool results follow it in one `user` message (after
/// the run: the API wants every result right after its call).
fn history(history: &[Message], images: bool, out: &mut Vec<Value>) {
    let mut pending: Vec<Value> = Vec::new();
    for item in history {
        if !matches!(item, Message::Tool { .. }) && !pending.is_empty() {
            out.push(json!({"role": "user", "content": std::mem::take(&mut pending)}));
        }
        out.push(message(item, images));
        if let Message::Tool {
            call_id,
            name,
            result,
        } = item
        {
            if let Some(image) = vision::image_of(result).filter(|_| images) {
                pending.push(json!({
                    "type": "text",
                    "text": format!("The image {name} returned (call {call_id}):"),
                }));
                pending.push(json!({
                    "type": "image_url",
                    "image_url": {"url": image.data_url()},
                }));
            }
        }
    }
    if !pending.is_empty() {
        out.push(json!({"role": "user", "content": pending}));
    }
}

fn message(message: &Message, images: bool) -> Value {
    match message {
        Message::User { content } => json!({"role": "user", "content": content}),
        Message::Assistant {
            content,
            tool_calls,
        } => {
            let mut out = Map::new();
            out.insert("role".into(), json!("assistant"));
            let text = if content.is_empty() && !tool_calls.is_empty() {
                Value::Null
            } else {
                json!(content)
            };
            out.insert("content".into(), text);
            if !tool_calls.is_empty() {
                let calls = tool_calls
                    .iter()
                    .map(|call| {
                        json!({
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": call.arguments.to_string()},
                        })
                    })
                    .collect();
                out.insert("tool_calls".into(), Value::Array(calls));
            }
            Value::Object(out)
        }
        Message::Tool {
            call_id, result, ..
        } => {
            let mut content = if result.is_error() {
                format!("[tool error] {}", result.text)
            } else {
                result.text.clone()
            };
            if !images && vision::image_of(result).is_some() {
                content = format!("{content}\n{}", vision::NOT_SHOWN);
            }
            json!({"role": "tool", "tool_call_id": call_id, "content": content})
        }
    }
}

/// A call being assembled from its fragments.
#[derive(Debug, Default)]
struct PendingCall {
    /// Our index: the order calls first appeared in.
    index: usize,
    id: String,
    name: String,
    arguments: String,
    started: bool,
}

/// Decodes chat completions chunks.
#[derive(Debug)]
pub(crate) struct OpenAiDecoder {
    provider: String,
    /// By the provider's `index`.
    calls: BTreeMap<u64, PendingCall>,
    stop: Option<StopReason>,
    done: bool,
}

impl OpenAiDecoder {
    pub(crate) fn new(provider: &str) -> Self {
        Self {
            provider: provider.to_string(),
            calls: BTreeMap::new(),
            stop: None,
            done: false,
        }
    }

    fn malformed(&self, message: String) -> ModelError {
        ModelError::Malformed {
            provider: self.provider.clone(),
            message,
        }
    }

    fn chunk(&mut self, chunk: &Value, out: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        if let Some(error) = super::answer::error_object(&self.provider, chunk) {
            return Err(error);
        }
        if let Some(choice) = chunk["choices"].as_array().and_then(|c| c.first()) {
            let delta = &choice["delta"];
            if let Some(text) = delta["content"].as_str().filter(|t| !t.is_empty()) {
                out.push(ModelEvent::TextDelta {
                    text: text.to_string(),
                });
            }
            if let Some(fragments) = delta["tool_calls"].as_array() {
                for fragment in fragments {
                    self.fragment(fragment, out)?;
                }
            }
            if let Some(reason) = choice["finish_reason"].as_str() {
                self.finish_calls(out)?;
                self.stop = Some(stop_reason(reason));
            }
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            out.push(ModelEvent::Usage {
                usage: parse_usage(usage),
            });
        }
        Ok(())
    }

    fn fragment(&mut self, fragment: &Value, out: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        let key = fragment["index"].as_u64().unwrap_or(0);
        let next_index = self.calls.len();
        let call = self.calls.entry(key).or_insert_with(|| PendingCall {
            index: next_index,
            ..PendingCall::default()
        });
        if let Some(id) = fragment["id"].as_str().filter(|id| !id.is_empty()) {
            call.id = id.to_string();
        }
        let function = &fragment["function"];
        if let Some(name) = function["name"].as_str().filter(|n| !n.is_empty()) {
            call.name.push_str(name);
        }
        let piece = function["arguments"].as_str().unwrap_or_default();
        call.arguments.push_str(piece);
        if !call.started && !call.name.is_empty() {
            call.started = true;
            if call.id.is_empty() {
                call.id = format!("call_{}", call.index);
            }
            out.push(ModelEvent::ToolCallStarted {
                index: call.index,
                id: call.id.clone(),
                name: call.name.clone(),
            });
            if !call.arguments.is_empty() {
                out.push(ModelEvent::ToolCallDelta {
                    index: call.index,
                    fragment: call.arguments.clone(),
                });
            }
        } else if call.started && !piece.is_empty() {
            out.push(ModelEvent::ToolCallDelta {
                index: call.index,
                fragment: piece.to_string(),
            });
        }
        Ok(())
    }

    fn finish_calls(&mut self, out: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        let mut calls: Vec<PendingCall> = std::mem::take(&mut self.calls).into_values().collect();
        calls.sort_by_key(|c| c.index);
        for call in calls {
            if call.name.is_empty() {
                return Err(self.malformed(format!("tool call {} has no name", call.index)));
            }
            let arguments = if call.arguments.trim().is_empty() {
                Value::Object(Map::new())
            } else {
                serde_json::from_str(&call.arguments).map_err(|err| {
                    self.malformed(format!(
                        "the arguments of tool call `{}` are not valid JSON ({err}): {}",
                        call.name, call.arguments
                    ))
                })?
            };
            out.push(ModelEvent::ToolCallCompleted {
                index: call.index,
                call: ToolCall {
                    id: call.id,
                    name: call.name,
                    arguments,
                },
            });
        }
        Ok(())
    }
}

impl Decoder for OpenAiDecoder {
    fn event(&mut self, event: &SseEvent) -> Result<Vec<ModelEvent>, ModelError> {
        let data = event.data.trim();
        let mut out = Vec::new();
        if data == "[DONE]" {
            self.done = true;
            self.finish_calls(&mut out)?;
            out.push(ModelEvent::Stop {
                reason: self.stop.take().unwrap_or(StopReason::EndTurn),
            });
            return Ok(out);
        }
        if data.is_empty() {
            return Ok(out);
        }
        let chunk: Value = serde_json::from_str(data)
            .map_err(|err| self.malformed(format!("a stream line is not JSON ({err}): {data}")))?;
        self.chunk(&chunk, &mut out)?;
        Ok(out)
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn whole(&mut self, answer: &Value) -> Result<Vec<ModelEvent>, ModelError> {
        let Some(choice) = answer["choices"].as_array().and_then(|c| c.first()) else {
            return Err(self.malformed(format!(
                "a whole answer without `choices`: {}",
                super::answer::snippet(&answer.to_string(), 300)
            )));
        };
        // The completion's message, restated as one chunk's delta: the same
        // code then assembles its calls (a server may give the arguments as
        // an object instead of a string, or leave the index out).
        let message = choice.get("message").unwrap_or(&choice["delta"]);
        let mut delta = Map::new();
        delta.insert("content".into(), message["content"].clone());
        if let Some(calls) = message["tool_calls"].as_array() {
            let calls = calls
                .iter()
                .enumerate()
                .map(|(i, call)| {
                    let arguments = match &call["function"]["arguments"] {
                        Value::String(text) => text.clone(),
                        Value::Null => String::new(),
                        other => other.to_string(),
                    };
                    json!({
                        "index": call["index"].as_u64().unwrap_or(i as u64),
                        "id": call["id"],
                        "function": {"name": call["function"]["name"], "arguments": arguments},
                    })
                })
                .collect();
            delta.insert("tool_calls".into(), Value::Array(calls));
        }
        let chunk = json!({
            "choices": [{"delta": delta, "finish_reason": choice["finish_reason"]}],
            "usage": answer["usage"],
        });
        let mut out = Vec::new();
        self.chunk(&chunk, &mut out)?;
        self.finish_calls(&mut out)?;
        self.done = true;
        out.push(ModelEvent::Stop {
            reason: self.stop.take().unwrap_or(StopReason::EndTurn),
        });
        Ok(out)
    }

    fn at_end(&mut self) -> Result<Vec<ModelEvent>, ModelError> {
        // Some servers close without `[DONE]` once they sent a finish reason.
        match self.stop.take() {
            Some(reason) => {
                self.done = true;
                Ok(vec![ModelEvent::Stop { reason }])
            }
            None => Err(ModelError::Connection {
                provider: self.provider.clone(),
                message: "the stream ended before the response finished".to_string(),
            }),
        }
    }
}

/// Maps a `finish_reason`.
pub fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "stop" => StopReason::EndTurn,
        "tool_calls" | "function_call" => StopReason::ToolUse,
        "length" => StopReason::MaxTokens,
        "content_filter" => StopReason::ContentFilter,
        other => StopReason::Other(other.to_string()),
    }
}

fn parse_usage(usage: &Value) -> Usage {
    let prompt = usage["prompt_tokens"].as_u64().unwrap_or(0);
    let cached = usage["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap_or(0);
    Usage {
        input_tokens: prompt.saturating_sub(cached),
        output_tokens: usage["completion_tokens"].as_u64().unwrap_or(0),
        cache_read_tokens: cached,
        cache_write_tokens: 0,
    }
}

#[cfg(test)]
#[path = "openai_tests.rs"]
mod tests;
