//! Both clients against a loopback server answering in every shape: an
//! event stream, a whole JSON answer to a streaming request, tool-call
//! fragments split across chunks, an error in the middle of a stream, and a
//! 200 carrying an HTML error page.

use pretty_assertions::assert_eq;
use serde_json::json;

use crate::model::anthropic::{AnthropicClient, AnthropicConfig};
use crate::model::openai::{OpenAiClient, OpenAiConfig};
use crate::model::testkit::{collect, fast_http, Reply, TestServer};
use crate::model::{ErrorClass, ModelError, ModelEvent, ModelRequest, Provider};
use crate::protocol::{Message, StopReason, ToolCall, Usage};

fn openai(server: &TestServer) -> OpenAiClient {
    OpenAiClient::new(
        OpenAiConfig {
            name: "openai".into(),
            base_url: format!("{}/v1", server.url()),
            api_key: None,
            key_var: "OPENAI_API_KEY".into(),
            model: "gpt-test".into(),
            context_window: 128_000,
            sees_images: false,
        },
        fast_http(),
    )
}

fn anthropic(server: &TestServer) -> AnthropicClient {
    AnthropicClient::new(
        AnthropicConfig {
            name: "anthropic".into(),
            base_url: server.url().into(),
            api_key: "sk-ant-test".into(),
            key_var: "ANTHROPIC_API_KEY".into(),
            model: "claude-test".into(),
            max_output_tokens: 1024,
            context_window: 200_000,
            sees_images: true,
        },
        fast_http(),
    )
}

fn request() -> ModelRequest {
    ModelRequest {
        model: String::new(),
        system: "Be brief.".into(),
        messages: vec![Message::user("Weather in Paris?")].into(),
        tools: Vec::new().into(),
        max_tokens: None,
        temperature: None,
    }
}

async fn run(provider: &dyn Provider) -> (Vec<ModelEvent>, Option<ModelError>) {
    collect(provider.stream(request()).await.unwrap()).await
}

/// The events of "Checking." and one `lookup_weather` call for Paris.
fn answer_events(usage: Usage, fragment: &str) -> Vec<ModelEvent> {
    vec![
        ModelEvent::TextDelta {
            text: "Checking.".into(),
        },
        ModelEvent::ToolCallStarted {
            index: 0,
            id: "call_1".into(),
            name: "lookup_weather".into(),
        },
        ModelEvent::ToolCallDelta {
            index: 0,
            fragment: fragment.into(),
        },
        ModelEvent::ToolCallCompleted {
            index: 0,
            call: ToolCall {
                id: "call_1".into(),
                name: "lookup_weather".into(),
                arguments: json!({"city": "Paris"}),
            },
        },
        ModelEvent::Usage { usage },
        ModelEvent::Stop {
            reason: StopReason::ToolUse,
        },
    ]
}

const OPENAI_COMPLETION: &str = r#"{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-test",
 "choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":"Checking.",
   "tool_calls":[{"id":"call_1","type":"function","function":{"name":"lookup_weather","arguments":"{\"city\":\"Paris\"}"}}]}}],
 "usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}}"#;

fn openai_usage() -> Usage {
    Usage {
        input_tokens: 12,
        output_tokens: 7,
        ..Usage::default()
    }
}

