//! Images in tool results, as each provider's request body carries them.

use pretty_assertions::assert_eq;
use serde_json::json;

use crate::model::{anthropic, openai, ModelRequest};
use crate::protocol::{Message, ToolCall, ToolResult};

/// A `read_file` of a PNG and a `read_file` of a text file, answered in one step.
fn request() -> ModelRequest {
    let call = |id: &str, path: &str| ToolCall {
        id: id.into(),
        name: "read_file".into(),
        arguments: json!({"path": path}),
    };
    ModelRequest {
        model: String::new(),
        system: "".into(),
        messages: vec![
            Message::user("What is in the chart?"),
            Message::Assistant {
                content: String::new(),
                tool_calls: vec![call("c1", "chart.png"), call("c2", "notes.txt")],
            },
            Message::Tool {
                call_id: "c1".into(),
                name: "read_file".into(),
                result: ToolResult::ok_with(
                    "`chart.png` is a PNG image (4 bytes), attached for you to see.",
                    json!({"image": {"media_type": "image/png", "path": "/w/chart.png", "bytes": "iVBORw=="}}),
                ),
            },
            Message::Tool {
                call_id: "c2".into(),
                name: "read_file".into(),
                result: ToolResult::ok("1\tsales by month"),
            },
        ]
        .into(),
        tools: Vec::new().into(),
        max_tokens: None,
        temperature: None,
    }
}

#[test]
fn openai_sends_the_image_as_a_data_url_after_the_run_of_tool_results() {
    let body = openai::request_body(&request(), "gpt-4o", true);
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 5, "{messages:#?}");
    assert_eq!(messages[2]["role"], "tool");
    assert_eq!(
        messages[2]["content"],
        "`chart.png` is a PNG image (4 bytes), attached for you to see."
    );
    assert_eq!(messages[3]["role"], "tool");
    assert_eq!(
        messages[4],
        json!({"role": "user", "content": [
            {"type": "text", "text": "The image read_file returned (call c1):"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw=="}},
        ]})
    );
}

#[test]
fn openai_without_vision_gets_the_text_fallback() {
    let body = openai::request_body(&request(), "gpt-3.5-turbo", false);
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 4);
    let text = messages[2]["content"].as_str().unwrap();
    assert!(text.contains("the image is not shown"), "{text}");
    assert!(!body.to_string().contains("iVBORw=="));
}

#[test]
fn anthropic_sends_an_image_block_inside_the_tool_result() {
    let body = anthropic::request_body(&request(), "claude-sonnet-4-5", 1024, true);
    let results = body["messages"][2]["content"].as_array().unwrap();
    assert_eq!(
        results[0],
        json!({
            "type": "tool_result",
            "tool_use_id": "c1",
            "is_error": false,
            "content": [
                {"type": "text", "text": "`chart.png` is a PNG image (4 bytes), attached for you to see."},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw=="}},
            ],
        })
    );
    assert_eq!(results[1]["content"], "1\tsales by month");
}

#[test]
fn anthropic_without_vision_gets_the_text_fallback() {
    let body = anthropic::request_body(&request(), "claude-test", 1024, false);
    let first = &body["messages"][2]["content"][0]["content"];
    assert!(
        first.as_str().unwrap().contains("the image is not shown"),
        "{first}"
    );
    assert!(!body.to_string().contains("iVBORw=="));
}
