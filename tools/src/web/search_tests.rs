use std::collections::HashMap;
use std::sync::Arc;

use pretty_assertions::assert_eq;
use troupe_runtime::home::Home;
use troupe_runtime::protocol::ToolStatus;

use super::*;
use crate::web::testserver::{Reply, TestServer};

const DDG_PAGE: &str = include_str!("search/fixtures/duckduckgo.html");
const DDG_BOT_CHECK: &str = include_str!("search/fixtures/duckduckgo_bot_check.html");
const TAVILY: &str = include_str!("search/fixtures/tavily.json");
const BRAVE: &str = include_str!("search/fixtures/brave.json");

fn env(keys: &[(&str, &str)]) -> Env {
    let keys: HashMap<String, String> = keys
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    Arc::new(move |k: &str| keys.get(k).cloned())
}

/// `[web]` pointing every engine at `server`.
fn settings(server: &TestServer) -> troupe_runtime::config::Web {
    troupe_runtime::config::Web {
        tavily_url: server.url("/tavily/search"),
        brave_url: server.url("/brave/res/v1/web/search"),
        duckduckgo_url: server.url("/ddg/html/"),
        ..Default::default()
    }
}

fn hit(title: &str, url: &str, snippet: &str) -> Hit {
    Hit {
        title: title.into(),
        url: url.into(),
        snippet: snippet.into(),
    }
}

fn web_search_with(
    settings: &troupe_runtime::config::Web,
    env: super::super::Env,
) -> impl troupe_runtime::tool::Tool {
    web_search::tool(Engines::new(settings, env))
}

async fn call(tool: &impl troupe_runtime::tool::Tool, args: serde_json::Value) -> ToolResult {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::standalone(Home::new(dir.path()), dir.path().to_path_buf());
    tool.call(args, &ctx).await
}

#[test]
fn the_duckduckgo_page_is_read_without_its_ads_and_with_uddg_links_decoded() {
    assert_eq!(
        parse_duckduckgo(DDG_PAGE).unwrap(),
        vec![
            hit(
                "GitHub - slawlor/ractor: Rust actor framework",
                "https://github.com/slawlor/ractor",
                "A pure-Rust actor framework, inspired by Erlang's gen_server, with supervision trees.",
            ),
            hit(
                "actix - Rust - Docs.rs",
                "https://docs.rs/actix/latest/actix/?search=actor&x=1",
                "Actix is a Rust actor framework.",
            ),
            hit(
                "Actors with Tokio – Alice Ryhl",
                "https://ryhl.io/blog/actors-with-tokio/",
                "This article is about building actors with Tokio directly, without using any actor libraries such as Actix.",
            ),
        ]
    );
}

#[test]
fn a_bot_check_page_is_an_error_not_an_empty_result() {
    let err = parse_duckduckgo(DDG_BOT_CHECK).unwrap_err();
    assert_eq!(err.engine, Engine::DuckDuckGo);
    assert!(
        err.to_string()
            .starts_with("DuckDuckGo: served a bot-check page"),
        "{err}"
    );
}

#[test]
fn tavily_and_brave_answers_are_read() {
    assert_eq!(
        tavily::parse(TAVILY).unwrap()[1],
        hit(
            "Actors with Tokio",
            "https://ryhl.io/blog/actors-with-tokio/",
            "This article is about building actors with Tokio directly, without using any actor libraries.",
        )
    );
    assert_eq!(
        brave::parse(BRAVE).unwrap(),
        vec![
            hit(
                "GitHub - slawlor/ractor: Rust actor framework",
                "https://github.com/slawlor/ractor",
                "A pure-Rust actor framework. Inspired from Erlang's gen_server.",
            ),
            hit(
                "Actix — Rust",
                "https://actix.rs/",
                "Actix is a powerful, pragmatic, and extremely fast web framework & actor system.",
            ),
        ]
    );
}

#[tokio::test]
async fn tavily_is_asked_first_with_its_key_and_query() {
    let server = TestServer::start(vec![("/tavily/search", Reply::json(200, TAVILY))]).await;
    let tool = web_search_with(
        &settings(&server),
        env(&[
            ("TAVILY_API_KEY", "tvly-secret"),
            ("BRAVE_SEARCH_API_KEY", "brave-key"),
        ]),
    );
    let result = call(
        &tool,
        serde_json::json!({"query": "rust actor model", "limit": 3}),
    )
    .await;
    assert_eq!(result.status, ToolStatus::Ok, "{}", result.text);
    assert_eq!(result.data["engine"], "Tavily");
    assert!(result.text.starts_with(
        "<untrusted_tool_result source=\"web_search\" engine=\"Tavily\" query=\"rust actor model\">\n1. ractor - Rust\n   https://docs.rs/ractor/latest/ractor/\n"
    ), "{}", result.text);
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let sent = &requests[0];
    assert_eq!(sent.method, "POST");
    assert_eq!(sent.header("authorization"), Some("Bearer tvly-secret"));
    assert_eq!(sent.json()["query"], "rust actor model");
    assert_eq!(sent.json()["max_results"], 3);
}

