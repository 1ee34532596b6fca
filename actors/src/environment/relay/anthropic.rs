//! Anthropic's messages API, answered by the relay itself for a model
//! with no address (a script): what Claude Code (and pi pointed at
//! `anthropic-messages`) sends to `POST /v1/messages` is read into troupe's
//! request, and the provider's answer is written back as a message —
//! whole, or as the stream of events Anthropic's clients read
//! (`message_start`, one `content_block_*` run per text or tool call,
//! `message_delta` with the stop reason and usage, `message_stop`).
//! `POST /v1/messages/count_tokens` is answered with an estimate.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};
use troupe_runtime::model::ModelRequest;
use troupe_runtime::protocol::{Message, StopReason, ToolCall, ToolResult};

use super::served::{estimate_tokens, invalid, tool_definition, Gathered, Rendered};
use super::Refusal;

/// The text of a system prompt or a content list (or a plain string).
fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter(|p| p["type"].as_str().is_none_or(|t| t == "text"))
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Reads a messages request into troupe's request for `model`, and
/// whether the client asked for a stream: a user turn's tool results
/// answer the calls of the same ids (and take their tools' names).
pub(super) fn request(body: &Value, model: &str) -> Result<(ModelRequest, bool), Refusal> {
    let Some(given) = body.get("messages").and_then(Value::as_array) else {
        return Err(invalid(
            "the request has no \"messages\" list; send it as Anthropic's messages API does".into(),
        ));
    };
    let mut system = vec![text_of(&body["system"])];
    let mut messages = Vec::with_capacity(given.len());
    let mut called: BTreeMap<String, String> = BTreeMap::new();
    for (n, message) in given.iter().enumerate() {
        let content = &message["content"];
        let blocks: Vec<Value> = match content {
            Value::String(text) => vec![json!({"type": "text", "text": text})],
            Value::Array(blocks) => blocks.clone(),
            _ => Vec::new(),
        };
        match message["role"].as_str().unwrap_or_default() {
            "user" => {
                for block in blocks.iter().filter(|b| b["type"] == "tool_result") {
                    let call_id = block["tool_use_id"].as_str().unwrap_or_default();
                    let text = text_of(&block["content"]);
                    messages.push(Message::Tool {
                        name: called.get(call_id).cloned().unwrap_or_default(),
                        call_id: call_id.to_string(),
                        result: if block["is_error"].as_bool() == Some(true) {
                            ToolResult::error(text)
                        } else {
                            ToolResult::ok(text)
                        },
                    });
                }
                let text = text_of(&Value::Array(blocks));
                if !text.is_empty() || messages.is_empty() {
                    messages.push(Message::User { content: text });
                }
            }
            "assistant" => {
                let mut tool_calls = Vec::new();
                for block in blocks.iter().filter(|b| b["type"] == "tool_use") {
                    let id = block["id"].as_str().unwrap_or_default().to_string();
                    let name = block["name"].as_str().unwrap_or_default().to_string();
                    called.insert(id.clone(), name.clone());
                    tool_calls.push(ToolCall {
                        id,
                        name,
                        arguments: block.get("input").cloned().unwrap_or_else(|| json!({})),
                    });
                }
                messages.push(Message::Assistant {
                    content: text_of(&Value::Array(blocks)),
                    tool_calls,
                });
            }
            // Claude Code sends some of its context as a system message.
            "system" => system.push(text_of(&Value::Array(blocks))),
            other => {
                return Err(invalid(format!(
                    "message {n} has role {other:?}; Anthropic's messages are user, assistant \
                     or system"
                )))
            }
        }
    }
    let tools = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|tool| tool_definition(tool, "input_schema"))
        .collect();
    Ok((
        ModelRequest {
            model: model.to_string(),
            system: system
                .into_iter()
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join("\n\n")
                .into(),
            messages: Arc::new(messages),
            tools: Arc::new(tools),
            max_tokens: body["max_tokens"]
                .as_u64()
                .map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
            temperature: body["temperature"].as_f64().map(|t| t as f32),
        },
        body["stream"].as_bool().unwrap_or(false),
    ))
}

/// `count_tokens`' answer for a model troupe answers itself: an estimate.
pub(super) fn count_tokens(body: &Value) -> Value {
    json!({"input_tokens": estimate_tokens(body)})
}

