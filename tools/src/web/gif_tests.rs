use std::collections::HashMap;
use std::sync::Arc;

use pretty_assertions::assert_eq;
use troupe_runtime::home::Home;
use troupe_runtime::protocol::ToolStatus;

use super::*;
use crate::web::testserver::{Reply, TestServer};
use troupe_runtime::tool::Tool as _;

const GIPHY: &str = r#"{
  "data": [
    {
      "type": "gif",
      "id": "l0MYt5jPR6QX5pnqM",
      "url": "https://giphy.com/gifs/happy-dance-l0MYt5jPR6QX5pnqM",
      "slug": "happy-dance-l0MYt5jPR6QX5pnqM",
      "title": "Happy Dance GIF by Originals",
      "rating": "g",
      "images": {
        "original": {"height": "270", "width": "480", "size": "1536745", "url": "https://media1.giphy.com/media/l0MYt5jPR6QX5pnqM/giphy.gif?cid=7b1d&rid=giphy.gif&ct=g", "webp": "https://media1.giphy.com/media/l0MYt5jPR6QX5pnqM/giphy.webp"},
        "fixed_height_small": {"height": "100", "width": "178", "url": "https://media1.giphy.com/media/l0MYt5jPR6QX5pnqM/100.gif"}
      }
    },
    {
      "type": "gif",
      "id": "blSTtZehjAZ8I",
      "url": "https://giphy.com/gifs/dancing-blSTtZehjAZ8I",
      "title": "Dancing GIF",
      "images": {"original": {"url": "https://media2.giphy.com/media/blSTtZehjAZ8I/giphy.gif"}}
    }
  ],
  "pagination": {"total_count": 2, "count": 2, "offset": 0},
  "meta": {"status": 200, "msg": "OK", "response_id": "7b1d"}
}"#;

const KLIPY: &str = r#"{
  "results": [
    {
      "id": "2481596163437263",
      "title": "",
      "content_description": "Cat facepalm",
      "itemurl": "https://klipy.com/gifs/cat-facepalm",
      "url": "https://klipy.com/gifs/cat-facepalm",
      "tags": ["cat", "facepalm"],
      "media_formats": {
        "gif": {"url": "https://static.klipy.com/ii/cat-facepalm.gif", "dims": [498, 280], "size": 1834021},
        "tinygif": {"url": "https://static.klipy.com/ii/cat-facepalm-tiny.gif", "dims": [220, 124], "size": 98012}
      },
      "created": 1715000000.0
    }
  ],
  "next": "1"
}"#;

fn env(keys: &[(&str, &str)]) -> Env {
    let keys: HashMap<String, String> = keys
        .iter()
        .map(|(k, v)| ((*k).into(), (*v).into()))
        .collect();
    Arc::new(move |k: &str| keys.get(k).cloned())
}

fn settings(server: &TestServer) -> troupe_runtime::config::Web {
    troupe_runtime::config::Web {
        giphy_url: server.url("/v1/gifs/search"),
        klipy_url: server.url("/v2/search"),
        ..Default::default()
    }
}

fn ctx(dir: &tempfile::TempDir) -> ToolContext {
    ToolContext::standalone(Home::new(dir.path()), dir.path().to_path_buf())
}

fn send_gif_with(
    settings: &troupe_runtime::config::Web,
    env: super::Env,
) -> impl troupe_runtime::tool::Tool {
    send_gif::tool(GifSearch::new(settings, env))
}

#[tokio::test]
async fn without_a_key_it_is_offered_and_answers_with_guidance_as_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let tool = send_gif_with(&Default::default(), env(&[]));
    assert!(tool.available(&ctx(&dir)).is_some());
    let result = tool
        .call(serde_json::json!({"query": "happy dance"}), &ctx(&dir))
        .await;
    assert_eq!(result.status, ToolStatus::Error);
    assert_eq!(result.text, NO_SERVICE);
    assert!(result.text.contains("GIPHY_API_KEY") && result.text.contains("KLIPY_API_KEY"));
}

