use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;
use crate::model::testkit::{collect, fast_http, pieces, End, Reply, TestServer};
use crate::protocol::ToolResult;
use crate::tool::ToolDefinition;

/// A thinking block, text, two tool_use blocks, pings anywhere, and
/// cumulative output usage in two `message_delta`s.
const TOOL_USE: &str = concat!(
    "event: message_start\n",
    "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-test\",\"stop_reason\":null,\"usage\":{\"input_tokens\":25,\"cache_creation_input_tokens\":1000,\"cache_read_input_tokens\":4000,\"output_tokens\":1}}}\n\n",
    "event: ping\n",
    "data: {\"type\":\"ping\"}\n\n",
    "event: content_block_start\n",
    "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"hmm\"}}\n\n",
    "event: content_block_stop\n",
    "data: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    "event: content_block_start\n",
    "data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"Checking \u{e9}t\u{e9}.\"}}\n\n",
    "event: content_block_stop\n",
    "data: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
    "event: content_block_start\n",
    "data: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_a\",\"name\":\"lookup_weather\",\"input\":{}}}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\"}}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"city\\\": \"}}\n\n",
    "event: ping\n",
    "data: {\"type\":\"ping\"}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\\\"Paris\\\"}\"}}\n\n",
    "event: content_block_stop\n",
    "data: {\"type\":\"content_block_stop\",\"index\":2}\n\n",
    "event: content_block_start\n",
    "data: {\"type\":\"content_block_start\",\"index\":3,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_b\",\"name\":\"list_files\",\"input\":{}}}\n\n",
    "event: content_block_stop\n",
    "data: {\"type\":\"content_block_stop\",\"index\":3}\n\n",
    "event: message_delta\n",
    "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":null},\"usage\":{\"output_tokens\":40}}\n\n",
    "event: message_delta\n",
    "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":89}}\n\n",
    "event: message_stop\n",
    "data: {\"type\":\"message_stop\"}\n\n",
);

fn tool_use_events() -> Vec<ModelEvent> {
    let usage = |output_tokens| ModelEvent::Usage {
        usage: Usage {
            input_tokens: 25,
            output_tokens,
            cache_read_tokens: 4000,
            cache_write_tokens: 1000,
        },
    };
    vec![
        usage(1),
        ModelEvent::TextDelta {
            text: "Checking \u{e9}t\u{e9}.".into(),
        },
        ModelEvent::ToolCallStarted {
            index: 0,
            id: "toolu_a".into(),
            name: "lookup_weather".into(),
        },
        ModelEvent::ToolCallDelta {
            index: 0,
            fragment: "{\"city\": ".into(),
        },
        ModelEvent::ToolCallDelta {
            index: 0,
            fragment: "\"Paris\"}".into(),
        },
        ModelEvent::ToolCallCompleted {
            index: 0,
            call: ToolCall {
                id: "toolu_a".into(),
                name: "lookup_weather".into(),
                arguments: json!({"city": "Paris"}),
            },
        },
        ModelEvent::ToolCallStarted {
            index: 1,
            id: "toolu_b".into(),
            name: "list_files".into(),
        },
        ModelEvent::ToolCallCompleted {
            index: 1,
            call: ToolCall {
                id: "toolu_b".into(),
                name: "list_files".into(),
                arguments: json!({}),
            },
        },
        usage(40),
        usage(89),
        ModelEvent::Stop {
            reason: StopReason::ToolUse,
        },
    ]
}

const TEXT_ONLY: &str = concat!(
    "event: message_start\n",
    "data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n",
    "event: content_block_start\n",
    "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    "event: content_block_delta\n",
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Sunny.\"}}\n\n",
    "event: content_block_stop\n",
    "data: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    "event: message_delta\n",
    "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":3}}\n\n",
    "event: message_stop\n",
    "data: {\"type\":\"message_stop\"}\n\n",
);

fn text_events() -> Vec<ModelEvent> {
    let usage = |output_tokens| ModelEvent::Usage {
        usage: Usage {
            input_tokens: 10,
            output_tokens,
            ..Usage::default()
        },
    };
    vec![
        usage(1),
        ModelEvent::TextDelta {
            text: "Sunny.".into(),
        },
        usage(3),
        ModelEvent::Stop {
            reason: StopReason::EndTurn,
        },
    ]
}

fn decode(stream: &str, size: usize) -> Result<Vec<ModelEvent>, ModelError> {
    let mut parser = crate::model::sse::SseParser::new();
    let mut decoder = AnthropicDecoder::new("anthropic");
    let mut events = Vec::new();
    for piece in pieces(stream, size) {
        for sse in parser.push(piece) {
            events.extend(decoder.event(&sse)?);
        }
    }
    Ok(events)
}

fn config(base_url: &str) -> AnthropicConfig {
    AnthropicConfig {
        name: "anthropic".into(),
        base_url: base_url.into(),
        api_key: "sk-ant-test".into(),
        key_var: "ANTHROPIC_API_KEY".into(),
        model: "claude-test".into(),
        max_output_tokens: 4096,
        context_window: 200_000,
        sees_images: true,
    }
}