#[tokio::test]
async fn brave_is_asked_with_its_token_header_and_params() {
    let server =
        TestServer::start(vec![("/brave/res/v1/web/search", Reply::json(200, BRAVE))]).await;
    let tool = web_search_with(
        &settings(&server),
        env(&[("BRAVE_SEARCH_API_KEY", "brave-key")]),
    );
    let result = call(
        &tool,
        serde_json::json!({"query": "rust actor model", "limit": 2}),
    )
    .await;
    assert_eq!(result.status, ToolStatus::Ok, "{}", result.text);
    assert_eq!(result.data["engine"], "Brave Search");
    let sent = &server.requests()[0];
    assert_eq!(sent.method, "GET");
    assert_eq!(sent.header("x-subscription-token"), Some("brave-key"));
    assert_eq!(sent.header("accept"), Some("application/json"));
    let query = sent.query();
    assert_eq!(query["q"], "rust actor model");
    assert_eq!(query["count"], "2");
}

#[tokio::test]
async fn with_no_key_duckduckgo_is_asked_by_form_and_the_limit_holds() {
    let server = TestServer::start(vec![("/ddg/html/", Reply::html(DDG_PAGE))]).await;
    let tool = web_search_with(&settings(&server), env(&[]));
    let result = call(
        &tool,
        serde_json::json!({"query": "rust actor model", "limit": 2}),
    )
    .await;
    assert_eq!(result.status, ToolStatus::Ok, "{}", result.text);
    assert_eq!(result.data["engine"], "DuckDuckGo");
    assert_eq!(result.data["results"].as_array().unwrap().len(), 2);
    let sent = &server.requests()[0];
    assert_eq!(sent.method, "POST");
    assert_eq!(sent.form()["q"], "rust actor model");
    assert!(!result.text.contains("Actor Framework Pro"), "ad shown");
}

#[tokio::test]
async fn refused_keys_and_rate_limits_fall_through_to_the_next_engine() {
    let server = TestServer::start(vec![
        (
            "/tavily/search",
            Reply::json(
                401,
                r#"{"detail":{"error":"Unauthorized: missing or invalid API key."}}"#,
            ),
        ),
        (
            "/brave/res/v1/web/search",
            Reply::json(
                429,
                r#"{"type":"ErrorResponse","error":{"code":"RATE_LIMITED"}}"#,
            ),
        ),
        ("/ddg/html/", Reply::html(DDG_PAGE)),
    ])
    .await;
    let tool = web_search_with(
        &settings(&server),
        env(&[("TAVILY_API_KEY", "bad"), ("BRAVE_SEARCH_API_KEY", "busy")]),
    );
    let result = call(&tool, serde_json::json!({"query": "rust actor model"})).await;
    assert_eq!(result.status, ToolStatus::Ok, "{}", result.text);
    assert_eq!(result.data["engine"], "DuckDuckGo");
    let order: Vec<String> = server
        .requests()
        .iter()
        .map(|r| r.target.split('?').next().unwrap().to_owned())
        .collect();
    assert_eq!(
        order,
        ["/tavily/search", "/brave/res/v1/web/search", "/ddg/html/"]
    );
    assert!(result.text.starts_with(
        "(Tavily: the key in TAVILY_API_KEY was refused (HTTP 401); check or renew it; tried the next engine)\n\
         (Brave Search: rate limit reached (HTTP 429); wait a minute or use another engine; tried the next engine)\n"
    ), "{}", result.text);
}

#[tokio::test]
async fn when_every_engine_fails_the_error_names_each_and_why() {
    let server = TestServer::start(vec![
        (
            "/tavily/search",
            Reply::json(200, r#"{"query":"q","results":[]}"#),
        ),
        ("/ddg/html/", Reply::html(DDG_BOT_CHECK)),
    ])
    .await;
    let tool = web_search_with(&settings(&server), env(&[("TAVILY_API_KEY", "k")]));
    let result = call(&tool, serde_json::json!({"query": "anything"})).await;
    assert_eq!(result.status, ToolStatus::Error);
    assert_eq!(
        result.text,
        "web_search found nothing: Tavily: no results for this query; DuckDuckGo: served a \
         bot-check page instead of results; try again later, or set TAVILY_API_KEY or \
         BRAVE_SEARCH_API_KEY for a search API"
    );
}

#[tokio::test]
async fn an_empty_query_is_refused_before_any_engine() {
    let server = TestServer::start(vec![]).await;
    let tool = web_search_with(&settings(&server), env(&[]));
    let result = call(&tool, serde_json::json!({"query": "  "})).await;
    assert_eq!(result.status, ToolStatus::Error);
    assert!(server.requests().is_empty());
}
