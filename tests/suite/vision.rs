//! An image `read_file` returns reaches a model that sees images, through the
//! real OpenAI-compatible client and a loopback server, and a text-only
//! model gets the text fallback.

use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use troupe::runtime::model::openai::{OpenAiClient, OpenAiConfig};
use troupe::runtime::model::HttpOptions;
use troupe::Runtime;

use super::support::{ask, TestHome};

/// The 8-byte PNG signature followed by a few bytes: enough for `read_file`.
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

/// A server answering every request with the next whole JSON completion
/// (not a stream), recording the request bodies.
async fn serve(answers: Vec<Value>) -> (String, Arc<Mutex<Vec<Value>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let recorded = Arc::clone(&seen);
    tokio::spawn(async move {
        for answer in answers {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut buf = Vec::new();
            let body = loop {
                let mut piece = [0u8; 65536];
                let n = socket.read(&mut piece).await.unwrap();
                buf.extend_from_slice(&piece[..n]);
                let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                    continue;
                };
                let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0);
                if buf.len() >= end + 4 + length {
                    break buf[end + 4..end + 4 + length].to_vec();
                }
            };
            recorded.lock().push(serde_json::from_slice(&body).unwrap());
            let answer = answer.to_string();
            let reply = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                answer.len()
            );
            socket.write_all(reply.as_bytes()).await.unwrap();
        }
    });
    (url, seen)
}

fn completion(message: Value, finish: &str) -> Value {
    json!({"choices": [{"index": 0, "message": message, "finish_reason": finish}],
           "usage": {"prompt_tokens": 10, "completion_tokens": 2}})
}

async fn read_a_png(sees_images: bool) -> Vec<Value> {
    let home = TestHome::new();
    std::fs::write(home.path().join("chart.png"), PNG).unwrap();
    let call = json!({"id": "c1", "type": "function",
        "function": {"name": "read_file", "arguments": "{\"path\":\"chart.png\"}"}});
    let (url, seen) = serve(vec![
        completion(
            json!({"role": "assistant", "content": null, "tool_calls": [call]}),
            "tool_calls",
        ),
        completion(json!({"role": "assistant", "content": "A chart."}), "stop"),
    ])
    .await;
    let client = OpenAiClient::new(
        OpenAiConfig {
            name: "local".into(),
            base_url: url,
            api_key: None,
            key_var: "(no key variable)".into(),
            model: "gpt-4o".into(),
            context_window: 128_000,
            sees_images,
        },
        HttpOptions::default(),
    );
    let runtime = Runtime::builder()
        .home(home.path())
        .cwd(home.path())
        .provider(Arc::new(client))
        .build()
        .await
        .unwrap();
    let bot = runtime.bot("assistant").await.unwrap();
    let report = ask(&bot, "What does chart.png show?").await;
    assert_eq!(report.text, "A chart.", "{report:?}");
    runtime.shutdown().await;
    let seen = seen.lock().clone();
    seen
}

#[tokio::test]
async fn a_png_read_by_a_model_that_sees_images_is_sent_as_an_image_part() {
    let seen = read_a_png(true).await;
    assert_eq!(seen.len(), 2);
    let messages = seen[1]["messages"].as_array().unwrap();
    let last = messages.last().unwrap();
    assert_eq!(last["role"], "user", "{messages:#?}");
    // Every PNG's base64 starts with its signature's, `iVBORw0KGgo`.
    let url = last["content"][1]["image_url"]["url"].as_str().unwrap();
    assert!(
        url.starts_with("data:image/png;base64,iVBORw0KGgo"),
        "{url}"
    );
}

#[tokio::test]
async fn a_png_read_by_a_text_only_model_is_described_not_sent() {
    let seen = read_a_png(false).await;
    let body = seen[1].to_string();
    assert!(!body.contains("image_url"), "{body}");
    assert!(body.contains("cannot see images"), "{body}");
}
