use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;
use crate::model::testkit::{collect, fast_http, pieces, End, Reply, TestServer};
use crate::protocol::ToolResult;
use crate::tool::ToolDefinition;

/// Text, then two tool calls whose fragments interleave, the finish reason,
/// the usage chunk with `choices: []`, and a keep-alive comment.
const PARALLEL_CALLS: &str = concat!(
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Let me \"},\"finish_reason\":null}]}\n\n",
    ": keep-alive\n\n",
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"check.\"},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_a\",\"type\":\"function\",\"function\":{\"name\":\"lookup_weather\",\"arguments\":\"\"}}]},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_b\",\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"arguments\":\"{\\\"pa\"}}]},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"city\\\":\"}}]},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"function\":{\"arguments\":\"th\\\":\\\"/tmp/\u{e9}t\u{e9}\\\"}\"}}]},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"Paris\\\"}\"}}]},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
    "data: {\"id\":\"c1\",\"choices\":[],\"usage\":{\"prompt_tokens\":120,\"completion_tokens\":30,\"total_tokens\":150,\"prompt_tokens_details\":{\"cached_tokens\":100}}}\n\n",
    "data: [DONE]\n\n",
);

fn parallel_events() -> Vec<ModelEvent> {
    vec![
        ModelEvent::TextDelta {
            text: "Let me ".into(),
        },
        ModelEvent::TextDelta {
            text: "check.".into(),
        },
        ModelEvent::ToolCallStarted {
            index: 0,
            id: "call_a".into(),
            name: "lookup_weather".into(),
        },
        ModelEvent::ToolCallStarted {
            index: 1,
            id: "call_b".into(),
            name: "read_file".into(),
        },
        ModelEvent::ToolCallDelta {
            index: 1,
            fragment: "{\"pa".into(),
        },
        ModelEvent::ToolCallDelta {
            index: 0,
            fragment: "{\"city\":".into(),
        },
        ModelEvent::ToolCallDelta {
            index: 1,
            fragment: "th\":\"/tmp/\u{e9}t\u{e9}\"}".into(),
        },
        ModelEvent::ToolCallDelta {
            index: 0,
            fragment: "\"Paris\"}".into(),
        },
        ModelEvent::ToolCallCompleted {
            index: 0,
            call: ToolCall {
                id: "call_a".into(),
                name: "lookup_weather".into(),
                arguments: json!({"city": "Paris"}),
            },
        },
        ModelEvent::ToolCallCompleted {
            index: 1,
            call: ToolCall {
                id: "call_b".into(),
                name: "read_file".into(),
                arguments: json!({"path": "/tmp/\u{e9}t\u{e9}"}),
            },
        },
        ModelEvent::Usage {
            usage: Usage {
                input_tokens: 20,
                output_tokens: 30,
                cache_read_tokens: 100,
                cache_write_tokens: 0,
            },
        },
        ModelEvent::Stop {
            reason: StopReason::ToolUse,
        },
    ]
}

const TEXT_ONLY: &str = concat!(
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello\"},\"finish_reason\":null}]}\n\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" there\"},\"finish_reason\":\"stop\"}]}\n\n",
    "data: {\"choices\":null,\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2}}\n\n",
    "data: [DONE]\n\n",
);

fn text_events() -> Vec<ModelEvent> {
    vec![
        ModelEvent::TextDelta {
            text: "Hello".into(),
        },
        ModelEvent::TextDelta {
            text: " there".into(),
        },
        ModelEvent::Usage {
            usage: Usage {
                input_tokens: 5,
                output_tokens: 2,
                ..Usage::default()
            },
        },
        ModelEvent::Stop {
            reason: StopReason::EndTurn,
        },
    ]
}

/// Decodes a whole stream fed in pieces of `size` bytes, without HTTP.
fn decode(stream: &str, size: usize) -> Result<Vec<ModelEvent>, ModelError> {
    let mut parser = crate::model::sse::SseParser::new();
    let mut decoder = OpenAiDecoder::new("openai");
    let mut events = Vec::new();
    for piece in pieces(stream, size) {
        for sse in parser.push(piece) {
            events.extend(decoder.event(&sse)?);
        }
    }
    Ok(events)
}

fn client(server: &TestServer) -> OpenAiClient {
    OpenAiClient::new(
        OpenAiConfig {
            name: "openai".into(),
            base_url: format!("{}/v1", server.url()),
            api_key: Some("sk-test".into()),
            key_var: "OPENAI_API_KEY".into(),
            model: "gpt-test".into(),
            context_window: 128_000,
            sees_images: false,
        },
        fast_http(),
    )
}

