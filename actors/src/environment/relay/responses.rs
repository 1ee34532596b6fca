//! OpenAI's Responses API, answered by the relay itself for a model with
//! no address (a script): what Codex sends to `POST /v1/responses` (its
//! `instructions`, its `input` items — messages, function calls and their
//! outputs — and its function tools) is read into troupe's request, and the
//! provider's answer is written back as a response — whole, or as the
//! stream of events the API's clients read (`response.created`, for each
//! output item `response.output_item.added`, its text or arguments as
//! deltas, `response.output_item.done`, then `response.completed` with the
//! whole response and its usage).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};
use troupe_runtime::model::ModelRequest;
use troupe_runtime::protocol::{Message, ToolCall, ToolResult};

use super::served::{invalid, tool_definition, Gathered, Rendered};
use super::Refusal;

/// The text of a content list (`input_text`, `output_text`, …) or a string.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Reads a Responses request into troupe's request for `model`, and
/// whether the client asked for a stream. A function call joins the
/// assistant message before it; its output answers it by `call_id`.
pub(super) fn request(body: &Value, model: &str) -> Result<(ModelRequest, bool), Refusal> {
    let mut system: Vec<String> = body["instructions"]
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .into_iter()
        .collect();
    let items: Vec<Value> = match &body["input"] {
        Value::String(text) => vec![json!({"type": "message", "role": "user", "content": text})],
        Value::Array(items) => items.clone(),
        _ => {
            return Err(invalid(
                "the request has no \"input\"; send it as OpenAI's Responses API does".into(),
            ))
        }
    };
    let mut messages: Vec<Message> = Vec::with_capacity(items.len());
    let mut names: std::collections::BTreeMap<String, String> = Default::default();
    for (n, item) in items.iter().enumerate() {
        match item["type"].as_str().unwrap_or("message") {
            "message" => {
                let content = text_of(&item["content"]);
                match item["role"].as_str().unwrap_or_default() {
                    "system" | "developer" => system.push(content),
                    "user" => messages.push(Message::User { content }),
                    "assistant" => messages.push(Message::Assistant {
                        content,
                        tool_calls: Vec::new(),
                    }),
                    other => {
                        return Err(invalid(format!(
                            "input item {n} has role {other:?}; use system, developer, user or \
                             assistant"
                        )))
                    }
                }
            }
            "function_call" => {
                let arguments = match &item["arguments"] {
                    Value::String(text) if text.trim().is_empty() => json!({}),
                    Value::String(text) => {
                        serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.clone()))
                    }
                    other => other.clone(),
                };
                let call = ToolCall {
                    id: item["call_id"].as_str().unwrap_or_default().to_string(),
                    name: item["name"].as_str().unwrap_or_default().to_string(),
                    arguments,
                };
                names.insert(call.id.clone(), call.name.clone());
                match messages.last_mut() {
                    Some(Message::Assistant { tool_calls, .. }) => tool_calls.push(call),
                    _ => messages.push(Message::Assistant {
                        content: String::new(),
                        tool_calls: vec![call],
                    }),
                }
            }
            "function_call_output" => {
                let call_id = item["call_id"].as_str().unwrap_or_default().to_string();
                let output = match &item["output"] {
                    Value::String(text) => text.clone(),
                    other => text_of(other),
                };
                messages.push(Message::Tool {
                    name: names.get(&call_id).cloned().unwrap_or_default(),
                    call_id,
                    result: ToolResult::ok(output),
                });
            }
            // Reasoning and the harness's own items carry nothing troupe's
            // models read.
            _ => {}
        }
    }
    let tools = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|tool| tool["type"].as_str() == Some("function"))
        .filter_map(|tool| tool_definition(tool, "parameters"))
        .collect();
    Ok((
        ModelRequest {
            model: model.to_string(),
            system: system.join("\n\n").into(),
            messages: Arc::new(messages),
            tools: Arc::new(tools),
            max_tokens: body["max_output_tokens"]
                .as_u64()
                .map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
            temperature: body["temperature"].as_f64().map(|t| t as f32),
        },
        body["stream"].as_bool().unwrap_or(false),
    ))
}