/// The answer as an Anthropic message, whole and as its stream.
pub(super) fn answer(gathered: &Gathered, model: &str) -> Rendered {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let id = format!("msg_troupe_{}", NEXT.fetch_add(1, Ordering::Relaxed));
    let mut blocks: Vec<Value> = Vec::new();
    if !gathered.text.is_empty() || gathered.calls.is_empty() {
        blocks.push(json!({"type": "text", "text": gathered.text}));
    }
    for call in &gathered.calls {
        blocks.push(json!({"type": "tool_use", "id": call.id, "name": call.name,
                           "input": call.arguments}));
    }
    let stop = match gathered.stop {
        Some(StopReason::ToolUse) => "tool_use",
        Some(StopReason::MaxTokens) => "max_tokens",
        Some(StopReason::StopSequence) => "stop_sequence",
        Some(StopReason::Refusal | StopReason::ContentFilter) => "refusal",
        _ if !gathered.calls.is_empty() => "tool_use",
        _ => "end_turn",
    };
    let usage = gathered.usage.unwrap_or_default();
    let usage = json!({
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_input_tokens": usage.cache_read_tokens,
        "cache_creation_input_tokens": usage.cache_write_tokens,
    });
    let whole = json!({
        "id": id, "type": "message", "role": "assistant", "model": model,
        "content": blocks, "stop_reason": stop, "stop_sequence": null, "usage": usage,
    });
    let mut started = whole.clone();
    started["content"] = json!([]);
    started["stop_reason"] = Value::Null;
    let mut events = vec![(
        "message_start",
        json!({"type": "message_start", "message": started}),
    )];
    for (index, block) in blocks.iter().enumerate() {
        let (start, delta) = match block["type"].as_str() {
            Some("tool_use") => (
                json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
                json!({"type": "input_json_delta", "partial_json": block["input"].to_string()}),
            ),
            _ => (
                json!({"type": "text", "text": ""}),
                json!({"type": "text_delta", "text": block["text"]}),
            ),
        };
        events.push((
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": start}),
        ));
        events.push((
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index, "delta": delta}),
        ));
        events.push((
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
    }
    events.push((
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
               "usage": usage}),
    ));
    events.push(("message_stop", json!({"type": "message_stop"})));
    Rendered { events, whole }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn a_conversation_with_tool_results_is_read_into_troupe_s_request() {
        let body = json!({
            "model": "m", "stream": true, "max_tokens": 100,
            "system": [{"type": "text", "text": "You are Claude Code."}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "<system-reminder>x</system-reminder>"},
                                             {"type": "text", "text": "Write hello.txt"}]},
                {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm"},
                    {"type": "tool_use", "id": "toolu_1", "name": "Write", "input": {"file_path": "/p/h"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                              "content": [{"type": "text", "text": "File created"}]}]},
                {"role": "system", "content": "# Environment"}
            ],
            "tools": [{"name": "Write", "description": "Writes", "input_schema": {"type": "object"}}]
        });
        let (request, stream) = request(&body, "m").unwrap();
        assert!(stream);
        assert_eq!(&*request.system, "You are Claude Code.\n\n# Environment");
        assert_eq!(request.tools[0].name, "Write");
        assert_eq!(request.messages.len(), 3);
        assert_eq!(
            request.messages[0],
            Message::User {
                content: "<system-reminder>x</system-reminder>\nWrite hello.txt".into()
            }
        );
        assert_eq!(
            request.messages[2],
            Message::Tool {
                name: "Write".into(),
                call_id: "toolu_1".into(),
                result: ToolResult::ok("File created")
            }
        );
        assert!(super::request(&json!({"messages": "no"}), "m").is_err());
    }

    #[test]
    fn a_tool_call_is_streamed_as_anthropic_s_clients_read_it() {
        let gathered = Gathered {
            text: String::new(),
            calls: vec![ToolCall {
                id: "c1".into(),
                name: "Bash".into(),
                arguments: json!({"command": "ls"}),
            }],
            stop: Some(StopReason::ToolUse),
            usage: None,
        };
        let rendered = answer(&gathered, "m");
        let names: Vec<&str> = rendered.events.iter().map(|e| e.0).collect();
        assert_eq!(
            names,
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        assert_eq!(
            rendered.events[2].1["delta"]["partial_json"],
            r#"{"command":"ls"}"#
        );
        assert_eq!(rendered.whole["stop_reason"], "tool_use");
        assert_eq!(rendered.whole["content"][0]["input"]["command"], "ls");
    }
}
