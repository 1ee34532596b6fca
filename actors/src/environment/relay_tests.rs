use pretty_assertions::assert_eq;

use super::*;

#[test]
fn only_the_model_api_paths_are_routed() {
    assert_eq!(route(&Method::GET, "/v1/models"), Ok(Route::Models));
    assert_eq!(
        route(&Method::POST, "/v1/chat/completions"),
        Ok(Route::Forward(Api::Openai))
    );
    assert_eq!(
        route(&Method::POST, "/v1/messages"),
        Ok(Route::Forward(Api::Anthropic))
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
                .contains("forwards only POST /v1/chat/completions"),
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