/// The answer as a response, whole and as its stream.
pub(super) fn answer(gathered: &Gathered, model: &str) -> Rendered {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let id = format!("resp_troupe_{n}");
    let created = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut output: Vec<Value> = Vec::new();
    if !gathered.text.is_empty() || gathered.calls.is_empty() {
        output.push(json!({
            "type": "message", "id": format!("msg_troupe_{n}"), "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": gathered.text, "annotations": []}],
        }));
    }
    for (i, call) in gathered.calls.iter().enumerate() {
        output.push(json!({
            "type": "function_call", "id": format!("fc_troupe_{n}_{i}"), "call_id": call.id,
            "name": call.name, "arguments": call.arguments.to_string(), "status": "completed",
        }));
    }
    let usage = gathered.usage.unwrap_or_default();
    let input = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens;
    let mut response = json!({
        "id": id, "object": "response", "created_at": created, "model": model,
        "status": "in_progress", "output": [],
    });
    let mut events: Vec<(&'static str, Value)> = Vec::new();
    let mut push = |name: &'static str, mut data: Value| {
        data["type"] = json!(name);
        data["sequence_number"] = json!(events.len());
        events.push((name, data));
    };
    push("response.created", json!({"response": response}));
    for (index, item) in output.iter().enumerate() {
        let mut added = item.clone();
        added["status"] = json!("in_progress");
        let item_id = item["id"].clone();
        match item["type"].as_str() {
            Some("function_call") => {
                added["arguments"] = json!("");
                push(
                    "response.output_item.added",
                    json!({"output_index": index, "item": added}),
                );
                push(
                    "response.function_call_arguments.delta",
                    json!({"output_index": index, "item_id": item_id, "delta": item["arguments"]}),
                );
                push(
                    "response.function_call_arguments.done",
                    json!({"output_index": index, "item_id": item_id,
                           "arguments": item["arguments"]}),
                );
            }
            _ => {
                added["content"] = json!([]);
                push(
                    "response.output_item.added",
                    json!({"output_index": index, "item": added}),
                );
                let text = item["content"][0]["text"].clone();
                push(
                    "response.content_part.added",
                    json!({"output_index": index, "item_id": item_id, "content_index": 0,
                           "part": {"type": "output_text", "text": "", "annotations": []}}),
                );
                push(
                    "response.output_text.delta",
                    json!({"output_index": index, "item_id": item_id, "content_index": 0,
                           "delta": text}),
                );
                push(
                    "response.output_text.done",
                    json!({"output_index": index, "item_id": item_id, "content_index": 0,
                           "text": text}),
                );
                push(
                    "response.content_part.done",
                    json!({"output_index": index, "item_id": item_id, "content_index": 0,
                           "part": item["content"][0]}),
                );
            }
        }
        push(
            "response.output_item.done",
            json!({"output_index": index, "item": item}),
        );
    }
    response["status"] = json!("completed");
    response["output"] = Value::Array(output);
    response["usage"] = json!({
        "input_tokens": input,
        "input_tokens_details": {"cached_tokens": usage.cache_read_tokens},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input + usage.output_tokens,
    });
    push("response.completed", json!({"response": response}));
    Rendered {
        events,
        whole: response,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use troupe_runtime::protocol::Usage;

    #[test]
    fn codex_s_input_is_read_into_troupe_s_request() {
        let body = json!({
            "model": "m", "stream": true, "instructions": "You are Codex.",
            "input": [
                {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "sandbox: workspace-write"}]},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "write hello.txt"}]},
                {"type": "reasoning", "summary": []},
                {"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": "{\"cmd\":\"ls\"}"},
                {"type": "function_call_output", "call_id": "c1", "output": "a\nb"}
            ],
            "tools": [{"type": "function", "name": "exec_command", "parameters": {"type": "object"}},
                      {"type": "web_search"}]
        });
        let (request, stream) = request(&body, "m").unwrap();
        assert!(stream);
        assert_eq!(
            &*request.system,
            "You are Codex.\n\nsandbox: workspace-write"
        );
        assert_eq!(request.tools.len(), 1);
        assert_eq!(request.messages.len(), 3);
        assert_eq!(
            request.messages[1],
            Message::Assistant {
                content: String::new(),
                tool_calls: vec![ToolCall {
                    id: "c1".into(),
                    name: "exec_command".into(),
                    arguments: json!({"cmd": "ls"})
                }]
            }
        );
        assert_eq!(
            request.messages[2],
            Message::Tool {
                name: "exec_command".into(),
                call_id: "c1".into(),
                result: ToolResult::ok("a\nb")
            }
        );
        assert!(super::request(&json!({}), "m").is_err());
    }

    #[test]
    fn an_answer_is_streamed_as_the_responses_api_does() {
        let gathered = Gathered {
            text: "Done.".into(),
            calls: vec![ToolCall {
                id: "c2".into(),
                name: "exec_command".into(),
                arguments: json!({"cmd": "true"}),
            }],
            stop: None,
            usage: Some(Usage {
                input_tokens: 5,
                output_tokens: 3,
                ..Usage::default()
            }),
        };
        let rendered = answer(&gathered, "m");
        assert_eq!(rendered.events[0].0, "response.created");
        let done: Vec<&Value> = rendered
            .events
            .iter()
            .filter(|e| e.0 == "response.output_item.done")
            .map(|e| &e.1["item"])
            .collect();
        assert_eq!(done[0]["content"][0]["text"], "Done.");
        assert_eq!(done[1]["call_id"], "c2");
        assert_eq!(done[1]["arguments"], r#"{"cmd":"true"}"#);
        let (last, completed) = rendered.events.last().unwrap();
        assert_eq!(*last, "response.completed");
        assert_eq!(completed["response"]["usage"]["total_tokens"], 8);
        assert_eq!(rendered.whole["status"], "completed");
        assert!(rendered
            .events
            .iter()
            .enumerate()
            .all(|(i, e)| e.1["sequence_number"] == i));
    }
}
