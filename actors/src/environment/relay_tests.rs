use pretty_assertions::assert_eq;

use http_body_util::BodyExt;
use hyper::header::{HeaderValue, ACCEPT, CONTENT_TYPE};
use troupe_runtime::model::sse::SseParser;
use troupe_runtime::model::Pricing;
use troupe_runtime::protocol::Usage;

use super::forward::upstream_headers;
use super::tally::read_usage;
use super::*;

#[test]
fn only_the_model_api_paths_are_routed() {
    assert_eq!(route(&Method::GET, "/v1/models"), Ok(Route::Models));
    assert_eq!(
        route(&Method::POST, "/v1/chat/completions"),
        Ok(Route::Call(Wire::Chat))
    );
    assert_eq!(
        route(&Method::POST, "/v1/messages"),
        Ok(Route::Call(Wire::Messages))
    );
    let wrong_method = route(&Method::GET, "/v1/chat/completions").unwrap_err();
    assert_eq!(
        (wrong_method.status, wrong_method.message.as_str()),
        (
            StatusCode::METHOD_NOT_ALLOWED,
            "/v1/chat/completions takes POST, not GET"
        )
    );
    for path in ["/", "/v1/embeddings", "/v1/chat/completions/", "/admin"] {
        let refused = route(&Method::POST, path).unwrap_err();
        assert_eq!(refused.status, StatusCode::NOT_FOUND, "{path}");
        assert!(
            refused
                .message
                .contains("forwards only POST /v1/chat/completions and /v1/responses"),
            "{path}: {}",
            refused.message
        );
    }
}

#[tokio::test]
async fn a_refusal_reads_as_an_error_to_both_apis_clients() {
    let refusal = Refusal::new(StatusCode::NOT_FOUND, "not_found", "nothing here".into());
    let response = refusal.response();
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert_eq!(
        response.headers().get(CONTENT_TYPE).unwrap(),
        "application/json"
    );
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(
        serde_json::from_slice::<Value>(&body).unwrap(),
        json!({"type": "error", "error": {"type": "not_found", "code": "not_found",
               "message": "troupe model relay: nothing here"}})
    );
}

#[test]
fn usage_is_read_from_openai_answers_and_anthropic_stream_events() {
    let mut usage = Usage::default();
    read_usage(
        &json!({"choices": [], "usage": {"prompt_tokens": 120, "completion_tokens": 30,
                "prompt_tokens_details": {"cached_tokens": 100}}}),
        &mut usage,
    );
    assert_eq!(
        usage,
        Usage {
            input_tokens: 20,
            output_tokens: 30,
            cache_read_tokens: 100,
            cache_write_tokens: 0,
        }
    );

    // Anthropic: message_start carries the input, message_delta the
    // running output total.
    let stream = concat!(
        "event: message_start\n",
        "data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":25,",
        "\"cache_creation_input_tokens\":1000,\"cache_read_input_tokens\":4000,\"output_tokens\":1}}}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"hi\"}}\n\n",
        "event: message_delta\n",
        "data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":17}}\n\n",
    );
    let mut parser = SseParser::new();
    let mut usage = Usage::default();
    // Cut anywhere: the parser keeps what a piece leaves unfinished.
    for piece in stream.as_bytes().chunks(7) {
        for event in parser.push(piece) {
            read_usage(&serde_json::from_str(&event.data).unwrap(), &mut usage);
        }
    }
    assert_eq!(
        usage,
        Usage {
            input_tokens: 25,
            output_tokens: 17,
            cache_read_tokens: 4000,
            cache_write_tokens: 1000,
        }
    );
}

#[test]
fn the_relay_is_named_by_its_own_loopback_address_only() {
    assert!(is_relay("127.0.0.1", Some(PORT)));
    assert!(is_relay("localhost", Some(PORT)));
    assert!(!is_relay("127.0.0.1", Some(PORT + 1)));
    assert!(!is_relay("127.0.0.1", None));
    assert!(!is_relay("api.openai.com", Some(PORT)));
}