fn request() -> ModelRequest {
    ModelRequest {
        model: String::new(),
        system: "You are terse.".into(),
        messages: vec![
            Message::user("What is the weather in Paris?"),
            Message::Assistant {
                content: String::new(),
                tool_calls: vec![ToolCall {
                    id: "call_1".into(),
                    name: "lookup_weather".into(),
                    arguments: json!({"city": "Paris"}),
                }],
            },
            Message::Tool {
                call_id: "call_1".into(),
                name: "lookup_weather".into(),
                result: ToolResult::ok("18 C, clear"),
            },
            Message::Assistant {
                content: "Checking the file too.".into(),
                tool_calls: vec![ToolCall {
                    id: "call_2".into(),
                    name: "read_file".into(),
                    arguments: json!({"path": "/nope"}),
                }],
            },
            Message::Tool {
                call_id: "call_2".into(),
                name: "read_file".into(),
                result: ToolResult::error("no such file: /nope"),
            },
        ]
        .into(),
        tools: vec![
            ToolDefinition {
                name: "read_file".into(),
                description: "Reads a file.".into(),
                parameters: json!({"type": "object", "required": ["path"], "properties": {"path": {"type": "string"}}, "additionalProperties": false}).into(),
            },
            ToolDefinition {
                name: "lookup_weather".into(),
                description: "Looks up the weather.".into(),
                parameters: json!({"properties": {"city": {"type": "string"}}, "type": "object"}).into(),
            },
        ].into(),
        max_tokens: Some(1000),
        temperature: None,
    }
}

#[test]
fn parallel_interleaved_calls_decode_at_any_byte_split() {
    for size in [1, 7, 13, PARALLEL_CALLS.len()] {
        assert_eq!(
            decode(PARALLEL_CALLS, size).unwrap(),
            parallel_events(),
            "size {size}"
        );
    }
    assert_eq!(decode(TEXT_ONLY, 3).unwrap(), text_events());
}

#[test]
fn every_finish_reason_is_mapped() {
    let cases = [
        ("stop", StopReason::EndTurn),
        ("tool_calls", StopReason::ToolUse),
        ("function_call", StopReason::ToolUse),
        ("length", StopReason::MaxTokens),
        ("content_filter", StopReason::ContentFilter),
        ("eos", StopReason::Other("eos".into())),
    ];
    for (reason, expected) in cases {
        assert_eq!(stop_reason(reason), expected);
    }
}

#[test]
fn invalid_arguments_at_completion_are_malformed_naming_the_tool() {
    let stream = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"function\":{\"name\":\"write_file\",\"arguments\":\"{\\\"path\\\": \"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
    );
    match decode(stream, 5) {
        Err(ModelError::Malformed { provider, message }) => {
            assert_eq!(provider, "openai");
            assert!(message.contains("`write_file`"), "{message}");
        }
        other => panic!("expected Malformed, got {other:?}"),
    }
}

#[test]
fn request_body_snapshot() {
    let server_free = OpenAiClient::new(
        OpenAiConfig {
            name: "openai".into(),
            base_url: "http://unused".into(),
            api_key: None,
            key_var: "OPENAI_API_KEY".into(),
            model: "gpt-test".into(),
            context_window: 1,
            sees_images: false,
        },
        fast_http(),
    );
    let body = server_free.body(&request());
    insta::assert_json_snapshot!("openai_request_body", body);
    let again = serde_json::to_vec(&server_free.body(&request())).unwrap();
    assert_eq!(
        serde_json::to_vec(&body).unwrap(),
        again,
        "same request, same bytes"
    );
}

#[tokio::test]
async fn streams_over_http_cut_every_1_7_13_bytes() {
    for size in [1, 7, 13] {
        let server = TestServer::start(vec![Reply::sse(PARALLEL_CALLS, size)]).await;
        let (events, error) = collect(client(&server).stream(request()).await.unwrap()).await;
        assert_eq!(error, None);
        assert_eq!(events, parallel_events(), "size {size}");
        let seen = server.requests();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].method, "POST");
        assert_eq!(seen[0].path, "/v1/chat/completions");
        assert_eq!(seen[0].header("authorization"), Some("Bearer sk-test"));
        assert_eq!(seen[0].json(), client(&server).body(&request()));
    }
}