#[tokio::test]
async fn openai_json_to_a_streaming_request_is_one_whole_answer() {
    for content_type in ["application/json", "application/json; charset=utf-8"] {
        let server =
            TestServer::start(vec![Reply::body(200, content_type, OPENAI_COMPLETION, 17)]).await;
        let (events, error) = run(&openai(&server)).await;
        assert_eq!(error, None, "{content_type}");
        assert_eq!(
            events,
            answer_events(openai_usage(), r#"{"city":"Paris"}"#),
            "{content_type}"
        );
        assert_eq!(server.requests().len(), 1);
    }
}

#[tokio::test]
async fn openai_a_whole_answer_sent_as_an_event_stream_or_plain_text_is_still_one_answer() {
    // The content type lies; the body is still a completion.
    for content_type in ["text/event-stream", "text/plain", ""] {
        let server =
            TestServer::start(vec![Reply::body(200, content_type, OPENAI_COMPLETION, 9)]).await;
        let (events, error) = run(&openai(&server)).await;
        assert_eq!(error, None, "{content_type:?}");
        assert_eq!(events, answer_events(openai_usage(), r#"{"city":"Paris"}"#));
    }
}

#[tokio::test]
async fn openai_arguments_given_as_an_object_are_accepted() {
    let body = OPENAI_COMPLETION.replace(r#""{\"city\":\"Paris\"}""#, r#"{"city":"Paris"}"#);
    let server = TestServer::start(vec![Reply::body(200, "application/json", &body, 64)]).await;
    let (events, error) = run(&openai(&server)).await;
    assert_eq!(error, None);
    assert_eq!(events, answer_events(openai_usage(), r#"{"city":"Paris"}"#));
}

#[tokio::test]
async fn openai_tool_call_fragments_split_across_chunks_at_every_byte() {
    let stream = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Checking.\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"function\":{\"name\":\"lookup_weather\",\"arguments\":\"{\\\"ci\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"ty\\\":\\\"Paris\\\"}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":7}}\n\n",
        "data: [DONE]\n\n",
    );
    for split in [1, 5, 64] {
        let server = TestServer::start(vec![Reply::sse(stream, split)]).await;
        let (events, error) = run(&openai(&server)).await;
        assert_eq!(error, None);
        let mut expected = answer_events(openai_usage(), "{\"ci");
        expected.insert(
            3,
            ModelEvent::ToolCallDelta {
                index: 0,
                fragment: "ty\":\"Paris\"}".into(),
            },
        );
        assert_eq!(events, expected, "split {split}");
    }
}

#[tokio::test]
async fn openai_a_bare_error_body_in_the_middle_of_a_stream_is_the_apis_error() {
    let stream = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Check\"}}]}\n\n",
        "{\"error\":{\"message\":\"upstream timed out\",\"type\":\"invalid_request_error\"}}\n",
    );
    let server = TestServer::start(vec![Reply::sse(stream, 6)]).await;
    let (events, error) = run(&openai(&server)).await;
    assert_eq!(
        events,
        vec![ModelEvent::TextDelta {
            text: "Check".into()
        }]
    );
    let error = error.unwrap();
    assert_eq!(
        error,
        ModelError::Api {
            provider: "openai".into(),
            kind: "invalid_request_error".into(),
            message: "upstream timed out".into(),
        }
    );
    assert_eq!(error.class(), ErrorClass::Content);
}

#[tokio::test]
async fn a_server_error_object_answered_whole_is_retried() {
    let server = TestServer::start(vec![
        Reply::body(
            200,
            "application/json",
            r#"{"error":{"message":"The server had an error","type":"server_error"}}"#,
            50,
        ),
        Reply::body(200, "application/json", OPENAI_COMPLETION, 50),
    ])
    .await;
    let (events, error) = run(&openai(&server)).await;
    assert_eq!(error, None);
    assert_eq!(events, answer_events(openai_usage(), r#"{"city":"Paris"}"#));
    assert_eq!(server.requests().len(), 2);
}

const HTML_PAGE: &str = "<!DOCTYPE html>\n<html>\n<head><title>Sign in - Corporate Proxy</title></head>\n<body><p>Please sign in: https://proxy.example/login</p></body>\n</html>\n";

#[tokio::test]
async fn a_200_with_an_html_page_is_a_protocol_error_not_retried_for_both_providers() {
    for provider in ["openai", "anthropic"] {
        let server = TestServer::start(vec![
            Reply::body(200, "text/html; charset=utf-8", HTML_PAGE, 16),
            Reply::body(200, "application/json", OPENAI_COMPLETION, 50),
        ])
        .await;
        let (events, error) = if provider == "openai" {
            run(&openai(&server)).await
        } else {
            run(&anthropic(&server)).await
        };
        assert_eq!(events, vec![], "{provider}");
        let error = error.unwrap();
        assert_eq!(error.class(), ErrorClass::Protocol, "{provider}");
        assert!(!error.retryable());
        let text = error.to_string();
        assert!(
            text.contains("an HTML page titled \"Sign in - Corporate Proxy\""),
            "{text}"
        );
        assert!(text.contains("base URL"), "{text}");
        assert!(!text.contains("connection"), "{text}");
        assert_eq!(server.requests().len(), 1, "{provider}: not retried");
    }
}

#[tokio::test]
async fn json_that_does_not_parse_is_a_protocol_error() {
    let server = TestServer::start(vec![Reply::body(
        200,
        "application/json",
        "{\"choices\": [",
        4,
    )])
    .await;
    let (_, error) = run(&openai(&server)).await;
    let error = error.unwrap();
    assert_eq!(error.class(), ErrorClass::Protocol);
    assert!(error.to_string().contains("declared JSON"), "{error}");
}

const ANTHROPIC_MESSAGE: &str = r#"{"id":"msg_1","type":"message","role":"assistant","model":"claude-test",
 "content":[{"type":"text","text":"Checking."},{"type":"tool_use","id":"call_1","name":"lookup_weather","input":{"city":"Paris"}}],
 "stop_reason":"tool_use","stop_sequence":null,
 "usage":{"input_tokens":12,"output_tokens":7,"cache_read_input_tokens":100,"cache_creation_input_tokens":5}}"#;

#[tokio::test]
async fn anthropic_the_non_streaming_messages_shape_is_one_whole_answer() {
    let server = TestServer::start(vec![Reply::body(
        200,
        "application/json",
        ANTHROPIC_MESSAGE,
        11,
    )])
    .await;
    let (events, error) = run(&anthropic(&server)).await;
    assert_eq!(error, None);
    let usage = Usage {
        input_tokens: 12,
        output_tokens: 7,
        cache_read_tokens: 100,
        cache_write_tokens: 5,
    };
    let mut expected = answer_events(usage, r#"{"city":"Paris"}"#);
    // Anthropic reports the usage first (message_start), as its stream does.
    let usage_event = expected.remove(4);
    expected.insert(0, usage_event);
    assert_eq!(events, expected);
}

#[tokio::test]
async fn anthropic_an_error_event_in_the_middle_of_a_stream_is_a_content_error() {
    let stream = concat!(
        "event: message_start\n",
        "data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n",
        "event: content_block_start\n",
        "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n",
        "event: error\n",
        "data: {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"prompt is too long\"}}\n\n",
    );
    let server = TestServer::start(vec![Reply::sse(stream, 9)]).await;
    let (events, error) = run(&anthropic(&server)).await;
    assert_eq!(
        events.last(),
        Some(&ModelEvent::TextDelta { text: "Hi".into() })
    );
    let error = error.unwrap();
    assert_eq!(
        error,
        ModelError::Api {
            provider: "anthropic".into(),
            kind: "invalid_request_error".into(),
            message: "prompt is too long".into(),
        }
    );
    assert_eq!(error.class(), ErrorClass::Content);
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_stream_cut_short_is_a_transport_error_and_an_empty_200_a_protocol_error() {
    let head = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n";
    let server = TestServer::start(vec![Reply::sse(head, 100)]).await;
    let (_, error) = run(&openai(&server)).await;
    assert_eq!(error.unwrap().class(), ErrorClass::Transport);

    let server = TestServer::start(vec![Reply::body(200, "text/event-stream", "", 1)]).await;
    let (_, error) = run(&openai(&server)).await;
    let error = error.unwrap();
    assert_eq!(error.class(), ErrorClass::Protocol);
    assert!(error.to_string().contains("an empty body"), "{error}");
}