#[test]
fn commands_are_given_the_relay_and_a_placeholder_key() {
    let env: std::collections::BTreeMap<String, String> = environment().into_iter().collect();
    let url = format!("http://127.0.0.1:{PORT}");
    assert_eq!(
        env,
        [
            ("ANTHROPIC_API_KEY", PLACEHOLDER_KEY.to_string()),
            ("ANTHROPIC_BASE_URL", url.clone()),
            ("OPENAI_API_KEY", PLACEHOLDER_KEY.to_string()),
            ("OPENAI_BASE_URL", format!("{url}/v1")),
            ("TROUPE_MODEL_RELAY", url),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    );
}

#[test]
fn the_key_goes_only_in_the_providers_own_header() {
    let endpoint = |api| ModelEndpoint {
        api,
        base_url: "http://provider".into(),
        api_key: Some("sk-real".into()),
        key_var: Some("KEY".into()),
        model: "m".into(),
        pricing: Pricing::default(),
        max_concurrency: None,
    };
    let mut incoming = HeaderMap::new();
    incoming.insert(
        AUTHORIZATION,
        HeaderValue::from_static("Bearer placeholder"),
    );
    incoming.insert("x-api-key", HeaderValue::from_static("placeholder"));
    incoming.insert("cookie", HeaderValue::from_static("a=b"));
    incoming.insert("anthropic-beta", HeaderValue::from_static("tools-1"));
    incoming.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
    let names = |headers: &HeaderMap| -> Vec<(String, String)> {
        let mut all: Vec<(String, String)> = headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_string()))
            .collect();
        all.sort();
        all
    };
    let openai = upstream_headers(Api::Openai, &incoming, &endpoint(Api::Openai)).unwrap();
    assert_eq!(
        names(&openai),
        vec![
            ("accept".into(), "text/event-stream".into()),
            ("authorization".into(), "Bearer sk-real".into()),
            ("content-type".into(), "application/json".into()),
        ]
    );
    let anthropic = upstream_headers(Api::Anthropic, &incoming, &endpoint(Api::Anthropic)).unwrap();
    assert_eq!(
        names(&anthropic),
        vec![
            ("accept".into(), "text/event-stream".into()),
            ("anthropic-beta".into(), "tools-1".into()),
            ("anthropic-version".into(), "2023-06-01".into()),
            ("content-type".into(), "application/json".into()),
            ("x-api-key".into(), "sk-real".into()),
        ]
    );
}

/// A relay on the host's loopback answering model `m1` from `script`,
/// taking only calls with key `s3cret`.
async fn scripted_relay(
    script: &Arc<troupe_runtime::model::ScriptedProvider>,
    stopped: &CancellationToken,
) -> (Relay, SocketAddr) {
    let served: Arc<dyn Provider> = script.clone();
    let relay = Relay::new(
        "executor pi",
        vec![Offered {
            name: "m1".into(),
            endpoint: Err("it has no address".into()),
            served: Some(served),
        }],
    )
    .with_secret("s3cret".into());
    let address = relay.listen(stopped.clone()).await.unwrap();
    (relay, address)
}

/// Posts `body` to `path` with `headers`; the status and the body.
async fn post(
    address: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
    body: &Value,
) -> (StatusCode, String) {
    let client = troupe_runtime::net::client_builder()
        .no_proxy()
        .build()
        .unwrap();
    let mut request = client
        .post(format!("http://{address}{path}"))
        .header("content-type", "application/json")
        .body(body.to_string());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = StatusCode::from_u16(response.status().as_u16()).unwrap();
    (status, response.text().await.unwrap())
}