#[tokio::test]
async fn giphy_is_asked_and_the_best_match_is_posted() {
    let server = TestServer::start(vec![("/v1/gifs/search", Reply::json(200, GIPHY))]).await;
    let dir = tempfile::tempdir().unwrap();
    let tool = send_gif_with(
        &settings(&server),
        env(&[("GIPHY_API_KEY", "gk"), ("KLIPY_API_KEY", "kk")]),
    );
    let result = tool
        .call(serde_json::json!({"query": "happy dance"}), &ctx(&dir))
        .await;
    assert_eq!(result.status, ToolStatus::Ok, "{}", result.text);
    assert_eq!(
        result.data["post"],
        serde_json::json!({
            "kind": "image",
            "url": "https://media1.giphy.com/media/l0MYt5jPR6QX5pnqM/giphy.gif?cid=7b1d&rid=giphy.gif&ct=g",
            "preview": "https://media1.giphy.com/media/l0MYt5jPR6QX5pnqM/100.gif",
            "width": 480,
            "height": 270,
            "bytes": 1536745,
            "title": "Happy Dance GIF by Originals",
            "attribution": "Powered by GIPHY",
            "page": "https://giphy.com/gifs/happy-dance-l0MYt5jPR6QX5pnqM",
        })
    );
    let query = server.requests()[0].query();
    assert_eq!(query["api_key"], "gk");
    assert_eq!(query["q"], "happy dance");
    assert_eq!(query["limit"], "1");

    let second = tool
        .call(
            serde_json::json!({"query": "happy dance", "index": 1}),
            &ctx(&dir),
        )
        .await;
    assert_eq!(
        second.data["post"]["url"],
        "https://media2.giphy.com/media/blSTtZehjAZ8I/giphy.gif"
    );
    assert_eq!(server.requests()[1].query()["limit"], "2");
    let beyond = tool
        .call(
            serde_json::json!({"query": "happy dance", "index": 5}),
            &ctx(&dir),
        )
        .await;
    assert_eq!(beyond.status, ToolStatus::Error);
    assert_eq!(
        beyond.text,
        "Giphy found only 2 GIFs for \"happy dance\"; give an index below 2"
    );
}

#[tokio::test]
async fn klipy_is_asked_the_tenor_way_when_only_its_key_is_set() {
    let server = TestServer::start(vec![("/v2/search", Reply::json(200, KLIPY))]).await;
    let dir = tempfile::tempdir().unwrap();
    let tool = send_gif_with(&settings(&server), env(&[("KLIPY_API_KEY", "kk")]));
    let result = tool
        .call(serde_json::json!({"query": "facepalm"}), &ctx(&dir))
        .await;
    assert_eq!(result.status, ToolStatus::Ok, "{}", result.text);
    assert_eq!(
        result.text,
        "Sent a GIF to the user: \"Cat facepalm\" (https://static.klipy.com/ii/cat-facepalm.gif). \
         They see it as a link; do not describe or link it again."
    );
    assert_eq!(
        result.data["post"]["preview"],
        "https://static.klipy.com/ii/cat-facepalm-tiny.gif"
    );
    assert_eq!(
        (
            &result.data["post"]["width"],
            &result.data["post"]["height"],
            &result.data["post"]["bytes"],
        ),
        (
            &serde_json::json!(498),
            &serde_json::json!(280),
            &serde_json::json!(1834021)
        )
    );
    assert_eq!(result.data["post"]["attribution"], "Powered by KLIPY");
    let query = server.requests()[0].query();
    assert_eq!(query["key"], "kk");
    assert_eq!(query["q"], "facepalm");
    assert_eq!(query["media_filter"], "gif,tinygif");
}

#[tokio::test]
async fn a_refused_key_and_no_match_are_clear_errors() {
    let server = TestServer::start(vec![
        (
            "/v1/gifs/search",
            Reply::json(401, r#"{"meta":{"status":401,"msg":"Unauthorized"}}"#),
        ),
        (
            "/v2/search",
            Reply::json(200, r#"{"results":[],"next":""}"#),
        ),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let giphy = send_gif_with(&settings(&server), env(&[("GIPHY_API_KEY", "bad")]));
    let result = giphy
        .call(serde_json::json!({"query": "x"}), &ctx(&dir))
        .await;
    assert_eq!(
        result.text,
        "Giphy: the key in GIPHY_API_KEY was refused (HTTP 401); check or renew it"
    );
    let klipy = send_gif_with(&settings(&server), env(&[("KLIPY_API_KEY", "k")]));
    let result = klipy
        .call(serde_json::json!({"query": "zzzz"}), &ctx(&dir))
        .await;
    assert_eq!(
        result.text,
        "KLIPY found no GIF for \"zzzz\"; try other words"
    );
}
