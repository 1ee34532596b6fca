//! The Anthropic Messages client.
//!
//! `POST {base}/v1/messages` with `stream: true` answers with named SSE
//! events: `message_start` (the input usage, cache reads and writes
//! included), `content_block_start/delta/stop` for text and `tool_use`
//! blocks (whose JSON input arrives as `input_json_delta` fragments),
//! `message_delta` (the stop reason and the output tokens *so far*: the
//! figure is cumulative and replaces, never adds), `message_stop`, `ping`
//! anywhere and `error` possibly after a 200.
//!
//! The request marks three prompt-cache breakpoints — the last tool, the
//! system block and the last block of the conversation — so each call of a
//! conversation reads the prefix the previous call wrote. The body is built
//! the same way byte for byte every time, tools in the given order and schema
//! keys sorted, or the cache would miss.
//!
//! A server or proxy that answers with the non-streaming Messages object
//! (`application/json`) is decoded into the same events, as one answer.

use reqwest::header::{HeaderName, HeaderValue};
use serde_json::{json, Map, Value};

use super::http::{self, Call, Decoder, HttpOptions};
use super::retry::Caller;
use super::sse::SseEvent;
use super::vision;
use super::{ModelError, ModelEvent, ModelRequest, ModelStream, Provider};
use crate::protocol::{Message, StopReason, ToolCall, Usage};
use crate::tool::sort_keys;

/// The API version sent with every request.
pub const API_VERSION: &str = "2023-06-01";

/// Output tokens asked for when neither the request nor the model sets it
/// (the Messages API requires a figure).
pub const DEFAULT_MAX_TOKENS: u32 = 8192;

/// Where and how to reach the Messages API.
#[derive(Debug, Clone, PartialEq)]
pub struct AnthropicConfig {
    /// The name in logs and errors.
    pub name: String,
    /// The base URL, without `/v1`.
    pub base_url: String,
    /// The key.
    pub api_key: String,
    /// The variable the key came from, named when it is refused.
    pub key_var: String,
    /// The model used when a request names none.
    pub model: String,
    /// `max_tokens` when the request sets none.
    pub max_output_tokens: u32,
    /// The context window in tokens.
    pub context_window: u64,
    /// Whether the model accepts images.
    pub sees_images: bool,
}

/// A client of the Anthropic Messages API.
#[derive(Debug, Clone)]
pub struct AnthropicClient {
    config: AnthropicConfig,
    http: HttpOptions,
}

impl AnthropicClient {
    /// A client of `config`'s endpoint.
    pub fn new(config: AnthropicConfig, http: HttpOptions) -> Self {
        Self { config, http }
    }