fn client(server: &TestServer) -> AnthropicClient {
    AnthropicClient::new(config(server.url()), fast_http())
}

fn request() -> ModelRequest {
    ModelRequest {
        model: String::new(),
        system: "You are terse.".into(),
        messages: vec![
            Message::user("Weather in Paris, and what is in /nope?"),
            Message::Assistant {
                content: "Checking both.".into(),
                tool_calls: vec![
                    ToolCall {
                        id: "toolu_1".into(),
                        name: "lookup_weather".into(),
                        arguments: json!({"city": "Paris"}),
                    },
                    ToolCall {
                        id: "toolu_2".into(),
                        name: "list_files".into(),
                        arguments: json!({"path": "/nope"}),
                    },
                ],
            },
            Message::Tool {
                call_id: "toolu_1".into(),
                name: "lookup_weather".into(),
                result: ToolResult::ok("18 C, clear"),
            },
            Message::Tool {
                call_id: "toolu_2".into(),
                name: "list_files".into(),
                result: ToolResult::error("no such folder: /nope"),
            },
        ]
        .into(),
        tools: vec![
            ToolDefinition {
                name: "list_files".into(),
                description: "Lists files.".into(),
                parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}, "additionalProperties": false}).into(),
            },
            ToolDefinition {
                name: "lookup_weather".into(),
                description: "Looks up the weather.".into(),
                parameters: json!({"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}}).into(),
            },
        ].into(),
        max_tokens: None,
        temperature: Some(0.5),
    }
}

#[test]
fn tool_use_decodes_at_any_byte_split_with_cumulative_usage() {
    for size in [1, 7, 13, TOOL_USE.len()] {
        assert_eq!(
            decode(TOOL_USE, size).unwrap(),
            tool_use_events(),
            "size {size}"
        );
    }
}

#[test]
fn every_stop_reason_is_mapped() {
    let cases = [
        ("end_turn", StopReason::EndTurn),
        ("tool_use", StopReason::ToolUse),
        ("max_tokens", StopReason::MaxTokens),
        ("stop_sequence", StopReason::StopSequence),
        ("pause_turn", StopReason::PauseTurn),
        ("refusal", StopReason::Refusal),
        (
            "model_context_window_exceeded",
            StopReason::Other("model_context_window_exceeded".into()),
        ),
    ];
    for (reason, expected) in cases {
        assert_eq!(stop_reason(reason), expected);
    }
}