#[tokio::test]
async fn a_429_with_retry_after_is_retried_then_succeeds() {
    let server = TestServer::start(vec![
        Reply::status(
            429,
            r#"{"error":{"message":"Rate limit reached","type":"requests"}}"#,
        )
        .header("retry-after", "1"),
        Reply::sse(TEXT_ONLY, 11),
    ])
    .await;
    let (events, error) = collect(client(&server).stream(request()).await.unwrap()).await;
    assert_eq!(error, None);
    assert_eq!(events, text_events());
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn insufficient_quota_is_not_retried() {
    let body = r#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#;
    let server = TestServer::start(vec![Reply::status(429, body), Reply::sse(TEXT_ONLY, 50)]).await;
    let (events, error) = collect(client(&server).stream(request()).await.unwrap()).await;
    assert_eq!(events, vec![]);
    assert_eq!(
        error,
        Some(ModelError::QuotaExhausted {
            provider: "openai".into(),
            message: "You exceeded your current quota, please check your plan and billing details. (insufficient_quota)".into(),
        })
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_401_names_the_key_variable_and_is_not_retried() {
    let body = r#"{"error":{"message":"Incorrect API key provided: sk-test.","type":"invalid_request_error","code":"invalid_api_key"}}"#;
    let server = TestServer::start(vec![Reply::status(401, body), Reply::sse(TEXT_ONLY, 50)]).await;
    let (_, error) = collect(client(&server).stream(request()).await.unwrap()).await;
    let error = error.unwrap();
    assert_eq!(
        error,
        ModelError::Auth {
            provider: "openai".into(),
            message: "Incorrect API key provided: sk-test. (invalid_request_error)".into(),
            key_var: "OPENAI_API_KEY".into(),
        }
    );
    assert!(error.to_string().contains("OPENAI_API_KEY"));
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_malformed_line_is_a_typed_error() {
    let stream = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\"\n\n",
        "data: [DONE]\n\n",
    );
    let server = TestServer::start(vec![Reply::sse(stream, 9)]).await;
    let (events, error) = collect(client(&server).stream(request()).await.unwrap()).await;
    assert_eq!(events, vec![ModelEvent::TextDelta { text: "Hi".into() }]);
    assert!(
        matches!(&error, Some(ModelError::Malformed { message, .. }) if message.contains("not JSON")),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_drop_before_anything_was_emitted_is_retried() {
    let head = "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\n";
    let server = TestServer::start(vec![
        Reply::sse(head, 20).ending(End::Drop),
        Reply::sse(TEXT_ONLY, 4),
    ])
    .await;
    let (events, error) = collect(client(&server).stream(request()).await.unwrap()).await;
    assert_eq!(error, None);
    assert_eq!(events, text_events());
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn a_drop_after_a_tool_call_started_reaches_the_caller() {
    let cut = PARALLEL_CALLS
        .find("\"index\":1,\"id\":\"call_b\"")
        .unwrap();
    let server = TestServer::start(vec![
        Reply::sse(&PARALLEL_CALLS[..cut], 13).ending(End::Drop),
        Reply::sse(PARALLEL_CALLS, 13),
    ])
    .await;
    let (events, error) = collect(client(&server).stream(request()).await.unwrap()).await;
    assert_eq!(events, parallel_events()[..3].to_vec());
    assert!(
        matches!(error, Some(ModelError::Connection { .. })),
        "{error:?}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn silence_between_chunks_times_out_after_text_and_is_not_retried() {
    let head = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n";
    let server = TestServer::start(vec![
        Reply::sse(head, 100).ending(End::Stall),
        Reply::sse(TEXT_ONLY, 100),
    ])
    .await;
    let (events, error) = collect(client(&server).stream(request()).await.unwrap()).await;
    assert_eq!(events, vec![ModelEvent::TextDelta { text: "Hel".into() }]);
    assert_eq!(
        error,
        Some(ModelError::Timeout {
            provider: "openai".into(),
            phase: "between chunks".into(),
            secs: 0,
        })
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn an_error_object_mid_stream_is_an_api_error() {
    let stream = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n",
        "data: {\"error\":{\"message\":\"Provider returned error\",\"code\":502}}\n\n",
    );
    let server = TestServer::start(vec![Reply::sse(stream, 7)]).await;
    let (events, error) = collect(client(&server).stream(request()).await.unwrap()).await;
    assert_eq!(events, vec![ModelEvent::TextDelta { text: "Hi".into() }]);
    assert_eq!(
        error,
        Some(ModelError::Api {
            provider: "openai".into(),
            kind: "502".into(),
            message: "Provider returned error".into(),
        })
    );
}

#[tokio::test]
async fn a_refused_connection_is_a_typed_error_after_the_retries() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    drop(listener);
    let client = OpenAiClient::new(
        OpenAiConfig {
            name: "ollama".into(),
            base_url: url,
            api_key: None,
            key_var: "(no key variable)".into(),
            model: "qwen3".into(),
            context_window: 32_768,
            sees_images: false,
        },
        fast_http(),
    );
    let (events, error) = collect(client.stream(request()).await.unwrap()).await;
    assert_eq!(events, vec![]);
    assert!(
        matches!(&error, Some(ModelError::Connection { provider, .. }) if provider == "ollama"),
        "{error:?}"
    );
}