/// A stream's events as JSON, `[DONE]` as a string, each chunk's `id` and
/// `created` dropped (they differ from call to call).
fn events_of(stream: &str) -> Vec<Value> {
    let mut parser = SseParser::new();
    parser
        .push(stream.as_bytes())
        .into_iter()
        .map(|event| match serde_json::from_str::<Value>(&event.data) {
            Ok(Value::Object(mut chunk)) => {
                assert!(chunk.remove("id").is_some() || chunk.contains_key("error"));
                chunk.remove("created");
                Value::Object(chunk)
            }
            _ => Value::String(event.data),
        })
        .collect()
}

/// The first messages pi 0.73.1 sends, and the tools it offers.
fn pi_request(messages: Vec<Value>) -> Value {
    let mut all = vec![
        json!({"role": "system", "content": "You are pi."}),
        json!({"role": "user", "content": [{"type": "text", "text": "write hello"}]}),
    ];
    all.extend(messages);
    json!({
        "model": "m1",
        "messages": all,
        "stream": true,
        "stream_options": {"include_usage": true},
        "store": false,
        "max_completion_tokens": 16384,
        "tools": [{"type": "function", "function": {"name": "write", "description": "Write a file",
                   "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}],
    })
}

#[tokio::test]
async fn a_scripted_executor_is_answered_over_a_loopback_relay_in_openai_chunks() {
    let script = Arc::new(
        troupe_runtime::model::ScriptedProvider::parse(
            r#"{"executors": {"pi": {"turns": [
                {"tool_calls": [{"name": "write", "arguments": {"path": "hello.txt", "content": "hi"}, "id": "c1"}],
                 "expect": "write hello", "usage": {"input_tokens": 10, "output_tokens": 4}},
                {"text": "Wrote hello.txt.", "expect": "Successfully wrote"}
            ]}}}"#,
            "pi.json",
        )
        .unwrap(),
    );
    let stopped = CancellationToken::new();
    let (_relay, address) = scripted_relay(&script, &stopped).await;
    let headers = [
        ("authorization", "Bearer s3cret"),
        ("x-troupe-executor", "pi"),
    ];

    let (status, stream) = post(
        address,
        "/v1/chat/completions",
        &headers,
        &pi_request(vec![]),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{stream}");
    let chunk = |delta: Value, finish: Value| {
        json!({"object": "chat.completion.chunk", "model": "m1",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    assert_eq!(
        events_of(&stream),
        vec![
            chunk(
                json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "c1", "type": "function",
                       "function": {"name": "write", "arguments": ""}}]}),
                Value::Null
            ),
            chunk(
                json!({"tool_calls": [{"index": 0,
                       "function": {"arguments": r#"{"path":"hello.txt","content":"hi"}"#}}]}),
                Value::Null
            ),
            chunk(json!({}), json!("tool_calls")),
            json!({"object": "chat.completion.chunk", "model": "m1", "choices": [],
                   "usage": {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14}}),
            json!("[DONE]"),
        ]
    );

    let answered = vec![
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
               "function": {"name": "write", "arguments": "{\"path\":\"hello.txt\",\"content\":\"hi\"}"}}]}),
        json!({"role": "tool", "content": "Successfully wrote 2 bytes to hello.txt", "tool_call_id": "c1"}),
    ];
    let (status, stream) = post(
        address,
        "/v1/chat/completions",
        &headers,
        &pi_request(answered),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{stream}");
    assert_eq!(
        events_of(&stream),
        vec![
            chunk(
                json!({"role": "assistant", "content": "Wrote hello.txt."}),
                Value::Null
            ),
            chunk(json!({}), json!("stop")),
            json!("[DONE]"),
        ]
    );

    // The scripted turn's `expect` saw the tool's result, as troupe's own
    // tool message answering the call.
    let pi = script.executor("pi").unwrap();
    let second = pi.requests().pop().unwrap();
    assert_eq!(
        (
            &*second.system,
            second.messages.to_vec(),
            second
                .tools
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>(),
            second.max_tokens,
        ),
        (
            "You are pi.",
            vec![
                troupe_runtime::protocol::Message::user("write hello"),
                troupe_runtime::protocol::Message::Assistant {
                    content: String::new(),
                    tool_calls: vec![troupe_runtime::protocol::ToolCall {
                        id: "c1".into(),
                        name: "write".into(),
                        arguments: json!({"path": "hello.txt", "content": "hi"}),
                    }],
                },
                troupe_runtime::protocol::Message::Tool {
                    call_id: "c1".into(),
                    name: "write".into(),
                    result: troupe_runtime::protocol::ToolResult::ok(
                        "Successfully wrote 2 bytes to hello.txt"
                    ),
                },
            ],
            vec!["write"],
            Some(16384),
        )
    );

    // A third call has no turn: an error the client reads, not a hang.
    let (status, body) = post(
        address,
        "/v1/chat/completions",
        &headers,
        &pi_request(vec![]),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["error"]["message"],
        json!("troupe model relay: script: script pi.json (executor `pi`) has 2 turns; call 3 has none")
    );
    stopped.cancel();
}

#[tokio::test]
async fn a_call_without_the_loopback_relays_key_is_refused_401() {
    let script = Arc::new(troupe_runtime::model::ScriptedProvider::new(vec![
        troupe_runtime::model::Turn::text("hello"),
    ]));
    let stopped = CancellationToken::new();
    let (relay, address) = scripted_relay(&script, &stopped).await;
    let mut body = pi_request(vec![]);
    body["stream"] = json!(false);
    for headers in [
        vec![],
        vec![("authorization", "Bearer wrong")],
        vec![("x-api-key", "s3cre")],
    ] {
        let (status, answer) = post(address, "/v1/chat/completions", &headers, &body).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{headers:?}");
        assert_eq!(
            serde_json::from_str::<Value>(&answer).unwrap()["error"]["type"],
            json!("authentication_error")
        );
    }
    assert_eq!(script.calls(), 0);

    // The key as x-api-key, and no executor named: the model's own turns,
    // whole since no stream was asked for.
    let (status, answer) = post(
        address,
        "/v1/chat/completions",
        &[("x-api-key", "s3cret")],
        &body,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let mut answer: Value = serde_json::from_str(&answer).unwrap();
    let object = answer.as_object_mut().unwrap();
    object.remove("id");
    object.remove("created");
    assert_eq!(
        answer,
        json!({"object": "chat.completion", "model": "m1", "choices": [{"index": 0,
               "message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}]})
    );

    // Only the port it listens on names it.
    let port = address.port();
    assert!(relay.is_named("127.0.0.1", Some(port)));
    assert!(!relay.is_named("127.0.0.1", Some(PORT)));
    stopped.cancel();
}

#[tokio::test]
async fn a_script_without_turns_for_the_executor_is_refused_naming_the_fix() {
    let script = Arc::new(troupe_runtime::model::ScriptedProvider::new(vec![
        troupe_runtime::model::Turn::text("hello"),
    ]));
    let stopped = CancellationToken::new();
    let (_relay, address) = scripted_relay(&script, &stopped).await;
    let message = |body: &str| -> String {
        serde_json::from_str::<Value>(body).unwrap()["error"]["message"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let headers = [
        ("authorization", "Bearer s3cret"),
        ("x-troupe-executor", "pi"),
    ];
    let (status, body) = post(
        address,
        "/v1/chat/completions",
        &headers,
        &pi_request(vec![]),
    )
    .await;
    assert_eq!(
        (status, message(&body)),
        (
            StatusCode::BAD_REQUEST,
            "troupe model relay: script m1 has no turns for executor pi; add an \
             `executors.pi.turns` section to it"
                .into()
        )
    );

    // A model answered here is answered in every wire format, the same
    // refusal included.
    for path in ["/v1/messages", "/v1/responses"] {
        let (status, body) = post(address, path, &headers, &pi_request(vec![])).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}");
        assert!(
            message(&body).contains("has no turns for executor pi"),
            "{path}: {body}"
        );
    }
    assert_eq!(script.calls(), 0);
    stopped.cancel();
}