#[test]
fn invalid_tool_input_is_malformed_naming_the_tool() {
    let stream = concat!(
        "event: content_block_start\n",
        "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"run_command\",\"input\":{}}}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"cmd\\\": tru\"}}\n\n",
        "event: content_block_stop\n",
        "data: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    );
    match decode(stream, 7) {
        Err(ModelError::Malformed { message, .. }) => {
            assert!(message.contains("`run_command`"), "{message}")
        }
        other => panic!("expected Malformed, got {other:?}"),
    }
}

#[test]
fn request_body_snapshot_with_cache_breakpoints() {
    let client = AnthropicClient::new(config("http://unused"), fast_http());
    let body = client.body(&request());
    insta::assert_json_snapshot!("anthropic_request_body", body);
    let text = serde_json::to_string(&body).unwrap();
    assert_eq!(text.matches("\"cache_control\"").count(), 3);
    assert_eq!(
        text,
        serde_json::to_string(&client.body(&request())).unwrap()
    );
}

#[test]
fn a_conversation_ending_with_a_user_message_marks_its_last_block() {
    let mut req = request();
    let messages = std::sync::Arc::make_mut(&mut req.messages);
    messages.push(Message::assistant("Paris is clear."));
    messages.push(Message::user("Thanks"));
    req.tools = Vec::new().into();
    req.system = "".into();
    let body = request_body(&req, "claude-test", 100, true);
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(
        messages.last().unwrap(),
        &json!({"role": "user", "content": [{"type": "text", "text": "Thanks", "cache_control": {"type": "ephemeral"}}]})
    );
    assert_eq!(
        serde_json::to_string(&body)
            .unwrap()
            .matches("cache_control")
            .count(),
        1
    );
    assert!(body.get("system").is_none() && body.get("tools").is_none());
}

#[tokio::test]
async fn streams_over_http_cut_every_1_7_13_bytes_with_headers() {
    for size in [1, 7, 13] {
        let server = TestServer::start(vec![Reply::sse(TOOL_USE, size)]).await;
        let (events, error) = collect(client(&server).stream(request()).await.unwrap()).await;
        assert_eq!(error, None);
        assert_eq!(events, tool_use_events(), "size {size}");
        let seen = &server.requests()[0];
        assert_eq!(seen.path, "/v1/messages");
        assert_eq!(seen.header("x-api-key"), Some("sk-ant-test"));
        assert_eq!(seen.header("anthropic-version"), Some("2023-06-01"));
        assert_eq!(seen.json(), client(&server).body(&request()));
    }
}

#[tokio::test]
async fn an_error_event_after_a_200_is_an_api_error() {
    let stream = format!(
        "{}event: error\ndata: {{\"type\":\"error\",\"error\":{{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}}}\n\n",
        &TEXT_ONLY[..TEXT_ONLY.find("event: content_block_stop").unwrap()]
    );
    let server = TestServer::start(vec![Reply::sse(&stream, 13), Reply::sse(TEXT_ONLY, 13)]).await;
    let (events, error) = collect(client(&server).stream(request()).await.unwrap()).await;
    assert_eq!(events, text_events()[..2].to_vec());
    assert_eq!(
        error,
        Some(ModelError::Api {
            provider: "anthropic".into(),
            kind: "overloaded_error".into(),
            message: "Overloaded".into(),
        })
    );
    assert_eq!(server.requests().len(), 1, "text was shown, so no retry");
}

#[tokio::test]
async fn a_529_then_success() {
    let server = TestServer::start(vec![
        Reply::status(
            529,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        ),
        Reply::sse(TEXT_ONLY, 7),
    ])
    .await;
    let (events, error) = collect(client(&server).stream(request()).await.unwrap()).await;
    assert_eq!(error, None);
    assert_eq!(events, text_events());
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn a_429_with_retry_after_ms_then_success() {
    let server = TestServer::start(vec![
        Reply::status(429, r#"{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}"#)
            .header("retry-after-ms", "5"),
        Reply::sse(TEXT_ONLY, 7),
    ])
    .await;
    let (events, error) = collect(client(&server).stream(request()).await.unwrap()).await;
    assert_eq!(error, None);
    assert_eq!(events, text_events());
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn persistent_529s_end_as_http_error_after_max_attempts() {
    let overloaded = Reply::status(
        529,
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
    );
    let server = TestServer::start(vec![overloaded.clone(), overloaded.clone(), overloaded]).await;
    let (_, error) = collect(client(&server).stream(request()).await.unwrap()).await;
    assert_eq!(
        error,
        Some(ModelError::Http {
            provider: "anthropic".into(),
            status: 529,
            message: "Overloaded (overloaded_error)".into(),
        })
    );
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn a_drop_before_any_text_is_retried_and_after_a_tool_call_is_not() {
    let before = &TOOL_USE[..TOOL_USE.find("event: content_block_start").unwrap()];
    let server = TestServer::start(vec![
        Reply::sse(before, 13).ending(End::Drop),
        Reply::sse(TEXT_ONLY, 13),
    ])
    .await;
    let (events, error) = collect(client(&server).stream(request()).await.unwrap()).await;
    assert_eq!(error, None);
    // The first attempt's usage was passed on before the drop; the retry's replaces it.
    assert_eq!(events[0], tool_use_events()[0]);
    assert_eq!(events[1..].to_vec(), text_events());
    assert_eq!(server.requests().len(), 2);

    let after = &TOOL_USE[..TOOL_USE
        .find("event: ping\ndata: {\"type\":\"ping\"}\n\nevent: content_block_delta")
        .unwrap()];
    let server = TestServer::start(vec![
        Reply::sse(after, 13).ending(End::Drop),
        Reply::sse(TOOL_USE, 13),
    ])
    .await;
    let (events, error) = collect(client(&server).stream(request()).await.unwrap()).await;
    assert_eq!(events, tool_use_events()[..4].to_vec());
    assert!(
        matches!(error, Some(ModelError::Connection { .. })),
        "{error:?}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn an_overloaded_error_event_before_any_text_is_retried() {
    let stream = concat!(
        "event: message_start\n",
        "data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n",
        "event: error\n",
        "data: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
    );
    let server = TestServer::start(vec![Reply::sse(stream, 13), Reply::sse(TEXT_ONLY, 13)]).await;
    let (events, error) = collect(client(&server).stream(request()).await.unwrap()).await;
    assert_eq!(error, None);
    assert_eq!(events[1..].to_vec(), text_events());
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn the_permit_is_held_for_the_stream_life() {
    let head = &TEXT_ONLY[..TEXT_ONLY.find("event: content_block_stop").unwrap()];
    let server = TestServer::start(vec![
        Reply::sse(head, 50).ending(End::Stall),
        Reply::sse(TEXT_ONLY, 50),
    ])
    .await;
    let mut http = fast_http();
    http.limit = crate::model::ConcurrencyLimit::new(1);
    http.timeouts.between_chunks = std::time::Duration::from_secs(30);
    let client = AnthropicClient::new(config(server.url()), http.clone());
    let mut first = client.stream(request()).await.unwrap();
    // Read up to the text: the first call is streaming and holds the only permit.
    use futures::StreamExt;
    while !matches!(first.next().await, Some(Ok(ModelEvent::TextDelta { .. }))) {}
    assert_eq!(http.limit.available(), 0);
    let second = client.stream(request()).await.unwrap();
    assert_eq!(
        server.requests().len(),
        1,
        "the second call waits for the permit"
    );
    drop(first);
    let (events, error) = collect(second).await;
    assert_eq!(error, None);
    assert_eq!(events, text_events());
    assert_eq!(server.requests().len(), 2);
}