    /// The JSON body sent for `request` (the same request gives the same bytes).
    pub fn body(&self, request: &ModelRequest) -> Value {
        request_body(
            request,
            &self.config.model,
            self.config.max_output_tokens,
            self.config.sees_images,
        )
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
impl Provider for AnthropicClient {
    fn name(&self) -> &str {
        &self.config.name
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        let call = Call::streamed_json(
            self.caller(),
            format!("{}/v1/messages", self.config.base_url.trim_end_matches('/')),
            &self.body(&request),
            &[(
                HeaderName::from_static("anthropic-version"),
                HeaderValue::from_static(API_VERSION),
            )],
            Some((
                HeaderName::from_static("x-api-key"),
                self.config.api_key.clone(),
            )),
        )?;
        let provider = self.config.name.clone();
        Ok(http::start(self.http.clone(), call, move || {
            AnthropicDecoder::new(&provider)
        }))
    }

    fn sees_images(&self) -> bool {
        self.config.sees_images
    }

    fn context_window(&self) -> u64 {
        self.config.context_window
    }
}

fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
}

/// The Messages body for `request`, cache breakpoints included; images in
/// tool results are sent when `images` (the model sees them).
pub fn request_body(
    request: &ModelRequest,
    default_model: &str,
    default_max: u32,
    images: bool,
) -> Value {
    let model = if request.model.is_empty() {
        default_model
    } else {
        &request.model
    };
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert(
        "max_tokens".into(),
        json!(request.max_tokens.unwrap_or(default_max)),
    );
    if !request.system.is_empty() {
        body.insert(
            "system".into(),
            json!([{"type": "text", "text": &*request.system, "cache_control": ephemeral()}]),
        );
    }
    let mut messages = messages(&request.messages, images);
    if let Some(block) = messages
        .last_mut()
        .and_then(|m| m["content"].as_array_mut())
        .and_then(|blocks| blocks.last_mut())
        .and_then(Value::as_object_mut)
    {
        block.insert("cache_control".into(), ephemeral());
    }
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        let count = request.tools.len();
        let tools = request
            .tools
            .iter()
            .enumerate()
            .map(|(i, tool)| {
                let mut out = Map::new();
                out.insert("name".into(), json!(tool.name));
                out.insert("description".into(), json!(tool.description));
                out.insert("input_schema".into(), sort_keys((*tool.parameters).clone()));
                if i + 1 == count {
                    out.insert("cache_control".into(), ephemeral());
                }
                Value::Object(out)
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(temperature) = request.temperature {
        body.insert("temperature".into(), json!(temperature));
    }
    body.insert("stream".into(), json!(true));
    Value::Object(body)
}

/// The history as Messages turns: tool results go in user turns, and turns of
/// the same role next to each other are merged (the API wants them alternating).
fn messages(history: &[Message], images: bool) -> Vec<Value> {
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in history {
        let (role, blocks) = match message {
            Message::User { content } => ("user", vec![json!({"type": "text", "text": content})]),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                let mut blocks = Vec::new();
                if !content.is_empty() {
                    blocks.push(json!({"type": "text", "text": content}));
                }
                for call in tool_calls {
                    blocks.push(json!({
                        "type": "tool_use",
                        "id": call.id,
                        "name": call.name,
                        "input": call.arguments,
                    }));
                }
                ("assistant", blocks)
            }
            Message::Tool {
                call_id, result, ..
            } => ("user", vec![tool_result(call_id, result, images)]),
        };
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last_role, last_blocks)) if *last_role == role => last_blocks.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    turns
        .into_iter()
        .map(|(role, blocks)| json!({"role": role, "content": blocks}))
        .collect()
}

/// A `tool_result` block: its text, and its image as an `image` block in its
/// content when the model sees images (the API takes text and image blocks
/// there).
fn tool_result(call_id: &str, result: &crate::protocol::ToolResult, images: bool) -> Value {
    let content = match vision::image_of(result) {
        Some(image) if images => json!([
            {"type": "text", "text": result.text},
            {"type": "image", "source": {
                "type": "base64",
                "media_type": image.media_type,
                "data": image.base64,
            }},
        ]),
        Some(_) => json!(format!("{}\n{}", result.text, vision::NOT_SHOWN)),
        None => json!(result.text),
    };
    json!({
        "type": "tool_result",
        "tool_use_id": call_id,
        "content": content,
        "is_error": result.is_error(),
    })
}

/// A content block being streamed.
#[derive(Debug)]
enum Block {
    Text,
    Tool {
        index: usize,
        id: String,
        name: String,
        input: String,
        /// The input given whole in `content_block_start`, if any.
        initial: Value,
    },
    Other,
}

/// Decodes Messages stream events.
#[derive(Debug)]
pub(crate) struct AnthropicDecoder {
    provider: String,
    blocks: std::collections::HashMap<u64, Block>,
    tool_count: usize,
    usage: Usage,
    stop: Option<StopReason>,
    done: bool,
}

impl AnthropicDecoder {
    pub(crate) fn new(provider: &str) -> Self {
        Self {
            provider: provider.to_string(),
            blocks: std::collections::HashMap::new(),
            tool_count: 0,
            usage: Usage::default(),
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

    fn handle(
        &mut self,
        kind: &str,
        data: &Value,
        out: &mut Vec<ModelEvent>,
    ) -> Result<(), ModelError> {
        match kind {
            "message_start" => {
                let usage = &data["message"]["usage"];
                self.usage = Usage {
                    input_tokens: usage["input_tokens"].as_u64().unwrap_or(0),
                    output_tokens: usage["output_tokens"].as_u64().unwrap_or(0),
                    cache_read_tokens: usage["cache_read_input_tokens"].as_u64().unwrap_or(0),
                    cache_write_tokens: usage["cache_creation_input_tokens"].as_u64().unwrap_or(0),
                };
                out.push(ModelEvent::Usage { usage: self.usage });
            }
            "content_block_start" => {
                let key = data["index"].as_u64().unwrap_or(0);
                let block = &data["content_block"];
                let started = match block["type"].as_str() {
                    Some("text") => {
                        if let Some(text) = block["text"].as_str().filter(|t| !t.is_empty()) {
                            out.push(ModelEvent::TextDelta {
                                text: text.to_string(),
                            });
                        }
                        Block::Text
                    }
                    Some("tool_use") => {
                        let index = self.tool_count;
                        self.tool_count += 1;
                        let id = block["id"].as_str().unwrap_or_default().to_string();
                        let name = block["name"].as_str().unwrap_or_default().to_string();
                        out.push(ModelEvent::ToolCallStarted {
                            index,
                            id: id.clone(),
                            name: name.clone(),
                        });
                        Block::Tool {
                            index,
                            id,
                            name,
                            input: String::new(),
                            initial: block["input"].clone(),
                        }
                    }
                    _ => Block::Other,
                };
                self.blocks.insert(key, started);
            }
            "content_block_delta" => {
                let key = data["index"].as_u64().unwrap_or(0);
                let delta = &data["delta"];
                match (delta["type"].as_str(), self.blocks.get_mut(&key)) {
                    (Some("text_delta"), _) => {
                        if let Some(text) = delta["text"].as_str().filter(|t| !t.is_empty()) {
                            out.push(ModelEvent::TextDelta {
                                text: text.to_string(),
                            });
                        }
                    }
                    (Some("input_json_delta"), Some(Block::Tool { index, input, .. })) => {
                        let piece = delta["partial_json"].as_str().unwrap_or_default();
                        if !piece.is_empty() {
                            input.push_str(piece);
                            out.push(ModelEvent::ToolCallDelta {
                                index: *index,
                                fragment: piece.to_string(),
                            });
                        }
                    }
                    (Some("input_json_delta"), _) => {
                        return Err(self.malformed(format!(
                            "input_json_delta for block {key}, which is not a tool_use block"
                        )))
                    }
                    // thinking, signature and future deltas carry nothing we pass on
                    _ => {}
                }
            }
            "content_block_stop" => {
                let key = data["index"].as_u64().unwrap_or(0);
                if let Some(Block::Tool {
                    index,
                    id,
                    name,
                    input,
                    initial,
                }) = self.blocks.remove(&key)
                {
                    let arguments = if input.trim().is_empty() {
                        if initial.is_object() {
                            initial
                        } else {
                            Value::Object(Map::new())
                        }
                    } else {
                        serde_json::from_str(&input).map_err(|err| {
                            self.malformed(format!(
                                "the arguments of tool call `{name}` are not valid JSON ({err}): {input}"
                            ))
                        })?
                    };
                    out.push(ModelEvent::ToolCallCompleted {
                        index,
                        call: ToolCall {
                            id,
                            name,
                            arguments,
                        },
                    });
                }
            }
            "message_delta" => {
                if let Some(reason) = data["delta"]["stop_reason"].as_str() {
                    self.stop = Some(stop_reason(reason));
                }
                let usage = &data["usage"];
                if usage.is_object() {
                    // Cumulative figures: they replace, never add.
                    if let Some(n) = usage["output_tokens"].as_u64() {
                        self.usage.output_tokens = n;
                    }
                    if let Some(n) = usage["input_tokens"].as_u64() {
                        self.usage.input_tokens = n;
                    }
                    if let Some(n) = usage["cache_read_input_tokens"].as_u64() {
                        self.usage.cache_read_tokens = n;
                    }
                    if let Some(n) = usage["cache_creation_input_tokens"].as_u64() {
                        self.usage.cache_write_tokens = n;
                    }
                    out.push(ModelEvent::Usage { usage: self.usage });
                }
            }
            "message_stop" => {
                self.done = true;
                out.push(ModelEvent::Stop {
                    reason: self.stop.take().unwrap_or(StopReason::EndTurn),
                });
            }
            "error" => {
                return Err(
                    super::answer::error_object(&self.provider, data).unwrap_or_else(|| {
                        ModelError::Api {
                            provider: self.provider.clone(),
                            kind: "error".to_string(),
                            message: data.to_string(),
                        }
                    }),
                );
            }
            // ping, and event types added after this was written
            _ => {}
        }
        Ok(())
    }
}

impl Decoder for AnthropicDecoder {
    fn event(&mut self, event: &SseEvent) -> Result<Vec<ModelEvent>, ModelError> {
        let data: Value = serde_json::from_str(&event.data).map_err(|err| {
            self.malformed(format!(
                "an event's data is not JSON ({err}): {}",
                event.data
            ))
        })?;
        let kind = event
            .event
            .clone()
            .or_else(|| data["type"].as_str().map(str::to_string))
            .unwrap_or_default();
        let mut out = Vec::new();
        self.handle(&kind, &data, &mut out)?;
        Ok(out)
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn whole(&mut self, answer: &Value) -> Result<Vec<ModelEvent>, ModelError> {
        let Some(content) = answer["content"].as_array() else {
            return Err(self.malformed(format!(
                "a whole answer without `content`: {}",
                super::answer::snippet(&answer.to_string(), 300)
            )));
        };
        let mut out = Vec::new();
        // The non-streaming Messages shape, replayed as the events of a
        // stream of it, so one code path handles both.
        self.handle("message_start", &json!({"message": answer}), &mut out)?;
        for (key, block) in content.iter().enumerate() {
            let start = json!({"index": key, "content_block": block});
            self.handle("content_block_start", &start, &mut out)?;
            if block["type"] == "tool_use" && !block["input"].is_null() {
                let delta = json!({"index": key, "delta": {
                    "type": "input_json_delta",
                    "partial_json": block["input"].to_string(),
                }});
                self.handle("content_block_delta", &delta, &mut out)?;
            }
            self.handle("content_block_stop", &json!({"index": key}), &mut out)?;
        }
        let stop = json!({"delta": {"stop_reason": answer["stop_reason"]}});
        self.handle("message_delta", &stop, &mut out)?;
        self.handle("message_stop", &json!({}), &mut out)?;
        Ok(out)
    }

    fn at_end(&mut self) -> Result<Vec<ModelEvent>, ModelError> {
        Err(ModelError::Connection {
            provider: self.provider.clone(),
            message: "the stream ended before message_stop".to_string(),
        })
    }
}

/// Maps a Messages `stop_reason`.
pub fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "end_turn" => StopReason::EndTurn,
        "tool_use" => StopReason::ToolUse,
        "max_tokens" => StopReason::MaxTokens,
        "stop_sequence" => StopReason::StopSequence,
        "pause_turn" => StopReason::PauseTurn,
        "refusal" => StopReason::Refusal,
        other => StopReason::Other(other.to_string()),
    }
}

#[cfg(test)]
#[path = "anthropic_tests.rs"]
mod tests;
